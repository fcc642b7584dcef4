"""Greedy pack placement compiled (numba), for callers that place many jobs on many nodes: the backfill
kernels (`sim/kernels.py`) and `greedy.place`'s multi-node pack. Each function is `greedy.py`'s rule on
arrays of per-node free GPUs, CPUs and memory; tests/placement/test_compiled.py and
tests/sim/test_backfill_profile.py hold them to it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit


@njit(cache=True)
def usable_gpus(g: int, c: int, m: int, cpu_per_gpu: float, mem_per_gpu: float) -> int:
    """`greedy._usable_nodes`'s count for one node: its GPUs, fewer if its CPUs or memory run out first."""
    if g <= 0:
        return 0
    if cpu_per_gpu > 0:
        g = min(g, int((c + 1e-9) / cpu_per_gpu))
    if mem_per_gpu > 0:
        g = min(g, int((m + 1e-9) / mem_per_gpu))
    return max(g, 0)


@njit(cache=True)
def slice_size(gpus: int, per_gpu: float) -> int:
    """`Demand.slice_cpus` / `slice_mem`: a slice's CPUs or memory, its GPU share rounded up."""
    return int(np.ceil(gpus * per_gpu - 1e-9))


@njit(cache=True)
def place_pack(
    fg: npt.NDArray[np.int64],
    fc: npt.NDArray[np.int64],
    fm: npt.NDArray[np.int64],
    gpus: int,
    dem_pool: npt.NDArray[np.int64],
    dem_cpg: npt.NDArray[np.float64],
    dem_mpg: npt.NDArray[np.float64],
    pool_ptr: npt.NDArray[np.int64],
    pool_flat: npt.NDArray[np.int64],
    pool_gpus: npt.NDArray[np.int64],
    out: npt.NDArray[np.int64],
) -> int:
    """`greedy.place(demand, pools, free, "pack")` on free capacity (fg, fc, fm): over the demand's pools,
    the fewest nodes, then the fewest GPUs left over on them, then the pool listed first. Writes the
    slices (node, GPUs, CPUs, memory), by node, into `out`'s rows and returns their count (0: no fit)."""
    best_len, best_left, count = -1, 0, 0
    scratch = np.empty((out.shape[0], 4), dtype=np.int64)
    for k in range(dem_pool.shape[0]):
        p = dem_pool[k]
        nodes = pool_flat[pool_ptr[p] : pool_ptr[p + 1]]
        if gpus <= pool_gpus[p]:
            found = _one_node(fg, fc, fm, gpus, nodes, dem_cpg[k], dem_mpg[k], scratch)
        else:
            found = many_nodes(fg, fc, fm, gpus, nodes, dem_cpg[k], dem_mpg[k], scratch)
        if found == 0:
            continue
        left = 0
        for s in range(found):
            left += fg[scratch[s, 0]] - scratch[s, 1]
        if best_len < 0 or found < best_len or (found == best_len and left < best_left):
            best_len, best_left, count = found, left, found
            for s in range(found):  # both searches write their slices by node
                out[s] = scratch[s]
    return count


@njit(cache=True)
def _one_node(
    fg: npt.NDArray[np.int64],
    fc: npt.NDArray[np.int64],
    fm: npt.NDArray[np.int64],
    gpus: int,
    nodes: npt.NDArray[np.int64],
    cpg: float,
    mpg: float,
    out: npt.NDArray[np.int64],
) -> int:
    """`greedy._single_node`, pack: the node with the fewest free GPUs that holds the job, ties to the
    lower node. Writes one slice; returns 1, or 0 if no node holds it."""
    need_c, need_m = slice_size(gpus, cpg), slice_size(gpus, mpg)
    best_node, best_free = -1, -1
    for n in nodes:
        f = fg[n]
        if f < gpus or fc[n] < need_c or fm[n] < need_m:
            continue
        if best_node < 0 or f < best_free:
            best_node, best_free = n, f
            if f == gpus:
                break
    if best_node < 0:
        return 0
    out[0, 0], out[0, 1], out[0, 2], out[0, 3] = best_node, gpus, need_c, need_m
    return 1


@njit(cache=True)
def many_nodes(
    fg: npt.NDArray[np.int64],
    fc: npt.NDArray[np.int64],
    fm: npt.NDArray[np.int64],
    gpus: int,
    nodes: npt.NDArray[np.int64],
    cpg: float,
    mpg: float,
    out: npt.NDArray[np.int64],
) -> int:
    """`greedy._multi_node` with `_pack_shares`: the nodes with the most usable GPUs first (ties to the
    lower node) until the rest fits on one node, then the tightest such node (ties to the lower). Writes
    the slices by node (as `_multi_node` returns them, so the caller need not sort a job's tens of
    slices in Python); returns their count, or 0 if the pool cannot hold the job."""
    usable = np.empty(nodes.shape[0], dtype=np.int64)
    for i in range(nodes.shape[0]):
        usable[i] = usable_gpus(fg[nodes[i]], fc[nodes[i]], fm[nodes[i]], cpg, mpg)
    if usable.sum() < gpus:
        return 0
    order = np.argsort(-usable, kind="mergesort")  # nodes are ascending; the sort is stable
    taken = np.empty(order.shape[0], dtype=np.int64)  # node, in the order taken
    share = np.empty(order.shape[0], dtype=np.int64)
    remaining, count = gpus, 0
    for a in range(order.shape[0]):
        u = usable[order[a]]
        if u >= remaining:
            fit = order[a]
            for b in range(a + 1, order.shape[0]):
                v = usable[order[b]]
                if v >= remaining and (v < usable[fit] or (v == usable[fit] and order[b] < fit)):
                    fit = order[b]
            u, order[a] = remaining, fit
        taken[count], share[count] = nodes[order[a]], u
        count += 1
        remaining -= u
        if remaining == 0:
            break
    by_node = np.argsort(taken[:count])
    for s in range(count):
        n, u = taken[by_node[s]], share[by_node[s]]
        out[s, 0], out[s, 1], out[s, 2], out[s, 3] = n, u, slice_size(u, cpg), slice_size(u, mpg)
    return count
