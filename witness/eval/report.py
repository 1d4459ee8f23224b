"""Suite reports: the frozen result of every suite, its JSON file, the per-sample detail beside it,
and the side-by-side Markdown comparison laid out as Table IV of RoadSceneVQA-G.

A report is ``{"suite", "n", "parse_rate", "missing", "metrics": {...}, "by": {"qtype": {...},
"category": {...}}}`` with fractions in [0, 1] (tables show percent) and null for undefined
values. :func:`write_report` writes ``REPORT.json`` and, beside it, ``REPORT.samples.parquet``:
one row per sample with the suite's per-sample quantities, the missed reference boxes and the extra
predicted boxes (pixel xyxy), for the UI.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InputError
from ..io import atomic_path, write_table
from ..schema import CATEGORIES, QTYPES

__all__ = [
    "SuiteReport",
    "group_metrics",
    "sample_table",
    "samples_path",
    "write_report",
    "read_report",
    "render_markdown",
]


def _clean(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        return None if math.isnan(f) or math.isinf(f) else f
    return obj


@dataclass(frozen=True)
class SuiteReport:
    """One suite's result: overall ``metrics``, ``by`` group, and the per-sample ``samples`` table."""

    suite: str
    n: int
    parse_rate: float
    missing: int
    metrics: dict
    by: dict = field(default_factory=dict)
    samples: pa.Table | None = None

    def to_dict(self) -> dict:
        """The JSON form (NaN → null).

        >>> SuiteReport("agc", 2, 1.0, 0, {"gda": float("nan")}).to_dict()["metrics"]
        {'gda': None}
        """
        return _clean(
            {
                "suite": self.suite,
                "n": self.n,
                "parse_rate": self.parse_rate,
                "missing": self.missing,
                "metrics": self.metrics,
                "by": self.by,
            }
        )


def _order(values: list, vocab: Sequence[str]) -> list:
    present = {v for v in values if v is not None}
    return [v for v in vocab if v in present] + sorted(present - set(vocab))


def group_metrics(s: Any, fn: Callable[[np.ndarray], dict], keys: Sequence[str] = ("qtype", "category"), *,
                  grouped: Callable[[np.ndarray, int], list] | None = None) -> dict:
    """``{key: {value: {"n": count, **fn(mask)}}}`` for each grouping column the samples carry.

    ``grouped(codes, n_groups)``, when given, returns the metrics of every group at once (a list
    indexed by group code) in place of one ``fn(mask)`` call per group.
    """
    by: dict[str, dict] = {}
    for key in keys:
        if key not in s.columns:
            continue
        enc = s.arrow(key).dictionary_encode()
        names = enc.dictionary.to_pylist()
        # null -> its own code len(names), never reported
        codes = np.asarray(pc.fill_null(enc.indices, len(names)).to_numpy(zero_copy_only=False), dtype=np.int64)
        vocab = QTYPES if key == "qtype" else CATEGORIES if key == "category" else ()
        groups = {}
        counts = np.bincount(codes, minlength=len(names) + 1)
        if grouped is not None:
            all_groups = grouped(codes, len(names) + 1)
        for v in _order(names, vocab):
            k = names.index(v)
            groups[v] = {"n": int(counts[k]), **(all_groups[k] if grouped is not None else fn(codes == k))}
        if groups:
            by[key] = groups
    return by


def _ragged(boxes: np.ndarray, offsets: np.ndarray, keep: np.ndarray) -> pa.Array:
    rows = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    counts = np.bincount(rows[keep], minlength=len(offsets) - 1)
    off = np.zeros(len(counts) + 1, dtype=np.int32)
    np.cumsum(counts, out=off[1:])
    inner = pa.FixedSizeListArray.from_arrays(pa.array(boxes[keep].reshape(-1), pa.float32()), 4)
    inner = inner.cast(pa.list_(pa.float32()))
    return pa.ListArray.from_arrays(pa.array(off), inner)


def sample_table(
    s: Any,
    columns: Mapping[str, Any],
    *,
    pred_matched: np.ndarray | None = None,
    ref_matched: np.ndarray | None = None,
) -> pa.Table:
    """The per-sample detail: id, answers, qtype/category, ``columns``, missed and extra boxes."""
    data: dict[str, Any] = {"id": s.arrow("id")}
    data["answer"] = s.arrow("pred_answers")
    if "answer" in s.columns:
        data["ref_answer"] = s.arrow("answer")
    for k in ("qtype", "category"):
        if k in s.columns:
            data[k] = s.arrow(k)
    data["missing"] = pa.array(s.missing)
    data["parsed"] = pa.array(s.parsed)
    for k, v in columns.items():
        data[k] = pa.array(np.asarray(v))
    if ref_matched is not None:
        data["missed_boxes"] = _ragged(s.ref_boxes, s.ref_offsets, ~np.asarray(ref_matched, dtype=bool))
    if pred_matched is not None:
        data["extra_boxes"] = _ragged(s.pred_boxes, s.pred_offsets, ~np.asarray(pred_matched, dtype=bool))
    return pa.table(data)


def samples_path(report_path: str | os.PathLike) -> Path:
    """``out/m1.json`` → ``out/m1.samples.parquet``.

    >>> samples_path("out/m1.json").as_posix()
    'out/m1.samples.parquet'
    """
    p = Path(report_path)
    return p.with_name(p.stem + ".samples.parquet")


def write_report(report: SuiteReport, path: str | os.PathLike, *, model: str | None = None) -> Path:
    """Write ``report`` as JSON at ``path`` (atomically) and its samples beside it.

    >>> import tempfile, pathlib
    >>> p = write_report(SuiteReport("grec", 1, 1.0, 0, {"pr_f1_1": 1.0}), pathlib.Path(tempfile.mkdtemp()) / "r.json",
    ...                  model="m")
    >>> read_report(p)["metrics"], read_report(p)["model"]
    ({'pr_f1_1': 1.0}, 'm')
    """
    path = Path(path)
    d = report.to_dict()
    if model:
        d["model"] = model
    with atomic_path(path, suffix=".json") as tmp:
        tmp.write_bytes(orjson.dumps(d, option=orjson.OPT_INDENT_2))
    if report.samples is not None:
        write_table(report.samples, samples_path(path))
    return path


def read_report(path: str | os.PathLike) -> dict:
    """Read a report JSON written by :func:`write_report`; errors name the file (a report without
    ``model`` is named after its file). Example: :func:`write_report`."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"Expected a report JSON file, got a path that does not exist ({path}).")
    try:
        d = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise InputError(f"Expected a report JSON file, got malformed JSON ({path}): {exc}.") from None
    if not isinstance(d, dict) or "suite" not in d or "metrics" not in d:
        raise InputError(f"Expected a witness eval report with 'suite' and 'metrics', got something else ({path}).")
    d.setdefault("model", path.stem)
    return d


def _pct(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{100.0 * float(v):.1f}"


def _num(v: Any) -> str:
    if v is None:
        return "–"
    return f"{v:.2f}" if isinstance(v, float) else str(v)


# Table IV of RoadSceneVQA-G: answer quality, grounding, AGC (decision / consistency / joint).
_TABLE_IV = [("F1", "f1"), ("AP", "ap"), ("GDA", "gda"), ("SPC", "spc"), ("CntAcc", "cnt_acc"), ("GCA", "gca_l")]
_TEXT = [("METEOR", "text_meteor"), ("BERTScore", "text_bertscore")]
_TABLE_XVII = [("F1", "f1"), ("GDA", "gda"), ("SPC", "spc"), ("CntAcc", "cnt_acc"), ("GCA-l", "gca_l")]
_COUNT_KEYS = {"spc_support", "n", "n_pairs", "n_skipped", "n_ambiguous", "count_mae", "cnt_mae", "ambiguous"}


def _cell(key: str, v: Any) -> str:
    return _num(v) if key in _COUNT_KEYS or key.endswith("_mae") or key.startswith("n_") else _pct(v)


def render_markdown(reports: Sequence[Mapping[str, Any]]) -> str:
    """Several models side by side: AGC reports as Table IV of RoadSceneVQA-G (percent; AP is
    AP@[.50:.95], GCA is GCA-l) plus the per-category breakdown of its Table XVII; other suites as
    one table of their metric keys each, and per category where reported.

    >>> md = render_markdown([{"model": "m", "suite": "agc", "n": 1, "parse_rate": 1.0, "missing": 0,
    ...                        "metrics": {"f1": 0.5, "ap": 0.25, "gda": 1.0, "spc": None, "cnt_acc": 1.0, "gca_l": 0.0},
    ...                        "by": {}}])
    >>> md.splitlines()[4]
    '| m | ✓ | – | – | 50.0 | 25.0 | 100.0 | – | 100.0 | 0.0 |'
    """
    if not reports:
        raise InputError("Expected at least one report, got none. Pass REPORT.json files.")
    out: list[str] = []
    suites: dict[str, list] = {}
    for r in reports:
        suites.setdefault(r["suite"], []).append(r)
    for suite, rs in suites.items():
        if suite == "agc":
            out.append("## AGC (Table IV layout)\n")
            cols = ["Method", "Ans."] + [c for c, _ in _TEXT] + [c for c, _ in _TABLE_IV]
            out.append("| " + " | ".join(cols) + " |")
            out.append("|" + "---|" * len(cols))
            for r in rs:
                m = r["metrics"]
                ans = "✓" if r.get("answers", True) else "×"
                vals = [_pct(m.get(k)) for _, k in _TEXT] + [_pct(m.get(k)) for _, k in _TABLE_IV]
                out.append("| " + " | ".join([str(r["model"]), ans] + vals) + " |")
            out.append("")
            out.append(
                "AP denotes AP@[.50:.95]; GCA denotes GCA-l. "
                + "; ".join(f"{r['model']}: n={r['n']}, parse rate {_pct(r['parse_rate'])}%, missing {r['missing']}" for r in rs)
                + ".\n"
            )
            cats = _order([c for r in rs for c in r.get("by", {}).get("category", {})], CATEGORIES)
            if cats:
                out.append("### Per category (Table XVII layout)\n")
                head = ["Category", "n"] + [f"{c} {r['model']}" for c, _ in _TABLE_XVII for r in rs]
                out.append("| " + " | ".join(head) + " |")
                out.append("|" + "---|" * len(head))
                for cat in cats:
                    g0 = next((r["by"]["category"][cat] for r in rs if cat in r.get("by", {}).get("category", {})), {})
                    row = [cat.replace("_", " "), str(g0.get("n", "–"))]
                    for _, k in _TABLE_XVII:
                        for r in rs:
                            row.append(_pct(r.get("by", {}).get("category", {}).get(cat, {}).get(k)))
                    out.append("| " + " | ".join(row) + " |")
                out.append("")
            continue
        keys = list(dict.fromkeys(k for r in rs for k in r["metrics"]))
        out.append(f"## {suite}\n")
        out.append("| Method | n | " + " | ".join(keys) + " |")
        out.append("|" + "---|" * (len(keys) + 2))
        for r in rs:
            out.append("| " + " | ".join([str(r["model"]), str(r["n"])] + [_cell(k, r["metrics"].get(k)) for k in keys]) + " |")
        out.append("")
        for group in ("category", "qtype"):
            vals = _order([c for r in rs for c in r.get("by", {}).get(group, {})], CATEGORIES if group == "category" else QTYPES)
            if not vals:
                continue
            out.append(f"### {suite} per {group}\n")
            out.append(f"| {group} | Method | " + " | ".join(keys) + " |")
            out.append("|" + "---|" * (len(keys) + 2))
            for v in vals:
                for r in rs:
                    g = r.get("by", {}).get(group, {}).get(v)
                    if g is None:
                        continue
                    out.append("| " + " | ".join([v, str(r["model"])] + [_cell(k, g.get(k)) for k in keys]) + " |")
            out.append("")
    return "\n".join(out).rstrip() + "\n"
