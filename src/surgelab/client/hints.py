"""What the commonest mistakes look like from the client, said with their fix instead of a bare
symptom: a URL that is not the API's base (a 404), and an answer that is not an event stream
("stream ended before [DONE]"). Each guess is made only where the evidence leaves one reading."""

from __future__ import annotations

import html
import re
from urllib.parse import urlsplit, urlunsplit

import orjson

__all__ = ["ENDPOINTS", "url_fix", "base_hint", "not_a_stream", "HEAD_BYTES"]

ENDPOINTS = ("/chat/completions", "/completions", "/responses", "/messages", "/embeddings", "/models",
             "/audio/transcriptions", "/audio/speech", "/images/generations", "/rerank")  # fmt: skip
"""The paths surgelab adds to the target's base URL (``client/kinds/``: a test holds every adapter's to it)."""

HEAD_BYTES = 2048  # of a body that brought no event: enough to tell a page or a JSON answer
_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.I | re.S)


def url_fix(base_url: str, url: str) -> str | None:
    """The base URL meant, when a 404 at ``url`` (an endpoint under ``base_url``) says the base is wrong:
    a bare host (``http://host`` → ``http://host/v1``) or a base with an endpoint pasted on
    (``…/v1/chat/completions`` → ``…/v1``). None for a base with a path of its own (``/openai/v1``)."""
    if not urlsplit(url).path.rstrip("/").endswith(ENDPOINTS):
        return None  # not a request surgelab built from the base (an http template's own path)
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    pasted = next((e for e in ENDPOINTS if path.endswith(e)), None)
    if pasted is not None:
        path = path[: -len(pasted)]
    elif path:
        return None
    return urlunsplit((parts.scheme, parts.netloc, path or "/v1", "", ""))


def base_hint(fix: str) -> str:
    """The sentence after a 404 whose fix is the base URL ``fix``."""
    return f"did you mean URL {fix}? (target.url / --url is the API's base: everything before /chat/completions)"


def not_a_stream(content_type: str, head: bytes) -> str:
    """What a streaming request got instead of events, from the answer's type and first bytes."""
    kind = content_type.split(";")[0].strip().lower()
    start = head.lstrip()[:1]
    if kind == "text/html" or (not kind and start == b"<"):
        title = _TITLE.search(head)
        named = f": {html.unescape(title[1].decode('utf-8', 'replace')).strip()[:80]!r}" if title else ""
        return f"the server answered text/html, not an event stream (a login page, or a proxy's error page?){named}"
    if kind.endswith("json") or (not kind and start in (b"{", b"[")):
        try:
            body = orjson.loads(head)
        except orjson.JSONDecodeError:
            body = None
        error = body.get("error") if isinstance(body, dict) else None
        if error is not None:
            message = error.get("message", error) if isinstance(error, dict) else error
            return f"the server answered a JSON error to a streaming request: {str(message)[:200]}"
        return ("the server answered a plain JSON body to a streaming request (is streaming supported? "
                "target.stream: false / --no-stream sends whole requests)")  # fmt: skip
    said = f"the server answered {kind}, not text/event-stream" if kind and kind != "text/event-stream" else ""
    said = said or ("an empty body" if not head.strip() else "")
    return "stream ended before [DONE] or a finish_reason" + (f" ({said})" if said else "")
