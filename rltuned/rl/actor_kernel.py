"""The exported actor's forward pass as one compiled loop, read off its frozen TorchScript graph.

Why: in the daemon's loop the TorchScript interpreter runs the actor's dozen operators on caches the
rest of the tick has just evicted, and pays 130 us a tick for what takes 35 us back to back
(docs/performance.md, "fifteenth step"). A compiled loop over the real rows costs 5 us a call and
about 0.2 us a row, and 33 us a tick in the same loop.

The TorchScript file stays the model: the kernel is built only from its constants, only when its graph
is `rl.agent.Actor`'s (the masked rows, optionally standardized, through Linear layers with tanh
between them, scattered into a -1e9 background, optionally minus a rank prior per slot), and kept only
when it scores fixed probe observations as the TorchScript does to float32 rounding (`agrees`). Any
other graph (an ensemble, a wrapper, a new architecture) runs as TorchScript. The daemon, the
simulator's tick and training's validation all score through `LoadedModel.score_rows`, so every side
ranks with the same engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from numba import njit

from rltuned.features import ACTOR_FEATURES, MAX_JOBS

PADDING = -1e9
"""The actor's score for a padding slot (`rl.agent.Actor.forward`)."""
TOLERANCE = 1e-5
"""How far, relative to max(1, |score|), the kernel may score from the TorchScript on the probes:
float32 sums in another order and another tanh differ by a few units in the last place (about 1e-8
on the shipped actors' scores); a misread graph differs by the size of a weight."""
PROBES = 8

Floats32 = npt.NDArray[np.float32]


@dataclass(frozen=True, eq=False)
class ActorKernel:
    """The actor's constants, laid out for `_forward`: layer l's weights transposed ([in, out],
    row-major) at `weights[w_at[l]:w_at[l + 1]]`, its biases at `biases[b_at[l]:b_at[l + 1]]`."""

    mean: Floats32
    scale: Floats32
    weights: Floats32
    biases: Floats32
    w_at: npt.NDArray[np.int64]
    b_at: npt.NDArray[np.int64]
    widths: npt.NDArray[np.int64]
    """[layers + 1]: the input width, then each layer's output width (the last is 1)."""
    rank_prior: float

    def scores(self, actor: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.float64]:
        """The TorchScript module's `forward(actor, mask)`, as float64 ([256])."""
        out = np.empty(mask.shape[0], dtype=np.float32)
        _forward(
            np.ascontiguousarray(actor, dtype=np.float32),
            np.ascontiguousarray(mask, dtype=np.bool_),
            self.mean,
            self.scale,
            self.weights,
            self.biases,
            self.w_at,
            self.b_at,
            self.widths,
            np.float32(self.rank_prior),
            out,
        )
        return out.astype(np.float64)


@njit(cache=True, fastmath={"contract"})
def _forward(
    actor: npt.NDArray[np.float32],
    mask: npt.NDArray[np.bool_],
    mean: Floats32,
    scale: Floats32,
    weights: Floats32,
    biases: Floats32,
    w_at: npt.NDArray[np.int64],
    b_at: npt.NDArray[np.int64],
    widths: npt.NDArray[np.int64],
    prior: np.float32,
    out: Floats32,
) -> None:
    """The real rows through the MLP in float32, layer by layer as the TorchScript computes them;
    padding rows -1e9; then the rank prior, `score - prior * slot`, on every slot as the module
    subtracts it. Each row's arithmetic is its own, so a job's score does not depend on the others."""
    rows = np.flatnonzero(mask)
    n = rows.shape[0]
    out[:] = np.float32(PADDING)
    here = np.empty((widths[0], n), dtype=np.float32)  # a layer's inputs, one row of jobs per unit
    for k in range(widths[0]):
        for i in range(n):
            here[k, i] = (actor[rows[i], k] - mean[k]) * scale[k]
    layers = widths.shape[0] - 1
    for layer in range(layers):
        matrix = weights[w_at[layer] : w_at[layer + 1]].reshape((widths[layer], widths[layer + 1]))
        here = _layer(here, matrix, biases[b_at[layer] : b_at[layer + 1]], layer < layers - 1)
    for i in range(n):
        out[rows[i]] = here[0, i]
    if prior != 0.0:
        for r in range(out.shape[0]):
            out[r] = out[r] - np.float32(r) * prior


@njit(cache=True, fastmath={"contract"})
def _layer(here: Floats32, matrix: Floats32, bias: Floats32, activate: bool) -> Floats32:
    """`tanh(matrix.T @ here + bias)` (without tanh on the last layer), jobs along the inner loops so
    they vectorize: every job's unit j sums its inputs in the same order (k ascending, one fused
    multiply-add each), whatever lane or how many jobs."""
    n = here.shape[1]
    there = np.empty((matrix.shape[1], n), dtype=np.float32)
    for j in range(matrix.shape[1]):
        into = there[j]
        into[:] = bias[j]
        for k in range(matrix.shape[0]):
            w, row = matrix[k, j], here[k]
            for i in range(n):
                into[i] += row[i] * w
        if activate:
            for i in range(n):
                into[i] = np.float32(_tanh(np.float64(into[i])))
    return there


TANH_CLAMP = 7.90531110763549805
"""Beyond it tanh rounds to +-1 in float32."""


@njit(cache=True, fastmath={"contract"})
def _tanh(x: float) -> float:
    """tanh to within 3 float32 units in the last place (tests/rl/test_actor_kernel.py; torch's is 1):
    the 13/6 rational minimax approximation Eigen and XLA use for float32, evaluated in float64. A call
    to libm's tanh per element does not vectorize and was half the kernel's time. NaN stays NaN."""
    c = min(max(x, -TANH_CLAMP), TANH_CLAMP)
    x2 = c * c
    p = -2.76076847742355e-16
    p = p * x2 + 2.00018790482477e-13
    p = p * x2 - 8.60467152213735e-11
    p = p * x2 + 5.12229709037114e-08
    p = p * x2 + 1.48572235717979e-05
    p = p * x2 + 6.37261928875436e-04
    p = p * x2 + 4.89352455891786e-03
    q = 1.19825839466702e-06
    q = q * x2 + 1.18534705686654e-04
    q = q * x2 + 2.26843463243900e-03
    q = q * x2 + 4.89352518554385e-03
    r = c * p / q
    return c if abs(c) < 0.0004 else r  # a select, not a branch: the loop over a row still vectorizes


def read_kernel(module: torch.jit.ScriptModule) -> ActorKernel | None:
    """The kernel of a frozen `Actor` graph, or None for any other graph; `agrees` still has to pass."""
    try:
        return _read(module.graph)
    except (AttributeError, IndexError, KeyError, RuntimeError, TypeError, ValueError):
        return None


class _Walk:
    """The graph's operators in order, each of which must read the one before it (`flow`)."""

    def __init__(self, graph: Any) -> None:
        self.nodes = [node for node in graph.nodes() if node.kind() != "prim::Constant"]
        self.at = 0
        self.flow: Any = None

    def next_is(self, kind: str) -> bool:
        return self.at < len(self.nodes) and self.nodes[self.at].kind() == kind

    def take(self, kind: str, reads_flow: bool = True) -> Any:
        if not self.next_is(kind):
            raise ValueError(f"expected {kind}")
        node = self.nodes[self.at]
        if reads_flow and not _is(node.inputsAt(0), self.flow):
            raise ValueError(f"{kind} does not read the operator before it")
        self.at += 1
        self.flow = node.output()
        return node


def _read(graph: Any) -> ActorKernel | None:
    walk = _Walk(graph)
    walk.take("aten::size", reads_flow=False)
    walk.take("prim::dtype", reads_flow=False)
    background = walk.take("aten::full", reads_flow=False)
    if _constant(background.inputsAt(1)) != PADDING:
        return None
    walk.take("prim::ListConstruct", reads_flow=False)
    walk.take("aten::index", reads_flow=False)
    mean = np.zeros(ACTOR_FEATURES, dtype=np.float32)
    scale = np.ones(ACTOR_FEATURES, dtype=np.float32)
    if walk.next_is("aten::sub"):
        sub = walk.take("aten::sub")
        if _constant(sub.inputsAt(2)) != 1:
            return None
        mean, scale = _array(sub.inputsAt(1)), _array(walk.take("aten::mul").inputsAt(1))
    weights: list[Floats32] = []
    biases: list[Floats32] = []
    while not weights or walk.next_is("aten::tanh"):
        if weights:
            walk.take("aten::tanh")
        linear = walk.take("aten::linear")
        weights.append(_array(linear.inputsAt(1)))
        biases.append(_array(linear.inputsAt(2)))
    walk.take("aten::squeeze")
    squeezed = walk.flow
    scatter = walk.take("aten::masked_scatter", reads_flow=False)
    if not (_is(scatter.inputsAt(0), background.output()) and _is(scatter.inputsAt(2), squeezed)):
        return None
    prior = 0.0
    if walk.next_is("aten::__getitem__"):
        scores = walk.flow
        walk.take("aten::__getitem__", reads_flow=False)
        walk.take("aten::arange", reads_flow=False)
        prior = float(_constant(walk.take("aten::mul").inputsAt(1)))
        sub = walk.take("aten::sub", reads_flow=False)
        if not (_is(sub.inputsAt(0), scores) and _is(sub.inputsAt(1), walk.nodes[walk.at - 2].output())):
            return None
    if walk.at != len(walk.nodes) or not _is(graph.return_node().inputsAt(0), walk.flow):
        return None
    return _layout(mean, scale, weights, biases, prior)


def _layout(
    mean: Floats32, scale: Floats32, weights: list[Floats32], biases: list[Floats32], prior: float
) -> ActorKernel | None:
    widths = [ACTOR_FEATURES]
    for w, b in zip(weights, biases, strict=True):
        if w.ndim != 2 or w.shape[1] != widths[-1] or b.shape != (w.shape[0],):
            return None
        widths.append(w.shape[0])
    if widths[-1] != 1 or mean.shape != (ACTOR_FEATURES,) or scale.shape != (ACTOR_FEATURES,):
        return None
    flat_w = [np.ascontiguousarray(w.T).ravel() for w in weights]
    return ActorKernel(
        mean=mean,
        scale=scale,
        weights=np.concatenate(flat_w).astype(np.float32),
        biases=np.concatenate(biases).astype(np.float32),
        w_at=np.cumsum([0, *(w.size for w in flat_w)]).astype(np.int64),
        b_at=np.cumsum([0, *(b.size for b in biases)]).astype(np.int64),
        widths=np.array(widths, dtype=np.int64),
        rank_prior=prior,
    )


def _is(a: Any, b: Any) -> bool:
    return bool(a.unique() == b.unique())


def _constant(value: Any) -> Any:
    if value.node().kind() != "prim::Constant":
        raise ValueError("not a constant")
    return value.toIValue()


def _array(value: Any) -> Floats32:
    tensor = _constant(value)
    if not isinstance(tensor, torch.Tensor) or tensor.dtype != torch.float32:
        raise TypeError("not a float32 tensor")
    return tensor.detach().numpy().astype(np.float32, copy=True)


def agrees(kernel: ActorKernel, module: torch.jit.ScriptModule) -> bool:
    """Whether the kernel scores `PROBES` fixed observations (features in [0, 1], 1 to 256 real rows,
    some with gaps in the mask) as the module does, every slot within `TOLERANCE`.

    Half the probes are read-only, as a tick's `Observation` is: numba compiles (or loads from its
    cache) one version of the loop per kind of array, and here, at load, is where that may take a
    second, not in a tick's inference budget."""
    rng = np.random.default_rng(0)
    for k in range(PROBES):
        actor = rng.random((MAX_JOBS, ACTOR_FEATURES), dtype=np.float32)
        mask = np.arange(MAX_JOBS) < max(1, (k + 1) * MAX_JOBS // PROBES)
        if k % 2:
            mask &= rng.random(MAX_JOBS) < 0.8
            actor.flags.writeable = mask.flags.writeable = False
        expected = torchscript_scores(module, actor, mask)
        if expected.shape != (MAX_JOBS,):
            return False
        got = kernel.scores(actor, mask)
        if not np.all(np.abs(got - expected) <= TOLERANCE * np.maximum(1.0, np.abs(expected))):
            return False
    return True


def torchscript_scores(
    module: torch.jit.ScriptModule, actor: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_]
) -> npt.NDArray[np.float64]:
    """The module's own forward pass on numpy rows, as float64 (copies: torch wants writable arrays,
    and a tick's observation is read-only)."""
    with torch.inference_mode():
        out = module(torch.from_numpy(np.array(actor)), torch.from_numpy(np.array(mask)))
    return out.detach().numpy().astype(np.float64)


def kernel_of(module: torch.jit.ScriptModule) -> ActorKernel | None:
    """The module's kernel, if its graph is the Actor's and the kernel agrees with it; else None."""
    kernel = read_kernel(module)
    return kernel if kernel is not None and agrees(kernel, module) else None
