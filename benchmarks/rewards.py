"""Benchmark: ECPO group reward (consensus + coverage of every rollout), per group, on both paths.

Targets (the training issue): a group of G = 6 rollouts with up to 20 boxes each under 0.2 ms, and
G = 16 rollouts with 55 boxes under 2 ms. Two paths are timed: ``fast`` (the numba kernel, when
numba is installed; built or loaded from numba's cache once, before timing) and ``python`` (the
pure-Python path, what runs without numba). Times are CPU time of this process
(time.process_time), robust to a loaded machine; each figure is repeated ``--repeats`` times and
reported as best-of-N and median; each path runs in a fresh process. Rollouts are drawn like a dense traffic scene: N objects, each
rollout finds ~85 % of them with a few pixels of jitter plus a few false positives.

    .venv/bin/python benchmarks/rewards.py [--groups 300] [--repeats 7] [--path both|fast|python]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import numpy as np

import witness.train.rewards as rewards
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


def _per_group_ms(fn, data: list, repeats: int) -> tuple[float, float]:
    """(best, median) over ``repeats`` runs of CPU milliseconds per group."""
    times = []
    for _ in range(repeats):
        t = time.process_time()
        for r in data:
            fn(r)
        times.append((time.process_time() - t) / len(data) * 1e3)
    return min(times), statistics.median(times)


def bench(g: int, n: int, groups: int, repeats: int, fast: bool, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    data = [make_group(rng, g, n) for _ in range(groups)]
    old = rewards._USE_JIT
    rewards._USE_JIT = fast
    try:
        for r in data[:5]:
            ecpo_group(r)
        best, med = _per_group_ms(ecpo_group, data, repeats)
        cbest, cmed = _per_group_ms(consensus_set, data, repeats)
    finally:
        rewards._USE_JIT = old
    boxes = np.mean([sum(len(b) for b in r) for r in data])
    return {"G": g, "max_boxes": n, "mean_pooled_boxes": float(boxes), "ms_best": best, "ms_median": med,
            "consensus_ms_best": cbest, "consensus_ms_median": cmed}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--path", choices=("both", "fast", "python"), default="both",
                    help="both: each path in a fresh process of its own (the allocator's state left by "
                         "one path measurably changes the other's times)")
    args = ap.parse_args()
    if args.path == "both":
        for path in ("fast", "python"):
            cmd = [sys.executable, __file__, "--groups", str(args.groups), "--repeats", str(args.repeats), "--path", path]
            subprocess.run(cmd, check=True)
        return
    fast = args.path == "fast"
    t = time.perf_counter()
    if fast and not rewards.warmup():
        print("fast path: numba kernel unavailable (numba missing or WITNESS_REWARDS_JIT=0); skipped")
        return
    if fast:
        print(f"fast path: numba kernel built or loaded from cache in {time.perf_counter() - t:.2f} s (once per process)")
    for g, n, target in ((6, 20, 0.2), (16, 55, 2.0)):
        r = bench(g, n, args.groups, args.repeats, fast)
        print(f"G={g:2d} boxes<= {n:2d} pooled={r['mean_pooled_boxes']:.0f} {args.path:>6}: "
              f"{r['ms_best']:.3f} ms/group best of {args.repeats}, {r['ms_median']:.3f} median "
              f"(consensus only {r['consensus_ms_best']:.3f} / {r['consensus_ms_median']:.3f}; target < {target} ms)",
              flush=True)


if __name__ == "__main__":
    main()
