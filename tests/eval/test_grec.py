"""GREC suite (gRefCOCO evaluator semantics): score filter, greedy GIoU matching, Pr@F1=1, N-acc, T-acc."""

from __future__ import annotations

import numpy as np
import pytest

from witness.boxes import match_greedy_giou
from witness.eval.data import samples_from_records
from witness.eval.grec import evaluate_grec
from witness.schema import item_record


def _items():
    return [
        item_record("t1", "i", 100, 100, "the two cars", "", [[0, 0, 10, 10], [20, 20, 30, 30]], ["car"] * 2),
        item_record("t2", "i", 100, 100, "the bus", "", [[50, 50, 90, 90]], ["bus"]),
        item_record("n1", "i", 100, 100, "the boat", ""),
        item_record("n2", "i", 100, 100, "the plane", ""),
    ]


def test_grec_hand_worked():
    preds = [
        # both cars found; a low-score extra is dropped before matching -> F1 = 1
        {"id": "t1", "boxes": [[0, 0, 10, 10], [20, 20, 30, 30], [60, 60, 70, 70]], "scores": [0.9, 0.8, 0.69]},
        # a confident wrong box: target sample with a prediction (T-acc) but F1 = 0
        {"id": "t2", "boxes": [[0, 50, 20, 70]], "scores": [0.95]},
        # no-target sample: only a below-threshold box -> counts as no prediction
        {"id": "n1", "boxes": [[1, 1, 5, 5]], "scores": [0.5]},
        # no-target sample with a kept prediction (no scores = 1.0)
        {"id": "n2", "boxes": [[1, 1, 5, 5]]},
    ]
    r = evaluate_grec(samples_from_records(_items(), preds))
    m = r.metrics
    assert m["pr_f1_1"] == pytest.approx(2 / 4)  # t1 and n1
    assert m["n_acc"] == pytest.approx(1 / 2)
    assert m["t_acc"] == pytest.approx(2 / 2)
    assert (m["n_target"], m["n_no_target"]) == (2, 2)
    rows = r.samples.to_pylist()
    assert rows[0]["extra_boxes"] == []  # the dropped box is not an "extra" prediction
    assert rows[1]["missed_boxes"] == [[50.0, 50.0, 90.0, 90.0]]


def test_threshold_is_inclusive_and_configurable():
    preds = [{"id": "n1", "boxes": [[1, 1, 5, 5]], "scores": [0.7]}]
    items = _items()[2:3]
    assert evaluate_grec(samples_from_records(items, preds)).metrics["n_acc"] == 0.0
    assert evaluate_grec(samples_from_records(items, preds), score_threshold=0.71).metrics["n_acc"] == 1.0


def test_grec_f1_equals_per_sample_greedy_giou():
    rng = np.random.default_rng(1)
    items, preds = [], []
    for i in range(80):
        k = int(rng.integers(0, 5))
        xy = rng.uniform(0, 40, (k, 2))
        r = np.c_[xy, xy + rng.uniform(5, 20, (k, 2))]
        p = r + rng.normal(0, 3, r.shape)
        p[:, 2:] = np.maximum(p[:, 2:], p[:, :2] + 1)
        items.append(item_record(f"s{i}", "i", 100, 100, "ref", "", r.tolist(), ["x"] * k))
        preds.append({"id": f"s{i}", "boxes": p.tolist(), "scores": rng.uniform(0.5, 1, k).tolist()})
    r = evaluate_grec(samples_from_records(items, preds))
    want = []
    for it, p in zip(items, preds, strict=False):
        keep = np.asarray(p["scores"]) >= 0.7
        pb = np.asarray(p["boxes"]).reshape(-1, 4)[keep]
        m = match_greedy_giou(pb, np.asarray(it["boxes"]).reshape(-1, 4))
        want.append((m.f1 == 1.0) if len(it["boxes"]) else len(pb) == 0)
    assert r.metrics["pr_f1_1"] == pytest.approx(np.mean(want))
