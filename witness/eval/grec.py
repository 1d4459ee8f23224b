"""The GREC suite, as the official gRefCOCO evaluator computes it (gRefCOCO / GREC; RoadSceneVQA-G
transfer results; ``shared/ARCHITECTURE.md``).

* predictions scoring below ``score_threshold`` = 0.7 are dropped (no scores: 1.0, kept);
* predictions and references are matched greedily, highest generalized IoU first, while it is
  ≥ 0.5 (:func:`witness.boxes.match_greedy_giou`); ``F1 = 2 TP / (|B̂| + |B*|)``;
* ``pr_f1_1`` = share of samples whose F1 is 1, where a no-target sample (no reference box) counts
  only with no prediction left; ``n_acc`` = share of no-target samples with no prediction;
  ``t_acc`` = share of target samples with at least one prediction. ``n_no_target`` and
  ``n_target`` give the supports.
"""

from __future__ import annotations

import numpy as np

from .agc import match_boxes_flat
from .data import Samples
from .report import SuiteReport, group_metrics, sample_table

__all__ = ["GREC_SCORE_THRESHOLD", "grec_per_sample", "grec_metrics", "evaluate_grec"]

GREC_SCORE_THRESHOLD = 0.7


def grec_per_sample(s: Samples, *, score_threshold: float = GREC_SCORE_THRESHOLD, iou: float = 0.5) -> dict:
    """Per sample: kept predictions, true positives and F1 after the score filter."""
    keep = s.pred_scores >= score_threshold
    rows = np.repeat(np.arange(len(s)), s.n_pred)
    n_kept = np.bincount(rows[keep], minlength=len(s))
    off = np.zeros(len(s) + 1, dtype=np.int64)
    np.cumsum(n_kept, out=off[1:])
    m = match_boxes_flat(s.pred_boxes[keep], off, s.ref_boxes, s.ref_offsets, method="greedy_giou", iou=iou)
    n_ref = s.n_ref
    denom = n_kept + n_ref
    f1 = np.ones(len(s))
    np.divide(2.0 * m.tp, denom, out=f1, where=denom > 0)
    pred_matched = np.zeros(len(s.pred_boxes), dtype=bool)
    pred_matched[np.flatnonzero(keep)[m.pred_matched]] = True
    return {"n_kept": n_kept, "n_ref": n_ref, "tp": m.tp, "f1": f1, "keep": keep,
            "pred_matched": pred_matched | ~keep, "ref_matched": m.ref_matched}


def _mean(x: np.ndarray) -> float:
    return float(np.mean(x)) if len(x) else float("nan")


def grec_metrics(per: dict, mask: np.ndarray | None = None) -> dict:
    """Aggregate :func:`grec_per_sample` (over ``mask``) into ``pr_f1_1``, ``n_acc``, ``t_acc``."""
    sel = np.ones(len(per["f1"]), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    nt = sel & (per["n_ref"] == 0)
    t = sel & (per["n_ref"] > 0)
    return {
        "pr_f1_1": _mean((per["f1"][sel] == 1.0).astype(float)),
        "n_acc": _mean((per["n_kept"][nt] == 0).astype(float)),
        "t_acc": _mean((per["n_kept"][t] > 0).astype(float)),
        "n_no_target": int(nt.sum()),
        "n_target": int(t.sum()),
    }


def evaluate_grec(s: Samples, *, score_threshold: float = GREC_SCORE_THRESHOLD, details: bool = True) -> SuiteReport:
    """Score ``s`` with the GREC suite.

    >>> from witness.schema import item_record
    >>> from witness.eval.data import samples_from_records
    >>> items = [item_record("t", "i", 100, 100, "the red car", "", [[0, 0, 10, 10]], ["car"]),
    ...          item_record("n", "i", 100, 100, "the blue bus", "")]
    >>> preds = [{"id": "t", "boxes": [[0, 0, 10, 10], [50, 50, 60, 60]], "scores": [0.9, 0.2]},
    ...          {"id": "n", "boxes": [[5, 5, 9, 9]], "scores": [0.95]}]
    >>> evaluate_grec(samples_from_records(items, preds)).metrics["pr_f1_1"]
    0.5
    """
    per = grec_per_sample(s, score_threshold=score_threshold)
    metrics = grec_metrics(per)
    by = group_metrics(s, lambda mask: grec_metrics(per, mask))
    table = None
    if details:
        table = sample_table(s, {"n_kept": per["n_kept"], "n_ref": per["n_ref"], "tp": per["tp"], "f1": per["f1"]},
                             pred_matched=per["pred_matched"], ref_matched=per["ref_matched"])
    return SuiteReport("grec", len(s), s.parse_rate, int(s.missing.sum()), metrics, by, table)
