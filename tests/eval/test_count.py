"""Counting suite (CARPK): count MAE with the stated count or the box count, recall at 0.5, SPC."""

from __future__ import annotations

import pytest

from witness.eval.count import evaluate_count
from witness.eval.data import samples_from_records
from witness.schema import item_record

CARS = [[i * 12, 0, i * 12 + 10, 10] for i in range(5)]


def test_count_hand_worked():
    items = [item_record("a", "i", 100, 100, "How many cars?", "5", CARS, ["car"] * 5, count=5, qtype="counting"),
             item_record("b", "i", 100, 100, "How many cars?", "2", CARS[:2], ["car"] * 2, count=2, qtype="counting")]
    preds = [
        {"id": "a", "answer": "seven cars", "boxes": CARS[:4]},  # states 7: |7 - 5| = 2; SPC 7 != 4
        {"id": "b", "answer": "Here they are.", "boxes": CARS[:2] + [[90, 90, 99, 99]]},  # no count: |3 - 2| = 1
    ]
    m = evaluate_count(samples_from_records(items, preds)).metrics
    assert m["count_mae"] == pytest.approx((2 + 1) / 2)
    assert m["recall_50"] == pytest.approx((4 + 2) / 7)
    assert m["spc"] == 0.0 and m["spc_support"] == 1


def test_missing_prediction_counts_as_no_boxes():
    import math

    items = [item_record("a", "i", 100, 100, "How many cars?", "5", CARS, ["car"] * 5, count=5, qtype="counting"),
             item_record("b", "i", 100, 100, "How many cars?", "1", CARS[:1], ["car"], count=1, qtype="counting")]
    r = evaluate_count(samples_from_records(items, [{"id": "b", "boxes": CARS[:1]}]))
    assert r.missing == 1
    assert r.metrics["count_mae"] == pytest.approx((5 + 0) / 2)
    assert math.isnan(r.metrics["spc"]) and r.metrics["spc_support"] == 0
