"""How a weighted split deals requests out: one rule for live and simulated routing.

Smooth weighted round robin (nginx's): each pick adds every eligible member's weight to its
credit and takes the member with the most credit (ties: the first), which then pays the
eligible total. 80/20 is exact over every 10 picks and no member gets two in a row more than
its share demands, so a live run's split and its simulation's are the same sequence, not two
draws that agree on average. Members out of the running (down, full) are skipped: their
credit waits, and the others share their part.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["SmoothSplit"]


class SmoothSplit:
    __slots__ = ("weights", "credit")

    def __init__(self, weights: Sequence[float]) -> None:
        self.weights = [float(w) for w in weights]
        self.credit = [0.0] * len(self.weights)

    def pick(self, eligible: Sequence[int]) -> int | None:
        """The member (an index into ``weights``) the next request goes to, among ``eligible``; None if none weighs."""
        live = [i for i in eligible if self.weights[i] > 0]
        if not live:
            return None
        credit, weights = self.credit, self.weights
        for i in live:
            credit[i] += weights[i]
        best = max(live, key=credit.__getitem__)
        credit[best] -= sum(weights[i] for i in live)
        return best

    def peek(self, eligible: Sequence[int]) -> int | None:
        """The member ``pick`` would take now, without taking it."""
        live = [i for i in eligible if self.weights[i] > 0]
        return max(live, key=lambda i: self.credit[i] + self.weights[i]) if live else None
