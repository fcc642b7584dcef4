"""Slurm 22.05 select/cons_tres's choice of node for a job on one node, as `_eval_nodes` makes it.

Nodes that can hold the job now (enough free GPUs of its type, CPUs and memory) form runs of adjacent
node indices in Slurm's node order; any other node ends a run. The run with the fewest free CPUs in
total wins (a tie: the first), and in it the node with the fewest free CPUs (a tie: the lower index).
GPUs play no part beyond the filter: Slurm's best fit is on CPUs. So on an idle lab of k80-1, k80-2,
m40-1, p100-1, p100-2 (8 CPUs each) a 1-GPU job goes to k80-1, not to the 1-GPU m40 a GPU best fit picks.

Left out, as the lab does not use them: node `Weight` (all equal; a lower weight would win first), GPU
core affinity in gres.conf (`Cores=`, which trims a node's CPUs to the GPU's socket), threads per core
above 1, `pack_serial_at_end`, LLN partitions, `--spread-job` and topology. The source and worked
examples: docs/simulator.md.

One compiled function, called by the main scheduler's placement (`greedy.place(..., "cons_tres")`) and
by the backfill pass (`sim/kernels.py`), so both choose by the same rule.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit


@njit(cache=True)
def tightest_node(cpus: npt.NDArray[np.int64], candidate: npt.NDArray[np.bool_]) -> int:
    """The node cons_tres picks among `candidate` nodes, by their free `cpus`; -1 when there is none."""
    n = candidate.shape[0]
    best_first, best_end, best_sum = -1, -1, 0
    i = 0
    while i < n:
        if not candidate[i]:
            i += 1
            continue
        j, total = i, 0
        while j < n and candidate[j]:
            total += cpus[j]
            j += 1
        if best_first < 0 or total < best_sum:
            best_first, best_end, best_sum = i, j, total
        i = j
    if best_first < 0:
        return -1
    pick = best_first
    for k in range(best_first + 1, best_end):
        if cpus[k] < cpus[pick]:
            pick = k
    return pick
