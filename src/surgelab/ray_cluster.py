"""Joining a Ray cluster, for the runner's actors and the deployment search's pool alike.

Ray is optional (``pip install 'surgelab[ray]'``): it is imported only when a command asks for ``--ray``.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["RayUnavailable", "connect"]


class RayUnavailable(RuntimeError):
    """``--ray`` was asked for but Ray is not installed or its cluster cannot be reached."""


def connect(address: str) -> Any:
    """The ``ray`` module, connected to the cluster at ``address`` ('local' starts one here); RayUnavailable otherwise."""
    try:
        import ray  # optional: only with --ray (pip install 'surgelab[ray]')
    except ImportError:
        raise RayUnavailable("--ray needs Ray: pip install 'surgelab[ray]'") from None
    if not ray.is_initialized():
        try:
            if address == "local":
                ray.init(include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
            else:
                ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise RayUnavailable(f"--ray {address}: cannot connect to a Ray cluster: {exc}") from None
    return ray
