"""The simulator stands on the schedule, the engine and the analysis, not on the runner or the HTTP client.

``import surgelab.sim`` in a fresh interpreter loads no module of ``surgelab.runner`` or
``surgelab.client`` and not aiohttp: what the simulator shares with a measured run (request
identity, stop rules, the summary's finisher) lives in the layers both stand on.
"""

from __future__ import annotations

import json
import subprocess
import sys


def test_importing_the_simulator_loads_neither_the_runner_nor_the_client():
    code = "import json, sys, surgelab.sim; print(json.dumps(sorted(sys.modules)))"
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    unwanted = [m for m in loaded if m.startswith(("surgelab.runner", "surgelab.client", "aiohttp"))]
    assert unwanted == []
    assert "surgelab.sim.simulator" in loaded  # the simulator itself did load
