"""Reading and writing records: Parquet and JSONL, streamed, written atomically.

* :func:`read_table` reads a Parquet or JSONL file (only the columns asked for) and conforms it to
  a record schema; :func:`iter_batches` streams a Parquet file batch by batch.
* :func:`write_table` writes Parquet atomically: to a temporary file beside the target, then
  ``os.replace``. A crash leaves the old file or the new one, never half of one.
* :func:`read_predictions` streams predictions JSONL with orjson, checking each line;
  :func:`read_predictions_fast` reads well-formed files columnar (pyarrow) with the same result.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Collection, Iterator

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .errors import InputError, SchemaError
from .schema import _ID_KEY, conform, validate_annotations, validate_items, validate_scenes

__all__ = [
    "atomic_path",
    "atomic_dir",
    "read_table",
    "iter_batches",
    "write_table",
    "write_jsonl",
    "iter_jsonl",
    "read_scenes",
    "read_items",
    "read_annotations",
    "Predictions",
    "read_predictions",
    "read_predictions_fast",
]


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it onto ``path``.

    On an exception the temporary file is removed and ``path`` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix or ".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary directory beside ``path``; on success it replaces ``path`` whole.

    The old directory (if any) is moved aside, the new one renamed into place, then the old one
    deleted; on an exception the temporary directory is deleted and ``path`` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if path.exists():
        old = path.parent / f".{path.name}.old-{os.getpid()}"
        os.replace(path, old)
    os.replace(tmp, path)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _is_jsonl(path: Path) -> bool:
    return path.suffix.lower() in {".jsonl", ".json", ".ndjson"}


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, object)`` for each non-blank line; a malformed line raises
    :class:`InputError` naming the file and line.
    """
    path = Path(path)
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise InputError(
                    f"Expected one JSON object per line, got malformed JSON ({path} line {lineno}): {exc}. "
                    "Fix or remove the line."
                ) from None
            if not isinstance(obj, dict):
                raise InputError(
                    f"Expected a JSON object, got {type(obj).__name__} ({path} line {lineno}). Write one object per line."
                )
            yield lineno, obj


def _read_jsonl_table(path: Path, record: str) -> pa.Table:
    from .schema import _SCHEMAS  # the schema registry is private to schema.py

    rows = [obj for _, obj in iter_jsonl(path)]
    schema = _SCHEMAS[record]
    known = [n for n in schema.names if any(n in r for r in rows[:1000])] or [schema.names[0]]
    sub = pa.schema([schema.field(n) for n in known])
    try:
        if record == "scene":
            for r in rows:
                for o in r.get("objects") or []:
                    if isinstance(o.get("attributes"), dict):
                        o["attributes"] = list(o["attributes"].items())
        return pa.Table.from_pylist([{k: r.get(k) for k in known} for r in rows], schema=sub)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise SchemaError(f"Expected {record} records, got values that do not fit the schema ({path}): {exc}.") from None


def read_table(
    path: str | os.PathLike,
    record: str,
    *,
    columns: list[str] | None = None,
    ids: Collection[str] | None = None,
) -> pa.Table:
    """Read a Parquet or JSONL file (or a directory of Parquet files, such as a release) of
    ``record`` records, conformed to the record's schema.

    ``columns`` reads only those columns (Parquet reads nothing else from disk); a missing required
    column raises :class:`SchemaError` naming it. ``ids`` keeps only the records whose key (``id``,
    ``image_id`` for scenes, ``item_id`` for annotations) is listed, reading Parquet batch by batch
    so that a large file with embedded images never sits in memory whole.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"Expected a {record} file, got a path that does not exist ({path}). Check the path.")
    if path.is_dir():
        files = sorted(path.glob("*.parquet")) or sorted(path.glob("**/*.parquet"))
        if not files:
            raise InputError(f"Expected Parquet files in the directory, found none ({path}).")
        return pa.concat_tables([read_table(f, record, columns=columns, ids=ids) for f in files])
    if path.stat().st_size == 0:
        raise InputError(f"Expected {record} records, got an empty file ({path}).")
    key = _ID_KEY[record]
    wanted_ids = None if ids is None else pa.array(sorted({str(i) for i in ids}), pa.string())
    if _is_jsonl(path):
        table = _read_jsonl_table(path, record)
        if wanted_ids is not None:
            table = table.filter(pc.is_in(table.column(key), value_set=wanted_ids))
    else:
        try:
            pf = pq.ParquetFile(path)
        except (pa.ArrowInvalid, OSError) as exc:
            raise InputError(f"Expected a Parquet or JSONL file, got unreadable data ({path}): {exc}.") from None
        names = pf.schema_arrow.names
        wanted = None if columns is None else [c for c in columns if c in names]
        if wanted_ids is None:
            table = pf.read(columns=wanted)
        else:
            read_cols = None if wanted is None else list(dict.fromkeys([*wanted, key]))
            parts = [
                b.filter(pc.is_in(b.column(key), value_set=wanted_ids))
                for b in pf.iter_batches(batch_size=256, columns=read_cols)
            ]
            table = pa.Table.from_batches(parts, schema=pf.schema_arrow if read_cols is None else None) if parts else pf.schema_arrow.empty_table()
            if wanted is not None:
                table = table.select(wanted)
    return conform(table, record, source=path, columns=columns)


def iter_batches(
    path: str | os.PathLike, *, columns: list[str] | None = None, batch_size: int = 2048
) -> Iterator[pa.RecordBatch]:
    """Stream a Parquet file in record batches (bounded memory)."""
    pf = pq.ParquetFile(path)
    yield from pf.iter_batches(batch_size=batch_size, columns=columns)


def write_table(table: pa.Table, path: str | os.PathLike, *, row_group_size: int | None = None) -> Path:
    """Write ``table`` to Parquet at ``path`` atomically (temporary file, then rename)."""
    path = Path(path)
    with atomic_path(path, suffix=".parquet") as tmp:
        pq.write_table(table, tmp, row_group_size=row_group_size, compression="zstd")
    return path


def write_jsonl(rows, path: str | os.PathLike) -> Path:
    """Write an iterable of dicts to JSONL atomically."""
    path = Path(path)
    with atomic_path(path, suffix=".jsonl") as tmp, open(tmp, "wb") as fh:
        for row in rows:
            fh.write(orjson.dumps(row, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
    return path


def read_scenes(path: str | os.PathLike) -> tuple[pa.Table, object]:
    """Read and validate a scenes file; return ``(table, ValidationReport)``."""
    return validate_scenes(read_table(path, "scene"), source=path)


def read_items(path: str | os.PathLike, *, columns: list[str] | None = None, validate: bool = True):
    """Read an items file. With ``validate`` (and all columns) returns ``(table, ValidationReport)``;
    otherwise ``(table, None)``.
    """
    table = read_table(path, "item", columns=columns)
    if validate and columns is None:
        return validate_items(table, source=path)
    return table, None


def read_annotations(path: str | os.PathLike) -> pa.Table:
    """Read and validate an annotations file."""
    return validate_annotations(read_table(path, "annotation"), source=path)


@dataclass(frozen=True)
class Predictions:
    """Predictions read from JSONL, columnar.

    ``boxes[offsets[i]:offsets[i+1]]`` (pixel xyxy) and the matching ``scores`` belong to
    ``ids[i]``; ``has_scores[i]`` says whether the line carried scores (otherwise they are 1.0).
    ``raw[i]`` is the unparsed text for ``{"id", "raw"}`` lines, else None.
    """

    ids: list[str]
    answers: list[str | None]
    raw: list[str | None]
    boxes: np.ndarray
    scores: np.ndarray
    offsets: np.ndarray
    has_scores: np.ndarray
    line_numbers: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)

    def index(self) -> dict[str, int]:
        return {k: i for i, k in enumerate(self.ids)}


def read_predictions(path: str | os.PathLike) -> Predictions:
    """Stream a predictions JSONL file into columnar :class:`Predictions`.

    Each line is ``{"id", "answer", "boxes": [[x1,y1,x2,y2], ...], "scores"?}`` or
    ``{"id", "raw"}``. Errors name the file and line: malformed JSON, missing id, duplicate id,
    boxes that are not lists of four finite numbers with ``x1 <= x2`` and ``y1 <= y2``, a scores
    list whose length differs from the boxes'.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"Expected a predictions JSONL file, got a path that does not exist ({path}).")
    ids: list[str] = []
    answers: list[str | None] = []
    raws: list[str | None] = []
    counts: list[int] = []
    flat: list[float] = []
    scores: list[float] = []
    has_scores: list[bool] = []
    lines: list[int] = []
    seen: dict[str, int] = {}
    for lineno, obj in iter_jsonl(path):
        pid = obj.get("id")
        if pid is None or pid == "":
            raise InputError(f"Expected an 'id' in every prediction, got none ({path} line {lineno}). Key each line by item id.")
        pid = str(pid)
        if pid in seen:
            raise InputError(
                f"Expected one prediction per id, got {pid!r} again ({path} line {lineno}; first on line {seen[pid]}). "
                "Remove the duplicate."
            )
        seen[pid] = lineno
        boxes = obj.get("boxes") or []
        if not isinstance(boxes, list) or any(not isinstance(b, list) or len(b) != 4 for b in boxes):
            raise InputError(
                f"Expected 'boxes' as a list of [x1, y1, x2, y2], got {str(boxes)[:80]} ({path} line {lineno}, id {pid!r})."
            )
        sc = obj.get("scores")
        if sc is not None and (not isinstance(sc, list) or len(sc) != len(boxes)):
            raise InputError(
                f"Expected one score per box ({len(boxes)}), got {str(sc)[:80]} ({path} line {lineno}, id {pid!r})."
            )
        for b in boxes:
            try:
                vals = [float(v) for v in b]
            except (TypeError, ValueError):
                raise InputError(f"Expected numeric box coordinates, got {b} ({path} line {lineno}, id {pid!r}).") from None
            if not all(np.isfinite(vals)) or vals[0] > vals[2] or vals[1] > vals[3]:
                raise InputError(
                    f"Expected a finite box with x1 <= x2 and y1 <= y2, got {b} ({path} line {lineno}, id {pid!r}). "
                    "Fix the box or the output format."
                )
            flat.extend(vals)
        ids.append(pid)
        ans = obj.get("answer")
        answers.append(None if ans is None else str(ans))
        raw = obj.get("raw")
        raws.append(None if raw is None else str(raw))
        counts.append(len(boxes))
        if sc is None:
            scores.extend([1.0] * len(boxes))
        else:
            try:
                scores.extend(float(s) for s in sc)
            except (TypeError, ValueError):
                raise InputError(
                    f"Expected numeric scores, got {str(sc)[:80]} ({path} line {lineno}, id {pid!r}). "
                    "Write one number per box."
                ) from None
        has_scores.append(sc is not None)
        lines.append(lineno)
    if not ids:
        raise InputError(f"Expected predictions, got an empty file ({path}).")
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return Predictions(
        ids=ids,
        answers=answers,
        raw=raws,
        boxes=np.asarray(flat, dtype=np.float64).reshape(-1, 4),
        scores=np.asarray(scores, dtype=np.float64),
        offsets=offsets,
        has_scores=np.asarray(has_scores, dtype=bool),
        line_numbers=np.asarray(lines, dtype=np.int64),
    )


_PRED_JSON_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("answer", pa.string()),
        ("raw", pa.string()),
        ("boxes", pa.list_(pa.list_(pa.float64()))),
        ("scores", pa.list_(pa.float64())),
    ]
)


def read_predictions_fast(path: str | os.PathLike) -> Predictions:
    """:func:`read_predictions` with a columnar fast path (pyarrow's C++ JSON reader,
    checks in numpy) for well-formed files; any file the fast path cannot vouch for (a blank line,
    a value of another type, a bad box, a duplicate id, a non-finite score, ...) is read again by
    :func:`read_predictions`, whose errors name the line. The result is the same.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "p.jsonl"
    >>> _ = p.write_text('{"id": "a", "answer": "1", "boxes": [[0, 0, 2, 2]]}\\n{"id": "b", "raw": "x"}\\n')
    >>> r = read_predictions_fast(p)
    >>> r.ids, r.offsets.tolist(), r.has_scores.tolist(), r.raw
    (['a', 'b'], [0, 1, 1], [False, False], [None, 'x'])
    """
    import pyarrow.json as pj

    path = Path(path)
    if not path.is_file() or path.stat().st_size == 0:
        return read_predictions(path)
    data = path.read_bytes()
    n_lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    try:
        t = pj.read_json(
            pa.BufferReader(data),
            read_options=pj.ReadOptions(block_size=1 << 21),
            parse_options=pj.ParseOptions(explicit_schema=_PRED_JSON_SCHEMA, unexpected_field_behavior="ignore"),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return read_predictions(path)
    del data
    n = t.num_rows
    if n != n_lines:
        return read_predictions(path)  # blank lines: line numbers need the slow reader
    ids = t.column("id").combine_chunks()
    if n == 0 or ids.null_count or pc.any(pc.equal(ids, "")).as_py() or pc.count_distinct(ids).as_py() != n:
        return read_predictions(path)
    boxes = pc.fill_null(t.column("boxes").combine_chunks(), pa.scalar([], _PRED_JSON_SCHEMA.field("boxes").type))
    inner = pc.list_flatten(boxes)
    counts = pc.list_value_length(boxes).to_numpy(zero_copy_only=False).astype(np.int64)
    if inner.null_count or (len(inner) and (pc.min(pc.list_value_length(inner)).as_py() != 4 or pc.max(pc.list_value_length(inner)).as_py() != 4)):
        return read_predictions(path)
    flat = pc.list_flatten(inner)
    if flat.null_count:
        return read_predictions(path)
    xyxy = flat.to_numpy(zero_copy_only=False).reshape(-1, 4)
    if len(xyxy) and not (np.isfinite(xyxy).all() and (xyxy[:, 0] <= xyxy[:, 2]).all() and (xyxy[:, 1] <= xyxy[:, 3]).all()):
        return read_predictions(path)
    scores_col = t.column("scores").combine_chunks()
    has_scores = scores_col.is_valid().to_numpy(zero_copy_only=False)
    sc_len = pc.fill_null(pc.list_value_length(scores_col), 0).to_numpy(zero_copy_only=False)
    if (has_scores & (sc_len != counts)).any():
        return read_predictions(path)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    rows = np.repeat(np.arange(n), counts)
    scores = np.ones(len(xyxy), dtype=np.float64)
    if has_scores.any():
        sflat = pc.list_flatten(scores_col)
        if sflat.null_count:
            return read_predictions(path)
        sv = sflat.to_numpy(zero_copy_only=False).astype(np.float64)
        if not np.isfinite(sv).all():
            return read_predictions(path)
        scores[has_scores[rows]] = sv
    return Predictions(
        ids=ids.to_pylist(),
        answers=t.column("answer").to_pylist(),
        raw=[None] * n if t.column("raw").null_count == n else t.column("raw").to_pylist(),
        boxes=np.ascontiguousarray(xyxy, dtype=np.float64),
        scores=scores,
        offsets=offsets,
        has_scores=has_scores,
        line_numbers=np.arange(1, n + 1, dtype=np.int64),
    )
