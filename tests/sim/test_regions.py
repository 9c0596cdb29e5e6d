"""Regions: a network round trip with jitter, nearest-first routing, region outages; fleet-file errors."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from surgelab.sim import FleetError, load_fleet

from .helpers import fleet, run, scenario

MS = 1_000_000


def _records(result):
    return pq.read_table(result.run_dir / "records.parquet").sort_by("intended_ns")


def _ttft_ns(table) -> np.ndarray:
    return table["first_token_ns"].to_numpy() - table["intended_ns"].to_numpy()


def test_a_round_trip_of_80ms_adds_80ms_within_the_jitter_to_ttft_and_e2e_not_to_itl(tmp_path):
    # one request at a time (4/s, 50 ms each on an engine of its own): nothing else differs
    scen = scenario({"rate": 4, "duration": "30s", "arrival": "constant"},
                    workload={"prompt_tokens": 64, "output_tokens": 8})  # fmt: skip

    def region(rtt, jitter):
        return fleet(seed=5, regions=[{"name": "r", "rtt": rtt, "jitter": jitter}],
                     pools=[{"profile": "llama3-8b-h100", "region": "r"}])  # fmt: skip

    near = _records(run(tmp_path, scen, region(0, 0), "near"))
    far_result = run(tmp_path, scen, region("80ms", "10ms"), "far")
    far = _records(far_result)
    assert far.num_rows == near.num_rows == 120 and pc.all(pc.equal(far["state"], "ok")).as_py()
    added = _ttft_ns(far) - _ttft_ns(near)
    assert added.min() >= 70 * MS and added.max() <= 90 * MS  # rtt ± jitter
    assert abs(added.mean() - 80 * MS) < 2 * MS  # the jitter averages out
    assert added.std() > 3 * MS  # and it is there: uniform ±10 ms has a 5.8 ms spread
    e2e_added = (far["end_ns"].to_numpy() - near["end_ns"].to_numpy())
    assert np.array_equal(e2e_added, added)  # the whole answer comes back the same way
    assert far["itl_us"].to_pylist() == near["itl_us"].to_pylist()
    # the seed fixes the jitter: the same fleet again gives the same records
    again = _records(run(tmp_path, scen, region("80ms", "10ms"), "again"))
    assert again["first_token_ns"].to_pylist() == far["first_token_ns"].to_pylist()
    assert far_result.fleet["regions"]["r"]["dispatched"] == 120


def _two_regions(router=None, outage=None, concurrency=2):
    near = {"name": "near", "rtt": "10ms"}
    if outage:
        near["outages"] = [outage]
    return fleet(
        regions=[near, {"name": "far", "rtt": "100ms"}],
        pools=[
            {"name": "far-pool", "region": "far", "service_time": 0.2, "concurrency": concurrency},
            {"name": "near-pool", "region": "near", "service_time": 0.2, "concurrency": concurrency},
        ],
        router=router or {"policy": "nearest"},
    )


def test_nearest_first_stays_near_until_the_near_region_is_full(tmp_path):
    # the near pool serves 2 at a time for 0.2 s: 10 requests/s at most
    light = run(tmp_path, scenario({"rate": 5, "duration": "10s", "arrival": "constant"}), _two_regions(), "light")
    pools = light.fleet["pools"]
    assert pools["near-pool"]["dispatched"] == 50 and pools["far-pool"]["dispatched"] == 0
    assert _ttft_ns(_records(light)).max() < 220 * MS  # 200 ms of service and the near round trip

    heavy = run(tmp_path, scenario({"rate": 15, "duration": "10s", "arrival": "constant"}), _two_regions(), "heavy")
    pools = heavy.fleet["pools"]
    # each of its 2 slots is held 205 ms (the way there, then service) and waits for the next
    # arrival (every 66.7 ms) once free: 4 arrivals a slot, 7.5/s; the rest spills over
    assert 73 <= pools["near-pool"]["dispatched"] <= 77
    assert pools["far-pool"]["dispatched"] == 150 - pools["near-pool"]["dispatched"]
    ttft = _ttft_ns(_records(heavy))
    assert (ttft == 300 * MS).sum() == pools["far-pool"]["dispatched"]  # spilled: service and the far round trip
    assert (ttft == 210 * MS).sum() == pools["near-pool"]["dispatched"]

    spread = run(tmp_path, scenario({"rate": 5, "duration": "10s", "arrival": "constant"}),
                 _two_regions({"policy": "least_outstanding"}), "spread")  # fmt: skip
    assert spread.fleet["pools"]["far-pool"]["dispatched"] >= 20  # least loaded ignores the distance


def test_a_region_outage_fails_what_it_holds_and_traffic_goes_to_the_other_region(tmp_path):
    scen = scenario({"rate": 10, "duration": "20s", "arrival": "constant"})
    flt = _two_regions(outage={"at": "5s", "duration": "5s"}, concurrency=4)
    result = run(tmp_path, scen, flt)
    t = _records(result)
    intended = t["intended_ns"].to_numpy()
    lost = t.filter(pc.equal(t["state"], "connection_error"))
    # in flight at 5 s: the requests sent at 4.8 and 4.9 s (0.2 s each), at the near pool
    assert lost.num_rows == 2 and result.fleet["lost"] == 2
    assert set(lost["error"].to_pylist()) == {"connection reset: region near is down"}
    # the client hears of the reset a way back (5 ms) after the outage
    assert lost["end_ns"].to_pylist() == [5_005 * MS, 5_005 * MS]
    ok = t.filter(pc.equal(t["state"], "ok"))
    sent = ok["intended_ns"].to_numpy()
    far = _ttft_ns(ok) > 250 * MS  # 200 ms of service + 100 ms of round trip
    during = (sent >= 5_000 * MS) & (sent < 10_000 * MS)
    assert far[during].all() and not far[~during].any()  # served far during the outage only
    out = result.fleet["regions"]["near"]["outages"]
    assert out == [{"at_s": 5.0, "until_s": 10.0, "replicas": 1, "lost_in_flight": 2, "lost_routed": 0,
                    "detected_at_s": 5.0}]  # fmt: skip
    assert [f.get("region") for f in result.fleet["failures"]] == ["near"]
    assert intended.size == 200


def test_with_health_checks_the_router_keeps_sending_into_the_outage_until_it_detects_it(tmp_path):
    scen = scenario({"rate": 10, "duration": "20s", "arrival": "constant"})
    router = {"policy": "nearest", "health_check": {"interval": "1s", "failures": 2, "recovery": 1}}
    result = run(tmp_path, scen, _two_regions(router, {"at": "5s", "duration": "5s"}, concurrency=4))
    outage = result.fleet["regions"]["near"]["outages"][0]
    # failed requests count as failed checks do (load.health): the 2 in flight at 5 s fail and take the
    # region's replica out at once, before the check at 5 s; nothing more is sent into the outage
    assert outage["detected_at_s"] == 5.0 and outage["lost_routed"] == 0 and outage["lost_in_flight"] == 2
    refused = _records(result).filter(pc.match_substring(_records(result)["error"], "connection refused"))
    assert refused.num_rows == 0
    # at 1 req/s nothing is in flight at 5 s: the check at 5 s fails, then the request sent at 5 s is
    # refused when it gets there (5 ms later): the second failure takes the replica out
    slow = _two_regions(router, {"at": "5s", "duration": "5s"}, concurrency=4)
    quiet = run(tmp_path, scenario({"rate": 1, "duration": "20s", "arrival": "constant"}), slow, "quiet")
    outage = quiet.fleet["regions"]["near"]["outages"][0]
    assert outage["detected_at_s"] == pytest.approx(5.005) and (outage["lost_routed"], outage["lost_in_flight"]) == (1, 0)


BAD = [
    ("regions: [{name: a}]\npools:\n  - {profile: tiny}\n  - {profile: tiny, name: b, region: eu}\n",
     "4: pools[1].region: unknown region 'eu' (regions: a)"),
    ("regions:\n  - {name: a, rtt: 10ms, jitter: 20ms}\npools: [{profile: tiny, region: a}]\n",
     "2: regions[0]: jitter (0.02s) must not exceed rtt (0.01s)"),
    ("pools: [{profile: tiny}]\nrouter:\n  policy: nearest\n", "3: router.policy: nearest needs pools with a region"),
    ("regions: [{name: a, rtt: far}]\npools: [{profile: tiny}]\n", "1: regions[0].rtt: expected a duration"),
    ("regions: [{name: a, outages: [{at: 5s}]}]\npools: [{profile: tiny}]\n",
     "1: regions[0].outages[0].duration: required field is missing"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), BAD, ids=[e.split(": ")[1] for _, e in BAD])
def test_bad_region_settings_are_one_line_with_file_line_and_field(tmp_path, text, expected):
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    with pytest.raises(FleetError) as err:
        load_fleet(path)
    assert str(err.value).startswith(f"{path}:{expected}")
    assert "\n" not in str(err.value)
