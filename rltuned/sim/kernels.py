"""Compiled inner loops of the Slurm model (numba), where a queue makes Python loops the cost.

sched/backfill plans a start for every tested job, and a queue of a few hundred jobs on a profile of a
few hundred rows is tested every `bf_interval`: the earliest-start search below ran as numpy slices
and a Python placement per candidate row, about 80 us a job; compiled, it is a few.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit


@njit(cache=True)
def earliest_on_one_node(
    times: npt.NDArray[np.float64],
    cap: npt.NDArray[np.int64],
    first: int,
    last: int,
    resolution: float,
    limit: float,
    nodes: npt.NDArray[np.int64],
    gpus: int,
    cpus: int,
    mem: int,
) -> tuple[int, int, int]:
    """The first row k in [first, last) from which one of `nodes` holds (gpus, cpus, mem) in every row
    until the job's end on the grid, and on it `place`'s pack choice: the node with the fewest GPUs
    left over on the span's least free capacity, ties to the earlier node. Returns (k, position in
    `nodes`, GPUs left over), or (-1, -1, -1).

    Each node keeps the first row at or after k that lacks the job's resources; as k only grows, every
    row is read at most once per node to find them."""
    rows = times.shape[0]
    count = nodes.shape[0]
    lacking = np.full(count, -1, dtype=np.int64)
    for k in range(first, last):
        end = np.ceil((times[k] + limit) / resolution - 1e-9) * resolution
        stop = np.searchsorted(times, end)  # the span is rows [k, stop)
        stop = max(stop, k + 1)
        best, best_left = -1, 0
        for i in range(count):
            n = nodes[i]
            if lacking[i] < k:
                r = k
                while r < rows and cap[r, 0, n] >= gpus and cap[r, 1, n] >= cpus and cap[r, 2, n] >= mem:
                    r += 1
                lacking[i] = r
            if lacking[i] < stop:
                continue
            low = cap[k, 0, n]
            for r in range(k + 1, stop):
                low = min(low, cap[r, 0, n])
            left = low - gpus
            if best < 0 or left < best_left:
                best, best_left = i, left
        if best >= 0:
            return k, best, best_left
    return -1, -1, -1


@njit(cache=True)
def earliest_on_nodes(
    times: npt.NDArray[np.float64],
    cap: npt.NDArray[np.int64],
    first: int,
    last: int,
    resolution: float,
    limit: float,
    nodes: npt.NDArray[np.int64],
    gpus: int,
    cpu_per_gpu: float,
    mem_per_gpu: float,
) -> int:
    """The first row k in [first, last) from which `nodes` together hold `gpus` GPUs (with their CPU and
    memory shares) in every row until the job's end on the grid, counted as `place` counts a node's
    usable GPUs on the span's least free capacity; -1 if none. The placement itself is left to `place`.
    A row whose own capacity cannot hold the job is passed over without reading its span."""
    rows = times.shape[0]
    for k in range(first, last):
        total = 0
        for n in nodes:
            total += _usable(cap[k, 0, n], cap[k, 1, n], cap[k, 2, n], cpu_per_gpu, mem_per_gpu)
        if total < gpus:
            continue
        end = np.ceil((times[k] + limit) / resolution - 1e-9) * resolution
        stop = min(max(np.searchsorted(times, end), k + 1), rows)
        total = 0
        for n in nodes:
            g, c, m = cap[k, 0, n], cap[k, 1, n], cap[k, 2, n]
            for r in range(k + 1, stop):
                g, c, m = min(g, cap[r, 0, n]), min(c, cap[r, 1, n]), min(m, cap[r, 2, n])
                if g <= 0:
                    break
            total += _usable(g, c, m, cpu_per_gpu, mem_per_gpu)
        if total >= gpus:
            return k
    return -1


@njit(cache=True)
def _usable(g: int, c: int, m: int, cpu_per_gpu: float, mem_per_gpu: float) -> int:
    """`greedy._usable_nodes`'s count for one node: its GPUs, fewer if its CPUs or memory run out first."""
    if g <= 0:
        return 0
    if cpu_per_gpu > 0:
        g = min(g, int((c + 1e-9) / cpu_per_gpu))
    if mem_per_gpu > 0:
        g = min(g, int((m + 1e-9) / mem_per_gpu))
    return max(g, 0)


@njit(cache=True)
def split_rows(
    times: npt.NDArray[np.float64], cap: npt.NDArray[np.int64], size: int, start: float, end: float
) -> tuple[int, int, int]:
    """Rows starting at `start` and at `end` in the first `size` rows (split off the intervals holding
    them, copying their capacity), for a reservation of [start, end) with start >= times[0]. The arrays
    need room for two more rows. Returns (first row, end row, new size)."""
    k0, size = _split(times, cap, size, start)
    k1, size = _split(times, cap, size, end)
    return k0, k1, size


@njit(cache=True)
def _split(
    times: npt.NDArray[np.float64], cap: npt.NDArray[np.int64], size: int, t: float
) -> tuple[int, int]:
    k = int(np.searchsorted(times[:size], t, side="right")) - 1
    if times[k] == t:
        return k, size
    for r in range(size, k + 1, -1):
        times[r] = times[r - 1]
        cap[r] = cap[r - 1]
    times[k + 1] = t
    cap[k + 1] = cap[k]
    return k + 1, size + 1
