"""The inference-engine model: continuous batching over a KV-cache budget, timed by a profile.

Clock-agnostic by construction: ``Engine.step()`` says how long a step takes and the caller
lets that time pass, in wall time (``surgelab serve``) or virtual time (the simulator).
``Engine.run()``/``advance()`` take the same steps many at a time while only time passes
(``surgelab.engine.request.Run`` says what a run did).
"""

from surgelab.engine.architecture import Architecture, ArchitectureError
from surgelab.engine.batches import step_batch
from surgelab.engine.calibration import Efficiency
from surgelab.engine.catalogue import find_model, model_names
from surgelab.engine.core import Engine, RequestRejected
from surgelab.engine.hardware import GPU, GPUS, Deployment
from surgelab.engine.kv import sequences_that_fit
from surgelab.engine.profile import EngineProfile, ProfileError
from surgelab.engine.profiles import PROFILES, load_profile, profile_names
from surgelab.engine.request import EngineRequest, StepResult, prefix_block_hashes

__all__ = [
    "GPU",
    "GPUS",
    "PROFILES",
    "Architecture",
    "ArchitectureError",
    "Deployment",
    "Efficiency",
    "Engine",
    "EngineProfile",
    "EngineRequest",
    "ProfileError",
    "RequestRejected",
    "StepResult",
    "find_model",
    "load_profile",
    "model_names",
    "prefix_block_hashes",
    "profile_names",
    "sequences_that_fit",
    "step_batch",
]
