"""One tick's decision as pure functions of the snapshot: rank the pending jobs, then place the top K.

Ranking is the deployment rule of issue 4: the visible jobs (the state's 256 rows, in base order) sorted
by the frozen actor's score, ties and the overflow beyond 256 in base order. A model that raises, returns
the wrong shape or non-finite scores, or is slower than its budget is not trusted for the tick: the base
order is used and the reason reported. Placement asks the MILP for the top K jobs that fit now; a solver
failure falls back to greedy pack, as in the simulator.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from rltuned.domain import Allocation, ClusterSnapshot, Job
from rltuned.errors import SolverError
from rltuned.features import Observation, encode
from rltuned.placement.greedy import FreeCapacity, place
from rltuned.placement.milp import MilpConfig, milp_place
from rltuned.placement.pools import Demand, Pool, build_pools, demand_for
from rltuned.policies.base import Policy
from rltuned.rl.export import LoadedModel


@dataclass(frozen=True)
class Ranking:
    order: tuple[Job, ...]
    """Every managed pending job, first to start first."""
    observation: Observation
    scores: Mapping[int, float]
    """Actor score per visible job id (empty when the base policy ranked)."""
    source: str
    """"model" or "base"."""
    fallback: str | None = None
    """Why the model was not used this tick (None when it was, or when none is loaded)."""
    features_s: float = 0.0
    policy_s: float = 0.0


@dataclass(frozen=True)
class Placement:
    """Where the solver would start a job now, by node name, and whether it shares nodes (pack)."""

    nodes: tuple[str, ...]
    gpu_type: str
    pack: bool


@dataclass(frozen=True)
class Placements:
    by_job: Mapping[int, Placement]
    outcome: str
    """"optimal", "fallback" (solver failed: greedy pack), or "idle" (nothing to place)."""
    detail: str = ""
    seconds: float = 0.0


def rank_jobs(
    snapshot: ClusterSnapshot, base: Policy, model: LoadedModel | None, max_inference_ms: float
) -> Ranking:
    started = time.perf_counter()
    obs = encode(snapshot, base)
    features_s = time.perf_counter() - started
    by_id = {job.id: job for job in snapshot.pending}
    base_order = tuple(by_id[int(i)] for i in obs.job_ids[obs.mask]) + tuple(by_id[i] for i in obs.overflow)
    if model is None or not snapshot.pending:
        return Ranking(base_order, obs, {}, "base", None, features_s, 0.0)
    started = time.perf_counter()
    try:
        scores = _scores(model, obs)
    except (RuntimeError, ValueError) as exc:
        reason = f"model failed: {str(exc).splitlines()[0][:200]}"
        return Ranking(base_order, obs, {}, "base", reason, features_s, time.perf_counter() - started)
    policy_s = time.perf_counter() - started
    if policy_s * 1000.0 > max_inference_ms:
        reason = f"model too slow: {policy_s * 1000.0:.0f} ms > {max_inference_ms:g} ms"
        return Ranking(base_order, obs, {}, "base", reason, features_s, policy_s)
    n = int(obs.mask.sum())
    visible = np.argsort(-scores[:n], kind="stable")  # stable: equal scores keep base order
    order = tuple(base_order[i] for i in visible) + base_order[n:]
    by_job = {int(obs.job_ids[i]): float(scores[i]) for i in range(n)}
    return Ranking(order, obs, by_job, "model", None, features_s, policy_s)


def _scores(model: LoadedModel, obs: Observation) -> np.ndarray:
    out = model.scores(torch.from_numpy(np.array(obs.actor)), torch.from_numpy(np.array(obs.mask)))
    scores = out.detach().numpy().astype(np.float64)
    n = int(obs.mask.sum())
    if scores.shape != obs.mask.shape:
        raise ValueError(f"scores of shape {scores.shape}, expected {obs.mask.shape}")
    if not np.isfinite(scores[:n]).all():
        raise ValueError("non-finite scores")
    return scores


def place_top(snapshot: ClusterSnapshot, order: Sequence[Job], config: MilpConfig) -> Placements:
    """Joint MILP placement of the top-K jobs on what is free now (jobs that cannot start get none)."""
    started = time.perf_counter()
    pools = build_pools(snapshot.cluster)
    demands = [(job, demand_for(job, pools)) for job in order[: 2 * config.k]]
    usable = [(job, d) for job, d in demands if d is not None]  # None: can never fit, Slurm will say so
    ranked, lookahead = usable[: config.k], usable[config.k :]
    if not ranked or not any(snapshot.free_gpus):
        return Placements({}, "idle", seconds=time.perf_counter() - started)
    free = FreeCapacity(list(snapshot.free_gpus), list(snapshot.free_cpus), list(snapshot.free_mem_mb))
    try:
        allocs = milp_place([d for _, d in ranked], [d for _, d in lookahead], pools, free.copy(), config)
        outcome, detail = "optimal", ""
    except SolverError as exc:
        allocs = _greedy([d for _, d in ranked], pools, free.copy())
        outcome, detail = "fallback", str(exc)
    placed = {
        job.id: _describe(snapshot, alloc, free)
        for (job, _), alloc in zip(ranked, allocs, strict=True)
        if alloc is not None
    }
    return Placements(placed, outcome, detail, time.perf_counter() - started)


def _greedy(demands: Sequence[Demand], pools: Sequence[Pool], free: FreeCapacity) -> list[Allocation | None]:
    out: list[Allocation | None] = []
    for demand in demands:
        alloc = place(demand, pools, free, "pack")
        if alloc is not None:
            free.take(alloc)
        out.append(alloc)
    return out


def _describe(snapshot: ClusterSnapshot, alloc: Allocation, free: FreeCapacity) -> Placement:
    """Pack when the job would share a node with other jobs' GPUs; spread when it owns whole nodes."""
    nodes = snapshot.cluster.nodes
    shares = any(s.gpus < nodes[s.node].gpus or free.gpus[s.node] < nodes[s.node].gpus for s in alloc)
    return Placement(tuple(nodes[s.node].name for s in alloc), nodes[alloc[0].node].gpu_type, shares)
