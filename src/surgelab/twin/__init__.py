"""The digital twin: fit an engine profile to a measured replica, then check its predictions."""
