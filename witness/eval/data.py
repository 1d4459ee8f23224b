"""Reference items and model predictions, read and aligned into columnar :class:`Samples`.

Every suite scores :class:`Samples`: one row per reference item, in GT-file order, with the
reference boxes and the prediction's boxes as flat ``(N, 4)`` pixel ``xyxy`` arrays plus offsets
(``boxes[offsets[i]:offsets[i+1]]`` belong to row ``i``). Nothing is a Python object per box.

Alignment rules (``shared/ARCHITECTURE.md``, eval issue):

* a reference item without a prediction scores as an empty answer with no boxes, and is counted in
  ``missing``;
* a prediction whose id is not a reference item is an error listing the first few such ids;
* a ``{"id", "raw"}`` prediction is parsed with :func:`witness.eval.parse.parse` using the item's
  width and height and the named format (required then); an unparsed output is an empty answer with
  no boxes and lowers ``parse_rate`` = parsed predictions / predictions present;
* a prediction without ``scores`` scores 1.0 for every box.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InputError, SchemaError, where
from ..io import Predictions, iter_jsonl, read_predictions, read_predictions_fast, read_table
from ..schema import ITEM_SCHEMA, flat_boxes

__all__ = [
    "Samples",
    "SUITE_COLUMNS",
    "read_gt",
    "align",
    "load_samples",
    "samples_from_records",
    "predictions_from_records",
    "concat_samples",
    "read_predictions_fast",  # lives in witness.io; re-exported here for existing callers
]

#: The item columns each suite reads (``id``, ``width``, ``height`` always).
SUITE_COLUMNS: dict[str, list[str]] = {
    "agc": ["answer", "boxes", "qtype", "category"],
    "aesp": ["question", "answer", "boxes", "labels", "count", "qtype", "targets", "relation"],
    "pairs": ["answer", "qtype", "category", "pair_id", "pair_role"],
    "grec": ["boxes", "qtype", "category"],
    "count": ["answer", "boxes", "qtype", "category"],
}
_BASE = ["id", "width", "height"]
#: Columns a suite can do without (filled with nulls when the file lacks them).
_OPTIONAL = {"qtype", "category", "labels", "count", "targets", "relation", "question"}


@dataclass(frozen=True)
class Samples:
    """Reference items aligned with predictions (one row per item, GT-file order).

    ``ref_*`` come from the items, ``pred_*`` from the predictions; ``columns`` holds the other
    item columns the suite asked for (``qtype``, ``category``, ``labels`` flat and parallel to
    ``ref_boxes``, ...). ``missing[i]``: no prediction for row ``i``; ``parsed[i]``: a prediction
    is present and was parsed (structured lines always are).
    """

    ids: list[str]
    width: np.ndarray
    height: np.ndarray
    ref_boxes: np.ndarray
    ref_offsets: np.ndarray
    pred_boxes: np.ndarray
    pred_scores: np.ndarray
    pred_offsets: np.ndarray
    pred_answers: list[str]
    missing: np.ndarray
    parsed: np.ndarray
    columns: dict[str, Any] = field(default_factory=dict)
    source: str | None = None
    _arrow: dict = field(default_factory=dict, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def n_ref(self) -> np.ndarray:
        return np.diff(self.ref_offsets)

    @property
    def n_pred(self) -> np.ndarray:
        return np.diff(self.pred_offsets)

    @property
    def parse_rate(self) -> float:
        present = int((~self.missing).sum())
        return float(self.parsed.sum() / present) if present else float("nan")

    def arrow(self, name: str) -> pa.Array:
        """A string column as an Arrow array (``id``, ``pred_answers`` or an item column), built once.

        The vectorized paths (ν, answer matching, grouping, the samples table) read these instead
        of converting the Python lists again.
        """
        if name not in self._arrow:
            values = self.ids if name == "id" else self.pred_answers if name == "pred_answers" else self.column(name)
            self._arrow[name] = pa.array(values, pa.string())
        return self._arrow[name]

    def column(self, name: str) -> Any:
        if name not in self.columns:
            raise SchemaError(
                f"Expected the item column {name!r}, got a GT without it ({self.source or 'items'}). "
                f"Add {name!r} to the items."
            )
        return self.columns[name]


def _file_columns(path: Path) -> set[str]:
    if path.suffix.lower() in {".jsonl", ".json", ".ndjson"}:
        keys: set[str] = set()
        for k, (_, obj) in enumerate(iter_jsonl(path)):
            keys.update(obj)
            if k >= 999:
                break
        return keys
    import pyarrow.parquet as pq

    try:
        return set(pq.read_schema(path).names)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"Expected a Parquet or JSONL items file, got unreadable data ({path}): {exc}.") from None


def read_gt(path: str | os.PathLike, suite: str | Sequence[str]) -> pa.Table:
    """Read the item columns ``suite`` needs (a suite name or a column list) from Parquet/JSONL.

    Raises :class:`SchemaError` naming a required column the file lacks, a duplicate id, or a
    reference box that is not finite with ``x1 < x2`` and ``y1 < y2``; :class:`InputError` for a
    missing or empty file.

    >>> import tempfile, pathlib
    >>> from witness.io import write_jsonl
    >>> p = write_jsonl([{"id": "a", "image_id": "i", "width": 9, "height": 9, "question": "Q?", "answer": "1"}],
    ...                 pathlib.Path(tempfile.mkdtemp()) / "items.jsonl")
    >>> read_gt(p, "pairs").column_names  # pair_id and pair_role are not in the file
    Traceback (most recent call last):
    ...
    witness.errors.SchemaError: Expected the item column(s) ['pair_id', 'pair_role'] that pairs needs, got a file without them (...). Evaluate against released items (witness dataset release).
    """
    return _read_gt(path, suite)[0]


def _read_gt(path: str | os.PathLike, suite: str | Sequence[str]) -> tuple[pa.Table, tuple[np.ndarray, np.ndarray] | None]:
    """:func:`read_gt`, plus the flat reference boxes it checked (``None`` without a boxes column)."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"Expected an items file, got a path that does not exist ({path}). Check the path.")
    if path.is_file() and path.stat().st_size == 0:
        raise InputError(f"Expected item records, got an empty file ({path}).")
    wanted = list(SUITE_COLUMNS[suite]) if isinstance(suite, str) else list(suite)
    columns = _BASE + [c for c in wanted if c not in _BASE]
    if path.is_file():
        have = _file_columns(path)
        if not have:
            raise InputError(f"Expected item records, got an empty file ({path}).")
        lacking = [c for c in columns if c not in have and c not in _OPTIONAL]
        if lacking:
            name = suite if isinstance(suite, str) else "this suite"
            raise SchemaError(
                f"Expected the item column(s) {lacking} that {name} needs, got a file without them ({path}). "
                "Evaluate against released items (witness dataset release)."
            )
    table = read_table(path, "item", columns=columns)
    if table.num_rows == 0:
        raise InputError(f"Expected item records, got none ({path}).")
    if pc.count_distinct(table.column("id")).as_py() != table.num_rows:
        ids = table.column("id").to_pylist()
        seen: dict[str, int] = {}
        for r, i in enumerate(ids):
            if i in seen:
                raise SchemaError(
                    f"Expected unique item ids, got {i!r} twice ({where(path, r, i, 'id')}; first at row {seen[i]}). "
                    "Give every item its own id."
                )
            seen[i] = r
    ref = _check_ref_boxes(table, None, path) if "boxes" in columns else None
    return table, ref


def _check_ref_boxes(table: pa.Table, ids: list, path: object) -> tuple[np.ndarray, np.ndarray]:
    """Check the reference boxes of ``table``; return them flat (``flat_boxes``)."""
    xyxy, offsets = flat_boxes(table.column("boxes"))
    if len(xyxy) == 0:
        return xyxy, offsets
    bad = ~(np.isfinite(xyxy).all(axis=1) & (xyxy[:, 0] < xyxy[:, 2]) & (xyxy[:, 1] < xyxy[:, 3]))
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        r = int(np.searchsorted(offsets, k, side="right") - 1)
        ids = ids if ids is not None else table.column("id").to_pylist()
        raise SchemaError(
            f"Expected a finite reference box with x1 < x2 and y1 < y2, got {xyxy[k].tolist()} "
            f"({where(path, r, ids[r], 'boxes')}). Fix the box in the items."
        )
    return xyxy, offsets


def _gather(flat: np.ndarray, offsets: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``rows`` (−1: empty) of a ragged array, as a new flat array and offsets."""
    counts = np.where(rows >= 0, np.diff(offsets)[np.maximum(rows, 0)] if len(offsets) > 1 else 0, 0)
    new_off = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(counts, out=new_off[1:])
    starts = np.where(rows >= 0, offsets[np.maximum(rows, 0)] if len(offsets) > 1 else 0, 0)
    idx = np.repeat(starts - new_off[:-1], counts) + np.arange(new_off[-1])
    return flat[idx], new_off


def _pylist(arr: pa.Array) -> list:
    """``arr.to_pylist()`` of a string array; a column with few distinct values (qtype, category,
    answers) is decoded through its dictionary, one Python string per distinct value."""
    enc = arr.dictionary_encode()
    if len(enc.dictionary) * 4 > len(arr):
        return arr.to_pylist()
    values = np.asarray(enc.dictionary.to_pylist() + [None], dtype=object)
    indices = pc.fill_null(enc.indices, len(values) - 1) if enc.indices.null_count else enc.indices
    return values[np.asarray(indices.to_numpy(zero_copy_only=False), dtype=np.int64)].tolist()


def _to_numpy(col: Any, dtype: Any) -> np.ndarray:
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=dtype)


def align(gt: pa.Table, preds: Predictions, *, fmt: str | None = None, source: object = None,
          pred_source: object = None, _ref: tuple[np.ndarray, np.ndarray] | None = None) -> Samples:
    """Align predictions to the reference items of ``gt`` (see the module rules).

    >>> from witness.schema import item_record, items_table
    >>> gt = items_table([item_record("q1", "i", 100, 100, "Any car?", "yes", [[0, 0, 10, 10]], ["car"])])
    >>> s = align(gt, predictions_from_records([{"id": "q1", "answer": "yes", "boxes": [[0, 0, 9, 9]]}]))
    >>> s.n_pred.tolist(), s.missing.tolist(), s.parse_rate
    ([1], [False], 1.0)
    """
    ids = gt.column("id").to_pylist()
    n = len(ids)
    width = _to_numpy(gt.column("width"), np.float64)
    height = _to_numpy(gt.column("height"), np.float64)
    if "boxes" in gt.column_names:
        # _ref: flat_boxes of this very table, already computed by the caller (load_samples)
        ref_boxes, ref_off = _ref if _ref is not None else flat_boxes(gt.column("boxes"))
    else:
        ref_boxes, ref_off = np.zeros((0, 4)), np.zeros(n + 1, dtype=np.int64)
    pos = pc.index_in(pa.array(preds.ids, pa.string()), value_set=gt.column("id").combine_chunks())
    found = pos.is_valid().to_numpy(zero_copy_only=False)
    rows = np.full(n, -1, dtype=np.int64)
    rows[pc.fill_null(pos, 0).to_numpy(zero_copy_only=False)[found]] = np.flatnonzero(found)
    unknown = [preds.ids[j] for j in np.flatnonzero(~found)[:5].tolist()]
    if unknown:
        unknown_n = int((~found).sum())
        raise InputError(
            f"Expected predictions for reference items only, got {unknown_n} unknown id(s) {unknown} "
            f"({pred_source or 'predictions'}). Evaluate against the items the predictions were made for."
        )
    if len(preds.scores) and not np.isfinite(preds.scores).all():
        k = int(np.flatnonzero(~np.isfinite(preds.scores))[0])
        j = int(np.searchsorted(preds.offsets, k, side="right") - 1)
        raise InputError(
            f"Expected finite scores, got {preds.scores[k]} ({pred_source or 'predictions'} line "
            f"{int(preds.line_numbers[j])}, id {preds.ids[j]!r}). Fix the scores."
        )
    missing = rows < 0
    pred_boxes, pred_off = _gather(preds.boxes, preds.offsets, rows)
    pred_scores, _ = _gather(preds.scores[:, None], preds.offsets, rows)
    pred_scores = pred_scores[:, 0]
    answers = [""] * n
    parsed = ~missing
    if preds.raw.count(None) == len(preds.raw):  # no raw line at all (C-speed check): nothing to parse
        raw_rows = []
    else:
        raw_rows = [i for i in np.flatnonzero(~missing).tolist() if preds.raw[rows[i]] is not None]
    if raw_rows:
        if fmt is None:
            i = raw_rows[0]
            from .parse import FORMATS

            raise InputError(
                f"Expected --format for raw model outputs, got none (id {ids[i]!r}, {pred_source or 'predictions'} "
                f"line {int(preds.line_numbers[rows[i]])}). Name one of {sorted(FORMATS)}."
            )
        from .parse import get_format, parse

        get_format(fmt)  # an unknown name fails before any parsing
        parsed = parsed.copy()
        new_boxes: dict[int, np.ndarray] = {}
        for i in raw_rows:
            p = parse(preds.raw[rows[i]], fmt, width=float(width[i]), height=float(height[i]))
            if p.ok:
                answers[i] = p.answer or ""
                new_boxes[i] = np.asarray(p.boxes, dtype=np.float64).reshape(-1, 4)
            else:
                parsed[i] = False
                new_boxes[i] = np.zeros((0, 4))
        raw_set = set(raw_rows)
        parts, sparts, counts = [], [], np.diff(pred_off).copy()
        for i in range(n):
            if i in raw_set:
                b = new_boxes[i]
                parts.append(b)
                sparts.append(np.ones(len(b)))
                counts[i] = len(b)
            else:
                parts.append(pred_boxes[pred_off[i] : pred_off[i + 1]])
                sparts.append(pred_scores[pred_off[i] : pred_off[i + 1]])
        pred_boxes = np.concatenate(parts) if parts else np.zeros((0, 4))
        pred_scores = np.concatenate(sparts) if sparts else np.zeros(0)
        pred_off = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=pred_off[1:])
    if len(preds.ids):
        structured = np.asarray([a or "" for a in preds.answers], dtype=object)[np.maximum(rows, 0)]
        keep = ~missing
        if raw_rows:
            keep[raw_rows] = False
        answers = np.where(keep, structured, np.asarray(answers, dtype=object)).tolist()
    columns: dict[str, Any] = {}
    arrow: dict[str, pa.Array] = {"id": gt.column("id").combine_chunks()}
    for name in gt.column_names:
        if name in ("id", "width", "height", "boxes"):
            continue
        col = gt.column(name)
        if col.type == pa.string():
            arrow[name] = pc.fill_null(col, "").combine_chunks() if name == "answer" else col.combine_chunks()
        if name == "labels":
            lab = col.combine_chunks()
            if lab.null_count:
                lab = pc.fill_null(lab, pa.scalar([], lab.type))
            columns["labels"] = np.asarray(pc.list_flatten(lab).to_pylist(), dtype=object)
        elif name in ("count", "pair_role"):
            columns[name] = _to_numpy(pc.fill_null(col, -1), np.int64)
        elif col.type == pa.string():
            columns[name] = _pylist(arrow[name])  # "answer": nulls already filled with ""
        else:
            columns[name] = col.to_pylist()
    if "answer" in columns and gt.schema.field("answer").type != pa.string():
        columns["answer"] = ["" if a is None else a for a in columns["answer"]]
    return Samples(
        ids=ids,
        width=width,
        height=height,
        ref_boxes=np.asarray(ref_boxes, dtype=np.float64).reshape(-1, 4),
        ref_offsets=np.asarray(ref_off, dtype=np.int64),
        pred_boxes=np.asarray(pred_boxes, dtype=np.float64).reshape(-1, 4),
        pred_scores=np.asarray(pred_scores, dtype=np.float64),
        pred_offsets=pred_off,
        pred_answers=answers,
        missing=missing,
        parsed=parsed,
        columns=columns,
        source=None if source is None else str(source),
        _arrow=arrow,
    )


def load_samples(gt_path: str | os.PathLike, pred_path: str | os.PathLike, suite: str | Sequence[str], *,
                 fmt: str | None = None) -> Samples:
    """Read the items (only the columns ``suite`` needs) and the predictions, and align them.

    >>> import tempfile, pathlib
    >>> from witness.io import write_jsonl
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> gt = write_jsonl([{"id": "a", "image_id": "i", "width": 9, "height": 9, "question": "Q?", "answer": "1",
    ...                    "boxes": [[0, 0, 4, 4]]}], d / "items.jsonl")
    >>> pred = write_jsonl([{"id": "a", "answer": "one", "boxes": [[0, 0, 4, 4]], "scores": [0.5]}], d / "p.jsonl")
    >>> s = load_samples(gt, pred, "agc")
    >>> s.pred_answers, s.pred_scores.tolist(), s.columns["qtype"]
    (['one'], [0.5], [None])
    """
    gt, ref = _read_gt(gt_path, suite)
    preds = read_predictions_fast(pred_path)
    return align(gt, preds, fmt=fmt, source=gt_path, pred_source=pred_path, _ref=ref)


def predictions_from_records(records: Iterable[Mapping[str, Any]]) -> Predictions:
    """Build columnar :class:`~witness.io.Predictions` from prediction dicts (training loops, tests).

    Same checks as :func:`witness.io.read_predictions` (ids, box shape, finite ordered boxes,
    one score per box), with "record k" in place of a line number.

    >>> p = predictions_from_records([{"id": "a", "answer": "2", "boxes": [[0, 0, 1, 1]], "scores": [0.5]}])
    >>> p.boxes.shape, p.scores.tolist()
    ((1, 4), [0.5])
    """
    import tempfile

    import orjson

    recs = list(records)
    if not recs:
        raise InputError("Expected predictions, got none (records). Pass at least one prediction.")
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "records.jsonl"
        with open(p, "wb") as fh:
            for r in recs:
                fh.write(orjson.dumps(dict(r), option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
        return read_predictions(p)


def samples_from_records(items: pa.Table | Iterable[Mapping[str, Any]], predictions: Any, *,
                         fmt: str | None = None) -> Samples:
    """Align items (a table or :func:`~witness.schema.item_record` dicts) with predictions
    (:class:`~witness.io.Predictions` or prediction dicts): the in-memory twin of
    :func:`load_samples`.

    >>> from witness.schema import item_record
    >>> s = samples_from_records([item_record("q", "i", 10, 10, "How many?", "1", [[0, 0, 5, 5]], ["car"])],
    ...                          [{"id": "q", "answer": "1", "boxes": [[0, 0, 5, 5]]}])
    >>> len(s), s.n_ref.tolist()
    (1, [1])
    """
    from ..schema import items_table

    table = items if isinstance(items, pa.Table) else items_table([dict(r) for r in items])
    if table.num_rows == 0:
        raise InputError("Expected item records, got none (records).")
    table = table.select([c for c in ITEM_SCHEMA.names if c in table.column_names and c != "image"])
    ids = table.column("id").to_pylist()
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise SchemaError(f"Expected unique item ids, got {dup!r} twice (records). Give every item its own id.")
    if "boxes" in table.column_names:
        _check_ref_boxes(table, ids, "records")
    preds = predictions if isinstance(predictions, Predictions) else predictions_from_records(predictions)
    return align(table, preds, fmt=fmt, source="records", pred_source="records")


def _cat_offsets(offs: list[np.ndarray]) -> np.ndarray:
    out = [np.zeros(1, dtype=np.int64)]
    base = 0
    for o in offs:
        out.append(o[1:] + base)
        base += int(o[-1])
    return np.concatenate(out)


def concat_samples(parts: Sequence[Samples]) -> Samples:
    """Concatenate aligned batches (the accumulating metric classes); ids must stay unique.

    >>> from witness.schema import item_record
    >>> a = samples_from_records([item_record("a", "i", 9, 9, "Q?", "1", [[0, 0, 1, 1]], ["x"])], [{"id": "a"}])
    >>> b = samples_from_records([item_record("b", "i", 9, 9, "Q?", "0")], [{"id": "b"}])
    >>> concat_samples([a, b]).ref_offsets.tolist()
    [0, 1, 1]
    """
    parts = list(parts)
    if len(parts) == 1:
        return parts[0]
    ids = [i for p in parts for i in p.ids]
    if len(set(ids)) != len(ids):
        seen: set[str] = set()
        dup = next(i for i in ids if i in seen or seen.add(i))
        raise SchemaError(f"Expected unique item ids across updates, got {dup!r} twice. Add each item once.")
    names = set.intersection(*[set(p.columns) for p in parts])
    columns: dict[str, Any] = {}
    for k in names:
        vals = [p.columns[k] for p in parts]
        columns[k] = np.concatenate(vals) if isinstance(vals[0], np.ndarray) else [v for part in vals for v in part]
    return Samples(
        ids=ids,
        width=np.concatenate([p.width for p in parts]),
        height=np.concatenate([p.height for p in parts]),
        ref_boxes=np.concatenate([p.ref_boxes for p in parts]),
        ref_offsets=_cat_offsets([p.ref_offsets for p in parts]),
        pred_boxes=np.concatenate([p.pred_boxes for p in parts]),
        pred_scores=np.concatenate([p.pred_scores for p in parts]),
        pred_offsets=_cat_offsets([p.pred_offsets for p in parts]),
        pred_answers=[a for p in parts for a in p.pred_answers],
        missing=np.concatenate([p.missing for p in parts]),
        parsed=np.concatenate([p.parsed for p in parts]),
        columns=columns,
        source=parts[0].source,
    )
