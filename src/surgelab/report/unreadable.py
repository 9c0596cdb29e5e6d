"""A report input that exists but cannot be read: the page names it in red, never silently shows less."""

from __future__ import annotations

__all__ = ["Unreadable", "why"]


class Unreadable(Exception):
    """A report input that exists but cannot be read: the page says so in red, never silently shows less."""


def why(exc: BaseException) -> str:
    """An exception's first line, for a sentence on the page."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
