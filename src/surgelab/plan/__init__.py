"""Capacity arithmetic: Little's Law now; queueing formulas and fleet sizing later."""
