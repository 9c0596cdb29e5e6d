"""Resolve ``tokenizer: auto | server`` before a run: learn the target's tokenizer once, for every worker.

The result goes into the scenario itself (``tokenizer_calibration``), so worker processes and
Ray actors build the very same prompts, and the run's ``scenario.yaml`` says how they were made.
"""

from __future__ import annotations

import sys

from surgelab.client.tokenize import learn_tokenizer
from surgelab.redact import redact_text
from surgelab.scenario.model import Scenario

__all__ = ["with_tokenizer", "TokenizerUnavailable"]


class TokenizerUnavailable(RuntimeError):
    """``tokenizer: server`` and the target cannot tokenize."""


async def with_tokenizer(scenario: Scenario, api_key: str | None = None, quiet: bool = False) -> Scenario:
    """The scenario with its tokenizer resolved (unchanged when it names one, or was resolved before)."""
    if scenario.tokenizer not in ("auto", "server") or scenario.tokenizer_calibration is not None:
        return scenario
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    learned = await learn_tokenizer(scenario.target, headers)
    if learned.calibration is None and scenario.tokenizer == "server":
        raise TokenizerUnavailable(f"tokenizer: server, but the target cannot tokenize: {redact_text(learned.note)}")
    if learned.calibration is None or learned.builtin_agrees:
        note = (
            f"the server counts as the built-in tokenizer does ({learned.note})"
            if learned.builtin_agrees
            else f"built-in tokenizer: {learned.note}; prompt lengths are checked against the server's usage after the run"
        )
        _say(note, quiet)
        return scenario.model_copy(update={"tokenizer": "builtin"})
    c = learned.calibration
    template = f"its template adds {c.template.chat} tokens to a chat" if c.template_measured else "template unknown"
    _say(f"prompt lengths as the server counts them: {len(c.words)} one-token words from {learned.note}; {template}", quiet)
    return scenario.model_copy(update={"tokenizer": "server", "tokenizer_calibration": c})


def _say(note: str, quiet: bool) -> None:
    if not quiet:
        print(f"tokenizer: {redact_text(note)}", file=sys.stderr)
