"""Help panels for ``surgelab run --help``: its options grouped by what they set.

One table here rather than ``rich_help_panel=`` on each of ``run``'s options, so that adding a
flag to ``run`` stays a one-line change. A flag not named here goes by its name's words (TLS and
certificate flags under Target, checks before the run under Guards), else under "Other".
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["RUN_PANELS", "apply_panels"]

TARGET, LOAD, WORKLOAD, OUTPUT, GUARDS, OTHER = (
    "Target", "Load", "Workload", "Output and live views", "Guards and pass/fail", "Other",
)  # fmt: skip

RUN_PANELS: dict[str, str] = {
    **dict.fromkeys(("url", "model", "endpoint", "stream", "connection", "api_key_env", "ca_cert", "client_cert",
                     "client_key", "server_name", "insecure", "proxy", "follow_redirects"), TARGET),  # fmt: skip
    **dict.fromkeys(("rate", "concurrency", "arrival", "cv", "think_time", "ramp_up", "duration", "warmup",
                     "max_in_flight", "grace", "workers", "ray"), LOAD),  # fmt: skip
    **dict.fromkeys(("prompt_tokens", "max_tokens", "seed", "set_"), WORKLOAD),
    **dict.fromkeys(("name", "out", "quiet", "scrape", "dashboard", "dashboard_port", "dashboard_token",
                     "prometheus_port", "prometheus_host", "prometheus_token_env"), OUTPUT),  # fmt: skip
    **dict.fromkeys(("threshold", "unlimited"), GUARDS),
}
_BY_WORD = ((("tls", "cert", "ca", "insecure", "verify", "sni", "header"), TARGET),
            (("preflight", "pre", "check", "guard", "abort", "limit"), GUARDS))  # fmt: skip


def _panel(name: str, table: dict[str, str]) -> str:
    if name in table:
        return table[name]
    words = set(name.split("_"))
    return next((panel for keys, panel in _BY_WORD if words & set(keys)), OTHER)


def apply_panels(command: Callable[..., Any], table: dict[str, str] = RUN_PANELS) -> None:
    """Set each typer option's help panel on ``command``'s parameter defaults (before the CLI is built)."""
    for name, param in inspect.signature(command).parameters.items():
        info = param.default
        if hasattr(info, "rich_help_panel") and type(info).__name__ == "OptionInfo" and info.rich_help_panel is None:
            info.rich_help_panel = _panel(name, table)
