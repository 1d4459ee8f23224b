"""Benchmark: ECPO group reward (consensus + coverage of every rollout), per group.

Targets (the training issue): a group of G = 6 rollouts with up to 20 boxes each under 0.2 ms, and
G = 16 rollouts with 55 boxes under 2 ms. Times are CPU time of this process (time.process_time), robust to a loaded machine. Rollouts are drawn like a dense traffic scene: N objects,
each rollout finds ~85 % of them with a few pixels of jitter plus a few false positives.

    .venv/bin/python benchmarks/rewards.py [--groups 300]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from witness.train.rewards import consensus_set, ecpo_group


def make_group(rng: np.random.Generator, g: int, n: int, size: float = 1920.0) -> list[np.ndarray]:
    xy = rng.uniform(0, size - 120, (n, 2))
    wh = rng.uniform(20, 120, (n, 2))
    gt = np.concatenate([xy, xy + wh], axis=1)
    rollouts = []
    for _ in range(g):
        keep = rng.random(n) < 0.85
        boxes = gt[keep] + rng.normal(0, 3, (int(keep.sum()), 4))
        fp = rng.uniform(0, size - 100, (int(rng.integers(0, 3)), 2))
        boxes = np.concatenate([boxes, np.concatenate([fp, fp + 50], axis=1)])
        rollouts.append(boxes[: n])
    return rollouts


def bench(g: int, n: int, groups: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    data = [make_group(rng, g, n) for _ in range(groups)]
    for r in data[:5]:
        ecpo_group(r)
    t = time.process_time()
    for r in data:
        ecpo_group(r)
    per = (time.process_time() - t) / groups
    t = time.process_time()
    for r in data:
        consensus_set(r)
    per_cons = (time.process_time() - t) / groups
    boxes = np.mean([sum(len(b) for b in r) for r in data])
    return {"G": g, "max_boxes": n, "mean_pooled_boxes": float(boxes), "ms_per_group": per * 1e3,
            "consensus_only_ms": per_cons * 1e3}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=300)
    args = ap.parse_args()
    for g, n, target in ((6, 20, 0.2), (16, 55, 2.0)):
        r = bench(g, n, args.groups)
        print(f"G={g:2d} boxes<= {n:2d} pooled={r['mean_pooled_boxes']:.0f}: {r['ms_per_group']:.3f} ms/group "
              f"(consensus only {r['consensus_only_ms']:.3f} ms; target < {target} ms)")


if __name__ == "__main__":
    main()
