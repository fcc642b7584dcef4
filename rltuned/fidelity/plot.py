"""Real against simulated start, one point per job: on the diagonal the simulator agreed."""

from __future__ import annotations

from collections.abc import Sequence

from rltuned.fidelity.compare import Pair


def plot_starts(matched: Sequence[Pair], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 6))
    same = [p for p in matched if p.real_gpu_type == p.sim_gpu_type]
    other = [p for p in matched if p.real_gpu_type != p.sim_gpu_type]
    for group, label, marker in ((same, "same GPU type", "o"), (other, "other GPU type", "x")):
        if group:
            ax.scatter([p.real_start for p in group], [p.sim_start for p in group], s=14, marker=marker,
                       label=label)  # fmt: skip
    top = max((max(p.real_start, p.sim_start) for p in matched), default=1.0)
    ax.plot([0, top], [0, top], color="grey", linewidth=0.8)
    ax.set_xlabel("real start (s after the first submit)")
    ax.set_ylabel("simulated start (s)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
