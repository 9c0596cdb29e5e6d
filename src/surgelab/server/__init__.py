"""``surgelab serve``: an OpenAI-compatible HTTP server on the engine model, with fault knobs.

``build_app`` gives the aiohttp application (for in-process use), ``serve`` runs it until
interrupted, and ``surgelab.server.process`` starts it as a real subprocess.
"""

from surgelab.server.app import InferenceServer, build_app
from surgelab.server.config import ConfigError, FaultConfig, ServerConfig, read_fault_file
from surgelab.server.run import serve

__all__ = [
    "ConfigError",
    "FaultConfig",
    "InferenceServer",
    "ServerConfig",
    "build_app",
    "read_fault_file",
    "serve",
]
