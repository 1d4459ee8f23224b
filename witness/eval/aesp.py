"""The AESP suite: answer–evidence support for existence, counting and comparison questions
(AESP paper; ``shared/ARCHITECTURE.md``).

* Coverage ``n_c``: reference instances whose box centre lies inside any predicted box (borders
  included, no IoU; :func:`witness.boxes.centers_inside`). Comparison items count ``n_A`` and
  ``n_B`` over the reference boxes labelled ``targets[0]`` and ``targets[1]``.
* The model's answer ``â``: yes/no or an integer read directly, else the extractor of
  :func:`witness.eval.answers.extract_answers` (rules, then an optional LLM); ambiguous → ``s = 0``.
* Support ``s`` (judged against the model's own answer): existence: yes needs ``n_c ≥ 1``, no needs
  ``n_c = 0``; counting: ``n_c = â``; comparison: ``more`` → yes iff ``n_A > n_B`` (no iff
  ``n_A ≤ n_B``), ``fewer`` → yes iff ``n_A < n_B``, ``equal`` → yes iff ``n_A = n_B``.
* Keys: ``accuracy`` (all samples); on the evaluation subset (drops existence questions whose
  reference answer is no): ``es_overall`` = mean s, ``es_correct`` = mean s over correctly
  answered samples, ``joint_success`` = mean 1[correct ∧ s], and micro ``precision``/``recall``/
  ``f1`` of the one-to-one matching maximizing the number of pairs with IoU ≥ 0.5
  (:func:`witness.boxes.match_max_cardinality`); each also per ``qtype``. ``n_eval`` is the subset
  size, ``n_ambiguous`` the undecidable answers, ``n_skipped`` items of other question types.

The reference answer: existence/comparison read with :func:`~witness.eval.answers.read_yes_no`;
counting uses the item's ``count`` (else ``ν`` of its answer).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import SchemaError, where
from ..schema import RELATIONS
from .agc import match_boxes_flat
from .answers import extract_answers, read_yes_no, stated_count
from .ap import _pairs
from .data import Samples
from .report import SuiteReport, group_metrics, sample_table

__all__ = ["AESP_QTYPES", "aesp_per_sample", "aesp_metrics", "evaluate_aesp"]

AESP_QTYPES = ("existence", "counting", "comparison")


def _coverage(s: Samples) -> tuple[np.ndarray, np.ndarray]:
    """Per reference box: covered (centre inside any predicted box of its sample)."""
    img, pi, ri = _pairs(s.pred_offsets, s.ref_offsets)
    covered = np.zeros(len(s.ref_boxes), dtype=bool)
    if len(img):
        r = s.ref_boxes[ri]
        cx, cy = (r[:, 0] + r[:, 2]) / 2, (r[:, 1] + r[:, 3]) / 2
        p = s.pred_boxes[pi]
        inside = (cx >= p[:, 0]) & (cx <= p[:, 2]) & (cy >= p[:, 1]) & (cy <= p[:, 3])
        covered[ri[inside]] = True
    rows = np.repeat(np.arange(len(s)), s.n_ref)
    return covered, rows


def _check_comparisons(s: Samples, qtypes: list) -> None:
    """Comparison items need a known relation, two targets and labels parallel to the reference
    boxes (``n_A``, ``n_B`` count labels); without them support would be silently wrong."""
    rows = [i for i, q in enumerate(qtypes) if q == "comparison"]
    if not rows:
        return
    targets = s.columns.get("targets") or [None] * len(s)
    relations = s.columns.get("relation") or [None] * len(s)
    for i in rows:
        t, rel = targets[i], relations[i]
        if rel not in RELATIONS or not t or len(t) != 2:
            raise SchemaError(
                f"Expected a comparison item with relation in {list(RELATIONS)} and two targets [A, B], got relation "
                f"{rel!r}, targets {t!r} ({where(s.source, i, s.ids[i], 'targets')}). Evaluate against released items."
            )
    labels = s.columns.get("labels")
    n_labels = 0 if labels is None else len(labels)
    if n_labels != len(s.ref_boxes):
        raise SchemaError(
            f"Expected one label per reference box ({len(s.ref_boxes)} boxes) for comparison items, got {n_labels} "
            f"labels ({s.source or 'items'}, field 'labels'). Evaluate against released items (labels parallel to boxes)."
        )


def aesp_per_sample(s: Samples, *, llm: Any = None, progress: Any = None) -> dict[str, np.ndarray]:
    """Per-sample coverage, answers, support and correctness (see the module docstring).

    Raises :class:`~witness.errors.SchemaError` for a comparison item without a known relation,
    two targets, or labels parallel to the reference boxes.
    """
    qtypes = list(s.column("qtype"))
    n = len(s)
    _check_comparisons(s, qtypes)
    inscope = np.array([q in AESP_QTYPES for q in qtypes], dtype=bool)
    questions = s.columns.get("question") or [""] * n
    extracted = extract_answers(
        [questions[i] or "" for i in range(n)],
        [s.pred_answers[i] if inscope[i] else None for i in range(n)],
        [q or "" for q in qtypes],
        llm=llm,
        progress=progress,
    )
    covered, rows = _coverage(s)
    n_c = np.bincount(rows[covered], minlength=n)
    labels = s.columns.get("labels")
    targets = s.columns.get("targets") or [None] * n
    relations = s.columns.get("relation") or [None] * n
    counts = s.columns.get("count", np.full(n, -1))
    ref_answers = s.column("answer")
    n_a = np.zeros(n, dtype=np.int64)
    n_b = np.zeros(n, dtype=np.int64)
    support = np.zeros(n, dtype=bool)
    correct = np.zeros(n, dtype=bool)
    subset = inscope.copy()
    ambiguous = np.zeros(n, dtype=bool)
    method = np.empty(n, dtype=object)
    value = np.empty(n, dtype=object)
    for i in np.flatnonzero(inscope).tolist():
        q, e = qtypes[i], extracted[i]
        method[i], value[i] = e.method, None if e.value is None else str(e.value)
        ambiguous[i] = e.value is None
        if q == "counting":
            ref = int(counts[i]) if counts[i] >= 0 else stated_count(ref_answers[i])
        else:
            ref = read_yes_no(ref_answers[i])
        correct[i] = e.value is not None and e.value == ref
        if q == "existence" and ref == "no":
            subset[i] = False
        if e.value is None:
            continue
        if q == "existence":
            support[i] = (n_c[i] >= 1) if e.value == "yes" else (n_c[i] == 0)
        elif q == "counting":
            support[i] = n_c[i] == e.value
        else:
            t = targets[i] or []
            lab = labels[s.ref_offsets[i] : s.ref_offsets[i + 1]] if labels is not None else np.zeros(0, dtype=object)
            cov = covered[s.ref_offsets[i] : s.ref_offsets[i + 1]]
            a = int((cov & (lab == t[0])).sum()) if len(t) == 2 else 0
            b = int((cov & (lab == t[1])).sum()) if len(t) == 2 else 0
            n_a[i], n_b[i] = a, b
            rel = relations[i]
            holds = {"more": a > b, "fewer": a < b, "equal": a == b}.get(rel)
            if holds is not None:
                support[i] = holds if e.value == "yes" else not holds
    m = match_boxes_flat(s.pred_boxes, s.pred_offsets, s.ref_boxes, s.ref_offsets, method="max_cardinality")
    return {
        "inscope": inscope,
        "subset": subset,
        "n_c": n_c,
        "n_a": n_a,
        "n_b": n_b,
        "support": support,
        "correct": correct,
        "ambiguous": ambiguous,
        "method": method,
        "value": value,
        "tp": m.tp,
        "n_pred": s.n_pred,
        "n_ref": s.n_ref,
        "pred_matched": m.pred_matched,
        "ref_matched": m.ref_matched,
    }


def _mean(x: np.ndarray) -> float:
    return float(np.mean(x)) if len(x) else float("nan")


def aesp_metrics(per: dict, mask: np.ndarray | None = None) -> dict[str, float | int]:
    """Aggregate :func:`aesp_per_sample` (over ``mask``) into the AESP keys."""
    sel = per["inscope"] if mask is None else per["inscope"] & mask
    sub = per["subset"] & sel
    corr, sup = per["correct"], per["support"]
    tp, npred, nref = int(per["tp"][sub].sum()), int(per["n_pred"][sub].sum()), int(per["n_ref"][sub].sum())
    return {
        "accuracy": _mean(corr[sel].astype(float)),
        "es_overall": _mean(sup[sub].astype(float)),
        "es_correct": _mean(sup[sub & corr].astype(float)),
        "joint_success": _mean((sup & corr)[sub].astype(float)),
        "precision": tp / npred if npred else float("nan"),
        "recall": tp / nref if nref else float("nan"),
        "f1": 1.0 if npred + nref == 0 else 2.0 * tp / (npred + nref),
        "n_eval": int(sub.sum()),
        "n_ambiguous": int((per["ambiguous"] & sel).sum()),
    }


def evaluate_aesp(s: Samples, *, llm: Any = None, details: bool = True, progress: Any = None) -> SuiteReport:
    """Score ``s`` with the AESP suite (items of other question types are skipped and counted).

    >>> from witness.schema import item_record
    >>> from witness.eval.data import samples_from_records
    >>> items = [item_record("c", "i", 100, 100, "How many ships?", "2", [[0, 0, 10, 10], [50, 50, 60, 60]],
    ...                      ["ship", "ship"], count=2, qtype="counting")]
    >>> preds = [{"id": "c", "answer": "3", "boxes": [[0, 0, 70, 70]]}]  # covers both, says 3
    >>> r = evaluate_aesp(samples_from_records(items, preds))
    >>> r.metrics["accuracy"], r.metrics["es_overall"]
    (0.0, 0.0)
    """
    per = aesp_per_sample(s, llm=llm, progress=progress)
    metrics = aesp_metrics(per)
    metrics["n_skipped"] = int((~per["inscope"]).sum())
    by = group_metrics(s, lambda mask: aesp_metrics(per, mask), keys=("qtype",))
    by = {"qtype": {k: v for k, v in by.get("qtype", {}).items() if k in AESP_QTYPES}}
    table = None
    if details:
        table = sample_table(
            s,
            {
                "in_subset": per["subset"],
                "extracted": per["value"],
                "extractor": per["method"],
                "coverage": per["n_c"],
                "n_a": per["n_a"],
                "n_b": per["n_b"],
                "supported": per["support"],
                "correct": per["correct"],
                "tp": per["tp"],
            },
            pred_matched=per["pred_matched"],
            ref_matched=per["ref_matched"],
        )
    return SuiteReport("aesp", int(per["inscope"].sum()), s.parse_rate, int(s.missing.sum()), metrics, by, table)
