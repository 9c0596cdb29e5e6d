"""Small differences between supported Python versions, in one place."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    from asyncio import timeout, timeout_at
else:  # pragma: no cover
    from async_timeout import timeout, timeout_at

__all__ = ["timeout", "timeout_at"]
