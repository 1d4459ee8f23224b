"""The Parquet release: items split by image, images embedded, a dataset card, a manifest.

:func:`release` turns one or more items files (Parquet or JSONL, :data:`witness.schema.ITEM_SCHEMA`)
into a directory that ``datasets.load_dataset(DIR)`` reads directly::

    DIR/
      README.md                           dataset card: YAML header (configs, dataset_info, license)
      data/train-00000-of-00001.parquet   one file per split (or shards of at most max_shard_bytes)
      data/test-00000-of-00001.parquet
      stats.json                          Table II / Table III statistics (witness.dataset.stats)
      manifest.json                       SHA-256 and size of every file above

Rules:

* **Split by image.** No image is in two splits. Items that carry a ``split`` keep it (two splits on
  one ``image_id`` is a :class:`~witness.errors.SchemaError`); the other images are shuffled with
  ``numpy.random.default_rng(seed)`` over their sorted ids and cut by the split fractions (counts by
  largest remainder), so a release is deterministic for a seed.
* **Images embedded.** The item ``image`` struct gets the bytes of the file at ``image.path``
  (absolute, relative to the working directory, or relative to the items file); the stored path
  becomes the file name. Bytes already present are kept. Each image's header is read with Pillow
  and its size must equal the item's ``width x height`` (or its transpose, for EXIF rotation).
* **Streamed.** Only the light columns of all items are held in memory; images are read and
  written batch by batch with a ``pyarrow.parquet.ParquetWriter``.
* **Atomic.** Everything is built in a temporary directory beside ``out_dir`` and swapped in
  (:func:`witness.io.atomic_dir`): a failure leaves the previous release untouched.
"""

from __future__ import annotations

import hashlib
import io as _io
import json
import math
import os
import re
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import InputError, SchemaError, where
from ..io import atomic_dir, iter_batches, read_table
from ..schema import IMAGE_TYPE, ITEM_SCHEMA, conform, validate_items

__all__ = [
    "DEFAULT_MAX_SHARD_BYTES",
    "ReleaseFile",
    "ReleaseReport",
    "assign_splits",
    "release",
    "release_schema",
    "sha256_file",
    "verify_manifest",
]

#: Shard size limit of a split file (bytes), as ``datasets``' ``push_to_hub`` default (500 MB).
DEFAULT_MAX_SHARD_BYTES = 500 * 1024 * 1024
_SPLIT_NAME = re.compile(r"^\w+(\.\w+)*$")
_SPLIT_ORDER = {"train": 0, "validation": 1, "dev": 2, "test": 3}
_ROW_GROUP = 100  # rows per Parquet row group: what datasets uses for image datasets


@dataclass(frozen=True)
class ReleaseFile:
    """One file of a release: path relative to the release directory, size in bytes, SHA-256."""

    path: str
    bytes: int
    sha256: str


@dataclass(frozen=True)
class ReleaseReport:
    """What :func:`release` wrote.

    ``items`` and ``images`` count per split; ``files`` lists every file with its hash (the
    manifest); ``clipped_boxes`` counts boxes clipped by validation; ``stats`` is ``stats.json``.
    """

    out_dir: Path
    items: dict[str, int]
    images: dict[str, int]
    files: tuple[ReleaseFile, ...]
    clipped_boxes: int
    seconds: float
    stats: dict = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict:
        return {
            "out_dir": str(self.out_dir),
            "items": dict(self.items),
            "images": dict(self.images),
            "files": [f.__dict__.copy() for f in self.files],
            "clipped_boxes": self.clipped_boxes,
            "seconds": round(self.seconds, 3),
        }


def sha256_file(path: str | os.PathLike, *, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.txt"; _ = p.write_bytes(b"abc")
    >>> sha256_file(p)[:16]
    'ba7816bf8f01cfea'
    """
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def release_schema() -> pa.Schema:
    """:data:`ITEM_SCHEMA` with the Hugging Face features in its ``huggingface`` metadata key.

    ``datasets`` reads ``{"info": {"features": ...}}`` from that key of a Parquet file's Arrow
    schema, so ``image`` loads as the ``Image`` feature (decoded to PIL) without a card.

    >>> json.loads(release_schema().metadata[b"huggingface"])["info"]["features"]["image"]
    {'_type': 'Image'}
    """
    features = _features()
    meta = dict(ITEM_SCHEMA.metadata or {})
    meta[b"huggingface"] = json.dumps({"info": {"features": features.to_dict()}}).encode()
    return ITEM_SCHEMA.with_metadata(meta)


def _features():
    from ..schema import hf_features

    return hf_features()


def _split_sort_key(name: str) -> tuple[int, str]:
    return (_SPLIT_ORDER.get(name, len(_SPLIT_ORDER)), name)


def _check_fractions(splits: Mapping[str, float] | None, test_fraction: float) -> dict[str, float]:
    if splits is None:
        if not (0.0 <= test_fraction < 1.0) or not math.isfinite(test_fraction):
            raise InputError(
                f"Expected a test fraction in [0, 1), got {test_fraction!r}. Pass e.g. --test-fraction 0.15."
            )
        splits = {"train": 1.0 - test_fraction, "test": test_fraction}
    fr = {str(k): float(v) for k, v in splits.items()}
    for name, v in fr.items():
        if not _SPLIT_NAME.match(name):
            raise InputError(
                f"Expected a split name of letters, digits and underscores, got {name!r}. Rename the split."
            )
        if not (v >= 0.0 and math.isfinite(v)):
            raise InputError(f"Expected a non-negative split fraction, got {name}={v!r}. Fix the fractions.")
    total = sum(fr.values())
    if not fr or abs(total - 1.0) > 1e-6:
        raise InputError(f"Expected split fractions that sum to 1, got {fr} (sum {total:g}). Fix the fractions.")
    return fr


def assign_splits(
    image_ids: Sequence[str],
    given: Sequence[str | None],
    fractions: Mapping[str, float],
    *,
    seed: int = 0,
    ids: Sequence[str] | None = None,
) -> list[str]:
    """Assign a split to every item, by image.

    Rule: an image takes the split its items carry (two different splits on one image raise
    :class:`SchemaError` naming the image); the remaining images, sorted by id, are permuted with
    ``numpy.random.default_rng(seed)`` and cut into consecutive runs whose sizes are the split
    fractions times the number of remaining images (rounded by largest remainder).

    >>> assign_splits(["a", "a", "b", "c"], [None, None, "test", None], {"train": 1.0})
    ['train', 'train', 'test', 'train']
    >>> assign_splits(["a", "b"], ["train", "test"], {"train": 1.0})
    ['train', 'test']
    """
    per_image: dict[str, str] = {}
    first_row: dict[str, int] = {}
    for r, (img, s) in enumerate(zip(image_ids, given, strict=True)):
        if s is None:
            continue
        prev = per_image.get(img)
        if prev is None:
            per_image[img] = s
            first_row[img] = r
        elif prev != s:
            item = None if ids is None else ids[r]
            first = "" if ids is None else f", also item {ids[first_row[img]]!r}"
            raise SchemaError(
                f"Expected each image in one split, got image {img!r} in splits {prev!r} and {s!r} "
                f"({where(None, r, item, 'split')}{first}). Put all questions of an image in one split."
            )
    free = sorted(set(image_ids) - set(per_image))
    if free:
        names = sorted(fractions, key=_split_sort_key)
        exact = np.array([fractions[n] * len(free) for n in names])
        counts = np.floor(exact).astype(np.int64)
        rest = len(free) - int(counts.sum())
        order = np.argsort(-(exact - counts), kind="stable")
        counts[order[:rest]] += 1
        perm = np.random.default_rng(seed).permutation(len(free))
        bounds = np.concatenate([[0], np.cumsum(counts)])
        for k, n in enumerate(names):
            for j in perm[bounds[k] : bounds[k + 1]]:
                per_image[free[j]] = n
    return [per_image[img] for img in image_ids]


# --------------------------------------------------------------------------------------------
# Reading the inputs
# --------------------------------------------------------------------------------------------


@dataclass
class _Input:
    path: Path
    table: pa.Table  # validated, every column but image bytes
    parquet: bool


def _read_light(path: Path) -> tuple[_Input, int]:
    """Read every column except the image bytes, validate, return the light table."""
    if not path.exists():
        raise InputError(f"Expected an items file, got a path that does not exist ({path}). Check the path.")
    if path.is_dir():
        raise InputError(f"Expected an items file (Parquet or JSONL), got a directory ({path}). Pass its files.")
    parquet = path.suffix.lower() not in {".jsonl", ".json", ".ndjson"}
    if parquet:
        try:
            pf = pq.ParquetFile(path)
        except (pa.ArrowInvalid, OSError) as exc:
            raise InputError(f"Expected a Parquet or JSONL items file, got unreadable data ({path}): {exc}.") from None
        names = [n for n in pf.schema_arrow.names if n != "image"]
        cols = names + (["image.path"] if "image" in pf.schema_arrow.names else [])
        raw = pf.read(columns=cols)
        if "image" in raw.column_names:  # a struct holding only `path`: rebuild the full struct
            paths = raw.column("image").combine_chunks().field("path")
            img = pa.StructArray.from_arrays([pa.nulls(len(paths), pa.binary()), paths], fields=list(IMAGE_TYPE))
            raw = raw.set_column(raw.schema.get_field_index("image"), "image", img)
        table = conform(raw, "item", source=path)
    else:
        table = read_table(path, "item")
    table, report = validate_items(table, source=path)
    return _Input(path, table, parquet), report.clipped_boxes


def _image_batches(inp: _Input, batch_size: int):
    """Yield the ``image`` column of ``inp`` in slices of ``batch_size`` rows (bytes included)."""
    n = inp.table.num_rows
    if inp.parquet and "image" in pq.ParquetFile(inp.path).schema_arrow.names:
        for batch in iter_batches(inp.path, columns=["image"], batch_size=batch_size):
            yield batch.column(0)
        return
    col = inp.table.column("image").combine_chunks()
    for start in range(0, n, batch_size):
        yield col.slice(start, batch_size)


class _ImageReader:
    """Read image files and check them with Pillow.

    The size (and resolved path) of each file is remembered, so Pillow parses each header once;
    the bytes of recently read files are kept in an LRU cache bounded by ``budget`` bytes (items
    of one image usually come together).
    """

    def __init__(self, budget: int = 32 * 1024 * 1024):
        self.meta: dict[tuple[str, str], tuple[Path, tuple[int, int]]] = {}
        self.cache: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        self.budget, self.held = budget, 0

    @staticmethod
    def resolve(raw: str, base: Path) -> Path:
        p = Path(raw)
        if p.is_absolute() or p.exists():
            return p
        alt = base / p
        return alt if alt.exists() else p

    def read(
        self, data: bytes | None, raw_path: str | None, *, base: Path, item: str, source: Path
    ) -> tuple[bytes, str | None, tuple[int, int]]:
        if data is not None:
            size = self._size(data, item=item, label=raw_path or "embedded bytes", source=source)
            return data, (os.path.basename(raw_path) if raw_path else None), size
        if not raw_path:
            raise InputError(
                f"Expected an image path or bytes, got none ({where(source, None, item, 'image')}). "
                "Set image.path to the image file."
            )
        key = (str(base), raw_path)
        name = os.path.basename(raw_path)
        hit = self.cache.get(key)
        if hit is not None:
            self.cache.move_to_end(key)
            return hit, name, self.meta[key][1]
        meta = self.meta.get(key)
        p = meta[0] if meta is not None else self.resolve(raw_path, base)
        try:
            data = p.read_bytes()
        except OSError as exc:
            raise InputError(
                f"Expected a readable image file, got {raw_path!r} ({where(source, None, item, 'image.path')}): "
                f"{exc.strerror or exc}. Fix the path or restore the image."
            ) from None
        if meta is None:
            meta = self.meta[key] = (p, self._size(data, item=item, label=str(p), source=source))
        if len(data) <= self.budget:
            self.cache[key] = data
            self.held += len(data)
            while self.held > self.budget:
                self.held -= len(self.cache.popitem(last=False)[1])
        return data, name, meta[1]

    @staticmethod
    def _size(data: bytes, *, item: str, label: str, source: Path) -> tuple[int, int]:
        from PIL import Image, UnidentifiedImageError

        try:
            with Image.open(_io.BytesIO(data)) as im:
                return im.size
        except (UnidentifiedImageError, OSError, ValueError) as exc:
            raise InputError(
                f"Expected an image file Pillow can read, got unreadable data at {label!r} "
                f"({where(source, None, item, 'image')}): {exc}. Replace the image."
            ) from None


def _embed(
    light: pa.Table,
    images: pa.Array,
    reader: _ImageReader,
    inp: _Input,
    start: int,
) -> pa.Table:
    """Return ``light`` with its ``image`` column holding bytes and the file name."""
    if isinstance(images, pa.ChunkedArray):
        images = images.combine_chunks()
    null = images.is_null().to_numpy(zero_copy_only=False)
    data = images.field("bytes").to_pylist()
    paths = images.field("path").to_pylist()
    ids = light.column("id").to_pylist()
    widths = light.column("width").to_pylist()
    heights = light.column("height").to_pylist()
    out_bytes, out_paths = [], []
    base = inp.path.parent
    for k in range(len(ids)):
        b = None if null[k] else data[k]
        p = None if null[k] else paths[k]
        blob, name, (w, h) = reader.read(b, p, base=base, item=ids[k], source=inp.path)
        if (w, h) != (widths[k], heights[k]) and (h, w) != (widths[k], heights[k]):
            raise SchemaError(
                f"Expected a {widths[k]}x{heights[k]} image (the item's width x height), got {w}x{h} "
                f"({where(inp.path, start + k, ids[k], 'image')}). Fix width/height or the image path."
            )
        out_bytes.append(blob)
        out_paths.append(name)
    img = pa.StructArray.from_arrays(
        [pa.array(out_bytes, pa.binary()), pa.array(out_paths, pa.string())], fields=list(IMAGE_TYPE)
    )
    return light.set_column(light.schema.get_field_index("image"), ITEM_SCHEMA.field("image"), img)


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


class _SplitWriter:
    """Writes one split as shards of at most ``max_bytes``; shard names get ``-of-`` at the end."""

    def __init__(self, data_dir: Path, split: str, schema: pa.Schema, max_bytes: int):
        self.data_dir, self.split, self.schema, self.max_bytes = data_dir, split, schema, max_bytes
        self.shards: list[Path] = []
        self.writer: pq.ParquetWriter | None = None
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        if self.writer is None:
            path = self.data_dir / f".{self.split}-{len(self.shards):05d}.parquet"
            self.shards.append(path)
            self.writer = pq.ParquetWriter(
                path,
                self.schema,
                # zstd also folds the repeated bytes of an image shared by adjacent questions;
                # a dictionary would not pay for image bytes, so it is kept for the other columns
                compression="zstd",
                use_dictionary=[n for n in self.schema.names if n != "image"],
            )
        self.writer.write_table(table, row_group_size=_ROW_GROUP)
        self.rows += table.num_rows
        if self.shards[-1].stat().st_size >= self.max_bytes:
            self.close()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def finish(self) -> list[Path]:
        self.close()
        n = len(self.shards)
        final = []
        for k, p in enumerate(self.shards):
            q = self.data_dir / f"{self.split}-{k:05d}-of-{n:05d}.parquet"
            os.replace(p, q)
            final.append(q)
        return final


def release(
    items_paths: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    *,
    test_fraction: float = 0.15,
    seed: int = 0,
    splits: Mapping[str, float] | None = None,
    card_extra: Mapping[str, Any] | None = None,
    extra_files: Mapping[str, bytes] | None = None,
    card_links: Mapping[str, str] | None = None,
    batch_size: int = 256,
    max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES,
    on_progress: Callable[[int, int], None] | None = None,
) -> ReleaseReport:
    """Write a Parquet release of the items in ``items_paths`` to ``out_dir`` (replaced atomically).

    Split rule: by image (see :func:`assign_splits`); ``splits`` maps split names to fractions of
    the images without a split (default ``{"train": 1 - test_fraction, "test": test_fraction}``).
    ``card_extra`` adds to or overrides keys of the card's YAML header (e.g. ``license``,
    ``pretty_name``). ``extra_files`` maps relative paths to bytes written inside the release
    (hashed in the manifest like every file, e.g. the audit gate's report); ``card_links`` maps a
    title to a relative path that the card's "Reports" section links. ``on_progress(done, total)``
    is called after each batch.

    Errors: a missing file, a duplicate item id across files, a validation failure
    (:func:`witness.schema.validate_items`, per file), an image in two splits, a missing or
    unreadable image, an image whose size differs from the item's.

    >>> import tempfile, pathlib
    >>> from PIL import Image
    >>> from witness.schema import item_record, items_table
    >>> from witness.io import write_table
    >>> d = pathlib.Path(tempfile.mkdtemp()); Image.new("RGB", (8, 6)).save(d / "a.png")
    >>> rows = [item_record("q1", "a", 8, 6, "Any car?", "no", image=str(d / "a.png"))]
    >>> _ = write_table(items_table(rows), d / "items.parquet")
    >>> r = release([d / "items.parquet"], d / "out", test_fraction=0.0)
    >>> r.items, sorted(f.path for f in r.files)[0]
    ({'train': 1}, 'README.md')
    """
    t0 = time.perf_counter()
    fractions = _check_fractions(splits, test_fraction)
    if not items_paths:
        raise InputError("Expected at least one items file, got none. Pass the items to release.")
    if batch_size < 1 or max_shard_bytes < 1:
        raise InputError(f"Expected a positive batch size and shard size, got {batch_size}, {max_shard_bytes}.")
    out_dir = Path(out_dir)
    inputs: list[_Input] = []
    clipped = 0
    seen: dict[str, Path] = {}
    for raw in items_paths:
        inp, n_clip = _read_light(Path(raw))
        clipped += n_clip
        for r, i in enumerate(inp.table.column("id").to_pylist()):
            if i in seen:
                raise SchemaError(
                    f"Expected unique item ids across input files, got {i!r} in {seen[i]} and again "
                    f"({where(inp.path, r, i, 'id')}). Give every item its own id or drop the duplicate file."
                )
            seen[i] = inp.path
        inputs.append(inp)
    total = len(seen)
    if total == 0:
        raise InputError(f"Expected items to release, got none in {[str(p) for p in items_paths]}.")

    image_ids = [i for inp in inputs for i in inp.table.column("image_id").to_pylist()]
    given = [s for inp in inputs for s in inp.table.column("split").to_pylist()]
    all_ids = [i for inp in inputs for i in inp.table.column("id").to_pylist()]
    for r, s in enumerate(given):
        if s is not None and not _SPLIT_NAME.match(s):
            raise SchemaError(
                f"Expected a split name of letters, digits and underscores, got {s!r} "
                f"({where(None, r, all_ids[r], 'split')}). Rename the split."
            )
    assigned = assign_splits(image_ids, given, fractions, seed=seed, ids=all_ids)
    split_names = sorted(set(assigned), key=_split_sort_key)
    schema = release_schema()
    reader = _ImageReader()

    with atomic_dir(out_dir) as tmp:
        data_dir = tmp / "data"
        data_dir.mkdir()
        writers = {s: _SplitWriter(data_dir, s, schema, max_shard_bytes) for s in split_names}
        offset = done = 0
        try:
            for inp in inputs:
                n = inp.table.num_rows
                start = 0
                for images in _image_batches(inp, batch_size):
                    m = len(images)
                    light = inp.table.slice(start, m)
                    split_col = pa.array(assigned[offset + start : offset + start + m], pa.string())
                    light = light.set_column(light.schema.get_field_index("split"), ITEM_SCHEMA.field("split"), split_col)
                    full = _embed(light, images, reader, inp, start).cast(schema)
                    for s in split_names:
                        sub = full.filter(pc.equal(split_col, s))
                        writers[s].write(sub)
                    start += m
                    done += m
                    if on_progress is not None:
                        on_progress(done, total)
                if start != n:  # pragma: no cover - the file changed while we read it
                    raise InputError(f"Expected {n} rows in {inp.path}, read {start}. Do not edit inputs during a release.")
                offset += n
        finally:
            for w in writers.values():
                w.close()
        for w in writers.values():
            w.finish()
        for rel, payload in dict(extra_files or {}).items():
            target = (tmp / rel).resolve()
            if tmp.resolve() not in target.parents or rel.startswith(("data/", "README.md", "manifest.json", "stats.json")):
                raise InputError(f"Expected an extra file path inside the release and outside its own files, got {rel!r}.")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(payload)
        from .stats import dataset_stats

        stats = dataset_stats(tmp)
        stats_dict = stats.to_dict()
        (tmp / "stats.json").write_text(json.dumps(stats_dict, indent=2) + "\n")
        items_per = {s: writers[s].rows for s in split_names}
        images_per = {s: len({img for img, a in zip(image_ids, assigned, strict=True) if a == s}) for s in split_names}
        data_files = {s: [f"data/{p.name}" for p in sorted(data_dir.glob(f"{s}-*.parquet"))] for s in split_names}
        card = dataset_card(data_files, items_per, stats, data_dir=tmp, extra=card_extra, links=card_links)
        (tmp / "README.md").write_text(card)
        files = _manifest_files(tmp)
        manifest = {
            "format": "witness-release/1",
            "splits": {s: {"items": items_per[s], "images": images_per[s], "files": data_files[s]} for s in split_names},
            "files": [f.__dict__.copy() for f in files],
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return ReleaseReport(
        out_dir=out_dir,
        items=items_per,
        images=images_per,
        files=tuple(files),
        clipped_boxes=clipped,
        seconds=time.perf_counter() - t0,
        stats=stats_dict,
    )


def _manifest_files(root: Path) -> list[ReleaseFile]:
    out = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.name != "manifest.json":
            out.append(ReleaseFile(p.relative_to(root).as_posix(), p.stat().st_size, sha256_file(p)))
    return out


def verify_manifest(release_dir: str | os.PathLike) -> list[str]:
    """Check every file of ``manifest.json`` against its size and SHA-256; return the problems.

    An empty list means the release is intact. A missing manifest raises :class:`InputError`.
    """
    root = Path(release_dir)
    mpath = root / "manifest.json"
    if not mpath.is_file():
        raise InputError(f"Expected a release with manifest.json, got none ({root}). Run `witness dataset release`.")
    try:
        manifest = json.loads(mpath.read_text())
    except ValueError as exc:
        raise InputError(f"Expected a JSON manifest, got malformed JSON ({mpath}): {exc}.") from None
    problems = []
    for f in manifest.get("files", []):
        p = root / f["path"]
        if not p.is_file():
            problems.append(f"{f['path']}: missing")
        elif p.stat().st_size != f["bytes"]:
            problems.append(f"{f['path']}: {p.stat().st_size} bytes, manifest says {f['bytes']}")
        elif sha256_file(p) != f["sha256"]:
            problems.append(f"{f['path']}: SHA-256 differs from the manifest")
    return problems


# --------------------------------------------------------------------------------------------
# The dataset card
# --------------------------------------------------------------------------------------------

_FIELDS = [
    ("id", "item id"),
    ("image", "the image (HF `Image`: embedded bytes, decoded to PIL)"),
    ("image_id", "image id; every question of an image is in one split"),
    ("width, height", "image size in pixels"),
    ("question, answer", "the question and its reference answer"),
    ("boxes", "evidence boxes `[x1, y1, x2, y2]`, absolute pixels (float32); empty: nothing to ground"),
    ("labels", "class of each evidence box, parallel to `boxes`"),
    ("count", "integer stated by the answer (counting items: the number of boxes), else null"),
    ("qtype", "question type (existence, counting, comparison, ...)"),
    ("category", "capability category (Table III of RoadSceneVQA-G)"),
    ("targets, relation", "classes the question refers to; comparison relation more/fewer/equal"),
    ("pair_id, pair_role", "logically equivalent question pairs (roles 1 and 2), else null"),
    ("split, source, provenance", "split, origin of the item, who drafted/annotated/reviewed it"),
]


def dataset_card(
    data_files: Mapping[str, list[str]],
    items: Mapping[str, int],
    stats,
    *,
    data_dir: Path | None = None,
    extra: Mapping[str, Any] | None = None,
    links: Mapping[str, str] | None = None,
) -> str:
    """The README.md of a release: a YAML header ``datasets.load_dataset`` reads, then a body.

    Header keys: ``license`` (default ``unknown``), ``task_categories``, ``tags``,
    ``configs`` (one ``default`` config, ``data_files`` per split) and ``dataset_info``
    (``features`` from :func:`witness.schema.hf_features`, ``splits`` with ``num_examples``).
    ``extra`` overrides or adds header keys; ``links`` (title → relative path) become a
    "Reports" section.
    """
    import yaml

    features = _features()
    splits = sorted(data_files, key=_split_sort_key)
    sizes = {}
    for s in splits:
        sizes[s] = sum((data_dir / f).stat().st_size for f in data_files[s]) if data_dir is not None else 0
    header: dict[str, Any] = {
        "license": "unknown",
        "task_categories": ["visual-question-answering"],
        "tags": ["grounded-vqa", "visual-grounding", "witness"],
        "pretty_name": "witness grounded VQA release",
        "configs": [
            {
                "config_name": "default",
                "data_files": [{"split": s, "path": f"data/{s}-*"} for s in splits],
            }
        ],
        "dataset_info": {
            "features": features._to_yaml_list(),
            "splits": [{"name": s, "num_bytes": int(sizes[s]), "num_examples": int(items[s])} for s in splits],
            "download_size": int(sum(sizes.values())),
            "dataset_size": int(sum(sizes.values())),
        },
    }
    for k, v in dict(extra or {}).items():
        header[str(k)] = v
    head = yaml.safe_dump(header, sort_keys=False, allow_unicode=True)
    name = header.get("pretty_name") or "witness grounded VQA release"
    lines = [
        "---",
        head.rstrip("\n"),
        "---",
        "",
        f"# {name}",
        "",
        "Grounded visual question answering: every answer is tied to the set of boxes that witnesses it "
        "(one box, several, or none). Built with witness: drafted, "
        "annotated, reviewed and released as Parquet with the images embedded.",
        "",
        "## Loading",
        "",
        "```python",
        "from datasets import load_dataset",
        'ds = load_dataset("path/to/this/directory")',
        f'ds["{splits[0]}"][0]["image"]  # a PIL image',
        "```",
        "",
        "Splits are by image: no image appears in two splits.",
        "",
        "## Fields",
        "",
        "| field | meaning |",
        "|---|---|",
        *[f"| `{k}` | {v} |" for k, v in _FIELDS],
        "",
        "## Statistics",
        "",
        "Composition (as Table II of RoadSceneVQA-G). No-Grd.: questions without evidence boxes; Grd.: with at "
        "least one; Multi-Box: share of grounded questions with at least two boxes; Avg. Box: mean number of "
        "evidence boxes per grounded question; Ref. SPC: share of the answers stating a count whose count equals "
        "the number of evidence boxes.",
        "",
        stats.markdown(),
        "",
        "See `stats.json` for per-qtype and per-category counts; `manifest.json` lists the SHA-256 of every file.",
        "",
    ]
    if links:
        lines += ["## Reports", ""] + [f"- [{title}]({path})" for title, path in links.items()] + [""]
    return "\n".join(lines)
