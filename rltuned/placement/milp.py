"""The MILP placer: jointly place the top-K ranked jobs, or defer them, on the current free capacity.

Variables: x[j, c] = 1 if ranked job j takes its candidate placement c (see `candidates.py`); u[l, c] = 1
if waiting job l (one of the next K, the lookahead) could still take its candidate c on what is left; y[n]
= 1 if node n, idle now and eligible for the largest waiting job L, stays whole; z = L's GPUs that whole
idle nodes can still hold.

    maximize   sum_j 2^(K-1-rank_j) * sum_c x[j,c]          (place jobs in rank order, lexicographically)
             + MU_LOOKAHEAD * sum_l gpus_l/G * sum_c u[l,c]  (room for the jobs that wait next)
             + MU * z / gpus(L)                               (keep whole nodes for the largest of them)
             - EPS * sum index(c) * (x + u)                   (prefer pack-like candidates on ties)
    s.t.       sum_c x[j,c] <= 1, sum_c u[l,c] <= 1           for every job
               sum x use(n,r) + sum u use(n,r) <= free(n,r)   for every node n, r in GPU/CPU/mem
               sum_{(j,c) on n} x[j,c] + M_n y[n] <= M_n      for every idle node n eligible for L
               z - sum_n gpus(n) y[n] <= whole GPUs of L's idle nodes no ranked candidate touches
               x, u, y binary;  0 <= z <= gpus(L)

MU + MU_LOOKAHEAD < 1 and EPS is tiny, so placing any ranked job always outweighs both lookahead terms,
which in turn outweigh the tie-break: among placements of the same ranked jobs, the one that leaves room
for the waiting jobs, and whole nodes for the largest, wins. The lookahead placements are hypothetical:
only the ranked jobs' choices are returned.

The problem is stated once (`build_problem`); `solve_glpk` calls GLPK through swiglpk (the hot path) and
`solve_cvxpy` states the same matrices in cvxpy and solves with GLPK_MI.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from rltuned.domain import Allocation
from rltuned.errors import SolverError
from rltuned.placement.candidates import candidates
from rltuned.placement.greedy import FreeCapacity
from rltuned.placement.pools import Demand, Pool

MAX_K = 24  # rank weights 2^(K-1) must leave a double room for the lookahead and tie-break terms
MU = 0.25
MU_LOOKAHEAD = 0.25
EPS_TOTAL = 1e-4


@dataclass(frozen=True)
class MilpConfig:
    k: int = 8
    """Ranked jobs placed jointly per solve (and the lookahead window's length)."""
    time_limit_ms: float = 50.0
    """A solve slower than this raises SolverError; the caller falls back to greedy pack (0 forces it)."""

    def __post_init__(self) -> None:
        if not 1 <= self.k <= MAX_K:
            raise ValueError(f"MILP k must be in [1, {MAX_K}], got {self.k}")
        if self.time_limit_ms < 0:
            raise ValueError(f"MILP time limit must be >= 0 ms, got {self.time_limit_ms}")


@dataclass(frozen=True)
class Problem:
    options: tuple[tuple[Allocation, ...], ...]
    """Candidate placements per job, ranked jobs first, then lookahead jobs; column order follows it."""
    n_ranked: int
    columns: tuple[tuple[int, int], ...]
    """(job, option) of each x column; y columns and z follow them."""
    c: np.ndarray
    a: sp.csr_matrix
    b: np.ndarray
    upper: np.ndarray
    n_binary: int
    whole_nodes: tuple[tuple[int, int], ...]
    """(node, GPUs) of idle lookahead nodes that some candidate touches: the y columns."""
    untouched_whole_gpus: int
    lookahead_gpus: int


@dataclass(frozen=True)
class Solution:
    choice: tuple[int, ...]
    """Per ranked job, the index of its chosen option, or -1 when deferred."""
    objective: float


def build_problem(
    ranked: Sequence[Demand],
    lookahead: Sequence[Demand],
    pools: Sequence[Pool],
    free: FreeCapacity,
    config: MilpConfig,
) -> Problem:
    k = len(ranked)
    jobs = [*ranked, *lookahead]
    options = tuple(tuple(candidates(d, pools, free, per_level=max(len(jobs), 1))) for d in jobs)
    columns = tuple((j, c) for j, opts in enumerate(options) for c in range(len(opts)))
    coef = _job_coefficients(jobs, k, options, columns)
    touching: dict[int, list[int]] = {}
    for col, (j, c) in enumerate(columns):
        for s in options[j][c]:
            touching.setdefault(s.node, []).append(col)
    placing = {n: [col for col in cols if columns[col][0] < k] for n, cols in touching.items()}
    big = max(lookahead, key=lambda d: d.gpus, default=None)
    whole, untouched = _whole_nodes(big, pools, free, placing)

    rows = _choice_rows(options, columns) + _capacity_rows(options, columns, touching, free)
    n_x = len(columns)
    for i, (n, _) in enumerate(whole):
        m = float(len(placing[n]))
        rows.append(({**dict.fromkeys(placing[n], 1.0), n_x + i: m}, m))
    z_col = n_x + len(whole)
    upper = np.ones(z_col + (1 if big else 0))
    if big is not None:
        rows.append(
            ({**{n_x + i: -float(g) for i, (_, g) in enumerate(whole)}, z_col: 1.0}, float(untouched))
        )
        coef += [0.0] * len(whole) + [MU / big.gpus]
        upper[z_col] = float(big.gpus)
    r_idx = [i for i, (row, _) in enumerate(rows) for _ in row]
    c_idx = [col for row, _ in rows for col in row]
    vals = [v for row, _ in rows for v in row.values()]
    a = sp.csr_matrix((vals, (r_idx, c_idx)), shape=(len(rows), len(upper)))
    return Problem(
        options=options,
        n_ranked=k,
        columns=columns,
        c=np.array(coef, dtype=np.float64),
        a=a,
        b=np.array([bound for _, bound in rows], dtype=np.float64),
        upper=upper,
        n_binary=z_col,
        whole_nodes=tuple(whole),
        untouched_whole_gpus=untouched,
        lookahead_gpus=big.gpus if big is not None else 0,
    )


Row = tuple[dict[int, float], float]


def _job_coefficients(
    jobs: Sequence[Demand],
    k: int,
    options: Sequence[Sequence[Allocation]],
    columns: Sequence[tuple[int, int]],
) -> list[float]:
    widest = max((len(o) for o in options), default=1)
    eps = EPS_TOTAL / max(len(jobs), 1) / max(widest, 1)
    ahead_gpus = sum(d.gpus for d in jobs[k:]) or 1
    return [
        (2.0 ** (k - 1 - j) if j < k else MU_LOOKAHEAD * jobs[j].gpus / ahead_gpus) - eps * c
        for j, c in columns
    ]


def _whole_nodes(
    big: Demand | None, pools: Sequence[Pool], free: FreeCapacity, placing: dict[int, list[int]]
) -> tuple[list[tuple[int, int]], int]:
    """Idle nodes eligible for the largest waiting job: those a ranked candidate touches (the y columns),
    and the GPUs of those none touches (always whole)."""
    whole: list[tuple[int, int]] = []
    untouched = 0
    if big is None:
        return whole, untouched
    for p in big.pools:
        pool = pools[p]
        for n in pool.nodes:
            if free.gpus[n] != pool.gpus:
                continue
            if placing.get(n):
                whole.append((n, pool.gpus))
            else:
                untouched += pool.gpus
    return whole, untouched


def _choice_rows(options: Sequence[Sequence[Allocation]], columns: Sequence[tuple[int, int]]) -> list[Row]:
    per_job: dict[int, dict[int, float]] = {}
    for col, (j, _) in enumerate(columns):
        per_job.setdefault(j, {})[col] = 1.0
    return [(row, 1.0) for _, row in sorted(per_job.items())]


def _capacity_rows(
    options: Sequence[Sequence[Allocation]],
    columns: Sequence[tuple[int, int]],
    touching: dict[int, list[int]],
    free: FreeCapacity,
) -> list[Row]:
    rows: list[Row] = []
    for n in sorted(touching):
        for resource, limit in (("gpus", free.gpus[n]), ("cpus", free.cpus[n]), ("mem_mb", free.mem[n])):
            row: dict[int, float] = {}
            for col in touching[n]:
                j, c = columns[col]
                use = sum(getattr(s, resource) for s in options[j][c] if s.node == n)
                row[col] = row.get(col, 0.0) + float(use)
            rows.append((row, float(limit)))
    return rows


def objective_of(problem: Problem, choice: Sequence[int]) -> float | None:
    """The objective of a choice for every job, lookahead ones included (y and z at their best), or None if
    it over-allocates a node."""
    if not _fits(problem, choice):
        return None
    value = 0.0
    touched: set[int] = set()
    for j, c in enumerate(choice):
        if c >= 0:
            value += float(problem.c[problem.columns.index((j, c))])
            if j < problem.n_ranked:
                touched.update(s.node for s in problem.options[j][c])
    if problem.lookahead_gpus:
        whole = problem.untouched_whole_gpus + sum(g for n, g in problem.whole_nodes if n not in touched)
        value += MU * min(whole, problem.lookahead_gpus) / problem.lookahead_gpus
    return value


def _fits(problem: Problem, choice: Sequence[int]) -> bool:
    x = np.zeros(problem.a.shape[1])
    for j, c in enumerate(choice):
        if c >= 0:
            x[problem.columns.index((j, c))] = 1.0
    n_x = len(problem.columns)
    rows = problem.a[:, :n_x] @ x[:n_x]
    # Rows that involve y or z are satisfiable by setting y = 0 and z = 0.
    return bool(np.all(rows <= problem.b + 1e-9))


def solve_glpk(problem: Problem, time_limit_ms: float) -> Solution:
    """Solve with GLPK's branch-and-cut through swiglpk; SolverError on timeout or failure."""
    import swiglpk as glp

    t0 = time.perf_counter()
    n_rows, n_cols = problem.a.shape
    if n_cols == 0:
        return Solution(tuple(-1 for _ in range(problem.n_ranked)), 0.0)
    lp = glp.glp_create_prob()
    try:
        glp.glp_set_obj_dir(lp, glp.GLP_MAX)
        glp.glp_add_rows(lp, n_rows)
        for i in range(n_rows):
            glp.glp_set_row_bnds(lp, i + 1, glp.GLP_UP, 0.0, float(problem.b[i]))
        glp.glp_add_cols(lp, n_cols)
        for j in range(n_cols):
            if j < problem.n_binary:
                glp.glp_set_col_kind(lp, j + 1, glp.GLP_BV)
            else:
                glp.glp_set_col_bnds(lp, j + 1, glp.GLP_DB, 0.0, float(problem.upper[j]))
            glp.glp_set_obj_coef(lp, j + 1, float(problem.c[j]))
        coo = problem.a.tocoo()
        ne = coo.nnz
        ia, ja, ar = glp.intArray(ne + 1), glp.intArray(ne + 1), glp.doubleArray(ne + 1)
        for t, (r, col, v) in enumerate(
            zip(coo.row.tolist(), coo.col.tolist(), coo.data.tolist(), strict=True)
        ):
            ia[t + 1], ja[t + 1], ar[t + 1] = r + 1, col + 1, v
        glp.glp_load_matrix(lp, ne, ia, ja, ar)
        params = glp.glp_iocp()
        glp.glp_init_iocp(params)
        params.presolve = glp.GLP_ON
        params.msg_lev = glp.GLP_MSG_OFF
        params.tm_lim = max(1, int(time_limit_ms))
        code = glp.glp_intopt(lp, params)
        status = glp.glp_mip_status(lp)
        if code == glp.GLP_ETMLIM:
            raise SolverError(f"GLPK hit its time limit ({time_limit_ms:.0f} ms)")
        if code != 0 or status != glp.GLP_OPT:
            raise SolverError(f"GLPK failed: intopt returned {code}, status {status}")
        values = [glp.glp_mip_col_val(lp, j + 1) for j in range(len(problem.columns))]
        objective = glp.glp_mip_obj_val(lp)
    finally:
        glp.glp_delete_prob(lp)
    elapsed_ms = (time.perf_counter() - t0) * 1000.0
    if elapsed_ms > time_limit_ms:
        raise SolverError(f"MILP took {elapsed_ms:.1f} ms, over its {time_limit_ms:.0f} ms limit")
    return Solution(_choice(problem, values), float(objective))


def solve_cvxpy(problem: Problem) -> Solution:
    """The same problem stated in cvxpy and solved with GLPK_MI (slower: cvxpy compiles on every call)."""
    import cvxpy as cp

    n_cols = problem.a.shape[1]
    if n_cols == 0:
        return Solution(tuple(-1 for _ in range(problem.n_ranked)), 0.0)
    nb = problem.n_binary
    binary = cp.Variable(nb, boolean=True)
    parts = [binary]
    constraints = []
    if n_cols > nb:
        cont = cp.Variable(n_cols - nb)
        parts.append(cont)
        constraints += [cont >= 0, cont <= problem.upper[nb:]]
    v = cp.hstack(parts) if len(parts) > 1 else binary  # type: ignore[attr-defined]
    constraints.append(problem.a @ v <= problem.b)
    prob = cp.Problem(cp.Maximize(problem.c @ v), constraints)
    try:
        prob.solve(solver=cp.GLPK_MI)  # type: ignore[no-untyped-call]
    except cp.error.SolverError as exc:
        raise SolverError(f"cvxpy/GLPK_MI failed: {exc}") from None
    if prob.status != cp.OPTIMAL or binary.value is None:
        raise SolverError(f"cvxpy/GLPK_MI status {prob.status}")
    values = [float(x) for x in binary.value[: len(problem.columns)]]
    return Solution(_choice(problem, values), float(prob.value))


def _choice(problem: Problem, values: Sequence[float]) -> tuple[int, ...]:
    """The ranked jobs' choices (lookahead placements are hypothetical and dropped)."""
    choice = [-1] * problem.n_ranked
    for col, (j, c) in enumerate(problem.columns):
        if j < problem.n_ranked and values[col] > 0.5:
            choice[j] = c
    return tuple(choice)


def milp_place(
    ranked: Sequence[Demand],
    lookahead: Sequence[Demand],
    pools: Sequence[Pool],
    free: FreeCapacity,
    config: MilpConfig,
) -> list[Allocation | None]:
    """Allocations for the ranked jobs (None = deferred); raises SolverError for the caller's fallback."""
    problem = build_problem(ranked, lookahead, pools, free, config)
    solution = solve_glpk(problem, config.time_limit_ms)
    return [problem.options[j][c] if c >= 0 else None for j, c in enumerate(solution.choice)]
