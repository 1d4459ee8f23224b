"""The counting suite (CARPK transfer of RoadSceneVQA-G; ``shared/ARCHITECTURE.md``).

* ``count_mae`` = mean |ĉᵢ − |B*ᵢ|| with ĉᵢ = ν(âᵢ), or |B̂ᵢ| where the answer states no count;
* ``recall_50`` = micro recall of ``M_0.5`` (maximum total IoU, pairs at IoU ≥ 0.5);
* ``spc`` (and ``spc_support``) exactly as in the AGC suite.
"""

from __future__ import annotations

import numpy as np

from .agc import match_boxes_flat
from .answers import stated_counts
from .data import Samples
from .report import SuiteReport, group_metrics, sample_table

__all__ = ["count_per_sample", "count_metrics", "evaluate_count"]


def count_per_sample(s: Samples, *, iou: float = 0.5) -> dict:
    """Per sample: stated count, predicted count used for the MAE, true positives."""
    nu = stated_counts(s.arrow("pred_answers"))
    n_pred = s.n_pred
    m = match_boxes_flat(s.pred_boxes, s.pred_offsets, s.ref_boxes, s.ref_offsets, method="max_iou", iou=iou)
    return {"nu": nu, "count": np.where(nu >= 0, nu, n_pred), "n_pred": n_pred, "n_ref": s.n_ref, "tp": m.tp,
            "pred_matched": m.pred_matched, "ref_matched": m.ref_matched}


def count_metrics(per: dict, mask: np.ndarray | None = None) -> dict:
    """Aggregate :func:`count_per_sample` (over ``mask``) into ``count_mae``, ``recall_50``, ``spc``."""
    sel = np.ones(len(per["nu"]), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    nu, n_pred, n_ref = per["nu"][sel], per["n_pred"][sel], per["n_ref"][sel]
    c = nu >= 0
    sr = int(n_ref.sum())
    return {
        "count_mae": float(np.mean(np.abs(per["count"][sel] - n_ref))) if sel.any() else float("nan"),
        "recall_50": int(per["tp"][sel].sum()) / sr if sr else float("nan"),
        "spc": float(np.mean(nu[c] == n_pred[c])) if c.any() else float("nan"),
        "spc_support": int(c.sum()),
    }


def evaluate_count(s: Samples, *, details: bool = True) -> SuiteReport:
    """Score ``s`` with the counting suite.

    >>> from witness.schema import item_record
    >>> from witness.eval.data import samples_from_records
    >>> items = [item_record("p", "i", 100, 100, "How many cars?", "3", [[0, 0, 9, 9], [20, 0, 29, 9], [40, 0, 49, 9]],
    ...                      ["car"] * 3, count=3, qtype="counting")]
    >>> r = evaluate_count(samples_from_records(items, [{"id": "p", "answer": "5 cars", "boxes": [[0, 0, 9, 9]]}]))
    >>> r.metrics["count_mae"], round(r.metrics["recall_50"], 4), r.metrics["spc"]
    (2.0, 0.3333, 0.0)
    """
    per = count_per_sample(s)
    metrics = count_metrics(per)
    by = group_metrics(s, lambda mask: count_metrics(per, mask))
    table = None
    if details:
        table = sample_table(s, {"stated_count": per["nu"], "count": per["count"], "n_pred": per["n_pred"],
                                 "n_ref": per["n_ref"], "tp": per["tp"]},
                             pred_matched=per["pred_matched"], ref_matched=per["ref_matched"])
    return SuiteReport("count", len(s), s.parse_rate, int(s.missing.sum()), metrics, by, table)
