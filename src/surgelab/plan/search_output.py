"""What a search leaves: ``search.json``, the winner ready to use, and the page.

- ``search.json``: every configuration with its status, reason, floor, replicas, cost and trials;
- ``fleet.yaml``: the winner as a fleet file (``surgelab simulate SCENARIO --fleet fleet.yaml``);
- ``deployment.yaml``: one replica's deployment (``surgelab serve --profile deployment.yaml``);
- ``plan.json``, ``hpa.yaml``, ``adapter.yaml``, ``alerts.yaml``: the capacity plan of the winner
  (its robust replica count at the peak; the HPA's per-pod target its measured requests in flight;
  an autoscaled winner's HPA is the one searched: its metric, target, min and max, and its fleet at
  the peak the most replicas that HPA provisioned at once);
- ``search.html``: the front of cost against P99 E2E, the chosen point, and a table to sort.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from surgelab.files import located, write_atomic
from surgelab.plan.artefacts import write_artefacts
from surgelab.plan.capacity import plan_capacity
from surgelab.plan.fleet import FleetInputs
from surgelab.plan.search import Outcome, SearchResult, fleet_data
from surgelab.report.search_view import SEARCH_FILE, render_search_html
from surgelab.sim.fleet import Autoscale

__all__ = ["write_search"]


def winner_fleet(result: SearchResult) -> dict:
    """The winner as fleet-file data: its robust replica count, its deployment, its price."""
    w = result.winner
    assert w is not None
    c = w.candidate
    profile = c.profile_file or c.deployment(result.space.max_model_len)
    fleet = fleet_data(c, w.robust_replicas or 1, profile, f"{result.space.name}-winner")
    return {"name": fleet.pop("name"), "description": f"surgelab plan --search: {c.label()}", **fleet}


def write_search(result: SearchResult, out: Path, force: bool = False) -> list[Path]:
    """Write every file into ``out``; ValueError when an earlier search is there (unless ``force``)."""
    earlier = out / "search.json"
    if earlier.exists() and not force:
        raise ValueError(f"{out} already holds a search (search.json): give --force to replace it, or another --out")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise located(exc, out) from None
    data = result.to_dict()
    written = [earlier]
    write_atomic(earlier, json.dumps(data, indent=1, default=str) + "\n")
    fleet_text = None
    if result.winner is not None:
        fleet = winner_fleet(result)
        fleet_text = yaml.safe_dump(fleet, sort_keys=False)
        write_atomic(out / "fleet.yaml", fleet_text)
        profile = fleet["pools"][0]["profile"]
        deployment = profile if isinstance(profile, dict) else {"profile": profile}
        write_atomic(out / "deployment.yaml", yaml.safe_dump(deployment, sort_keys=False))
        written += [out / "fleet.yaml", out / "deployment.yaml"]
        written += write_artefacts(out, _capacity_plan(result, result.winner), result.space.slo, force=True,
                                   **_searched_hpa(result.winner))  # fmt: skip
    write_atomic(out / SEARCH_FILE, render_search_html(data, fleet_text))
    return [*written, out / SEARCH_FILE]


_HPA_METRIC = {"in_flight": "inflight", "rps": "rps", "queue": "queue", "busy": "gpu"}
"""The simulator's autoscale metric → the HPA manifest's (``busy`` is a 0–1 share, DCGM's GPU utilisation a percentage)."""


def _searched_hpa(w: Outcome) -> dict:
    """write_artefacts' HPA settings for an autoscaled winner: the metric, target, min and max it was searched with."""
    if w.candidate.autoscale is None:
        return {}
    metric, target, low, high = w.candidate.autoscale
    rules = Autoscale.model_validate(w.candidate.hpa())
    up, down = rules.scale_up.stabilization, rules.scale_down.stabilization
    windows = (round(up if up is not None else 0), round(down if down is not None else 300))  # the simulator's defaults
    return {"metric": _HPA_METRIC[metric], "target": target * 100 if metric == "busy" else target, "min_replicas": low,
            "max_replicas": high, "windows": windows}  # fmt: skip


def _capacity_plan(result: SearchResult, w: Outcome):
    c = w.candidate
    # the fleet at the peak: an autoscaled winner's most replicas at once (its HPA may grow to its max)
    n = (w.peak_replicas or c.autoscale[3]) if c.autoscale else w.robust_replicas or w.replicas or 1
    inputs = FleetInputs(peak=result.peak, capacity=result.peak / n * (1 + 1e-9), safety=1.0, gpus_per_instance=c.tp,
                         gpu_hour_cost=c.gpu_hour)  # fmt: skip
    trial = w.latency
    held = (f"an HPA of {c.autoscale[2]}–{c.autoscale[3]} replicas ({n} at the peak, {w.mean_replicas or 0:.1f} on average)"
            if c.autoscale else f"{n} replicas")  # fmt: skip
    source = f"plan --search: {held} of {c.label()} hold {result.peak:g} req/s (simulated, robust)"
    return plan_capacity(inputs, source, trial.in_flight_per_replica if trial else None)
