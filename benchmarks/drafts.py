"""Benchmark: rule drafts and pair drafts on synthetic demo-like scenes.

Usage: python benchmarks/drafts.py [N_SCENES ...]   (default 300 1000 3000)

Prints scenes, items, items/image, wall and CPU time (best of 3; items/s on CPU time) for draft_rules and draft_pairs.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from witness.annotate.pairs import draft_pairs
from witness.annotate.rules import draft_rules
from witness.schema import scene_record, scenes_table

CLASSES = ("car", "truck", "bus", "pedestrian", "cyclist")
COLORS = ("red", "white", "black", "blue", "silver", "yellow", "green")


def scenes(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n):
        objs = []
        for c in range(int(rng.integers(0, 3))):
            y = float(rng.integers(250, 400))
            objs.append({"id": f"cw{c}", "label": "crosswalk", "box": [0, y, 1280, y + 40]})
        for k in range(int(rng.integers(2, 16))):
            x1, y1 = float(rng.integers(0, 1180)), float(rng.integers(0, 600))
            w, h = float(rng.integers(10, 100)), float(rng.integers(10, 100))
            objs.append({
                "id": f"o{k}", "label": str(rng.choice(CLASSES)), "box": [x1, y1, x1 + w, y1 + h],
                "attributes": {"color": str(rng.choice(COLORS)), "lane": str(int(rng.integers(1, 5))),
                               "direction": str(rng.choice(["approaching", "receding"])),
                               "motion": str(rng.choice(["moving", "waiting"])),
                               "area": str(rng.choice(["road", "crosswalk", "sidewalk"]))},
            })
        rows.append(scene_record(f"s{s:05d}", 1280, 720, objs, source="bench", split="train"))
    return scenes_table(rows)


def best_of(fn, k: int = 3) -> tuple[float, float, object]:
    """Best wall and CPU seconds of k runs (CPU time is less disturbed by a busy machine)."""
    best, best_cpu, out = float("inf"), float("inf"), None
    for _ in range(k):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return best, best_cpu, out


def main(sizes: list[int]) -> None:
    print(f"{'what':<12} {'scenes':>7} {'objects':>8} {'items':>7} {'items/img':>9} {'wall s':>8} {'cpu s':>8} {'items/s':>9}")
    for n in sizes:
        t = scenes(n)
        n_obj = sum(len(o) for o in t.column("objects").to_pylist())
        for name, fn in (("draft_rules", lambda t=t: draft_rules(t)), ("draft_pairs", lambda t=t: draft_pairs(t))):
            dt, cpu, items = best_of(fn)
            print(f"{name:<12} {n:>7} {n_obj:>8} {items.num_rows:>7} {items.num_rows / n:>9.1f} {dt:>8.3f} {cpu:>8.3f} {items.num_rows / cpu:>9.0f}")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [300, 1000, 3000])
