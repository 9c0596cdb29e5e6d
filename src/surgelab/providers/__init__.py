"""Choosing a provider: requirement scoring, capability probes, monitoring history, cost.

The seed's study in library form: measure candidates (runs, compare dirs), probe what load
cannot show (context, multi-turn memory, API conformance), watch them over days (history),
price them, then score everything against one requirement profile.
"""
