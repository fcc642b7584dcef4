"""Greedy placement on per-node free capacity: `pack` (best fit on the fewest nodes), `spread` (worst fit,
and one node more than needed for jobs larger than a node) and `cons_tres` (Slurm's own choice of node,
`placement/cons_tres.py`, for a job on one node; pack for a larger one). Also the MILP placer's fallback.

`free` holds per-node free GPUs, CPUs and memory (indexed like the cluster's nodes). `caps`, when given,
bounds what may be used on some nodes (EASY backfilling's "extra" resources on the head job's reserved
nodes). Ties go to the lower node index, so placements are deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial

import numpy as np

from rltuned.domain import Allocation, Slice
from rltuned.placement.compiled import many_nodes
from rltuned.placement.cons_tres import tightest_node
from rltuned.placement.pools import Demand, Pool

STRATEGIES = ("pack", "spread", "cons_tres")
COMPILED_FROM = 16
"""Pools of at least this many nodes place multi-node pack jobs compiled (below it, converting the
free lists to arrays costs more than the Python scan)."""
Caps = Mapping[int, tuple[int, int, int]]
EXACT_FIT = (1, 0)
"""Pack's best rank: one node, no GPU left over on it."""


class FreeCapacity:
    """Mutable per-node free resources; the simulator's live state and the reservation's scratch copy."""

    __slots__ = ("cpus", "gpus", "mem")

    def __init__(self, gpus: list[int], cpus: list[int], mem: list[int]) -> None:
        self.gpus = gpus
        self.cpus = cpus
        self.mem = mem

    def copy(self) -> FreeCapacity:
        return FreeCapacity(self.gpus[:], self.cpus[:], self.mem[:])

    def take(self, allocation: Allocation) -> None:
        g, c, m = self.gpus, self.cpus, self.mem
        for node, gpus, cpus, mem in allocation:
            g[node] -= gpus
            c[node] -= cpus
            m[node] -= mem

    def give(self, allocation: Allocation) -> None:
        g, c, m = self.gpus, self.cpus, self.mem
        for node, gpus, cpus, mem in allocation:
            g[node] += gpus
            c[node] += cpus
            m[node] += mem


def place(
    demand: Demand, pools: Sequence[Pool], free: FreeCapacity, strategy: str, caps: Caps | None = None
) -> Allocation | None:
    """Best allocation over the demand's eligible pools, or None if it does not fit now."""
    if strategy == "cons_tres":
        found = _cons_tres(demand, pools, free, caps)
        if found is not None or all(demand.gpus <= pools[p].gpus for p in demand.pools):
            return found
        strategy = "pack"  # a job on several nodes: Slurm fills the chosen run from its start
    best: Allocation | None = None
    best_rank: tuple[int, int] | None = None
    for k, p in enumerate(demand.pools):
        pool = pools[p]
        if demand.gpus <= pool.gpus:
            found = _single_node(demand, k, pool, free, strategy, caps)
        else:
            found = _multi_node(demand, k, pool, free, strategy, caps)
        if found is None:
            continue
        if len(demand.pools) == 1:
            return found  # nothing to rank it against
        rank = _rank(found, free, strategy)
        if best_rank is None or rank < best_rank:
            best, best_rank = found, rank
            if rank == EXACT_FIT and strategy == "pack":
                break  # no pool can rank lower, and an equal rank keeps the earlier pool
    return best


def _cons_tres(
    demand: Demand, pools: Sequence[Pool], free: FreeCapacity, caps: Caps | None
) -> Allocation | None:
    """Slurm's node for a job on one node: every node of a single-node pool that holds it is a
    candidate, and `tightest_node` picks among them by free CPUs."""
    g = demand.gpus
    candidate = np.zeros(len(free.gpus), dtype=np.bool_)
    need: dict[int, tuple[int, int]] = {}
    for k, p in enumerate(demand.pools):
        pool = pools[p]
        if g > pool.gpus:
            continue
        need_c, need_m = demand.one_node[k]
        for n in pool.nodes:
            f_g, f_c, f_m = free.gpus[n], free.cpus[n], free.mem[n]
            if caps is not None and n in caps:
                f_g, f_c, f_m = min(f_g, caps[n][0]), min(f_c, caps[n][1]), min(f_m, caps[n][2])
            if f_g >= g and f_c >= need_c and f_m >= need_m:
                candidate[n] = True
                need[n] = (need_c, need_m)
    if not need:
        return None
    node = int(tightest_node(np.asarray(free.cpus, dtype=np.int64), candidate))
    return (Slice(node, g, *need[node]),)


def _rank(allocation: Allocation, free: FreeCapacity, strategy: str) -> tuple[int, int]:
    """Pack prefers fewer nodes then less GPU left over on them; spread prefers more left over."""
    fg = free.gpus
    if len(allocation) == 1:  # most placements: no generator for one slice
        leftover = fg[allocation[0].node] - allocation[0].gpus
    else:
        leftover = sum([fg[s.node] - s.gpus for s in allocation])
    if strategy == "pack":
        return (len(allocation), leftover)
    return (-len(allocation), -leftover)


def _usable_nodes(
    demand: Demand, k: int, pool: Pool, free: FreeCapacity, caps: Caps | None
) -> list[tuple[int, int]]:
    """(GPUs the job could take there, node) for each node of the pool with room for at least one."""
    fg, fc, fm = free.gpus, free.cpus, free.mem
    cpg, mpg = demand.cpu_per_gpu[k], demand.mem_per_gpu[k]
    out = []
    for n in pool.nodes:
        g = fg[n]
        if g <= 0:
            continue
        c, m = fc[n], fm[n]
        if caps is not None and n in caps:
            cg, cc, cm = caps[n]
            g, c, m = min(g, cg), min(c, cc), min(m, cm)
        if cpg > 0:
            g = min(g, int((c + 1e-9) / cpg))
        if mpg > 0:
            g = min(g, int((m + 1e-9) / mpg))
        if g > 0:
            out.append((g, n))
    return out


def _single_node(
    demand: Demand, k: int, pool: Pool, free: FreeCapacity, strategy: str, caps: Caps | None
) -> Allocation | None:
    g = demand.gpus
    need_c, need_m = demand.one_node[k]
    fg, fc, fm = free.gpus, free.cpus, free.mem
    pack = strategy == "pack"
    best_node, best_free = -1, -1
    for n in pool.nodes:
        f = fg[n]
        if f < g or fc[n] < need_c or fm[n] < need_m:
            continue
        if caps is not None and n in caps:
            cg, cc, cm = caps[n]
            if cg < g or cc < need_c or cm < need_m:
                continue
        if best_node < 0 or (f < best_free if pack else f > best_free):
            best_node, best_free = n, f
            if pack and f == g:
                break
    if best_node < 0:
        return None
    return (Slice(best_node, g, need_c, need_m),)


def _multi_node(
    demand: Demand, k: int, pool: Pool, free: FreeCapacity, strategy: str, caps: Caps | None
) -> Allocation | None:
    if strategy == "pack" and caps is None and len(pool.nodes) >= COMPILED_FROM:
        return _multi_node_compiled(demand, k, pool, free)
    usable = _usable_nodes(demand, k, pool, free, caps)
    if sum(u for u, _ in usable) < demand.gpus:
        return None
    usable.sort(key=lambda un: (-un[0], un[1]))
    shares = _pack_shares(usable, demand.gpus)
    if strategy == "spread":
        shares = _spread_shares(usable[: len(shares) + 1], demand.gpus)
    return tuple(
        Slice(n, gpus, demand.slice_cpus(k, gpus), demand.slice_mem(k, gpus)) for n, gpus in sorted(shares)
    )


def _multi_node_compiled(demand: Demand, k: int, pool: Pool, free: FreeCapacity) -> Allocation | None:
    """`_multi_node`'s pack on arrays (`compiled.many_nodes`, the same rule): a job spanning tens of
    single-slot nodes (an SWF log's) costs a Python scan of every node of its pool otherwise."""
    nodes = pool.array
    out = np.empty((len(nodes), 4), dtype=np.int64)
    count = many_nodes(
        np.array(free.gpus, dtype=np.int64),
        np.array(free.cpus, dtype=np.int64),
        np.array(free.mem, dtype=np.int64),
        demand.gpus,
        nodes,
        demand.cpu_per_gpu[k],
        demand.mem_per_gpu[k],
        out,
    )
    if count == 0:
        return None
    known = _SLICES
    return tuple([known.get(row) or _kept(row) for row in map(tuple, out[:count].tolist())])  # by node


_as_slice = partial(tuple.__new__, Slice)
"""A (node, GPUs, CPUs, memory) row as a Slice without NamedTuple's Python-level __new__ (a multi-node
job on single-slot nodes has a slice per node)."""
_SLICES: dict[tuple[int, ...], Slice] = {}
"""Multi-node slices already built, each its own key (a row tuple finds it: equal, same hash). Slices are
immutable, and on single-slot nodes the same ones recur (one per node and request): built anew, an SWF
job's tens of slices outlive the collector's youngest generation, whose collections took NASA's
windows from 42,000 jobs/s to 36,000 (in one process). Kept for the process, up to `_SLICES_KEPT` (about
10 MB at most; past it, new slices are built and not kept)."""
_SLICES_KEPT = 1 << 16


def _kept(row: tuple[int, ...]) -> Slice:
    made = _as_slice(row)
    if len(_SLICES) < _SLICES_KEPT:
        _SLICES[made] = made
    return made


def _pack_shares(usable: list[tuple[int, int]], gpus: int) -> list[tuple[int, int]]:
    """Fewest nodes: take the largest until the rest fits on one node, then the best-fitting node for it."""
    shares: list[tuple[int, int]] = []
    remaining = gpus
    for i, (u, n) in enumerate(usable):
        if u >= remaining:
            fits = [j for j in range(i, len(usable)) if usable[j][0] >= remaining]
            fit = min(fits, key=lambda j: (usable[j][0], usable[j][1]))  # tightest, then lowest node
            shares.append((usable[fit][1], remaining))
            return shares
        shares.append((n, u))
        remaining -= u
    raise AssertionError("caller checked that the usable GPUs cover the demand")


def _spread_shares(usable: list[tuple[int, int]], gpus: int) -> list[tuple[int, int]]:
    """Worst fit one GPU at a time over the given nodes, so the job spreads as evenly as they allow."""
    left = {n: u for u, n in usable}
    taken = dict.fromkeys(left, 0)
    for _ in range(gpus):
        node = max(left, key=lambda n: (left[n], -n))
        left[node] -= 1
        taken[node] += 1
    return [(n, t) for n, t in taken.items() if t > 0]
