"""What may be sent as an HTTP header, checked where the header is written down (a scenario's
``headers``, the API key's variable) rather than where it is sent, so the error names the field.

Names are tokens (RFC 9110 §5.1). Values are visible ASCII, spaces and tabs: a line break would end
the header (and start another: header injection), a control character is refused by servers, and
bytes beyond ASCII are read differently by each server (RFC 9110 §5.5 keeps them for old text only).
"""

from __future__ import annotations

import re

__all__ = ["header_name_problem", "header_value_problem", "VALUE_RULE"]

VALUE_RULE = "a header value is one line of ASCII text (percent-encode or base64 anything else)"

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_NOT_VALUE = re.compile(r"[^\t\x20-\x7e]")


def header_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a header name, or None when it can."""
    if _TOKEN.fullmatch(name):
        return None
    return "the name is not an HTTP token (letters, digits and !#$%&'*+-.^_`|~ only)"


def header_value_problem(value: str) -> str | None:
    """What in ``value`` cannot be sent as a header value (``holds … at character N``), or None when
    nothing. The value itself is never quoted (it may be a key), only the offending character's code
    point and position."""
    found = _NOT_VALUE.search(value)
    if found is None:
        return None
    char, at = found.group(), found.start() + 1
    if char in "\r\n":
        return f"holds a line break (CR or LF) at character {at}"
    if char < " " or char == "\x7f":
        return f"holds a control character (U+{ord(char):04X}) at character {at}"
    return f"holds U+{ord(char):04X} at character {at}, which is not ASCII"
