"""How closely can the actor clone a per-job teacher order, and what does a closer clone keep on validation?

The ITP clone of the searched order agreed with its teacher's first choice 83-86% of the time and kept
about half of the teacher's validation gain over SJF (docs/training.md). This script separates the two
questions the gap raises: is the clone under-fitted (more steps, another loss), or can the actor's
inputs not express the teacher? It demonstrates the teacher on training windows (the recipe's
imitation seeds, plus held-out episodes for fidelity), clones fresh actors under each setting, reports
fidelity on the held-out episodes, then scores each clone on the validation windows (the recipe's
3-draw per-window gap over the base). Training and validation splits only; never the test split.

    python scripts/clone_fidelity.py --settings pl:500,pl:4000,score:4000

A setting is `loss:steps`: `pl` is the warm start's Plackett-Luce loss on the whole ranking
(`rl.imitate.clone`); `score` regresses each slot's score onto the teacher's key, centred per decision.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from rltuned.policies.loglinear import LogLinear, parse_loglinear
from rltuned.rl import plackett_luce as pl
from rltuned.rl.agent import ActorCritic
from rltuned.rl.args import Args
from rltuned.rl.imitate import Demonstration, clone, demonstrate
from rltuned.rl.ppo import IMITATION_SEED_OFFSET, make_env, make_validator, seed_everything, tick_settings
from rltuned.rl.rollouts import LocalCollector
from rltuned.rl.tick_env import TickEnv
from rltuned.rl.validation import Validator, gap
from rltuned.sim.metrics import compute_metrics
from rltuned.sim.ticks import run_order

TEACHER = "loglinear:b=1,c=0.25,w0=3600"


def clone_scores(agent: ActorCritic, demo: Demonstration, steps: int, lr: float, batch: int = 256) -> None:
    """Regress the actor's scores onto the teacher's keys, both centred over each decision's real slots."""
    assert demo.keys is not None, "a teacher's demonstration"
    actor = torch.from_numpy(demo.actor)
    mask = torch.from_numpy(demo.mask)
    keys = torch.from_numpy(demo.keys)
    opt = torch.optim.Adam(agent.actor.parameters(), lr=lr)
    for _ in range(steps):
        mb = torch.randint(len(actor), (min(batch, len(actor)),))
        m = mask[mb].float()
        scores = torch.where(mask[mb], agent.actor(actor[mb], mask[mb]), 0.0)
        count = m.sum(-1, keepdim=True)
        s = scores - (scores * m).sum(-1, keepdim=True) / count
        k = keys[mb] - (keys[mb] * m).sum(-1, keepdim=True) / count
        loss = (((s - k) ** 2) * m).sum() / m.sum()
        opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()


@torch.no_grad()
def fidelity(agent: ActorCritic, demo: Demonstration) -> dict[str, float]:
    """Held-out agreement with the teacher: first choice, first 8 as a set, and the ranking's likelihood."""
    actor = torch.from_numpy(demo.actor)
    mask = torch.from_numpy(demo.mask)
    ranking = demo.actions
    assert ranking is not None
    scores = agent.actor(actor, mask)
    order = torch.argsort(scores, dim=-1, descending=True).numpy()
    top1, top8 = [], []
    for i in range(len(order)):
        n = int(demo.mask[i].sum())
        k = min(8, n)
        top1.append(order[i, 0] == ranking[i, 0])
        top8.append(len(set(order[i, :k].tolist()) & set(ranking[i, :k].tolist())) / k)
    nll = -(pl.log_prob(scores, mask, torch.from_numpy(ranking)) / mask.sum(-1)).mean()
    return {"top1": float(np.mean(top1)), "top8": float(np.mean(top8)), "pl_nll": float(nll)}


def teacher_scores(validator: Validator, args: Args, teacher: LogLinear) -> list[float]:
    """The teacher itself as the daemon's base order on every validation window, in `args`' loop."""
    out = []
    for draw, span in validator.windows:
        chunk, warm = span.with_warmup(validator.draws[draw], validator.warmup)
        result = run_order(validator.cluster, list(chunk), warm, tick_settings(args), teacher)
        out.append(compute_metrics(result).avg_bsld)
    return out


def parse() -> argparse.Namespace:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--settings", default="pl:500,pl:4000,score:4000")
    parser.add_argument("--episodes", type=int, default=8, help="demonstrated training windows (recipe: 8)")
    parser.add_argument("--held-out", type=int, default=2, help="other training windows, for fidelity only")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--teacher", default=TEACHER)
    parser.add_argument("--no-validation", action="store_true")
    parser.add_argument("--refresh-s", type=float, default=600.0, help="the recipe's quiet ticks")
    parser.add_argument("--guard-promote-to", default="head", help="the guard the loop runs with")
    parser.add_argument("--teacher-only", action="store_true", help="score the teacher itself and stop")
    parser.add_argument("--out", default="", help="append one JSON line per setting here")
    return parser.parse_args()


def write(row: dict[str, object], out: str) -> None:
    print(json.dumps(row), flush=True)
    if out:
        with open(out, "a") as f:
            f.write(json.dumps(row) + "\n")


def cloned(demo: Demonstration, setting: str, seed: int, lr: float) -> ActorCritic:
    loss, steps = setting.split(":")
    seed_everything(seed)
    agent = ActorCritic(0.0)
    agent.actor.fit_input(torch.from_numpy(demo.actor), torch.from_numpy(demo.mask))
    if loss == "pl":
        clone(agent, demo, int(steps), lr, ranks=True)
    elif loss == "score":
        clone_scores(agent, demo, int(steps), lr)
    else:
        raise SystemExit(f"unknown loss {loss!r}")
    return agent


def main() -> None:
    opts = parse()
    args = Args(
        trace="itp", cluster="itp-slice", metric="bsld", window=1024, warmup=512, reward="dense",
        base="sjf", refresh_s=opts.refresh_s, validation_score="per_window", validation_estimate_seeds=3,
        imitate_episodes=opts.episodes, imitate_teacher=opts.teacher, seed=opts.seed,
        guard_promote_to=opts.guard_promote_to,
    )  # fmt: skip
    args.check()
    torch.set_num_threads(1)
    teacher = parse_loglinear(opts.teacher)
    env = make_env(args)
    assert isinstance(env, TickEnv)
    validator = None if opts.no_validation else make_validator(args)
    collector = LocalCollector(env, validator)
    base = [] if validator is None else collector.validate(None)
    row: dict[str, object] = {"guard_promote_to": opts.guard_promote_to, "refresh_s": opts.refresh_s}
    if opts.teacher_only:
        assert validator is not None, "the teacher is scored on validation"
        scores = teacher_scores(validator, args, teacher)
        row.update(teacher=opts.teacher, base_mean=float(np.mean(base)), val_mean=float(np.mean(scores)),
                   val_gap=gap(base, scores, "bsld", "per_window"),
                   val_wins=sum(a < b for a, b in zip(scores, base, strict=True)))  # fmt: skip
        write(row, opts.out)
        return
    t0 = time.perf_counter()
    start = opts.seed * 1_000_003 + IMITATION_SEED_OFFSET
    taught = demonstrate(env, opts.episodes, start, args.gamma, teacher, keys=True)
    held = demonstrate(env, opts.held_out, start + 500, args.gamma, teacher, keys=True)
    print(
        f"demonstrated {len(taught.actor)} + {len(held.actor)} decisions in {time.perf_counter() - t0:.0f} s"
    )
    for setting in opts.settings.split(","):
        t1 = time.perf_counter()
        agent = cloned(taught, setting, opts.seed, opts.lr)
        out = dict(row, setting=setting, clone_s=round(time.perf_counter() - t1, 1))
        out.update({f"train_{k}": round(v, 4) for k, v in fidelity(agent, taught).items()})
        out.update({f"held_{k}": round(v, 4) for k, v in fidelity(agent, held).items()})
        if validator is not None:
            scores = collector.validate(agent)
            out["val_gap"] = round(gap(base, scores, "bsld", "per_window"), 4)
            out["val_wins"] = sum(a < b for a, b in zip(scores, base, strict=True))
            out["val_mean"] = round(float(np.mean(scores)), 4)
            out["base_mean"] = round(float(np.mean(base)), 4)
        write(out, opts.out)


if __name__ == "__main__":
    main()
