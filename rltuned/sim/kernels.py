"""Compiled inner loops of the Slurm model (numba), where a queue makes Python loops the cost.

sched/backfill plans a start for every tested job, and a queue of a few hundred jobs on a profile of a
few hundred rows is tested every `bf_interval`: the earliest-start search below ran as numpy slices
and a Python placement per candidate row, about 80 us a job; compiled, it is a few. A whole pass
(`backfill_pass`) is one call, so no Python runs per tested job. The pack rule on
arrays (`place_pack`) lives in `placement/compiled.py`.

A profile is three arrays: row r starts at `times[r]` (ascending) and its free capacity per node is
`cap[slot[r]]` ([GPUs, CPUs, memory] x nodes). A reservation adds rows in the middle of the plan; through
`slot` they are written once, at the end of `cap`, instead of moving every later row down.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit

from rltuned.placement.compiled import place_pack, slice_size, usable_gpus
from rltuned.placement.cons_tres import tightest_node

PACK, CONS_TRES = 0, 1
"""Node selection in `earliest_start`: `place`'s pack, or Slurm's cons_tres (`placement/cons_tres.py`)."""


@njit(cache=True)
def earliest_on_one_node(
    times: npt.NDArray[np.float64],
    slot: npt.NDArray[np.int64],
    cap: npt.NDArray[np.int64],
    first: int,
    last: int,
    limit: float,
    nodes: npt.NDArray[np.int64],
    gpus: int,
    cpus: int,
    mem: int,
) -> tuple[int, int, int]:
    """The first row k in [first, last) from which one of `nodes` holds (gpus, cpus, mem) in every row
    until the job's end (start + limit), and on it `place`'s pack choice: the node with the fewest GPUs
    left over on the span's least free capacity, ties to the earlier node. Returns (k, position in
    `nodes`, GPUs left over), or (-1, -1, -1).

    Each node keeps the first row at or after k that lacks the job's resources; as k only grows, every
    row is read at most once per node to find them, and the span's end row only moves forward (`limit`
    is finite: a trace's limits and every estimate model's are)."""
    rows = times.shape[0]
    count = nodes.shape[0]
    lacking = np.full(count, -1, dtype=np.int64)
    end = first  # the first row at or after times[k] + limit: only grows with k
    for k in range(first, last):
        t_end = times[k] + limit
        while end < rows and times[end] < t_end:
            end += 1
        stop = max(end, k + 1)  # the span is rows [k, stop)
        best, best_left = -1, 0
        for i in range(count):
            n = nodes[i]
            if lacking[i] < k:
                r = k
                while r < rows:
                    q = slot[r]
                    if cap[q, 0, n] < gpus or cap[q, 1, n] < cpus or cap[q, 2, n] < mem:
                        break
                    r += 1
                lacking[i] = r
            if lacking[i] < stop:
                continue
            low = cap[slot[k], 0, n]
            for r in range(k + 1, stop):
                low = min(low, cap[slot[r], 0, n])
            left = low - gpus
            if best < 0 or left < best_left:
                best, best_left = i, left
        if best >= 0:
            return k, best, best_left
    return -1, -1, -1


@njit(cache=True)
def earliest_on_nodes(
    times: npt.NDArray[np.float64],
    slot: npt.NDArray[np.int64],
    cap: npt.NDArray[np.int64],
    first: int,
    last: int,
    limit: float,
    nodes: npt.NDArray[np.int64],
    gpus: int,
    cpu_per_gpu: float,
    mem_per_gpu: float,
) -> int:
    """The first row k in [first, last) from which `nodes` together hold `gpus` GPUs (with their CPU and
    memory shares) in every row until the job's end, counted as `place` counts a node's
    usable GPUs on the span's least free capacity; -1 if none. The placement itself is left to `place`.
    A row whose own capacity cannot hold the job is passed over without reading its span."""
    rows = times.shape[0]
    for k in range(first, last):
        at = slot[k]
        total = 0
        for n in nodes:
            total += usable_gpus(cap[at, 0, n], cap[at, 1, n], cap[at, 2, n], cpu_per_gpu, mem_per_gpu)
        if total < gpus:
            continue
        stop = min(max(np.searchsorted(times, times[k] + limit), k + 1), rows)
        total = 0
        for n in nodes:
            g, c, m = cap[at, 0, n], cap[at, 1, n], cap[at, 2, n]
            for r in range(k + 1, stop):
                q = slot[r]
                g, c, m = min(g, cap[q, 0, n]), min(c, cap[q, 1, n]), min(m, cap[q, 2, n])
                if g <= 0:
                    break
            total += usable_gpus(g, c, m, cpu_per_gpu, mem_per_gpu)
        if total >= gpus:
            return k
    return -1


@njit(cache=True)
def split_rows(
    times: npt.NDArray[np.float64],
    slot: npt.NDArray[np.int64],
    cap: npt.NDArray[np.int64],
    size: int,
    start: float,
    end: float,
) -> tuple[int, int, int]:
    """Rows starting at `start` and at `end` in the first `size` rows (split off the intervals holding
    them, copying their capacity), for a reservation of [start, end) with start >= times[0]. The arrays
    need room for two more rows. Returns (first row, end row, new size)."""
    k0, size = _split(times, slot, cap, size, start)
    k1, size = _split(times, slot, cap, size, end)
    return k0, k1, size


@njit(cache=True)
def _split(
    times: npt.NDArray[np.float64],
    slot: npt.NDArray[np.int64],
    cap: npt.NDArray[np.int64],
    size: int,
    t: float,
) -> tuple[int, int]:
    """A new row's capacity goes to the next free slot of `cap` (`size`: slots are used in order), and
    only the times and the slot numbers move to keep the rows in time order. Moving the capacity of
    every later row instead (3 x nodes values a row, hundreds of rows once a pass has reserved for
    hundreds of jobs) cost about a sixth of Philly's passes, measured on passes captured from its
    windows."""
    k = int(np.searchsorted(times[:size], t, side="right")) - 1
    if times[k] == t:
        return k, size
    for r in range(size, k + 1, -1):
        times[r] = times[r - 1]
        slot[r] = slot[r - 1]
    times[k + 1] = t
    slot[k + 1] = size
    cap[size] = cap[slot[k]]
    return k + 1, size + 1


@njit(cache=True)
def grid(t: float, resolution: float) -> float:
    """`t` rounded up to the backfill plan's time grid (absolute multiples of the resolution)."""
    return float(np.ceil(t / resolution - 1e-9) * resolution)


@njit(cache=True)
def past_limit_release(now: float, resolution: float) -> float:
    """Where a profile gives back a running job past its time limit: the first grid point at least half a
    step after now."""
    return grid(now + resolution / 2, resolution)


@njit(cache=True)
def record(start: float, end: float, now: float, resolution: float) -> tuple[float, float]:
    """The interval sched/backfill records for a job planned to start later: its start and end rounded
    down to `bf_resolution` (`start_time / backfill_resolution * backfill_resolution` in backfill.c), not
    before now; empty (end <= start) when the rounding leaves nothing."""
    return max(np.floor(start / resolution) * resolution, now), np.floor(end / resolution) * resolution


@njit(cache=True)
def hold(
    times: npt.NDArray[np.float64],
    slot: npt.NDArray[np.int64],
    cap: npt.NDArray[np.int64],
    size: int,
    now: float,
    resolution: float,
    start: float,
    end: float,
    slices: npt.NDArray[np.int64],
    whole_nodes: bool,
) -> int:
    """What a backfill pass holds for a job it placed: one that starts now takes its slices until its
    limit (a real allocation); one planned later is recorded on the resolution grid (`record`), on whole
    nodes when `whole_nodes`, and not at all when the rounding leaves nothing. Returns the new row count;
    the arrays need room for two more rows."""
    if start <= now:
        return reserve(times, slot, cap, size, start, end, slices)
    rs, re = record(start, end, now, resolution)
    if re <= rs:
        return size
    return reserve(times, slot, cap, size, rs, re, slices, whole_nodes)


@njit(cache=True)
def earliest_start(
    times: npt.NDArray[np.float64],
    slot: npt.NDArray[np.int64],
    cap: npt.NDArray[np.int64],
    limit: float,
    horizon: float,
    not_before: float,
    gpus: int,
    dem_pool: npt.NDArray[np.int64],
    dem_cpg: npt.NDArray[np.float64],
    dem_mpg: npt.NDArray[np.float64],
    pool_ptr: npt.NDArray[np.int64],
    pool_flat: npt.NDArray[np.int64],
    pool_gpus: npt.NDArray[np.int64],
    out: npt.NDArray[np.int64],
    select: int = PACK,
) -> tuple[int, float, int]:
    """The first profile row starting in [not_before, horizon] from which the job fits until its time
    limit, and `place(..., "pack")`'s allocation on the least free capacity over that span (with
    `select=CONS_TRES`, a job on one node gets cons_tres's node among those that hold it over the span,
    by their free CPUs in that row). Returns (row, end (start + limit), slice count written to `out`), or
    (-1, 0, 0).

    `place` prefers one node to several, then the fewest GPUs left over, then the pool listed first.
    So: the earliest row on one node of a pool, unless a pool where the job spans nodes fits strictly
    earlier; that row's placement is `place`'s own on the span's least capacity."""
    first = int(np.searchsorted(times, not_before, side="left"))
    last = int(np.searchsorted(times, horizon, side="right"))
    if first >= last:
        return -1, 0.0, 0
    s_row, s_left, s_k, s_node = -1, 0, -1, -1
    multi = -1
    for k in range(dem_pool.shape[0]):
        p = dem_pool[k]
        nodes = pool_flat[pool_ptr[p] : pool_ptr[p + 1]]
        if gpus <= pool_gpus[p]:
            c, m = slice_size(gpus, dem_cpg[k]), slice_size(gpus, dem_mpg[k])
            row, i, left = earliest_on_one_node(times, slot, cap, first, last, limit, nodes, gpus, c, m)
            if row >= 0 and (s_row < 0 or row < s_row or (row == s_row and left < s_left)):
                s_row, s_left, s_k, s_node = row, left, k, nodes[i]
        else:
            row = earliest_on_nodes(times, slot, cap, first, last, limit, nodes, gpus, dem_cpg[k], dem_mpg[k])
            if row >= 0 and (multi < 0 or row < multi):
                multi = row
    if multi >= 0 and (s_row < 0 or multi < s_row):
        end = times[multi] + limit
        j = max(int(np.searchsorted(times, end, side="left")), multi + 1)
        low = cap[slot[multi]]
        for r in range(multi + 1, j):
            low = np.minimum(low, cap[slot[r]])
        count = place_pack(
            low[0], low[1], low[2], gpus, dem_pool, dem_cpg, dem_mpg, pool_ptr, pool_flat, pool_gpus, out
        )
        assert count > 0, "the compiled count and place disagree"
        return multi, end, count
    if s_row < 0:
        return -1, 0.0, 0
    if select == CONS_TRES:
        s_node, s_k = _cons_tres_node(
            times,
            slot,
            cap,
            s_row,
            limit,
            gpus,
            dem_pool,
            dem_cpg,
            dem_mpg,
            pool_ptr,
            pool_flat,
            pool_gpus,
        )
    out[0, 0], out[0, 1] = s_node, gpus
    out[0, 2], out[0, 3] = slice_size(gpus, dem_cpg[s_k]), slice_size(gpus, dem_mpg[s_k])
    return s_row, times[s_row] + limit, 1


@njit(cache=True)
def fits_now(
    free: npt.NDArray[np.int64],
    now: float,
    pool_ptr: npt.NDArray[np.int64],
    pool_flat: npt.NDArray[np.int64],
    pool_gpus: npt.NDArray[np.int64],
    asks: npt.NDArray[np.float64],
    shape_ptr: npt.NDArray[np.int64],
    shape_pool: npt.NDArray[np.int64],
    shape_cpg: npt.NDArray[np.float64],
    shape_mpg: npt.NDArray[np.float64],
) -> bool:
    """Whether any of the jobs (`asks`: GPUs, time limit, shape number, as `backfill_pass` reads them)
    fits `free` (GPUs, CPUs and memory per node, [1, 3, nodes]) as a
    backfill pass's row 0 holds it: `earliest_start` on that row alone (no span, no window). A pass
    starts only jobs that fit there, since its reservations only take capacity, so when none does it
    can be skipped. Within a shape (which says whether its jobs span nodes, `Demand.shape`), a job
    asking for no fewer GPUs than one that did not fit does not fit either, so it is not tried."""
    times = np.full(1, now)
    slot = np.zeros(1, dtype=np.int64)
    out = np.zeros((pool_flat.shape[0], 4), dtype=np.int64)
    failed = np.full(shape_ptr.shape[0] - 1, np.iinfo(np.int64).max)
    for j in range(asks.shape[0]):
        g, s = int(asks[j, 0]), int(asks[j, 2])
        if g >= failed[s]:
            continue
        a, b = shape_ptr[s], shape_ptr[s + 1]
        row, _, _ = earliest_start(
            times, slot, free, 0.0, now, now, g, shape_pool[a:b], shape_cpg[a:b], shape_mpg[a:b],
            pool_ptr, pool_flat, pool_gpus, out,
        )  # fmt: skip
        if row >= 0:
            return True
        failed[s] = g
    return False


@njit(cache=True)
def _cons_tres_node(
    times: npt.NDArray[np.float64],
    slot: npt.NDArray[np.int64],
    cap: npt.NDArray[np.int64],
    k: int,
    limit: float,
    gpus: int,
    dem_pool: npt.NDArray[np.int64],
    dem_cpg: npt.NDArray[np.float64],
    dem_mpg: npt.NDArray[np.float64],
    pool_ptr: npt.NDArray[np.int64],
    pool_flat: npt.NDArray[np.int64],
    pool_gpus: npt.NDArray[np.int64],
) -> tuple[int, int]:
    """(node, demand entry) cons_tres picks at row k among the nodes of single-node pools that hold the
    job in every row of its span: those are the nodes sched/backfill leaves the job (`_start_job`
    excludes the rest), and `select_nodes` then picks by the usual rule."""
    stop = max(int(np.searchsorted(times, times[k] + limit)), k + 1)
    candidate = np.zeros(cap.shape[2], dtype=np.bool_)
    entry = np.full(cap.shape[2], -1, dtype=np.int64)
    for e in range(dem_pool.shape[0]):
        p = dem_pool[e]
        if gpus > pool_gpus[p]:
            continue
        c, m = slice_size(gpus, dem_cpg[e]), slice_size(gpus, dem_mpg[e])
        for n in pool_flat[pool_ptr[p] : pool_ptr[p + 1]]:
            holds = True
            for r in range(k, stop):
                q = slot[r]
                if cap[q, 0, n] < gpus or cap[q, 1, n] < c or cap[q, 2, n] < m:
                    holds = False
                    break
            if holds:
                candidate[n] = True
                entry[n] = e
    node = tightest_node(cap[slot[k], 1].copy(), candidate)
    return node, entry[node]


@njit(cache=True)
def reserve(
    times: npt.NDArray[np.float64],
    slot: npt.NDArray[np.int64],
    cap: npt.NDArray[np.int64],
    size: int,
    start: float,
    end: float,
    slices: npt.NDArray[np.int64],
    whole: bool = False,
) -> int:
    """Take the slices' resources during [start, end) (rows split there), or with `whole` their nodes
    entirely (sched/backfill's plan for a job that starts later removes its nodes from every other
    job's availability in that window: `node_space` keeps node bitmaps). Returns the new row count.
    The arrays need room for two more rows."""
    k0, k1, size = split_rows(times, slot, cap, size, start, end)
    for s in range(slices.shape[0]):
        n = slices[s, 0]
        if whole:
            for r in range(k0, k1):
                q = slot[r]
                cap[q, 0, n], cap[q, 1, n], cap[q, 2, n] = 0, 0, 0
            continue
        for r in range(k0, k1):
            q = slot[r]
            cap[q, 0, n] -= slices[s, 1]
            cap[q, 1, n] -= slices[s, 2]
            cap[q, 2, n] -= slices[s, 3]
    return size


@njit(cache=True)
def backfill_pass(
    times: npt.NDArray[np.float64],
    slot: npt.NDArray[np.int64],
    cap: npt.NDArray[np.int64],
    size: int,
    now: float,
    horizon: float,
    resolution: float,
    pool_ptr: npt.NDArray[np.int64],
    pool_flat: npt.NDArray[np.int64],
    pool_gpus: npt.NDArray[np.int64],
    job_gpus: npt.NDArray[np.int64],
    job_limit: npt.NDArray[np.float64],
    job_shape: npt.NDArray[np.int64],
    shape_ptr: npt.NDArray[np.int64],
    shape_pool: npt.NDArray[np.int64],
    shape_cpg: npt.NDArray[np.float64],
    shape_mpg: npt.NDArray[np.float64],
    slices: npt.NDArray[np.int64],
    select: int = PACK,
    whole_nodes: bool = False,
) -> tuple[npt.NDArray[np.int64], int]:
    """One sched/backfill pass over the tested jobs in priority order: each job's earliest start on the
    profile (rows `[0, size)` of times and slot, their capacity in cap through slot; room for two rows
    per job), reserved there when it lies within the horizon. Returns, per job, the number of slices of
    a job that starts now (0 for the others; its slices are `slices[j, :count]`), and the profile's row
    count after the pass. A job's demand is its shape's: shape s's pools and per-GPU CPUs and memory are
    entries `shape_ptr[s]:shape_ptr[s + 1]` of `shape_pool`, `shape_cpg` and `shape_mpg` (`ShapeTable`).

    Reservations only take capacity away during a pass, and within a demand shape a job asking for no
    fewer GPUs for no less time fits nowhere a smaller, shorter one did not: its earliest start is no
    earlier than theirs (inf: beyond the window), which bounds where its search begins. With
    `whole_nodes`, a job planned to start later holds its nodes whole (see `reserve`)."""
    n_jobs = job_gpus.shape[0]
    started = np.zeros(n_jobs, dtype=np.int64)
    found_at = np.empty(n_jobs, dtype=np.float64)
    for j in range(n_jobs):
        g, limit, shape = job_gpus[j], job_limit[j], job_shape[j]
        bound = now
        for e in range(j):
            if job_shape[e] == shape and job_gpus[e] <= g and job_limit[e] <= limit and found_at[e] > bound:
                bound = found_at[e]
                if bound > horizon:  # skipped whatever the rest holds: most of a congested queue's jobs
                    break
        found_at[j] = np.inf
        if bound > horizon:
            continue
        a, b = shape_ptr[shape], shape_ptr[shape + 1]
        row, end, count = earliest_start(
            times[:size], slot[:size], cap, limit, horizon, bound, g,
            shape_pool[a:b], shape_cpg[a:b], shape_mpg[a:b], pool_ptr, pool_flat, pool_gpus, slices[j],
            select,
        )  # fmt: skip
        if row < 0:
            continue
        at = times[row]
        found_at[j] = at
        size = hold(times, slot, cap, size, now, resolution, at, end, slices[j, :count], whole_nodes)
        if at == now:
            started[j] = count
    return started, size


@njit(cache=True)
def build_profile(
    now: float,
    resolution: float,
    ends: npt.NDArray[np.float64],
    slices: npt.NDArray[np.int64],
    free: npt.NDArray[np.int64],
    room: int,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.int64], int]:
    """A backfill pass's starting profile (`slurm.Profile`): row 0 is now with the free capacity (`free`:
    GPUs, CPUs and memory per node), then one row per distinct end of the running jobs' time limits,
    each adding back what its slices hold; arrays with `2 * size + room` spare rows. Returns the rows'
    times, their slots in the capacity array (here in order; `_split` adds rows at the end) and
    capacity, and the row count. One call per pass
    instead of a dozen numpy calls (three `np.add.at`) on a few hundred slices, at every pass."""
    at = ends.copy()  # will_run reads the running jobs' end times as they are
    past = past_limit_release(now, resolution)  # past its limit, still running
    for i in range(len(at)):
        if at[i] <= now:
            at[i] = past
    times = np.unique(at)
    size = 1 + len(times)
    total = 3 * size + room
    # Only the rows in use are set: a spare row is written (a split copies into it) before anything
    # reads it, and zeroing the spare room of a congested queue's pass (room for two rows per tested
    # job) cost 13-24 us a pass.
    t = np.empty(total)
    t[0] = now
    t[1:size] = times
    cap = np.empty((total, 3, free.shape[1]), dtype=np.int64)
    cap[:size] = 0
    cap[0] = free
    for i in range(len(at)):
        row = 1 + np.searchsorted(times, at[i])
        node = slices[i, 0]
        for r in range(3):
            cap[row, r, node] += slices[i, 1 + r]
    for row in range(1, size):
        cap[row] += cap[row - 1]
    return t, np.arange(total), cap, size
