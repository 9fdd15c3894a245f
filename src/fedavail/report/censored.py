"""Censored times to a target. A run that never reaches the target accuracy within its rounds is censored at its final
device time: it would have needed longer, by an amount nobody knows. Such a run is never dropped (comparing the runs
that reach the target favours the method whose slow runs never do). A run's time is the interval [low, high]: its time
when it reaches the target (low = high), else (final device time, ∞).

Two methods are compared seed by seed with a paired sign test. A pair counts above (below) a bound only when its
difference is above (below) it whatever the censored times are; a pair that censoring leaves open counts against
whichever side is claimed, and only pairs equal to the bound for sure are left out. Under no difference (the two runs of
a pair exchangeable), a pair is surely above the bound with probability at most ½, so the number above is at most
Binomial(n, ½): a side is decided when P(Binomial(n, ½) >= its count) <= ALPHA."""

import math
from typing import NamedTuple

import numpy as np
import pandas as pd

# One side of a two-sided 95% level, as the claims' t intervals: a side needs at least 6 pairs (2^-6 < 0.025 < 2^-5).
ALPHA = 0.025


class SignTest(NamedTuple):
    """Paired differences against a bound: how many are surely above, surely below, left open, surely equal, and the
    one-sided p-value of each side."""

    above: int
    below: int
    open: int
    ties: int
    p_above: float
    p_below: float

    @property
    def pairs(self) -> int:
        return self.above + self.below + self.open + self.ties

    def decided(self) -> str | None:
        """'above' or 'below' where that side is decided at ALPHA, else None."""
        if self.p_above <= ALPHA:
            return "above"
        return "below" if self.p_below <= ALPHA else None

    def describe(self, above: str = "above", below: str = "below") -> str:
        ties = f", {self.ties} equal" if self.ties else ""
        return (f"{self.above} {above}, {self.below} {below}, {self.open} open{ties} of {self.pairs} "
                f"(sign test p {min(self.p_above, self.p_below):.2g})")


def binomial_tail(count: int, trials: int) -> float:
    """P(Binomial(trials, ½) >= count)."""
    if count <= 0:
        return 1.0
    return sum(math.comb(trials, k) for k in range(count, trials + 1)) / 2**trials


def time_bounds(values: pd.Series, reached: pd.Series) -> tuple[pd.Series, pd.Series]:
    """(low, high) of each run's time: the time where reached, else (its censoring time, ∞)."""
    return values, values.where(reached.astype(bool), np.inf)


def sign_test(low, high, bound: float = 0.0) -> SignTest:
    """The paired sign test of differences known to lie in [low, high] (arrays of one length; no NaN) against
    `bound`."""
    low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    above, below = int((low > bound).sum()), int((high < bound).sum())
    ties = int(((low == bound) & (high == bound)).sum())
    trials = len(low) - ties
    return SignTest(above, below, trials - above - below, ties, binomial_tail(above, trials),
                    binomial_tail(below, trials))
