"""Credentials written into URLs (``https://user:pass@host/v1``, ``?api_key=…``) are never shown or stored.

The client still uses them (user and password as HTTP Basic authentication, as curl does); every
URL that reaches a terminal, a file or an error message goes through ``redact_url`` (one URL)
or ``redact_text`` (any text that may hold URLs), and ``redact_tree`` for whole JSON documents.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = ["redact_url", "redact_text", "redact_tree", "url_credentials", "REDACTED"]

REDACTED = "REDACTED"  # valid in a URL's user part, so a redacted URL still parses
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^/\s?#@]*(?:@[^/\s?#@]*)*)@")
_SECRET_PARAM = re.compile(
    r"(?i)([?&](?:api[-_]?key|key|token|access[-_]?token|auth|password|passwd|secret|signature|sig)=)[^&#\s\"']+"
)


def redact_text(text: str) -> str:
    """``text`` with the user and password of every URL in it, and secret-looking query values, replaced."""
    if "://" not in text and "=" not in text:
        return text
    text = _USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    return _SECRET_PARAM.sub(lambda m: f"{m.group(1)}{REDACTED}", text)


def redact_url(url: str) -> str:
    """One URL without its credentials: ``https://REDACTED@host/v1``."""
    return redact_text(url)


def redact_tree(value: Any) -> Any:
    """A JSON-like document (dicts, lists, strings) with every string redacted."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: redact_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_tree(v) for v in value]
    return value


def url_credentials(url: str) -> tuple[str, str] | None:
    """The user and password written into ``url`` (percent-decoded), or None."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return None
    return unquote(parts.username or ""), unquote(parts.password or "")
