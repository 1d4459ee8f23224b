"""The release gate: admit what passed, refuse a dataset that fails, and say why. It fails closed.

Per item, an item is admitted only when

* it passes the schema checks (:func:`witness.schema.validate_items`, applied row by row so one
  bad row excludes itself, not the file), and
* it passes consensus review (:func:`witness.audit.review.consensus`: two reviewers, all four
  checks, numeric answer = evidence count), and
* for a logically equivalent pair, its partner is admitted too (pairs are released whole or not).

Dataset level, the gate refuses (exit 1, :class:`~witness.errors.GateError`, no release written):

* reviewer agreement below ``min_kappa`` (κ of ``kappa_field`` among reviewers, Cohen's for two
  raters, Fleiss' for more; an undefined κ counts as a failure);
* split leakage (an image in two splits);
* nothing admitted.

Otherwise it releases the admitted items through :func:`witness.dataset.release.release` with a
gate report (``gate/report.json`` and ``gate/report.md``: counts per reason, the κ table,
count-box agreement, pair accept / correct / discard rates) inside the release, linked from the card.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..errors import GateError, InputError, SchemaError
from ..io import write_table
from ..schema import validate_items
from .agreement import agreement
from .review import consensus

__all__ = ["GateReport", "gate", "schema_problems", "render_gate_markdown"]


@dataclass(frozen=True)
class GateReport:
    n_items: int
    n_admitted: int
    excluded: dict[str, int]
    kappa: dict[str, Any]
    count_box_agreement: float | None
    pair_decisions: dict[str, float]
    passed: bool
    failures: list[str] = field(default_factory=list)
    release: dict | None = None

    def to_dict(self) -> dict:
        return {
            "passed": self.passed,
            "failures": self.failures,
            "n_items": self.n_items,
            "n_admitted": self.n_admitted,
            "excluded": dict(sorted(self.excluded.items())),
            "kappa": self.kappa,
            "count_box_agreement": self.count_box_agreement,
            "pair_decisions": self.pair_decisions,
            "release": self.release,
        }


def schema_problems(items: pa.Table) -> dict[str, str]:
    """Item id → first schema problem, checking each row alone (pair fields checked separately).

    >>> from witness.schema import item_record, items_table
    >>> t = items_table([item_record("ok", "i", 10, 10, "Any car?", "yes", [[0, 0, 5, 5]], ["car"]),
    ...                  item_record("bad", "i", 10, 10, "Any car?", "yes", [[0, 0, 50, 5]], ["car"])])
    >>> schema_problems(t)
    {'bad': 'invalid boxes'}
    """
    try:
        validate_items(items)
        return {}
    except SchemaError:
        pass
    problems: dict[str, str] = {}
    ids = items.column("id").to_pylist()
    seen: set[str] = set()
    single = items.set_column(items.schema.get_field_index("pair_id"), "pair_id", pa.nulls(items.num_rows, pa.string()))
    single = single.set_column(single.schema.get_field_index("pair_role"), "pair_role", pa.nulls(items.num_rows, pa.int8()))
    for r, item_id in enumerate(ids):
        if item_id in seen:
            problems[item_id] = "duplicate id"
            continue
        seen.add(item_id)
        try:
            validate_items(single.slice(r, 1))
        except SchemaError as exc:
            field = re.search(r"field '([^']+)'", str(exc))
            problems[item_id] = f"invalid {field.group(1)}" if field else str(exc).split(" (")[0]
    return problems


def _count_box_agreement(table: pa.Table) -> float | None:
    from ..eval.answers import stated_count

    rows = table.select(["answer", "boxes", "qtype"]).to_pylist()
    counting = [r for r in rows if r["qtype"] == "counting"]
    if not counting:
        return None
    return sum(stated_count(r["answer"] or "") == len(r["boxes"] or []) for r in counting) / len(counting)


def _pair_decisions(annotations: pa.Table, items: pa.Table) -> dict[str, float]:
    pair_items = {i for i, p in zip(items.column("id").to_pylist(), items.column("pair_id").to_pylist()) if p is not None}
    decisions = [
        d
        for i, d, role in zip(
            annotations.column("item_id").to_pylist(), annotations.column("decision").to_pylist(), annotations.column("role").to_pylist()
        )
        if i in pair_items and d is not None and role in ("annotator", "adjudicator")
    ]
    if not decisions:
        return {}
    c = Counter(decisions)
    return {k: c.get(k, 0) / len(decisions) for k in ("accept", "correct", "discard")} | {"n": len(decisions)}


def _leakage(items: pa.Table) -> str | None:
    seen: dict[str, str] = {}
    for image_id, split in zip(items.column("image_id").to_pylist(), items.column("split").to_pylist()):
        if split is None:
            continue
        if seen.setdefault(image_id, split) != split:
            return f"image {image_id!r} is in splits {seen[image_id]!r} and {split!r}"
    return None


def render_gate_markdown(report: GateReport) -> str:
    """The gate report for people (Markdown)."""
    lines = [
        "# Release gate report",
        "",
        f"**{'PASSED' if report.passed else 'REFUSED'}** — {report.n_admitted} of {report.n_items} items admitted.",
        "",
    ]
    if report.failures:
        lines += ["## Dataset-level failures", ""] + [f"- {f}" for f in report.failures] + [""]
    lines += ["## Excluded items by reason", "", "| reason | items |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(report.excluded.items())] or ["| — | 0 |"]
    k = report.kappa
    lines += ["", "## Reviewer agreement", "", "| field | method | κ | 95% CI | observed | expected | items |", "|---|---|---|---|---|---|---|"]
    if k:
        ci = k.get("ci95")
        ci_s = "—" if not ci else f"[{ci[0]:.3f}, {ci[1]:.3f}]"
        lines.append(
            f"| {k.get('field')} | {k.get('method')} | {k.get('kappa', float('nan')):.3f} | {ci_s} | "
            f"{k.get('observed', float('nan')):.3f} | {k.get('expected', float('nan')):.3f} | {k.get('n_items')} |"
        )
    cba = report.count_box_agreement
    lines += ["", f"Count-box agreement on admitted counting items: {'—' if cba is None else f'{100 * cba:.1f}%'}", ""]
    if report.pair_decisions:
        pdx = report.pair_decisions
        lines += [
            "## Pair verification (ConVBench)",
            "",
            "| accepted | corrected | discarded | decisions |",
            "|---|---|---|---|",
            f"| {100 * pdx['accept']:.1f}% | {100 * pdx['correct']:.1f}% | {100 * pdx['discard']:.1f}% | {pdx['n']} |",
            "",
        ]
    return "\n".join(lines) + "\n"


def gate(
    items: pa.Table,
    annotations: pa.Table,
    out_dir: str | Path,
    *,
    min_kappa: float = 0.8,
    kappa_field: str = "decision",
    test_fraction: float = 0.15,
    seed: int = 0,
    n_boot: int = 1000,
) -> GateReport:
    """Gate and release (see the module docstring). Raises :class:`GateError` on a dataset failure."""
    from ..dataset.release import release

    if items.num_rows == 0:
        raise InputError("Expected items to gate, got none.")
    import pyarrow.compute as pc

    # Only the annotations of the items being gated count (a project may hold other batches).
    annotations = annotations.filter(pc.is_in(annotations.column("item_id"), value_set=items.column("id").combine_chunks()))
    excluded: Counter[str] = Counter()
    problems = schema_problems(items)
    for reason in problems.values():
        excluded[f"schema: {reason}"] += 1
    cons = consensus(annotations, items)
    cons_rows = cons.table.select(["item_id", "passed", "reasons"]).to_pylist()
    review_fail = {r["item_id"]: r["reasons"] for r in cons_rows if not r["passed"]}
    for item_id, reasons in review_fail.items():
        if item_id not in problems:
            excluded[f"review: {reasons[0].split(' (')[0]}"] += 1
    ids = items.column("id").to_pylist()
    pair_ids = items.column("pair_id").to_pylist()
    admitted = {i for i in ids if i not in problems and i not in review_fail}
    members: dict[str, list[str]] = {}
    for i, p in zip(ids, pair_ids):
        if p is not None:
            members.setdefault(p, []).append(i)
    for p, mem in members.items():
        if any(m not in admitted for m in mem):
            for m in mem:
                if m in admitted:
                    admitted.discard(m)
                    excluded["pair partner excluded"] += 1
    failures: list[str] = []
    try:
        agr = agreement(annotations, kappa_field, roles=["reviewer"], n_boot=n_boot, seed=seed)
        kappa = agr.to_dict()
        if not (isinstance(agr.result.kappa, float) and not math.isnan(agr.result.kappa) and agr.result.kappa >= min_kappa):
            failures.append(f"reviewer κ of {kappa_field!r} is {agr.result.kappa:.3f}, below the minimum {min_kappa}")
    except InputError as exc:
        kappa = {}
        failures.append(f"reviewer agreement could not be computed: {exc}")
    leak = _leakage(items)
    if leak:
        failures.append(f"split leakage: {leak}")
    keep_mask = pa.array([i in admitted for i in ids])
    admitted_table = items.filter(keep_mask)
    if admitted_table.num_rows == 0:
        failures.append("no item passed review and schema checks")
    report = GateReport(
        n_items=items.num_rows,
        n_admitted=admitted_table.num_rows,
        excluded=dict(excluded),
        kappa=kappa,
        count_box_agreement=_count_box_agreement(admitted_table) if admitted_table.num_rows else None,
        pair_decisions=_pair_decisions(annotations, items),
        passed=not failures,
        failures=failures,
    )
    if failures:
        err = GateError("Release refused: " + "; ".join(failures) + ". Nothing was written.")
        err.report = report  # the CLI writes it beside the refused release for the curator
        raise err
    with tempfile.TemporaryDirectory(prefix="witness-gate-") as tmp:
        admitted_path = write_table(admitted_table, Path(tmp) / "admitted.parquet")
        extra = {
            "gate/report.json": json.dumps(report.to_dict(), indent=2, default=str).encode(),
            "gate/report.md": render_gate_markdown(report).encode(),
        }
        rel = release([admitted_path], out_dir, test_fraction=test_fraction, seed=seed, extra_files=extra,
                      card_links={"Release gate report": "gate/report.md"})
    final = GateReport(**{**report.__dict__, "release": rel.to_dict()})
    return final
