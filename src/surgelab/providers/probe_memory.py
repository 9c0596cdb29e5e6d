"""The two probes that need many requests: usable context length and multi-turn retention.

**Context**: prompts of n tokens (built-in tokenizer, random pseudo-words so no cache helps)
with ``max_tokens=1``; n doubles from 1,024 until a rejection (any 4xx) or a timeout, then
the bracket is bisected until it is within 0.1 % (by default) — bounded by a step count, a time budget and
a length limit. The reported value is the longest accepted prompt as the *server* counted it
(``usage.prompt_tokens``), or the built-in count when the server reports no usage.

**Retention**: a code word (random letters and digits, which no model produces by chance) is
given at turn 1; short filler questions follow, each answer kept in the history; at each
checkpoint N the conversation so far is sent with the question "what was the code word?" as
turn N, on a branch that the main conversation does not keep (the chat API is stateless, so a
branch costs one request). The answer passes when it contains the code word, ignoring case and
punctuation. The value is the last checkpoint up to which every checkpoint passed.
"""

from __future__ import annotations

import re
import time
from typing import Any

import numpy as np

from surgelab.providers.probe_http import ProbeClient, Reply
from surgelab.providers.probe_result import ProbeResult, ProbeSettings
from surgelab.tokenizer import BuiltinTokenizer

__all__ = ["probe_context", "probe_retention", "recalled"]

_START = 1024
_FILLERS = (
    "Name one colour of the sky at dusk.", "What is 7 plus {k}?", "Give one word that rhymes with light.",
    "Name a fruit that is usually yellow.", "How many legs does a spider have?", "Name a planet other than Earth.",
    "What is the opposite of cold?", "Name one musical instrument with strings.",
)  # fmt: skip
_QUESTION = (
    "What was the code word I asked you to remember at the start of this conversation? Reply with the code word only."
)


def _outcome(reply: Reply) -> str:
    if reply.ok:
        return "accepted"
    if 400 <= reply.status < 500:
        return "rejected"
    if reply.status == 0 and reply.error and "Timeout" in reply.error:
        return "timed out"
    return "error"


async def probe_context(client: ProbeClient, s: ProbeSettings) -> ProbeResult:
    tokenizer, rng = BuiltinTokenizer(), np.random.default_rng(0)
    deadline = time.monotonic() + s.context_budget
    steps: list[dict[str, Any]] = []
    lo, lo_server, hi, stop = 0, None, None, ""

    async def attempt(n: int) -> str:
        remaining = max(deadline - time.monotonic(), 1.0)
        text = tokenizer.synthesize(n, rng)
        reply = await client.chat(
            [{"role": "user", "content": text}], max_tokens=1, timeout=min(client.endpoint.timeout, remaining)
        )
        outcome = _outcome(reply)
        server = (reply.usage or {}).get("prompt_tokens")
        steps.append(
            {"prompt_tokens": n, "server_prompt_tokens": server, "outcome": outcome, "reply": reply.describe()}
        )
        return outcome

    n = _START
    while len(steps) < s.context_steps:
        if time.monotonic() >= deadline:
            stop = f"time budget of {s.context_budget:g}s spent"
            break
        outcome = await attempt(n)
        if outcome == "error":
            stop = f"inconclusive: {steps[-1]['reply']} at {n} tokens (tried twice)"
            break
        if outcome == "accepted":
            lo, lo_server = n, steps[-1]["server_prompt_tokens"]
        else:
            hi = n
        if hi is None:
            if n >= s.context_limit:
                stop = f"accepted the limit of {s.context_limit} tokens"
                break
            n = min(n * 2, s.context_limit)
            continue
        if hi - lo <= max(int(lo * s.context_precision), 1):
            stop = f"bracket [{lo}, {hi}) within {s.context_precision:.1%}"
            break
        n = (lo + hi) // 2
    else:
        stop = f"step limit of {s.context_steps} reached"
    value = lo_server if isinstance(lo_server, int) else (lo or None)
    counted = "server's usage" if isinstance(lo_server, int) else "built-in tokenizer"
    if not lo:
        found = f"no prompt was accepted ({steps[-1]['reply'] if steps else 'no attempt'})"
    elif hi is None:
        found = f"accepted {value} prompt tokens ({counted}); the search stopped there: {stop}"
    else:
        why = {s["prompt_tokens"]: s for s in steps}[hi]
        found = (
            f"longest accepted prompt {value} tokens ({counted}); {hi} was {why['outcome']} ({why['reply']}); {stop}"
        )
    how = (f"max_tokens=1 prompts of random pseudo-words, doubling from {_START} then bisecting; "
           f"{len(steps)} requests, limit {s.context_limit}")  # fmt: skip
    return ProbeResult("context", "max_context", float(value) if value else None, found, how,
                       {"steps": steps, "rejected_at": hi, "stop": stop})  # fmt: skip


def _squash(text: str) -> str:
    return re.sub(r"[^0-9A-Z]", "", text.upper())


def recalled(secret: str, answer: str) -> bool:
    """The code word appears in the answer, ignoring case, spaces and punctuation."""
    return bool(_squash(secret)) and _squash(secret) in _squash(answer)


def _secret(rng: np.random.Generator) -> str:
    letters = "".join(chr(ord("A") + int(i)) for i in rng.integers(0, 26, size=6))
    return f"{letters}-{int(rng.integers(1000, 10000))}"


async def probe_retention(client: ProbeClient, s: ProbeSettings) -> ProbeResult:
    rng = np.random.default_rng(int(time.time_ns() % 2**32))
    secret = _secret(rng)
    checkpoints = sorted({c for c in s.checkpoints if 2 <= c <= s.turns})
    history: list[dict[str, Any]] = [
        {"role": "user", "content": f"Please remember this code word for later: {secret}. Reply OK."}
    ]
    results: list[dict[str, Any]] = []
    stop = ""
    first = await client.chat(history, max_tokens=16)
    if not first.ok:
        stop = f"turn 1 failed: {first.describe()}"
    else:
        history.append({"role": "assistant", "content": first.text})
        for turn in range(2, (checkpoints[-1] if checkpoints else 1) + 1):
            if turn in checkpoints:
                ask = await client.chat([*history, {"role": "user", "content": _QUESTION}], max_tokens=24)
                if not ask.ok:
                    stop = f"the question at turn {turn} failed: {ask.describe()}"
                    break
                results.append({"turn": turn, "recalled": recalled(secret, ask.text), "answer": ask.text[:120]})
            if turn == checkpoints[-1]:
                break
            filler = {"role": "user", "content": _FILLERS[turn % len(_FILLERS)].format(k=turn)}
            reply = await client.chat([*history, filler], max_tokens=24)
            if not reply.ok:
                stop = f"filler turn {turn} failed: {reply.describe()}"
                break
            history += [filler, {"role": "assistant", "content": reply.text}]
    value = 0
    for r in results:
        if not r["recalled"]:
            break
        value = r["turn"]
    miss = next((r for r in results if not r["recalled"]), None)
    if miss is not None:
        kept = f"recalled up to turn {value}" if value else "never recalled"
        found = f"{kept}; not at turn {miss['turn']} (answer: {miss['answer'][:60]!r})"
    elif results:
        found = f"recalled at every checkpoint up to turn {value}"
    else:
        found = "no checkpoint reached"
    if stop:
        found += f"; stopped: {stop}"
    how = (f"code word {secret} at turn 1, filler turns, the question asked on a branch at turns "
           f"{', '.join(map(str, checkpoints))}; passes when the answer contains the code word")  # fmt: skip
    return ProbeResult("retention", "multi_turn_retention", float(value) if results else None, found, how,
                       {"secret": secret, "checkpoints": results, "stop": stop})  # fmt: skip
