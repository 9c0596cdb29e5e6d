"""The error bar a plan prints is the larger of the calibration set's and the never-fitted runs' medians."""

from __future__ import annotations

import pytest

from surgelab.engine import accuracy
from surgelab.engine.accuracy import ErrorBar, nearest_error

FAMILIES = {
    "engine": "vLLM 0.15.1",
    "families": {
        "h100-dense": {
            "gpu": "H100 SXM", "kind": "dense", "models": 5, "runs": 9, "e2e_mean": 5.2, "ttft_mean": 10.1,
            "heldout": {"runs": 19, "models": 4, "e2e_mean": 6.5, "ttft_mean": 8.6},
        },
        "a100-dense": {
            "gpu": "A100 SXM 80GB", "kind": "dense",
            "heldout": {"runs": 4, "models": 4, "e2e_mean": 9.0, "ttft_mean": 20.0, "note": "4 of 4 at assumed load rates"},
        },
    },
}  # fmt: skip


@pytest.fixture
def families(monkeypatch):
    monkeypatch.setattr(accuracy, "_families", lambda: FAMILIES)


def test_each_metric_takes_the_larger_median(families):
    bar = nearest_error("H100 SXM", moe=False)
    assert bar.errors == {"e2e_mean": 6.5, "ttft_mean": 10.1}
    text = bar.describe()
    assert text.startswith("E2E ±6.5 %, TTFT ±10.1 % (the larger median error of 9 real runs of 5 models, each")
    assert "19 real runs of 4 models never fitted" in text
    assert "carried over" not in text


def test_a_gpu_measured_only_by_heldout_runs_is_measured_not_carried(families):
    bar = nearest_error("A100 SXM 80GB", moe=False)
    assert bar.errors == {"e2e_mean": 9.0, "ttft_mean": 20.0}
    assert bar.runs == 0 and bar.heldout_runs == 4
    text = bar.describe()
    assert "carried over" not in text and "each model left out" not in text
    assert "median error on 4 real runs of 4 models never fitted (4 of 4 at assumed load rates)" in text
    assert bar.pessimistic(100.0) == pytest.approx(100 / 1.09)


def test_a_gpu_no_run_measured_still_says_carried_over(families):
    text = nearest_error("L40S", moe=False).describe()
    assert "not measured on L40S: the H100 SXM figures, carried over by data sheet" in text


def test_the_bar_survives_summary_json(families):
    bar = nearest_error("A100 SXM 80GB", moe=False)
    assert ErrorBar.from_dict(bar.to_dict()) == bar
