"""The priority lever's targets (`plan.priority_targets`) as one compiled call over the queue.

Why: a training episode's sampled rankings reorder most of the queue every tick, so the chain of kept
values is found by patience sorting one job at a time and most gaps are refilled; in Python that was
about a tenth of a sampled Philly episode (docs/performance.md, "twentieth step"). The rule is in
`plan.priority_targets`' docstring; tests/core/test_plan.py holds this code to that rule as first
written, in Python.

Priorities are 32-bit in Slurm; `NONE` (int64's minimum) stands for "no value" in the inputs.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit

NONE = np.iinfo(np.int64).min
"""No priority shown by Slurm, or none written by rltuned."""

Ints = npt.NDArray[np.int64]


@njit(cache=True)
def longest_decreasing(values: Ints) -> Ints:
    """The positions of the longest strictly decreasing subsequence of `values`: patience sorting's
    chain (the last pile's top, followed back through each point's parent), O(n log n)."""
    n = len(values)
    tails = np.empty(n, np.int64)  # tails[k]: -value at the end of the best chain of length k+1
    tail_at = np.empty(n, np.int64)
    parent = np.full(n, -1, np.int64)
    piles = 0
    for p in range(n):
        key = -values[p]
        lo, hi = 0, piles  # bisect_left(tails[:piles], key)
        while lo < hi:
            mid = (lo + hi) // 2
            if tails[mid] < key:
                lo = mid + 1
            else:
                hi = mid
        tails[lo] = key
        tail_at[lo] = p
        if lo == piles:
            piles += 1
        parent[p] = tail_at[lo - 1] if lo > 0 else -1
    chain = np.empty(piles, np.int64)
    p = tail_at[piles - 1] if piles > 0 else -1
    for k in range(piles - 1, -1, -1):
        chain[k] = p
        p = parent[p]
    return chain


@njit(cache=True)
def renumber(n: int, low: int, high: int, step: int) -> Ints:
    """Fresh values `step` apart (closer if the band is short), from a quarter below the band's top."""
    top = high - (high - low) // 4
    spacing = max(1, min(step, (top - low) // max(n - 1, 1)))
    if spacing * (n - 1) > top - low:
        top = high
        spacing = max(1, (high - low) // max(n - 1, 1))
    out = np.empty(n, np.int64)
    for i in range(n):
        out[i] = max(low, top - spacing * i)
    return out


@njit(cache=True)
def targets(current: Ints, owned: Ints, low: int, high: int, step: int) -> Ints:
    """Each position's target: the values on the longest chain of kept ones, the gaps between them
    filled `step` apart where the room allows, else the whole queue renumbered."""
    n = len(current)
    at = np.empty(n, np.int64)
    inside = 0
    for i in range(n):
        value = owned[i]
        if value != NONE and current[i] == value and low <= value <= high:
            at[inside] = i
            inside += 1
    if inside == 0:
        return renumber(n, low, high, step)
    points = at[:inside]
    chain = points[longest_decreasing(owned[points])]
    out = np.empty(n, np.int64)
    for i in chain:
        out[i] = owned[i]
    for a in range(len(chain) + 1):  # the gap above each kept job, and the one below the last
        i0 = chain[a - 1] if a > 0 else -1
        i1 = chain[a] if a < len(chain) else n
        m = i1 - i0 - 1
        if m == 0:
            continue
        upper = owned[i0] if i0 >= 0 else high + 1
        lower = owned[i1] if i1 < n else low - 1
        if i0 < 0:  # above the first kept job: step upwards from it
            spacing = min(step, (upper - lower - 1) // m)
            if spacing < 1:
                return renumber(n, low, high, step)
            for k in range(m):
                out[i0 + 1 + k] = lower + spacing * (m - k)
        else:  # below a kept job: step downwards, leaving room under the last new one if another follows
            spacing = min(step, (upper - lower - 1) // (m + 1 if i1 < n else m))
            if spacing < 1:
                return renumber(n, low, high, step)
            for k in range(m):
                out[i0 + 1 + k] = upper - spacing * (k + 1)
    return out
