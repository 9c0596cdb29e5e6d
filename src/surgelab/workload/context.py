"""Does a request class ask for more tokens than the model holds? Said before the load, not as 400s after.

A long-context preset (``preset: long-200k``) against a model of 131,072 positions makes every
request a ``context_length_exceeded``: the run would measure errors. The model's context is known
when the target names a catalogued model (``target.model``, its ``max_position_embeddings``), when
its ``/models`` lists a ``max_model_len`` (the pre-flight), or, in a simulation, from each pool's
engine (``max_model_len``); otherwise nothing is said. A class is
checked at the longest it can ask for: a fixed length, or the top of a bounded distribution.
"""

from __future__ import annotations

from collections.abc import Iterator

from surgelab.engine.architecture import ArchitectureError
from surgelab.engine.catalogue import find_model, model_names
from surgelab.scenario.model import RequestClass, Scenario

__all__ = ["context_warnings", "model_context"]


def model_context(model: str) -> int | None:
    """The context (positions) of a catalogued model by id or alias; None when it is not catalogued."""
    if model.lower() not in {name.lower() for name in model_names()}:
        return None  # never a file: a model name is not read from the working directory
    try:
        return find_model(model).max_position_embeddings or None
    except ArchitectureError:
        return None


def _longest(dist) -> float | None:
    """The most a length distribution can draw (None: unbounded, e.g. log-normal without a max)."""
    for name in ("value", "max"):
        value = getattr(dist, name, None)
        if isinstance(value, (int, float)):
            return float(value)
    return None


def _classes(scenario: Scenario) -> Iterator[RequestClass]:
    seen: set[int] = set()
    for phase in scenario.phase_list:
        workload = scenario.workload_of(phase)
        if id(workload) not in seen:
            seen.add(id(workload))
            yield from workload.classes


def context_warnings(scenario: Scenario, limit: int | None = None, where: str = "") -> list[str]:
    """One sentence per class whose longest prompt plus answer exceeds ``limit`` tokens (default: the target model's)."""
    if limit is None:
        limit, where = model_context(scenario.target.model), f"the context of {scenario.target.model}"
    if not limit:
        return []
    out = []
    for c in _classes(scenario):
        prompt, answer = _longest(c.prompt_tokens), _longest(c.output_tokens)
        if prompt is None or answer is None or c.dataset is not None or prompt + answer <= limit:
            continue
        asked = f"preset {c.preset} asks" if c.preset else "asks"
        out.append(
            f"class {c.name}: {asked} for up to {prompt + answer:,.0f} tokens ({prompt:,.0f} prompt + {answer:,.0f} output), "
            f"more than {where} ({limit:,}): those requests will fail (context_length_exceeded); choose a shorter preset or a longer-context model"
        )
    return out
