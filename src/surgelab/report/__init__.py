"""Presenting results: terminal live view and summary table (HTML reports come later)."""
