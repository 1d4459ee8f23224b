"""Inter-rater agreement over Annotation records: categorical and grounded.

From an annotations table (:data:`witness.schema.ANNOTATION_SCHEMA`) this module builds the rating
matrix of one field (a column, or a dotted path into a struct such as ``verdicts.box_tight``) and
computes the kappa that fits it:

* two raters → Cohen's κ (optionally weighted) over the items both rated;
* three or more → Fleiss' κ over the items rated by all of them.

Without an explicit rater list, witness looks at who rated: exactly two people → Cohen; more (as
when six annotators share the work and each item gets two ratings) → Fleiss over the items that carry
the most common number of ratings (≥ 2), the rest counted as dropped. One rater's repeated
annotations of an item count once: the latest (``updated_at``, else ``created_at``, else file order).

Grounded agreement compares the raters' evidence sets: κ of the grounding decision (any box or
none), the share of rating pairs with the same number of boxes, and box-set F1 at IoU 0.5
(``witness.boxes.match_max_iou``) with the share of pairs at F1 = 1.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..boxes import match_max_iou
from ..errors import InputError, SchemaError
from .kappa import KappaResult, cohen_kappa, fleiss_kappa, ratings_to_counts

__all__ = [
    "Ratings",
    "GroundedAgreement",
    "AgreementReport",
    "field_values",
    "latest_ratings",
    "agreement",
    "grounded_agreement",
]


@dataclass(frozen=True)
class Ratings:
    """``values[item_id][rater]`` for one field, latest annotation per (item, rater)."""

    field: str
    values: dict[str, dict[str, Any]]
    boxes: dict[str, dict[str, np.ndarray]]

    @property
    def raters(self) -> list[str]:
        return sorted({r for v in self.values.values() for r in v})


@dataclass(frozen=True)
class GroundedAgreement:
    """Agreement of the raters' evidence sets over rating pairs of the same item."""

    n_pairs: int
    grounding_kappa: float
    count_agreement: float
    box_f1: float
    box_f1_perfect: float

    def to_dict(self) -> dict:
        return {
            "n_pairs": self.n_pairs,
            "grounding_kappa": self.grounding_kappa,
            "count_agreement": self.count_agreement,
            "box_f1": self.box_f1,
            "box_f1_perfect": self.box_f1_perfect,
        }


@dataclass(frozen=True)
class AgreementReport:
    """``audit kappa``'s result: the overall kappa, a per-category breakdown and grounded agreement."""

    field: str
    raters: list[str]
    result: KappaResult
    by: dict[str, KappaResult] = field(default_factory=dict)
    grounded: GroundedAgreement | None = None
    n_dropped: int = 0

    def to_dict(self) -> dict:
        d = self.result.to_dict()
        d.update(
            {
                "field": self.field,
                "raters": self.raters,
                "n_dropped": self.n_dropped,
                "by": {"category": {k: v.to_dict() for k, v in self.by.items()}},
                "grounded": None if self.grounded is None else self.grounded.to_dict(),
            }
        )
        return d


def field_values(table: pa.Table, path: str) -> list:
    """Values of a column or of a dotted path into a struct column, as Python objects.

    >>> t = pa.table({"verdicts": [{"box_tight": True}, {"box_tight": None}]})
    >>> field_values(t, "verdicts.box_tight")
    [True, None]
    """
    head, *rest = path.split(".")
    if head not in table.column_names:
        raise SchemaError(
            f"Expected a column {head!r} in the annotations, got columns {table.column_names}. "
            "Pass --field as a column or a dotted path such as verdicts.box_tight."
        )
    col = table.column(head).combine_chunks()
    for part in rest:
        if not pa.types.is_struct(col.type):
            raise SchemaError(f"Expected a struct at {head!r} to read {path!r}, got {col.type}.")
        names = [col.type.field(i).name for i in range(col.type.num_fields)]
        if part not in names:
            raise SchemaError(f"Expected a field {part!r} in {head!r}, got {names}. Check --field {path!r}.")
        col = pc.struct_field(col, part)
        head = f"{head}.{part}"
    values = col.to_pylist()
    return [tuple(v) if isinstance(v, list) and v and not isinstance(v[0], list) else v for v in values]


def latest_ratings(table: pa.Table, path: str, *, raters: Sequence[str] | None = None, roles: Sequence[str] | None = None) -> Ratings:
    """The rating matrix of ``path``: latest annotation per (item, rater), nulls dropped."""
    values = field_values(table, path)
    items = table.column("item_id").to_pylist()
    who = table.column("annotator").to_pylist()
    role = table.column("role").to_pylist() if "role" in table.column_names else [None] * len(items)
    stamp_cols = [c for c in ("updated_at", "created_at") if c in table.column_names]
    stamps = [table.column(c).to_pylist() for c in stamp_cols]
    boxes_col = table.column("boxes").to_pylist() if "boxes" in table.column_names else [None] * len(items)
    wanted = set(raters) if raters else None
    roles_ok = set(roles) if roles else None
    best: dict[tuple[str, str], tuple[tuple, int]] = {}
    for r in range(len(items)):
        if wanted is not None and who[r] not in wanted:
            continue
        if roles_ok is not None and role[r] not in roles_ok:
            continue
        key = (items[r], who[r])
        order = tuple((s[r] is not None, s[r]) if s[r] is not None else (False, 0) for s in stamps) + (r,)
        if key not in best or order >= best[key][0]:
            best[key] = (order, r)
    out: dict[str, dict[str, Any]] = {}
    out_boxes: dict[str, dict[str, np.ndarray]] = {}
    for (item, rater), (_, r) in best.items():
        if values[r] is not None:
            out.setdefault(item, {})[rater] = values[r]
        b = boxes_col[r]
        if b is not None:
            out_boxes.setdefault(item, {})[rater] = np.asarray(b, dtype=np.float64).reshape(-1, 4)
    if wanted is not None:
        missing = wanted - {r for v in out.values() for r in v}
        if missing:
            raise InputError(f"Expected ratings of {sorted(wanted)}, got none from {sorted(missing)} for field {path!r}. Check --raters.")
    return Ratings(path, out, out_boxes)


def _kappa_for(ratings: Mapping[str, Mapping[str, Any]], raters: list[str] | None, *, weights, labels, n_boot, seed) -> tuple[KappaResult, list[str], int]:
    all_raters = sorted({r for v in ratings.values() for r in v})
    chosen = raters or all_raters
    if len(chosen) < 2:
        raise InputError(f"Expected ratings from at least two raters, got {chosen}. Each item needs two independent ratings.")
    if raters is not None or len(all_raters) == 2:
        if len(chosen) == 2:
            a, b = chosen
            both = [i for i, v in ratings.items() if a in v and b in v]
            if not both:
                raise InputError(f"Expected items rated by both {a!r} and {b!r}, got none.")
            res = cohen_kappa([ratings[i][a] for i in both], [ratings[i][b] for i in both], weights=weights, labels=labels, n_boot=n_boot, seed=seed)
            return res, [a, b], len(ratings) - len(both)
        full = [i for i, v in ratings.items() if all(r in v for r in chosen)]
        if not full:
            raise InputError(f"Expected items rated by all of {chosen}, got none.")
        counts, _ = ratings_to_counts([[ratings[i][r] for r in chosen] for i in full], labels)
        return fleiss_kappa(counts, n_boot=n_boot, seed=seed), chosen, len(ratings) - len(full)
    sizes = Counter(len(v) for v in ratings.values() if len(v) >= 2)
    if not sizes:
        raise InputError("Expected items with at least two ratings, got none. Each item needs two independent ratings.")
    n = max(sizes.items(), key=lambda kv: (kv[1], kv[0]))[0]
    keep = [i for i, v in ratings.items() if len(v) == n]
    counts, _ = ratings_to_counts([list(ratings[i].values()) for i in keep], labels)
    return fleiss_kappa(counts, n_boot=n_boot, seed=seed), all_raters, len(ratings) - len(keep)


def grounded_agreement(boxes: Mapping[str, Mapping[str, np.ndarray]], *, iou: float = 0.5, n_boot: int = 0) -> GroundedAgreement | None:
    """Agreement of evidence sets over every pair of ratings of the same item.

    ``grounding_kappa`` is Fleiss' κ (Cohen's when all pairs come from the same two raters gives the
    same value for n = 2) of the decision "at least one box"; ``count_agreement`` the share of pairs
    with equal box counts; ``box_f1`` the mean F1 at IoU ``iou`` and ``box_f1_perfect`` the share at 1.

    >>> g = grounded_agreement({"q1": {"a": np.array([[0, 0, 10, 10.]]), "b": np.array([[0, 0, 10, 11.]])},
    ...                         "q2": {"a": np.zeros((0, 4)), "b": np.zeros((0, 4))}})
    >>> g.count_agreement, g.box_f1, g.box_f1_perfect
    (1.0, 1.0, 1.0)
    """
    f1s, same_count, decisions = [], [], []
    for per_rater in boxes.values():
        sets = list(per_rater.values())
        if len(sets) < 2:
            continue
        for x, y in combinations(sets, 2):
            f1s.append(match_max_iou(x, y, iou=iou).f1)
            same_count.append(len(x) == len(y))
            decisions.append([len(x) > 0, len(y) > 0])
    if not f1s:
        return None
    counts = np.stack([np.sum(np.asarray(decisions), axis=1), 2 - np.sum(np.asarray(decisions), axis=1)], axis=1)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        gk = fleiss_kappa(counts, n_boot=n_boot).kappa
    f1 = np.asarray(f1s)
    return GroundedAgreement(len(f1s), gk, float(np.mean(same_count)), float(f1.mean()), float(np.mean(f1 == 1.0)))


def agreement(
    table: pa.Table,
    path: str,
    *,
    raters: Sequence[str] | None = None,
    roles: Sequence[str] | None = None,
    weights: str | None = None,
    categories: Mapping[str, str] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> AgreementReport:
    """Kappa of ``path`` over the annotations, with a per-category breakdown and grounded agreement.

    ``categories`` maps item ids to a category (from the items file) for the breakdown; a category
    whose kappa cannot be computed (fewer than two items rated twice) is left out.
    """
    ratings = latest_ratings(table, path, raters=raters, roles=roles)
    if not ratings.values:
        raise InputError(f"Expected ratings in field {path!r}, got only nulls. Check --field and --role.")
    labels = None
    if weights is not None:
        labels = sorted({v for per in ratings.values.values() for v in per.values()})
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result, used, dropped = _kappa_for(ratings.values, list(raters) if raters else None, weights=weights, labels=labels, n_boot=n_boot, seed=seed)
        by: dict[str, KappaResult] = {}
        if categories:
            groups: dict[str, dict] = {}
            for item, per in ratings.values.items():
                groups.setdefault(categories.get(item, "unknown"), {})[item] = per
            for cat, sub in sorted(groups.items()):
                try:
                    by[cat] = _kappa_for(sub, list(raters) if raters else None, weights=weights, labels=labels, n_boot=n_boot, seed=seed)[0]
                except (InputError, ValueError):
                    continue
    grounded = grounded_agreement(ratings.boxes) if ratings.boxes else None
    return AgreementReport(path, used, result, by, grounded, dropped)
