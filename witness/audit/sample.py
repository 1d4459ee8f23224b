"""Stratified random samples for blind re-adjudication (RoadSceneVQA-G: 5,000 items, §III-A).

Allocation rule (proportional, largest remainder): a stratum ``h`` of size ``N_h`` out of ``N``
receives ``n_h = floor(n N_h / N)``, and the ``n - Σ n_h`` places left go to the strata with the
largest remainders ``n N_h / N - n_h`` (ties: larger stratum, then stratum key order). Within a
stratum, items are drawn without replacement by a seeded ``numpy.random.Generator``. Deterministic for
a seed; ``n >= N`` returns every item.

The blind copy blanks what adjudicators must not see (answer, evidence boxes, labels, count,
provenance) so that they re-annotate without the released labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa

from ..errors import InputError

__all__ = ["allocate", "stratified_sample", "blind", "SampleResult"]


def allocate(sizes: Sequence[int], n: int) -> np.ndarray:
    """Largest-remainder proportional allocation of ``n`` draws over strata of ``sizes``.

    >>> allocate([50, 30, 20], 10).tolist()
    [5, 3, 2]
    >>> allocate([1, 1, 1], 2).tolist()
    [1, 1, 0]
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    total = int(sizes.sum())
    if n >= total:
        return sizes.copy()
    quota = n * sizes / total
    base = np.floor(quota).astype(np.int64)
    left = n - int(base.sum())
    remainder = quota - base
    order = sorted(range(len(sizes)), key=lambda h: (-remainder[h], -sizes[h], h))
    for h in order[:left]:
        base[h] += 1
    return np.minimum(base, sizes)


@dataclass(frozen=True)
class SampleResult:
    table: pa.Table
    allocation: dict[str, tuple[int, int]]  # stratum -> (population, drawn)

    def to_dict(self) -> dict:
        return {
            "n": self.table.num_rows,
            "strata": {k: {"population": p, "drawn": d} for k, (p, d) in self.allocation.items()},
        }


def stratified_sample(items: pa.Table, n: int, *, stratify: Sequence[str] = ("split", "category"), seed: int = 0) -> SampleResult:
    """Draw ``n`` items, stratified by the given columns (nulls form their own stratum).

    >>> from witness.schema import item_record, items_table
    >>> t = items_table([item_record(f"q{i}", "im", 10, 10, "q?", "a", category="existence" if i < 6 else "enumeration")
    ...                  for i in range(10)])
    >>> stratified_sample(t, 5, stratify=["category"]).allocation
    {'enumeration': (4, 2), 'existence': (6, 3)}
    """
    if n <= 0:
        raise InputError(f"Expected a sample size n >= 1, got {n}.")
    for col in stratify:
        if col not in items.column_names:
            raise InputError(f"Expected a column {col!r} to stratify by, got columns {items.column_names}. Check --stratify.")
    keys = list(zip(*[items.column(c).to_pylist() for c in stratify])) if stratify else [()] * items.num_rows
    names = ["/".join("∅" if v is None else str(v) for v in k) or "all" for k in keys]
    strata = sorted(set(names))
    members = {s: [] for s in strata}
    for i, s in enumerate(names):
        members[s].append(i)
    sizes = [len(members[s]) for s in strata]
    alloc = allocate(sizes, n)
    rng = np.random.default_rng(seed)
    picked: list[int] = []
    allocation = {}
    for s, k in zip(strata, alloc):
        idx = np.asarray(members[s])
        chosen = np.sort(rng.choice(idx, size=int(k), replace=False)) if k < len(idx) else idx
        picked.extend(chosen.tolist())
        allocation[s] = (len(idx), int(k))
    picked.sort()
    return SampleResult(items.take(pa.array(picked, pa.int64())), allocation)


def blind(items: pa.Table) -> pa.Table:
    """A copy with the released labels blanked: answer '', no boxes or labels, count and provenance null."""
    n = items.num_rows
    out = items
    replacements = {
        "answer": pa.array([""] * n, pa.string()),
        "boxes": pa.array([[]] * n, items.schema.field("boxes").type) if "boxes" in items.column_names else None,
        "labels": pa.array([[]] * n, items.schema.field("labels").type) if "labels" in items.column_names else None,
        "count": pa.nulls(n, pa.int32()),
    }
    for name, arr in replacements.items():
        if arr is None or name not in out.column_names:
            continue
        i = out.schema.get_field_index(name)
        out = out.set_column(i, out.schema.field(name), arr)
    if "provenance" in out.column_names:
        i = out.schema.get_field_index("provenance")
        out = out.set_column(i, out.schema.field("provenance"), pa.nulls(n, out.schema.field("provenance").type))
    return out
