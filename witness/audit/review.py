"""Consensus review: an item is admitted only when two reviewers pass it (RoadSceneVQA-G, §III-A).

Rule (the paper's "consensus review"): an item passes when

1. at least two reviewers judged it (``role == "reviewer"``; one reviewer's repeated annotations count
   once, the latest);
2. every one of them passes all four checks (``box_tight``, ``category_correct``,
   ``question_natural``, ``answer_evidence_agree`` all true) and does not discard it; and
3. a numeric answer equals the number of evidence boxes: ``ν(answer) = |boxes|`` whenever the answer
   states a count (the answer and boxes are the item's, from the items file, else the latest
   annotator's annotation).

Anything else fails with a reason. Reviewers who *disagree* (one passes, one fails; or their check
values differ) are listed for adjudication with both judgments side by side.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from ..errors import InputError
from ..schema import VERDICT_KEYS

__all__ = ["ConsensusResult", "consensus", "CONSENSUS_SCHEMA"]

_JUDGMENT = pa.struct(
    [("reviewer", pa.string()), ("decision", pa.string())] + [(k, pa.bool_()) for k in VERDICT_KEYS]
)

#: One row per reviewed item.
CONSENSUS_SCHEMA = pa.schema(
    [
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("passed", pa.bool_(), nullable=False),
        pa.field("reasons", pa.list_(pa.string())),
        pa.field("n_reviews", pa.int32()),
        pa.field("disagreement", pa.bool_()),
        pa.field("judgments", pa.list_(_JUDGMENT)),
        pa.field("stated_count", pa.int32()),
        pa.field("n_boxes", pa.int32()),
    ]
)


@dataclass(frozen=True)
class ConsensusResult:
    """The consensus table and its counts."""

    table: pa.Table
    n_items: int
    n_passed: int
    n_disagreements: int
    reasons: dict[str, int]

    def to_dict(self) -> dict:
        return {
            "n_items": self.n_items,
            "n_passed": self.n_passed,
            "pass_rate": (self.n_passed / self.n_items) if self.n_items else None,
            "n_disagreements": self.n_disagreements,
            "reasons": dict(sorted(self.reasons.items())),
        }


def _passes(j: dict) -> bool:
    return j["decision"] not in ("discard",) and all(j.get(k) is True for k in VERDICT_KEYS)


def consensus(annotations: pa.Table, items: pa.Table | None = None, *, min_reviews: int = 2) -> ConsensusResult:
    """Apply the consensus rule to every item that has reviews (or is listed in ``items``).

    >>> from witness.schema import annotation_record, annotations_table
    >>> ok = {k: True for k in VERDICT_KEYS}
    >>> rows = [annotation_record("q1", "ann", "annotator", answer="2 cars", boxes=[[0, 0, 1, 1], [2, 2, 3, 3]]),
    ...         annotation_record("q1", "r1", "reviewer", verdicts=ok, decision="accept"),
    ...         annotation_record("q1", "r2", "reviewer", verdicts=ok, decision="accept")]
    >>> consensus(annotations_table(rows)).n_passed
    1
    """
    from ..eval.answers import stated_count

    cols = set(annotations.column_names)
    for need in ("item_id", "annotator", "role", "verdicts", "decision"):
        if need not in cols:
            raise InputError(f"Expected column {need!r} in the annotations, got {sorted(cols)}. Pass annotations pulled by witness.")
    rows = annotations.to_pylist()
    def stamp(r: int) -> tuple:
        t = rows[r].get("updated_at") or rows[r].get("created_at")
        return (0, r) if t is None else (1, t, r)

    order = sorted(range(len(rows)), key=stamp)  # later rows overwrite earlier ones: latest wins
    reviews: dict[str, dict[str, dict]] = {}
    work: dict[str, dict] = {}
    for r in order:
        row = rows[r]
        if row["role"] == "reviewer":
            v = row.get("verdicts") or {}
            reviews.setdefault(row["item_id"], {})[row["annotator"]] = {
                "reviewer": row["annotator"],
                "decision": row.get("decision"),
                **{k: v.get(k) for k in VERDICT_KEYS},
            }
        elif row["role"] == "annotator":
            work[row["item_id"]] = {"answer": row.get("answer"), "boxes": row.get("boxes") or []}
    if items is not None:
        for it in items.select([c for c in ("id", "answer", "boxes") if c in items.column_names]).to_pylist():
            work[it["id"]] = {"answer": it.get("answer"), "boxes": it.get("boxes") or []}
        universe = list(dict.fromkeys(items.column("id").to_pylist()))
    else:
        universe = list(dict.fromkeys(list(reviews) + [i for i in work if i in reviews]))
    out, reasons_count, n_pass, n_dis = [], {}, 0, 0
    for item in universe:
        js = list(reviews.get(item, {}).values())
        reasons: list[str] = []
        if len(js) < min_reviews:
            reasons.append(f"fewer than {min_reviews} reviews")
        for j in js:
            if j["decision"] == "discard":
                reasons.append(f"discarded ({j['reviewer']})")
            for k in VERDICT_KEYS:
                if j.get(k) is not True:
                    reasons.append(f"{k} {'failed' if j.get(k) is False else 'not checked'} ({j['reviewer']})")
        w = work.get(item)
        nu = n_boxes = None
        if w is not None:
            nu = stated_count(w["answer"] or "")
            n_boxes = len(w["boxes"])
            if nu is not None and nu != n_boxes:
                reasons.append(f"count mismatch (stated {nu}, {n_boxes} evidence boxes)")
        passes = [_passes(j) for j in js]
        disagreement = len(js) >= 2 and (len(set(passes)) > 1 or len({tuple(j.get(k) for k in VERDICT_KEYS) + (j["decision"],) for j in js}) > 1)
        passed = not reasons
        n_pass += passed
        n_dis += disagreement
        for reason in reasons:
            key = reason.split(" (")[0]
            reasons_count[key] = reasons_count.get(key, 0) + 1
        out.append(
            {
                "item_id": item,
                "passed": passed,
                "reasons": reasons,
                "n_reviews": len(js),
                "disagreement": disagreement,
                "judgments": js,
                "stated_count": nu,
                "n_boxes": n_boxes,
            }
        )
    table = pa.Table.from_pylist(out, schema=CONSENSUS_SCHEMA)
    return ConsensusResult(table, len(out), n_pass, n_dis, reasons_count)
