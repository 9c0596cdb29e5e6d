"""Targets with exactly known behaviour, for tests, benchmarks and client calibration."""
