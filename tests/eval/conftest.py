"""Fixtures of the evaluation-suite tests (small synthetic items and predictions built through the schema)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from witness.io import write_jsonl, write_table
from witness.schema import item_record, items_table


def random_case(rng: np.random.Generator, n: int, *, width: float = 200.0, height: float = 150.0):
    """``n`` samples: reference boxes (0–8 per sample, some empty), jittered predictions with
    dropped and extra boxes, scores with ties; returns (items, predictions) as record dicts."""
    items, preds = [], []
    for i in range(n):
        k = int(rng.choice([0, 1, 2, 3, 5, 8], p=[0.2, 0.3, 0.2, 0.15, 0.1, 0.05]))
        xy = rng.uniform(0, 1, (k, 2)) * np.array([width - 40, height - 40])
        ref = np.c_[xy, xy + rng.uniform(5, 40, (k, 2))].round(1)
        items.append(item_record(f"q{i}", f"img{i}", int(width), int(height), "How many cars?", f"{k} cars",
                                 ref.tolist(), ["car"] * k, qtype="counting" if i % 2 else "existence",
                                 category="enumeration" if i % 2 else "existence"))
        keep = ref[rng.random(k) < 0.8]
        j = keep + rng.normal(0, 2.0, keep.shape)
        extra = int(rng.integers(0, 3))
        exy = rng.uniform(0, 1, (extra, 2)) * np.array([width - 40, height - 40])
        b = np.r_[j, np.c_[exy, exy + rng.uniform(5, 40, (extra, 2))]]
        b[:, 2:] = np.maximum(b[:, 2:], b[:, :2] + 0.5)
        scores = rng.choice([0.25, 0.5, 0.75, 1.0], len(b)) if i % 3 else rng.random(len(b))
        said = len(b) if rng.random() < 0.7 else int(rng.integers(0, 6))
        preds.append({"id": f"q{i}", "answer": f"{said} cars", "boxes": b.round(2).tolist(), "scores": scores.tolist()})
    return items, preds


@pytest.fixture
def suite_files(tmp_path: Path):
    """Write items (Parquet) and predictions (JSONL) and return their paths."""

    def write(items: list[dict], preds: list[dict], *, jsonl_items: bool = False) -> tuple[Path, Path]:
        gt = tmp_path / ("items.jsonl" if jsonl_items else "items.parquet")
        if jsonl_items:
            rows = [{k: v for k, v in r.items() if k not in ("image", "provenance")} for r in items]
            write_jsonl(rows, gt)
        else:
            write_table(items_table(items), gt)
        pred = tmp_path / "pred.jsonl"
        write_jsonl(preds, pred)
        return gt, pred

    return write
