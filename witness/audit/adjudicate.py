"""Blind re-adjudication: the figures RoadSceneVQA-G reports for its released labels (§III-A).

Two adjudicators who did not annotate re-answer a stratified sample blind (``audit sample`` writes
the blind copy); their annotations (``role == "adjudicator"``) are compared with the released items:

* ``answer_confirmed``: share of sampled items whose released answer both adjudicators confirm,
  an adjudicator confirming when their answer matches the released one under the lenient rule of
  the AGC contract (``witness.eval.answers``);
* ``evidence_confirmed``: share whose released evidence set both confirm, an adjudicator confirming
  when their box set matches it with F1 = 1 at IoU 0.5 (``witness.boxes.match_max_iou``);
* ``count_box_agreement``: over counting items, share where both adjudicators' stated counts equal
  the number of released evidence boxes;
* ``kappa_answer``: Cohen's κ between the two adjudicators *before reconciliation*, over their
  normalized answers as categories; ``kappa_evidence``: Cohen's κ over their per-item "evidence
  confirmed" decisions.

Where the adjudicators disagree with each other, the item is ``disputed`` and counts as unconfirmed
(the paper reconciles by discussion; witness reports the floor and lists the disputes).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pyarrow as pa

from ..boxes import match_max_iou
from ..errors import InputError
from .kappa import cohen_kappa

__all__ = ["AdjudicationReport", "adjudicate"]


@dataclass(frozen=True)
class AdjudicationReport:
    adjudicators: list[str]
    n_items: int
    answer_confirmed: float
    evidence_confirmed: float
    count_box_agreement: float | None
    n_counting: int
    kappa_answer: float
    kappa_evidence: float
    disputed: list[str] = field(default_factory=list)
    per_adjudicator: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "adjudicators": self.adjudicators,
            "n_items": self.n_items,
            "answer_confirmed": self.answer_confirmed,
            "evidence_confirmed": self.evidence_confirmed,
            "count_box_agreement": self.count_box_agreement,
            "n_counting": self.n_counting,
            "kappa_answer": self.kappa_answer,
            "kappa_evidence": self.kappa_evidence,
            "n_disputed": len(self.disputed),
            "disputed": self.disputed[:50],
            "per_adjudicator": self.per_adjudicator,
        }


def adjudicate(released: pa.Table, adjudications: pa.Table, *, adjudicators: Sequence[str] | None = None) -> AdjudicationReport:
    """Compare two adjudicators' blind annotations with the released items.

    >>> from witness.schema import item_record, items_table, annotation_record, annotations_table
    >>> rel = items_table([item_record("q1", "im", 100, 100, "How many cars?", "2", [[0, 0, 9, 9], [20, 20, 29, 29]],
    ...                                ["car", "car"], count=2, qtype="counting")])
    >>> adj = annotations_table([annotation_record("q1", a, "adjudicator", answer="two", boxes=[[0, 0, 9, 9], [20, 20, 29, 29]])
    ...                          for a in ("x", "y")])
    >>> r = adjudicate(rel, adj)
    >>> r.answer_confirmed, r.evidence_confirmed, r.count_box_agreement
    (1.0, 1.0, 1.0)
    """
    from ..eval.answers import match_lenient, normalize_lenient, stated_count

    adj = adjudications.to_pylist()
    adj = [a for a in adj if a.get("role") == "adjudicator"]
    if not adj:
        raise InputError("Expected annotations with role 'adjudicator', got none. Pull the adjudication project's annotations.")
    if adjudicators is None:
        counts: dict[str, int] = {}
        for a in adj:
            counts[a["annotator"]] = counts.get(a["annotator"], 0) + 1
        adjudicators = [k for k, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:2]]
    if len(adjudicators) != 2:
        raise InputError(f"Expected two adjudicators, got {list(adjudicators)}. Pass --adjudicators A,B.")
    a_name, b_name = adjudicators
    by_item: dict[str, dict[str, dict]] = {}
    for a in adj:
        if a["annotator"] in (a_name, b_name):
            by_item.setdefault(a["item_id"], {})[a["annotator"]] = a  # file order: the last one wins
    rel = {r["id"]: r for r in released.select([c for c in ("id", "answer", "boxes", "qtype") if c in released.column_names]).to_pylist()}
    unknown = [i for i in by_item if i not in rel]
    if unknown:
        raise InputError(f"Expected adjudicated items to be in the release, got unknown ids {unknown[:5]}. Check the files.")
    both = [i for i, per in by_item.items() if a_name in per and b_name in per]
    if not both:
        raise InputError(f"Expected items adjudicated by both {a_name!r} and {b_name!r}, got none.")
    ans_ok = {n: [] for n in (a_name, b_name)}
    ev_ok = {n: [] for n in (a_name, b_name)}
    answers = {n: [] for n in (a_name, b_name)}
    count_ok, disputed = [], []
    for item in both:
        r = rel[item]
        ref_boxes = np.asarray(r.get("boxes") or [], dtype=np.float64).reshape(-1, 4)
        per_count = []
        for n in (a_name, b_name):
            a = by_item[item][n]
            text = a.get("answer") or ""
            ans_ok[n].append(bool(match_lenient(text, r["answer"] or "")))
            boxes = np.asarray(a.get("boxes") or [], dtype=np.float64).reshape(-1, 4)
            ev_ok[n].append(match_max_iou(boxes, ref_boxes, iou=0.5).f1 == 1.0)
            answers[n].append(normalize_lenient(text))
            per_count.append(stated_count(text))
        if r.get("qtype") == "counting":
            count_ok.append(all(c == len(ref_boxes) for c in per_count))
        if ans_ok[a_name][-1] != ans_ok[b_name][-1] or ev_ok[a_name][-1] != ev_ok[b_name][-1]:
            disputed.append(item)
    a_ans, b_ans = np.asarray(ans_ok[a_name]), np.asarray(ans_ok[b_name])
    a_ev, b_ev = np.asarray(ev_ok[a_name]), np.asarray(ev_ok[b_name])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        k_ans = cohen_kappa(answers[a_name], answers[b_name], n_boot=0).kappa
        k_ev = cohen_kappa(list(a_ev), list(b_ev), n_boot=0).kappa
    return AdjudicationReport(
        adjudicators=[a_name, b_name],
        n_items=len(both),
        answer_confirmed=float(np.mean(a_ans & b_ans)),
        evidence_confirmed=float(np.mean(a_ev & b_ev)),
        count_box_agreement=float(np.mean(count_ok)) if count_ok else None,
        n_counting=len(count_ok),
        kappa_answer=float(k_ans),
        kappa_evidence=float(k_ev),
        disputed=disputed,
        per_adjudicator={
            a_name: {"answer_confirmed": float(a_ans.mean()), "evidence_confirmed": float(a_ev.mean())},
            b_name: {"answer_confirmed": float(b_ans.mean()), "evidence_confirmed": float(b_ev.mean())},
        },
    )
