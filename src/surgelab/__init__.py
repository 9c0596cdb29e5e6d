"""surgelab: honest load tests, concurrency scenarios and capacity plans for AI inference services."""

__version__ = "0.1.0"

__all__ = ["__version__"]
