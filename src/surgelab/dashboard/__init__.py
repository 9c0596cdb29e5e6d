"""Live web dashboard for a run under way (``surgelab run --dashboard``)."""

from surgelab.dashboard.server import Dashboard, DashboardSettings

__all__ = ["Dashboard", "DashboardSettings"]
