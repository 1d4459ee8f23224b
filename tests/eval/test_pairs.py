"""Pairs suite (ConVBench): per-pair consistency and robust accuracy, per category, macro mean."""

from __future__ import annotations

import pytest

from witness.eval.data import samples_from_records
from witness.eval.pairs import evaluate_pairs
from witness.schema import item_record


def _pair(pid, cat, a1, a2):
    return [item_record(f"{pid}-1", "i", 9, 9, "Q1?", a1, pair_id=pid, pair_role=1, category=cat),
            item_record(f"{pid}-2", "i", 9, 9, "Q2?", a2, pair_id=pid, pair_role=2, category=cat)]


def test_pairs_hand_worked_macro_over_categories():
    items = (_pair("p1", "existence", "yes", "no") + _pair("p2", "existence", "yes", "yes")
             + _pair("p3", "existence", "no", "no") + _pair("p4", "spatial_reasoning", "left", "right"))
    preds = [
        {"id": "p1-1", "answer": "Yes."}, {"id": "p1-2", "answer": "No"},  # both right: consistent, robust
        {"id": "p2-1", "answer": "yes"}, {"id": "p2-2", "answer": "no"},  # one right: inconsistent
        {"id": "p3-1", "answer": "yes"},  # p3-2 missing: both wrong -> consistent, not robust
        {"id": "p4-1", "answer": "on the left"}, {"id": "p4-2", "answer": "on the right"},
    ]
    r = evaluate_pairs(samples_from_records(items, preds))
    ex, sp = r.by["category"]["existence"], r.by["category"]["spatial_reasoning"]
    assert ex == {"n": 3, "consistency": pytest.approx(2 / 3), "robust_accuracy": pytest.approx(1 / 3)}
    assert sp["consistency"] == 1.0 and sp["robust_accuracy"] == 1.0
    m = r.metrics
    assert m["consistency"] == pytest.approx((2 / 3 + 1) / 2)  # macro over categories
    assert m["robust_accuracy"] == pytest.approx((1 / 3 + 1) / 2)
    assert m["consistency_micro"] == pytest.approx(3 / 4)
    assert m["robust_accuracy_micro"] == pytest.approx(2 / 4)
    assert m["n_pairs"] == 4 and r.missing == 1
    assert m["accuracy"] == pytest.approx(5 / 8)


def test_strict_predicate_changes_rightness():
    items = _pair("p", "existence", "4", "four")
    preds = [{"id": "p-1", "answer": "four"}, {"id": "p-2", "answer": "4"}]
    assert evaluate_pairs(samples_from_records(items, preds)).metrics["robust_accuracy"] == 1.0
    assert evaluate_pairs(samples_from_records(items, preds), strict=True).metrics["robust_accuracy"] == 0.0


def test_incomplete_pairs_are_counted_not_scored():
    items = _pair("p", "existence", "yes", "no")[:1] + [item_record("lone", "i", 9, 9, "Q?", "yes")]
    r = evaluate_pairs(samples_from_records(items, [{"id": "p-1", "answer": "yes"}]))
    assert r.metrics["n_pairs"] == 0 and r.metrics["n_incomplete"] == 1
    import math

    assert math.isnan(r.metrics["consistency"])


def test_a_pair_with_two_items_of_one_role_is_refused():
    from witness.errors import SchemaError

    items = _pair("p", "existence", "yes", "no")
    items[1] = dict(items[1], pair_role=1)  # used to replace p-1 silently, leaving an incomplete pair
    with pytest.raises(SchemaError, match=r"pair 'p' .* got role 1 again \(first on item 'p-1'\) \(item 'p-2'"):
        evaluate_pairs(samples_from_records(items, [{"id": "p-1", "answer": "yes"}]))
    items[1] = dict(items[1], pair_role=None)
    with pytest.raises(SchemaError, match="got no role"):
        evaluate_pairs(samples_from_records(items, [{"id": "p-1", "answer": "yes"}]))
