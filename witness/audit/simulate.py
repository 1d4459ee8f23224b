"""Simulated reviewers, for ``witness demo`` and tests only — never a substitute for people.

The demo has no annotators, yet its audit stage should exercise the real consensus, kappa and gate
code on data whose right answer is known. So: a seeded share of the drafted items is corrupted with
the judge's calibration corruptions (:func:`witness.audit.judge.corrupt`: a dropped, added or
shifted box, a wrong stated count), and each simulated reviewer

* flags a corrupted item with probability ``detect`` (failing the check the corruption breaks), and
* flags a clean item with probability ``false_alarm`` (a random check),

independently of the other reviewer. Every annotation says ``source = "simulated"``.
"""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pyarrow as pa

from ..schema import VERDICT_KEYS, annotation_record, annotations_table, conform
from .judge import CORRUPTIONS, corrupt

__all__ = ["simulate_review"]

_BROKEN_CHECK = {
    "drop_box": "answer_evidence_agree",
    "add_distractor": "box_tight",
    "shift_box": "box_tight",
    "change_count": "answer_evidence_agree",
}


def simulate_review(
    items: pa.Table,
    *,
    corrupt_share: float = 0.05,
    detect: float = 0.98,
    false_alarm: float = 0.005,
    reviewers: tuple[str, str] = ("sim-reviewer-1", "sim-reviewer-2"),
    seed: int = 0,
) -> tuple[pa.Table, pa.Table, dict[str, int]]:
    """Corrupt a share of ``items`` and review all of them with two simulated reviewers.

    Returns ``(items_after_corruption, annotations, corrupted_per_kind)``.

    >>> from witness.schema import item_record, items_table
    >>> t = items_table([item_record(f"q{i}", "im", 100, 100, "Any car?", "yes", [[0, 0, 9, 9]], ["car"]) for i in range(20)])
    >>> items, ann, kinds = simulate_review(t, corrupt_share=0.5, seed=1)
    >>> ann.num_rows, sum(kinds.values()) > 0
    (40, True)
    """
    rng = np.random.default_rng(seed)
    rows = items.to_pylist()
    kinds: dict[str, int] = {}
    corrupted_kind: dict[str, str] = {}
    for row in rows:
        if rng.random() < corrupt_share:
            for kind in rng.permutation(CORRUPTIONS):
                bad = corrupt(row, str(kind), rng)
                if bad is not None:
                    row.update(bad)
                    corrupted_kind[row["id"]] = str(kind)
                    kinds[str(kind)] = kinds.get(str(kind), 0) + 1
                    break
    stamp = datetime(2026, 1, 1, tzinfo=timezone.utc)
    ann = []
    for row in rows:
        kind = corrupted_kind.get(row["id"])
        for who in reviewers:
            verdicts = {k: True for k in VERDICT_KEYS}
            if kind is not None and rng.random() < detect:
                verdicts[_BROKEN_CHECK[kind]] = False
            elif rng.random() < false_alarm:
                verdicts[VERDICT_KEYS[int(rng.integers(len(VERDICT_KEYS)))]] = False
            decision = "accept" if all(verdicts.values()) else "discard"
            ann.append(annotation_record(row["id"], who, "reviewer", verdicts=verdicts, decision=decision,
                                         created_at=stamp, source="simulated"))
    # A corrupted counting item may no longer satisfy the schema's count rule; the gate's row-wise
    # schema check excludes it, as it would a real annotation error.
    out = pa.Table.from_pylist(rows, schema=conform(items, "item").schema)
    return out, annotations_table(ann), kinds
