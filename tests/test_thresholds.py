"""k6-style threshold expressions parse into typed criteria, or fail with the accepted forms."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from surgelab.conditions import Threshold

PARSE = TypeAdapter(Threshold).validate_python


@pytest.mark.parametrize(
    ("expr", "key", "op", "value"),
    [
        ("p99(ttft) < 2s", "p99(ttft)", "<", 2.0),
        ("p90(e2e) < 3s", "p90(e2e)", "<", 3.0),
        ("p99.9(itl)<=50ms", "p99.9(itl)", "<=", 0.05),
        ("  mean(itl) <= 50ms ", "mean(itl)", "<=", 0.05),
        ("avg(tpot) < 40ms", "mean(tpot)", "<", 0.04),
        ("median(ttft) < 1", "p50(ttft)", "<", 1.0),
        ("max(e2e) < 1m", "max(e2e)", "<", 60.0),
        ("min(ttft) >= 100ms", "min(ttft)", ">=", 0.1),
        ("error_rate < 0.5%", "error_rate", "<", 0.005),
        ("error_rate<=0.01", "error_rate", "<=", 0.01),
        ("drop_rate < 1%", "drop_rate", "<", 0.01),
        ("throughput > 10", "throughput", ">", 10.0),
        ("output_tokens_per_s >= 500", "output_tokens_per_s", ">=", 500.0),
        ("goodput > 2.5", "goodput", ">", 2.5),
    ],
)
def test_valid_expressions(expr, key, op, value):
    threshold = PARSE(expr)
    assert threshold.key == key
    assert threshold.op == op
    assert threshold.value == pytest.approx(value)
    assert threshold.expr == expr
    assert threshold.abort_on_fail is False


def test_mapping_form_with_abort():
    threshold = PARSE({"expr": "p99(ttft) < 2s", "abort_on_fail": True})
    assert threshold.abort_on_fail and threshold.key == "p99(ttft)"


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("p99(latency) < 2s", "unknown latency metric 'latency'"),
        ("p100(ttft) < 2s", "cannot read threshold"),
        ("p0(ttft) < 2s", "percentile out of range"),
        ("p99(ttft) < 2 parsecs", "cannot read threshold"),
        ("p99(ttft) < fast", "duration"),
        ("errors < 1%", "unknown metric 'errors'"),
        ("error_rate < lots", "ratio"),
        ("throughput > many", "could not convert"),
        ("p99(ttft) == 2s", "cannot read threshold"),
        ("p99(ttft)", "cannot read threshold"),
        ("", "cannot read threshold"),
        (42, "expected a threshold expression"),
        ({"abort_on_fail": True}, "expected a threshold expression"),
    ],
)
def test_invalid_expressions(expr, message):
    with pytest.raises(ValidationError) as info:
        PARSE(expr)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("expr", "observed", "passes"),
    [
        ("p99(ttft) < 2s", 1.999, True),
        ("p99(ttft) < 2s", 2.0, False),
        ("p99(ttft) <= 2s", 2.0, True),
        ("throughput > 10", 10.0, False),
        ("throughput >= 10", 10.0, True),
        ("error_rate < 0.5%", 0.004, True),
        ("error_rate < 0.5%", 0.006, False),
        ("p99(ttft) < 2s", None, False),  # no data never passes
        ("p99(ttft) < 2s", float("nan"), False),
    ],
)
def test_passes(expr, observed, passes):
    assert PARSE(expr).passes(observed) is passes
