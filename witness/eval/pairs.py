"""The pairs suite (ConVBench, "Be Consistent!"): logically equivalent question pairs.

Each item with a ``pair_id`` is one question of a pair (roles 1 and 2). A question is *right*
when its answer matches the reference under the lenient predicate
(:func:`witness.eval.answers.match_lenient`; ``strict=True`` for the strict one). Per pair:
``consistency`` = 1 if both answers are right or both wrong; ``robust_accuracy`` = 1 if both are
right. Reported per ``category`` (the category of the pair's role-1 item) and as the **macro mean
over categories** (``consistency``, ``robust_accuracy``); the micro means over pairs are
``consistency_micro`` and ``robust_accuracy_micro``; ``accuracy`` is per question; ``n_pairs``
counts complete pairs and ``n_incomplete`` pair members whose partner is not in the items.
"""

from __future__ import annotations

import numpy as np

from ..errors import SchemaError, where
from ..schema import CATEGORIES
from .answers import match_answers
from .data import Samples
from .report import SuiteReport, _order, sample_table

__all__ = ["pairs_per_pair", "evaluate_pairs"]


def pairs_per_pair(s: Samples, *, strict: bool = False) -> dict[str, np.ndarray]:
    """Per question ``right``; per complete pair its two rows, category, consistency, robustness.

    Raises :class:`~witness.errors.SchemaError` for a pair member without role 1 or 2, or a pair
    with two items of one role (one would silently replace the other).
    """
    right = match_answers(s.pred_answers, s.column("answer"), lenient=not strict)
    pair_ids = s.column("pair_id")
    roles = s.column("pair_role")
    cats = s.columns.get("category") or [None] * len(s)
    members: dict[str, dict[int, int]] = {}
    for i, (p, r) in enumerate(zip(pair_ids, roles, strict=False)):
        if p is None:
            continue
        m = members.setdefault(p, {})
        if int(r) not in (1, 2) or int(r) in m:
            got = f"role {int(r)} again (first on item {s.ids[m[int(r)]]!r})" if int(r) in m else (
                "no role" if int(r) < 0 else f"role {int(r)}")
            raise SchemaError(
                f"Expected pair {p!r} to have one item of role 1 and one of role 2, got {got} "
                f"({where(s.source, i, s.ids[i], 'pair_role')}). Evaluate against released items."
            )
        m[int(r)] = i
    first, second, pids = [], [], []
    incomplete = 0
    for p, m in members.items():
        if 1 in m and 2 in m:
            first.append(m[1])
            second.append(m[2])
            pids.append(p)
        else:
            incomplete += len(m)
    a = np.asarray(first, dtype=np.int64)
    b = np.asarray(second, dtype=np.int64)
    return {
        "right": right,
        "first": a,
        "second": b,
        "pair_id": np.asarray(pids, dtype=object),
        "category": np.asarray([cats[i] or "uncategorized" for i in first], dtype=object),
        "consistent": right[a] == right[b],
        "robust": right[a] & right[b],
        "incomplete": np.asarray(incomplete),
    }


def _mean(x: np.ndarray) -> float:
    return float(np.mean(x)) if len(x) else float("nan")


def evaluate_pairs(s: Samples, *, strict: bool = False, details: bool = True) -> SuiteReport:
    """Score ``s`` with the pairs suite.

    >>> from witness.schema import item_record
    >>> from witness.eval.data import samples_from_records
    >>> items = [item_record("a1", "i", 9, 9, "Is the car red?", "yes", pair_id="p", pair_role=1, category="attribute_recognition"),
    ...          item_record("a2", "i", 9, 9, "Is the car not red?", "no", pair_id="p", pair_role=2, category="attribute_recognition")]
    >>> r = evaluate_pairs(samples_from_records(items, [{"id": "a1", "answer": "Yes"}, {"id": "a2", "answer": "Yes"}]))
    >>> r.metrics["consistency"], r.metrics["robust_accuracy"]
    (0.0, 0.0)
    """
    per = pairs_per_pair(s, strict=strict)
    cats = per["category"]
    by_cat = {}
    for c in _order(list(cats), CATEGORIES):
        m = cats == c
        by_cat[c] = {
            "n": int(m.sum()),
            "consistency": _mean(per["consistent"][m].astype(float)),
            "robust_accuracy": _mean(per["robust"][m].astype(float)),
        }
    in_pair = np.zeros(len(s), dtype=bool)
    in_pair[per["first"]] = True
    in_pair[per["second"]] = True
    metrics = {
        "consistency": _mean(np.asarray([g["consistency"] for g in by_cat.values()])),
        "robust_accuracy": _mean(np.asarray([g["robust_accuracy"] for g in by_cat.values()])),
        "consistency_micro": _mean(per["consistent"].astype(float)),
        "robust_accuracy_micro": _mean(per["robust"].astype(float)),
        "accuracy": _mean(per["right"][in_pair].astype(float)),
        "n_pairs": int(len(per["first"])),
        "n_incomplete": int(per["incomplete"]),
    }
    table = None
    if details:
        partner_right = np.zeros(len(s), dtype=bool)
        partner_right[per["first"]] = per["right"][per["second"]]
        partner_right[per["second"]] = per["right"][per["first"]]
        table = sample_table(s, {"in_pair": in_pair, "right": per["right"], "partner_right": partner_right,
                                 "consistent": in_pair & (per["right"] == partner_right)})
    return SuiteReport("pairs", int(in_pair.sum()), s.parse_rate, int(s.missing.sum()), metrics, {"category": by_cat}, table)
