"""Does ``surgelab plan --search`` miss a cheaper fleet? The same space searched, then brute-forced.

The search prunes by physics, simulates cheapest floor first and skips what cannot win; brute
force simulates every configuration whose weights fit (the capacity-pruned ones too) at every
replica count from the space's minimum until it passes, on the same trials (same scenario,
seed and early stop). Printed: the cheapest passing cost each found (nominal physics, the
scenario's seed — the robust count is the search's own extra step), whether the search's is
the cheapest, the simulations and CPU each took, and the ratio. An autoscaled configuration is
one simulation from its HPA's min, costing its mean replicas, in both.

    python benchmarks/search_bruteforce.py examples/search/llama70b.yaml
    python benchmarks/search_bruteforce.py examples/search/thousand-qps.yaml
    python benchmarks/search_bruteforce.py examples/search/hpa-70b.yaml
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from surgelab.plan.search import mean_lengths, prune, search, trial, workload
from surgelab.plan.space import load_space


def _brute(args: tuple) -> tuple[str, float | None, int, float]:
    """(label, cheapest passing cost per hour or None, simulations, CPU s) of one configuration."""
    scenario, cand, profile, low, high = args
    started, sims = time.process_time(), 0
    if cand.autoscale is not None:
        t = trial(scenario, cand, cand.autoscale[2], profile, scenario.seed)
        cost = t.mean_replicas * cand.replica_hour if t.passed and t.mean_replicas else None
        return cand.label(), cost, 1, time.process_time() - started
    for n in range(low, high + 1):
        sims += 1
        if trial(scenario, cand, n, profile, scenario.seed).passed:
            return cand.label(), n * cand.replica_hour, sims, time.process_time() - started
    return cand.label(), None, sims, time.process_time() - started


def _nominal(o) -> float:
    """The passing cost at the scenario's seed and nominal physics (before the robust checks)."""
    if o.candidate.autoscale is not None:
        return o.trials[0].mean_replicas * o.candidate.replica_hour
    return o.replicas * o.candidate.replica_hour


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("space", type=Path)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    space, base = load_space(args.space)
    scenario = workload(space, base)

    started = time.perf_counter()
    result = search(space, base, scenario, workers=args.workers)
    search_wall = time.perf_counter() - started
    nominal = [o for o in result.outcomes if o.status == "passed"]
    best_search = min((_nominal(o) for o in nominal), default=None)
    print(f"search: {len(result.outcomes)} configurations, {result.simulations} simulations, {search_wall:.0f} s wall; "
          f"cheapest passing {best_search:,.2f}/h" if best_search is not None else "search: nothing passed")  # fmt: skip

    peak = result.peak
    jobs = []
    lengths = mean_lengths(scenario)
    for cand in space.candidates():
        fits = prune(space, base, cand, peak, lengths)
        if fits.reason.startswith(("memory", "context")):
            continue  # cannot run at all: no simulation could pass
        jobs.append(
            (scenario, cand, cand.deployment(space.max_model_len, base), space.replicas.min, space.replicas.max)
        )
    started, cpu, sims, cheapest = time.perf_counter(), 0.0, 0, []
    with ProcessPoolExecutor(args.workers) as pool:
        for label, cost, n, seconds in pool.map(_brute, jobs):
            sims += n
            cpu += seconds
            if cost is not None:
                cheapest.append((cost, label))
    brute_wall = time.perf_counter() - started
    cheapest.sort()
    best = cheapest[0] if cheapest else None
    print(f"brute force: {len(jobs)} configurations, {sims} simulations, {brute_wall:.0f} s wall, {cpu:.0f} CPU s; "
          f"cheapest passing {best[0]:,.2f}/h ({best[1]})" if best else "brute force: nothing passed")  # fmt: skip
    if best and best_search is not None:
        tied = [label for cost, label in cheapest if abs(cost - best[0]) < 1e-9]
        verdict = (
            "the same cost" if abs(best_search - best[0]) < 1e-9 else f"{best_search / best[0]:.3f}× the brute force's"
        )
        print(
            f"search's cheapest: {verdict}; {len(tied)} configuration(s) tie at the cheapest; "
            f"search took {result.simulations / max(sims, 1):.1%} of the simulations and {search_wall / brute_wall:.1%} of the wall time"
        )


if __name__ == "__main__":
    main()
