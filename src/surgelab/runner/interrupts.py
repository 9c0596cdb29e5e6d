"""Ctrl-C and SIGTERM during a run: the first stops it gently, the next stops it now, and each says so.

A run that is told to stop lets the requests in flight finish within ``load.grace``; a second
interrupt skips what is left of the grace, and those requests are recorded as cancelled. Either
way every record already measured is kept. The lines go to stderr even with ``--quiet``: a
keypress that seems to do nothing gets pressed again, or followed by ``kill -9``.

A stop button (the live dashboard's) is an interrupt too: an observer with ``attach_stop`` is
handed ``Interrupts.request`` while a run that takes interrupts is under way (None after it), which
any thread may call; the run then
stops as on a first Ctrl-C, with the button's reason (``interrupted (…)``), so everything that
follows — grace, cancelled requests, exit status 130, the report — is Ctrl-C's.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable, Sequence

from surgelab.scenario.model import Scenario

__all__ = ["Interrupts"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupts:
    """``with Interrupts(scenario, stop, hurry):`` (or ``install()`` … ``remove()``) while a run is under way.

    ``stop(reason)`` starts the graceful stop, ``hurry()`` ends the grace."""

    def __init__(self, scenario: Scenario, stop: Callable[[str], None], hurry: Callable[[], None],
                 enabled: bool = True, observers: Sequence[object] = ()) -> None:  # fmt: skip
        self.grace_s = max(p.load.grace for p in scenario.phase_list)
        self.stop, self.hurry, self.enabled = stop, hurry, enabled
        self.count = 0
        # the buttons belong to the run that takes the user's interrupts (not to a compare run's inner runs)
        self.buttons = [o for o in observers if callable(getattr(o, "attach_stop", None))] if enabled else []
        self._loop: asyncio.AbstractEventLoop | None = None

    def install(self) -> Interrupts:
        """Take over SIGINT and SIGTERM on the running loop (when enabled); hand the stop buttons their stop."""
        if self.enabled:
            self._loop = asyncio.get_running_loop()
            for sig in _SIGNALS:
                self._loop.add_signal_handler(sig, self._on, sig)
            for button in self.buttons:
                button.attach_stop(self.request)  # type: ignore[attr-defined]
        return self

    def remove(self) -> None:
        for button in self.buttons:
            button.attach_stop(None)  # type: ignore[attr-defined]
        if self._loop is not None:
            for sig in _SIGNALS:
                self._loop.remove_signal_handler(sig)
            self._loop = None

    def request(self, reason: str) -> bool:
        """A stop asked for from any thread (a stop button): as a first Ctrl-C, with ``reason``.
        False when the run is no longer under way."""
        loop = self._loop
        try:
            loop.call_soon_threadsafe(self._requested, reason)  # type: ignore[union-attr]
        except (AttributeError, RuntimeError):  # the run has ended (no loop, or a closed one)
            return False
        return True

    def _requested(self, reason: str) -> None:
        if self.count:  # already stopping: a button is not a second Ctrl-C
            return
        self.count += 1
        print(f"{reason}: stopping; requests in flight have up to {self.grace_s:g}s (load.grace) to finish. "
              "Records are kept.", file=sys.stderr, flush=True)  # fmt: skip
        self.stop(reason)

    def __enter__(self) -> Interrupts:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def _on(self, sig: int) -> None:
        self.count += 1
        name = signal.Signals(sig).name
        if self.count == 1:
            print(f"interrupted ({name}): stopping; requests in flight have up to {self.grace_s:g}s (load.grace) to "
                  "finish — interrupt again to stop now. Records are kept.", file=sys.stderr, flush=True)  # fmt: skip
            self.stop(f"interrupted ({name})")
        else:
            print(f"second interrupt ({name}): stopping now, records kept; requests still in flight are recorded "
                  "as cancelled", file=sys.stderr, flush=True)  # fmt: skip
            self.hurry()
