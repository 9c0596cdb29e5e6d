"""Files: paths named in a scenario (relative to the scenario file, as in k6 or Compose), writes that
are whole or absent, and one line that says what went wrong with a file and what to do about it."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import ValidationInfo

__all__ = ["scenario_path", "write_atomic", "removing_on_error", "located", "os_error_line"]


def scenario_path(value: str, info: ValidationInfo | None, what: str = "file") -> str:
    """The absolute path for ``value``; raises ValueError (a validation error) when it does not exist."""
    path = Path(value).expanduser()
    base = (info.context or {}).get("base_dir") if info is not None else None
    if base is not None and not path.is_absolute():
        path = Path(base) / path
    if not path.exists():
        raise ValueError(f"{what} not found: {path}")
    return str(path)


def located(exc: OSError, path: Path | str) -> OSError:
    """``exc`` with ``path`` as its file name (pyarrow's write errors name no file), same errno and type."""
    if exc.filename:
        return exc
    code = exc.errno if exc.errno is not None else _errno_in(str(exc))
    reason = os.strerror(code) if code is not None else str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return OSError(code, reason, str(path)) if code is not None else OSError(errno.EIO, reason, str(path))


def _errno_in(text: str) -> int | None:
    """The errno in a message like pyarrow's "... Detail: [errno 28] No space left on device"."""
    marker = text.lower().rfind("[errno ")
    if marker < 0:
        return None
    digits = text[marker + 7 :].split("]", 1)[0]
    return int(digits) if digits.isdigit() else None


@contextlib.contextmanager
def removing_on_error(tmp: Path, final: Path) -> Iterator[Path]:
    """Yield ``tmp`` to write; on any error it is removed (never left behind) and an OSError names ``final``."""
    try:
        yield tmp
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            if exc.filename is not None and str(exc.filename) == str(tmp):
                exc = OSError(exc.errno, exc.strerror, str(final))  # the file asked for, not its .tmp
            raise located(exc, final) from None
        raise


def write_atomic(path: Path | str, data: bytes | str | Callable[[Path], object]) -> Path:
    """Write ``path`` whole or not at all: into ``path.tmp`` first, then renamed over ``path``.

    ``data`` is the content, or a function that writes a given path. On failure (a full disk,
    a directory that cannot be written) the ``.tmp`` is removed and the OSError names ``path``.
    """
    path = Path(path)
    with removing_on_error(path.with_name(path.name + ".tmp"), path) as tmp:
        if callable(data):
            data(tmp)
        elif isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        else:
            tmp.write_bytes(data)
        tmp.replace(path)
    return path


# errno: (what it means, what to do); a full disk keeps its remedy beside the caller's (another place)
_SPACE = {
    errno.ENOSPC: ("the disk is full", "free some space"),
    errno.EDQUOT: ("the disk quota is used up", "free some space"),
    errno.EFBIG: ("the file size limit was reached (ulimit -f)", "raise it"),
}
_PLACE = {
    errno.EACCES: ("no permission to write there", "choose a directory you can write to"),
    errno.EPERM: ("not permitted to write there", "choose a directory you can write to"),
    errno.EROFS: ("the file system is read-only", "choose another directory"),
    errno.ENOTDIR: ("a part of that path is a file, not a directory", "choose another path"),
    errno.EISDIR: ("that is a directory", "give a file name"),
    errno.ENOENT: ("a directory on that path does not exist", "create it or choose another path"),
}


def os_error_line(exc: OSError, where: str = "", fallback: Path | str | None = None) -> str:
    """One line: the path, what went wrong and what to do. ``where`` is the way to another place
    (``"or give --out another directory"``); ``fallback`` the path when the error names none."""
    path = exc.filename or fallback or "?"
    reason = exc.strerror or (str(exc).splitlines() or [""])[0] or type(exc).__name__
    if exc.errno in _SPACE:
        meaning, remedy = _SPACE[exc.errno]
        remedy = f"{remedy} {where}".strip() if where else f"{remedy} or write elsewhere"
    elif exc.errno in _PLACE:
        meaning, remedy = _PLACE[exc.errno]
        remedy = where.removeprefix("or ") if where else remedy
    else:
        meaning, remedy = "", where.removeprefix("or ")
    tail = ": ".join(part for part in (meaning, remedy) if part)
    return f"{path}: {reason}" + (f" — {tail}" if tail else "")
