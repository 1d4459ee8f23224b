"""The records every stage of witness reads and writes, defined once.

Four records (see ``shared/ARCHITECTURE.md``):

* **Scene**: one image and all of its annotated objects.
* **Item**: one grounded question, its answer and the evidence boxes that witness it.
* **Annotation**: one person's (or judge's) judgment of one item.
* **Prediction**: one model output for one item (JSONL; see :mod:`witness.io`).

Each record is an Arrow schema; Parquet files carry exactly these schemas, and the ``image`` column
is the Hugging Face ``Image`` feature (a struct of ``bytes`` and ``path``). Boxes are absolute pixel
``[x1, y1, x2, y2]`` in float32 everywhere.

Validation is columnar: :func:`validate_items` and :func:`validate_scenes` check a whole table with
numpy and raise :class:`~witness.errors.SchemaError` naming the first offending record, or repair
what is safe to repair (a box that overshoots the image by at most one pixel is clipped and counted).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import SchemaError, where

__all__ = [
    "BOX_TYPE",
    "IMAGE_TYPE",
    "OBJECT_TYPE",
    "PROVENANCE_TYPE",
    "VERDICTS_TYPE",
    "SCENE_SCHEMA",
    "ITEM_SCHEMA",
    "ANNOTATION_SCHEMA",
    "PREDICTION_SCHEMA",
    "QTYPES",
    "CATEGORIES",
    "QTYPE_CATEGORY",
    "RELATIONS",
    "VERDICT_KEYS",
    "DECISIONS",
    "ROLES",
    "OVERSHOOT_TOLERANCE_PX",
    "ValidationReport",
    "scene_record",
    "item_record",
    "annotation_record",
    "scenes_table",
    "items_table",
    "annotations_table",
    "conform",
    "flat_boxes",
    "validate_scenes",
    "validate_items",
    "validate_annotations",
    "hf_features",
]

# --------------------------------------------------------------------------------------------
# Vocabularies
# --------------------------------------------------------------------------------------------

#: Question types drafted by rules, the LLM drafter and people.
QTYPES: tuple[str, ...] = (
    "existence",
    "counting",
    "comparison",
    "identification",
    "selection",
    "attribute",
    "spatial",
    "scene",
    "reasoning",
)

#: The nine-category capability taxonomy of the RoadSceneVQA-G paper (Table III): perception
#: (existence, enumeration, attribute recognition, object identification, scene inference) and
#: reasoning (spatial, behavioral, normative, causal). Rule drafts map qtypes onto it as
#: :data:`QTYPE_CATEGORY` says (a comparison of counts is enumeration; selection is identification).
CATEGORIES: tuple[str, ...] = (
    "existence",
    "enumeration",
    "attribute_recognition",
    "object_identification",
    "scene_inference",
    "spatial_reasoning",
    "behavioral_reasoning",
    "normative_reasoning",
    "causal_reasoning",
)

#: The default category of each question type.
QTYPE_CATEGORY: dict[str, str] = {
    "existence": "existence",
    "counting": "enumeration",
    "comparison": "enumeration",
    "identification": "object_identification",
    "selection": "object_identification",
    "attribute": "attribute_recognition",
    "spatial": "spatial_reasoning",
    "scene": "scene_inference",
    "reasoning": "behavioral_reasoning",
}

#: Comparison relations (``targets == [A, B]``: "more A than B", ...).
RELATIONS: tuple[str, ...] = ("more", "fewer", "equal")

#: The four reviewer checks of the RoadSceneVQA-G pipeline.
VERDICT_KEYS: tuple[str, ...] = (
    "box_tight",
    "category_correct",
    "question_natural",
    "answer_evidence_agree",
)

#: An annotation's decision: ConVBench's accept / correct / discard.
DECISIONS: tuple[str, ...] = ("accept", "correct", "discard")

#: Who made an annotation.
ROLES: tuple[str, ...] = ("annotator", "reviewer", "adjudicator", "judge")

#: A box may overshoot the image by this many pixels; it is then clipped and counted.
OVERSHOOT_TOLERANCE_PX = 1.0

# --------------------------------------------------------------------------------------------
# Arrow types
# --------------------------------------------------------------------------------------------

#: One box: ``[x1, y1, x2, y2]`` in absolute pixels.
BOX_TYPE = pa.list_(pa.float32())
#: The Hugging Face ``Image`` feature as Arrow stores it.
IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
#: One annotated object of a scene.
OBJECT_TYPE = pa.struct(
    [
        ("id", pa.string()),
        ("label", pa.string()),
        ("box", BOX_TYPE),
        ("attributes", pa.map_(pa.string(), pa.string())),
    ]
)
#: Who drafted, annotated and reviewed an item, and what the audit decided.
PROVENANCE_TYPE = pa.struct(
    [
        ("drafted_by", pa.string()),
        ("annotated_by", pa.list_(pa.string())),
        ("reviewed_by", pa.list_(pa.string())),
        ("audit", pa.string()),
    ]
)
#: The four reviewer checks; null where a check was not made.
VERDICTS_TYPE = pa.struct([(k, pa.bool_()) for k in VERDICT_KEYS])

SCENE_SCHEMA = pa.schema(
    [
        pa.field("image_id", pa.string(), nullable=False),
        pa.field("image", IMAGE_TYPE),
        pa.field("width", pa.int32(), nullable=False),
        pa.field("height", pa.int32(), nullable=False),
        pa.field("objects", pa.list_(OBJECT_TYPE)),
        pa.field("source", pa.string()),
        pa.field("split", pa.string()),
    ],
    metadata={b"witness.record": b"scene", b"witness.schema_version": b"1"},
)

ITEM_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("image", IMAGE_TYPE),
        pa.field("image_id", pa.string(), nullable=False),
        pa.field("width", pa.int32(), nullable=False),
        pa.field("height", pa.int32(), nullable=False),
        pa.field("question", pa.string(), nullable=False),
        pa.field("answer", pa.string(), nullable=False),
        pa.field("boxes", pa.list_(BOX_TYPE)),
        pa.field("labels", pa.list_(pa.string())),
        pa.field("count", pa.int32()),
        pa.field("qtype", pa.string()),
        pa.field("category", pa.string()),
        pa.field("targets", pa.list_(pa.string())),
        pa.field("relation", pa.string()),
        pa.field("pair_id", pa.string()),
        pa.field("pair_role", pa.int8()),
        pa.field("split", pa.string()),
        pa.field("source", pa.string()),
        pa.field("provenance", PROVENANCE_TYPE),
    ],
    metadata={b"witness.record": b"item", b"witness.schema_version": b"1"},
)

ANNOTATION_SCHEMA = pa.schema(
    [
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("annotator", pa.string(), nullable=False),
        pa.field("role", pa.string(), nullable=False),
        pa.field("question", pa.string()),
        pa.field("answer", pa.string()),
        pa.field("boxes", pa.list_(BOX_TYPE)),
        pa.field("labels", pa.list_(pa.string())),
        pa.field("verdicts", VERDICTS_TYPE),
        pa.field("decision", pa.string()),
        pa.field("created_at", pa.timestamp("us", tz="UTC")),
        pa.field("updated_at", pa.timestamp("us", tz="UTC")),
        pa.field("lead_time", pa.float64()),
        pa.field("source", pa.string()),
    ],
    metadata={b"witness.record": b"annotation", b"witness.schema_version": b"1"},
)

PREDICTION_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("answer", pa.string()),
        pa.field("boxes", pa.list_(BOX_TYPE)),
        pa.field("scores", pa.list_(pa.float32())),
        pa.field("raw", pa.string()),
    ],
    metadata={b"witness.record": b"prediction", b"witness.schema_version": b"1"},
)

_SCHEMAS = {
    "scene": SCENE_SCHEMA,
    "item": ITEM_SCHEMA,
    "annotation": ANNOTATION_SCHEMA,
    "prediction": PREDICTION_SCHEMA,
}
_ID_KEY = {"scene": "image_id", "item": "id", "annotation": "item_id", "prediction": "id"}

# --------------------------------------------------------------------------------------------
# Record builders (row-wise, for code that makes a few records at a time)
# --------------------------------------------------------------------------------------------


def _image_value(image: Any) -> dict | None:
    if image is None:
        return None
    if isinstance(image, Mapping):
        return {"bytes": image.get("bytes"), "path": image.get("path")}
    if isinstance(image, (bytes, bytearray)):
        return {"bytes": bytes(image), "path": None}
    return {"bytes": None, "path": str(image)}


def scene_record(
    image_id: str,
    width: int,
    height: int,
    objects: Iterable[Mapping[str, Any]] = (),
    *,
    image: Any = None,
    source: str = "",
    split: str | None = None,
) -> dict:
    """Build one Scene as a plain dict in :data:`SCENE_SCHEMA` order.

    ``objects`` are mappings with ``id``, ``label``, ``box`` (pixel xyxy) and optional
    ``attributes`` (string to string). ``image`` is a path, raw bytes or an ``{bytes, path}`` dict.

    >>> s = scene_record("img1", 640, 480, [{"id": "o1", "label": "car", "box": [1, 2, 30, 40]}])
    >>> s["objects"][0]["attributes"]
    {}
    """
    objs = []
    for k, obj in enumerate(objects):
        objs.append(
            {
                "id": str(obj.get("id", f"{image_id}:{k}")),
                "label": str(obj["label"]),
                "box": [float(v) for v in obj["box"]],
                "attributes": {str(a): str(v) for a, v in dict(obj.get("attributes") or {}).items()},
            }
        )
    return {
        "image_id": str(image_id),
        "image": _image_value(image),
        "width": int(width),
        "height": int(height),
        "objects": objs,
        "source": source,
        "split": split,
    }


def item_record(
    id: str,
    image_id: str,
    width: int,
    height: int,
    question: str,
    answer: str,
    boxes: Iterable[Iterable[float]] = (),
    labels: Iterable[str] = (),
    *,
    image: Any = None,
    count: int | None = None,
    qtype: str | None = None,
    category: str | None = None,
    targets: Iterable[str] = (),
    relation: str | None = None,
    pair_id: str | None = None,
    pair_role: int | None = None,
    split: str | None = None,
    source: str = "",
    provenance: Mapping[str, Any] | None = None,
) -> dict:
    """Build one Item as a plain dict in :data:`ITEM_SCHEMA` order.

    >>> r = item_record("q1", "img1", 640, 480, "How many cars?", "2", [[0, 0, 9, 9], [10, 10, 20, 20]],
    ...                 ["car", "car"], count=2, qtype="counting", category="enumeration")
    >>> r["count"], len(r["boxes"])
    (2, 2)
    """
    prov = dict(provenance or {})
    return {
        "id": str(id),
        "image": _image_value(image),
        "image_id": str(image_id),
        "width": int(width),
        "height": int(height),
        "question": question,
        "answer": answer,
        "boxes": [[float(v) for v in b] for b in boxes],
        "labels": [str(label) for label in labels],
        "count": None if count is None else int(count),
        "qtype": qtype,
        "category": category,
        "targets": [str(t) for t in targets],
        "relation": relation,
        "pair_id": pair_id,
        "pair_role": pair_role,
        "split": split,
        "source": source,
        "provenance": {
            "drafted_by": prov.get("drafted_by"),
            "annotated_by": list(prov.get("annotated_by") or []),
            "reviewed_by": list(prov.get("reviewed_by") or []),
            "audit": prov.get("audit"),
        },
    }


def annotation_record(
    item_id: str,
    annotator: str,
    role: str = "annotator",
    *,
    question: str | None = None,
    answer: str | None = None,
    boxes: Iterable[Iterable[float]] | None = None,
    labels: Iterable[str] | None = None,
    verdicts: Mapping[str, bool | None] | None = None,
    decision: str | None = None,
    created_at: Any = None,
    updated_at: Any = None,
    lead_time: float | None = None,
    source: str = "",
) -> dict:
    """Build one Annotation as a plain dict in :data:`ANNOTATION_SCHEMA` order.

    >>> a = annotation_record("q1", "ann@example.org", "reviewer", verdicts={"box_tight": True},
    ...                       decision="accept")
    >>> a["verdicts"]["question_natural"] is None
    True
    """
    v = dict(verdicts or {})
    return {
        "item_id": str(item_id),
        "annotator": str(annotator),
        "role": role,
        "question": question,
        "answer": answer,
        "boxes": None if boxes is None else [[float(x) for x in b] for b in boxes],
        "labels": None if labels is None else [str(x) for x in labels],
        "verdicts": {k: (None if v.get(k) is None else bool(v[k])) for k in VERDICT_KEYS},
        "decision": decision,
        "created_at": created_at,
        "updated_at": updated_at,
        "lead_time": lead_time,
        "source": source,
    }


def _table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=schema)


def scenes_table(rows: list[dict]) -> pa.Table:
    """Rows from :func:`scene_record` to a table with :data:`SCENE_SCHEMA`."""
    for r in rows:  # Arrow wants maps as lists of pairs
        for o in r["objects"]:
            if isinstance(o.get("attributes"), Mapping):
                o["attributes"] = list(o["attributes"].items())
    return _table(rows, SCENE_SCHEMA)


def items_table(rows: list[dict]) -> pa.Table:
    """Rows from :func:`item_record` to a table with :data:`ITEM_SCHEMA`."""
    return _table(rows, ITEM_SCHEMA)


def annotations_table(rows: list[dict]) -> pa.Table:
    """Rows from :func:`annotation_record` to a table with :data:`ANNOTATION_SCHEMA`."""
    return _table(rows, ANNOTATION_SCHEMA)


def conform(table: pa.Table, record: str, *, source: object = None, columns: list[str] | None = None) -> pa.Table:
    """Cast ``table`` to the schema of ``record`` (scene, item, annotation, prediction).

    Missing nullable columns are added as nulls; a missing required column, or one that cannot be
    cast, raises :class:`SchemaError` naming the column and the file. ``columns`` restricts the
    result (and the requirement) to those columns.

    >>> t = pa.table({"id": ["a"], "answer": ["yes"]})
    >>> conform(t, "prediction").column_names
    ['id', 'answer', 'boxes', 'scores', 'raw']
    """
    schema = _SCHEMAS[record]
    wanted = columns if columns is not None else schema.names
    arrays, fields = [], []
    for name in wanted:
        if name not in schema.names:
            raise SchemaError(f"Expected a {record} column, got unknown column {name!r}. Known: {schema.names}.")
        f = schema.field(name)
        if name in table.column_names:
            col = table.column(name)
            if col.type != f.type:
                try:
                    col = col.cast(f.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise SchemaError(
                        f"Expected column {name!r} of type {f.type}, got {col.type} ({where(source)}). "
                        f"Fix the column or re-create the file with witness. ({exc})"
                    ) from exc
        elif f.nullable:
            col = pa.nulls(table.num_rows, f.type)
        else:
            raise SchemaError(
                f"Expected column {name!r} in the {record} file, got columns {table.column_names} "
                f"({where(source)}). Add the column or pass a {record} file."
            )
        arrays.append(col)
        fields.append(f)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata=schema.metadata))


# --------------------------------------------------------------------------------------------
# Columnar validation
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ValidationReport:
    """What validation repaired; errors are raised, not reported."""

    n_records: int
    n_boxes: int
    clipped_boxes: int = 0
    warnings: tuple[str, ...] = field(default_factory=tuple)


def flat_boxes(boxes: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """Flatten a ``list<list<float>>`` column into an ``(N, 4)`` array and per-row offsets.

    Returns ``(xyxy, offsets)`` where row ``i`` owns ``xyxy[offsets[i]:offsets[i + 1]]``. A null row
    has no boxes. Raises :class:`SchemaError` when an inner list does not hold four numbers.

    >>> xyxy, off = flat_boxes(pa.array([[[0, 0, 1, 1]], [], [[1, 1, 2, 2], [2, 2, 3, 3]]]))
    >>> xyxy.shape, off.tolist()
    ((3, 4), [0, 1, 1, 3])
    """
    if isinstance(boxes, pa.ChunkedArray):
        boxes = boxes.combine_chunks() if boxes.num_chunks != 1 else boxes.chunk(0)
    if boxes.null_count:
        boxes = pc.fill_null(boxes, pa.scalar([], boxes.type))
    lengths = pc.list_value_length(boxes).to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    inner = pc.list_flatten(boxes)
    if len(inner) == 0:
        return np.zeros((0, 4), dtype=np.float64), offsets
    inner_len = pc.list_value_length(inner).to_numpy(zero_copy_only=False)
    bad = np.flatnonzero(inner_len != 4)
    if len(bad):
        row = int(np.searchsorted(offsets, bad[0], side="right") - 1)
        raise SchemaError(
            f"Expected boxes of 4 numbers [x1, y1, x2, y2], got {inner_len[bad[0]]} numbers (row {row}). "
            "Write each box as four pixel coordinates."
        )
    values = pc.list_flatten(inner).to_numpy(zero_copy_only=False).astype(np.float64)
    return values.reshape(-1, 4), offsets


def _row_of(offsets: np.ndarray, box_index: int) -> int:
    return int(np.searchsorted(offsets, box_index, side="right") - 1)


def _check_boxes(
    xyxy: np.ndarray,
    offsets: np.ndarray,
    width: np.ndarray,
    height: np.ndarray,
    ids: list,
    *,
    source: object,
    column: str,
    tolerance: float = OVERSHOOT_TOLERANCE_PX,
) -> tuple[np.ndarray, int]:
    """Check finite, ordered, inside-the-image boxes; clip overshoots within ``tolerance``."""
    if len(xyxy) == 0:
        return xyxy, 0
    rows = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    w = width[rows].astype(np.float64)
    h = height[rows].astype(np.float64)

    def fail(mask: np.ndarray, what: str, fix: str) -> None:
        k = int(np.flatnonzero(mask)[0])
        r = int(rows[k])
        box = [round(float(v), 3) for v in xyxy[k]]
        raise SchemaError(f"Expected {what}, got {box} ({where(source, r, ids[r], column)}). {fix}.")

    finite = np.isfinite(xyxy).all(axis=1)
    if not finite.all():
        fail(~finite, "finite box coordinates", "Remove NaN or infinite coordinates")
    ordered = (xyxy[:, 0] < xyxy[:, 2]) & (xyxy[:, 1] < xyxy[:, 3])
    if not ordered.all():
        fail(~ordered, "a box with x1 < x2 and y1 < y2", "Write boxes as [x1, y1, x2, y2] with positive size")
    over = np.stack(
        [-xyxy[:, 0], -xyxy[:, 1], xyxy[:, 2] - w, xyxy[:, 3] - h], axis=1
    ).max(axis=1)
    too_far = over > tolerance
    if too_far.any():
        k = int(np.flatnonzero(too_far)[0])
        fail(
            too_far,
            f"a box inside the {int(w[k])}x{int(h[k])} image",
            "Check the image size and the box convention (pixel xyxy)",
        )
    clipped_mask = over > 0
    n_clipped = int(clipped_mask.sum())
    if n_clipped:
        xyxy = xyxy.copy()
        xyxy[:, 0] = np.clip(xyxy[:, 0], 0, w)
        xyxy[:, 2] = np.clip(xyxy[:, 2], 0, w)
        xyxy[:, 1] = np.clip(xyxy[:, 1], 0, h)
        xyxy[:, 3] = np.clip(xyxy[:, 3], 0, h)
        degenerate = (xyxy[:, 0] >= xyxy[:, 2]) | (xyxy[:, 1] >= xyxy[:, 3])
        if degenerate.any():
            fail(degenerate, "a box that keeps a positive size after clipping to the image", "Fix the box")
    return xyxy, n_clipped


def _rebuild_boxes(xyxy: np.ndarray, offsets: np.ndarray) -> pa.Array:
    inner = pa.FixedSizeListArray.from_arrays(pa.array(xyxy.reshape(-1), pa.float32()), 4).cast(BOX_TYPE)
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), inner)


def _duplicates(values: list) -> list:
    seen, dup = set(), []
    for v in values:
        if v in seen:
            dup.append(v)
        seen.add(v)
    return dup


def _check_sizes(table: pa.Table, ids: list, source: object) -> tuple[np.ndarray, np.ndarray]:
    width = table.column("width").to_numpy(zero_copy_only=False)
    height = table.column("height").to_numpy(zero_copy_only=False)
    bad = ~((width > 0) & (height > 0))
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise SchemaError(
            f"Expected a positive image size, got {width[r]}x{height[r]} ({where(source, r, ids[r], 'width')}). "
            "Read the size from the image header."
        )
    return width, height


def validate_scenes(table: pa.Table, *, source: object = None) -> tuple[pa.Table, ValidationReport]:
    """Check a scenes table; return it (boxes clipped where safe) and a report.

    Checks: unique ``image_id``; positive sizes; every object box finite, ordered and inside the
    image (an overshoot up to :data:`OVERSHOOT_TOLERANCE_PX` is clipped and counted); unique object
    ids within a scene.
    """
    table = conform(table, "scene", source=source)
    ids = table.column("image_id").to_pylist()
    dup = _duplicates(ids)
    if dup:
        raise SchemaError(
            f"Expected unique image ids, got {dup[0]!r} {ids.count(dup[0])} times ({where(source, ids.index(dup[0]), dup[0], 'image_id')}). "
            "Give every image one scene."
        )
    width, height = _check_sizes(table, ids, source)
    objects = table.column("objects").combine_chunks()
    if objects.null_count:
        objects = pc.fill_null(objects, pa.scalar([], objects.type))
    obj_struct = pc.list_flatten(objects)
    n_obj = pc.list_value_length(objects).to_numpy(zero_copy_only=False).astype(np.int64)
    obj_offsets = np.zeros(len(n_obj) + 1, dtype=np.int64)
    np.cumsum(n_obj, out=obj_offsets[1:])
    box_col = obj_struct.field("box")
    box_len = pc.fill_null(pc.list_value_length(box_col), 0).to_numpy(zero_copy_only=False)
    if (box_len != 4).any():
        k = int(np.flatnonzero(box_len != 4)[0])
        r = _row_of(obj_offsets, k)
        raise SchemaError(
            f"Expected an object box of 4 numbers, got {box_len[k]} ({where(source, r, ids[r], 'objects.box')}). "
            "Write each box as [x1, y1, x2, y2] pixels."
        )
    xyxy = pc.list_flatten(box_col).to_numpy(zero_copy_only=False).astype(np.float64).reshape(-1, 4)
    xyxy, n_clipped = _check_boxes(xyxy, obj_offsets, width, height, ids, source=source, column="objects.box")
    labels = obj_struct.field("label")
    if labels.null_count:
        k = int(np.flatnonzero(labels.is_null().to_numpy(zero_copy_only=False))[0])
        r = _row_of(obj_offsets, k)
        raise SchemaError(f"Expected an object label, got null ({where(source, r, ids[r], 'objects.label')}). Label every object.")
    obj_ids = obj_struct.field("id").to_pylist()
    for r in range(len(ids)):
        chunk = obj_ids[obj_offsets[r] : obj_offsets[r + 1]]
        if len(set(chunk)) != len(chunk):
            d = _duplicates(chunk)[0]
            raise SchemaError(
                f"Expected unique object ids within a scene, got {d!r} twice ({where(source, r, ids[r], 'objects.id')}). "
                "Number the objects of each image uniquely."
            )
    if n_clipped:
        new_boxes = pa.FixedSizeListArray.from_arrays(pa.array(xyxy.reshape(-1), pa.float32()), 4).cast(BOX_TYPE)
        new_struct = pa.StructArray.from_arrays(
            [obj_struct.field("id"), obj_struct.field("label"), new_boxes, obj_struct.field("attributes")],
            fields=list(OBJECT_TYPE),
        )
        new_objects = pa.ListArray.from_arrays(pa.array(obj_offsets.astype(np.int32)), new_struct)
        table = table.set_column(table.schema.get_field_index("objects"), SCENE_SCHEMA.field("objects"), new_objects)
    warnings = (f"clipped {n_clipped} box(es) overshooting the image by at most {OVERSHOOT_TOLERANCE_PX:g} px",) if n_clipped else ()
    return table, ValidationReport(len(ids), len(xyxy), n_clipped, warnings)


_QTYPE_SET = set(QTYPES)
_CATEGORY_SET = set(CATEGORIES)
_RELATION_SET = set(RELATIONS)


def validate_items(table: pa.Table, *, source: object = None) -> tuple[pa.Table, ValidationReport]:
    """Check an items table; return it (boxes clipped where safe) and a report.

    Checks, each raising :class:`SchemaError` naming the file, row, item and field:

    * unique ``id``; non-empty ``question``; positive image size;
    * every evidence box finite, ``x1 < x2``, ``y1 < y2``, inside the image (an overshoot of at
      most one pixel is clipped and counted);
    * ``labels`` parallel to ``boxes``;
    * ``count`` equal to the number of evidence boxes for counting items;
    * ``qtype``, ``category`` and ``relation`` from their vocabularies where set; comparison items
      name two targets;
    * a pair is exactly roles 1 and 2 on one image.

    >>> from witness.schema import item_record, items_table
    >>> t = items_table([item_record("q1", "i", 100, 100, "Any car?", "yes", [[0, 0, 100.5, 10]], ["car"])])
    >>> validate_items(t)[1].clipped_boxes
    1
    """
    table = conform(table, "item", source=source)
    ids = table.column("id").to_pylist()
    dup = _duplicates(ids)
    if dup:
        raise SchemaError(
            f"Expected unique item ids, got {dup[0]!r} twice ({where(source, ids.index(dup[0]), dup[0], 'id')}). "
            "Give every item its own id."
        )
    width, height = _check_sizes(table, ids, source)
    questions = table.column("question").to_pylist()
    for r, q in enumerate(questions):
        if not q or not q.strip():
            raise SchemaError(f"Expected a question, got {q!r} ({where(source, r, ids[r], 'question')}). Write the question.")
    xyxy, offsets = flat_boxes(table.column("boxes"))
    xyxy, n_clipped = _check_boxes(xyxy, offsets, width, height, ids, source=source, column="boxes")
    n_boxes = np.diff(offsets)
    labels = table.column("labels").combine_chunks()
    n_labels = pc.fill_null(pc.list_value_length(labels), 0).to_numpy(zero_copy_only=False)
    bad = np.flatnonzero(n_labels != n_boxes)
    if len(bad):
        r = int(bad[0])
        raise SchemaError(
            f"Expected one label per evidence box ({n_boxes[r]} boxes), got {n_labels[r]} labels "
            f"({where(source, r, ids[r], 'labels')}). Keep labels parallel to boxes."
        )
    qtypes = table.column("qtype").to_pylist()
    counts = table.column("count").to_numpy(zero_copy_only=False)
    for name, vocab, values in (
        ("qtype", _QTYPE_SET, qtypes),
        ("category", _CATEGORY_SET, table.column("category").to_pylist()),
        ("relation", _RELATION_SET, table.column("relation").to_pylist()),
    ):
        for r, v in enumerate(values):
            if v is not None and v not in vocab:
                raise SchemaError(
                    f"Expected {name} in {sorted(vocab)}, got {v!r} ({where(source, r, ids[r], name)}). Use a known {name}."
                )
    is_counting = np.array([q == "counting" for q in qtypes], dtype=bool)
    count_null = table.column("count").is_null().to_numpy(zero_copy_only=False)
    mismatch = is_counting & (count_null | (np.nan_to_num(counts.astype(np.float64), nan=-1) != n_boxes))
    if mismatch.any():
        r = int(np.flatnonzero(mismatch)[0])
        got = None if count_null[r] else int(counts[r])
        raise SchemaError(
            f"Expected count {int(n_boxes[r])} (the number of evidence boxes) for a counting item, got {got} "
            f"({where(source, r, ids[r], 'count')}). Make the stated count and the evidence agree."
        )
    relations = table.column("relation").to_pylist()
    targets = table.column("targets").to_pylist()
    for r, q in enumerate(qtypes):
        if q == "comparison" and (relations[r] is None or not targets[r] or len(targets[r]) != 2):
            raise SchemaError(
                f"Expected a comparison item with relation and two targets [A, B], got relation {relations[r]!r}, "
                f"targets {targets[r]!r} ({where(source, r, ids[r], 'targets')}). Set both."
            )
    _check_pairs(table, ids, source)
    if n_clipped:
        table = table.set_column(
            table.schema.get_field_index("boxes"), ITEM_SCHEMA.field("boxes"), _rebuild_boxes(xyxy, offsets)
        )
    warnings = (f"clipped {n_clipped} box(es) overshooting the image by at most {OVERSHOOT_TOLERANCE_PX:g} px",) if n_clipped else ()
    return table, ValidationReport(len(ids), len(xyxy), n_clipped, warnings)


def _check_pairs(table: pa.Table, ids: list, source: object) -> None:
    pair_ids = table.column("pair_id").to_pylist()
    roles = table.column("pair_role").to_pylist()
    image_ids = table.column("image_id").to_pylist()
    members: dict[str, list[int]] = {}
    for r, (p, role) in enumerate(zip(pair_ids, roles)):
        if p is None:
            if role is not None:
                raise SchemaError(
                    f"Expected pair_role to be null without a pair_id, got {role} ({where(source, r, ids[r], 'pair_role')}). "
                    "Set both or neither."
                )
            continue
        members.setdefault(p, []).append(r)
    for p, rows in members.items():
        got_roles = sorted(roles[r] for r in rows if roles[r] is not None)
        if got_roles != [1, 2] or len(rows) != 2:
            r = rows[0]
            raise SchemaError(
                f"Expected pair {p!r} to hold exactly roles 1 and 2, got roles {[roles[k] for k in rows]} "
                f"({where(source, r, ids[r], 'pair_role')}). Keep both questions of a pair, once each."
            )
        if image_ids[rows[0]] != image_ids[rows[1]]:
            raise SchemaError(
                f"Expected both questions of pair {p!r} on one image, got {image_ids[rows[0]]!r} and "
                f"{image_ids[rows[1]]!r} ({where(source, rows[1], ids[rows[1]], 'image_id')}). A pair shares its image."
            )


def validate_annotations(table: pa.Table, *, source: object = None) -> pa.Table:
    """Check an annotations table: roles and decisions from their vocabularies, valid boxes' shape."""
    table = conform(table, "annotation", source=source)
    ids = table.column("item_id").to_pylist()
    for name, vocab in (("role", ROLES), ("decision", DECISIONS)):
        for r, v in enumerate(table.column(name).to_pylist()):
            if v is not None and v not in vocab:
                raise SchemaError(
                    f"Expected {name} in {list(vocab)}, got {v!r} ({where(source, r, ids[r], name)}). Use a known {name}."
                )
    flat_boxes(table.column("boxes"))
    return table


def hf_features():
    """The Hugging Face ``datasets.Features`` of an item release (requires ``datasets``)."""
    from .errors import require

    ds = require("datasets", "eval")
    f = ds.Features
    v = ds.Value
    seq = ds.Sequence
    return f(
        {
            "id": v("string"),
            "image": ds.Image(),
            "image_id": v("string"),
            "width": v("int32"),
            "height": v("int32"),
            "question": v("string"),
            "answer": v("string"),
            "boxes": seq(seq(v("float32"))),
            "labels": seq(v("string")),
            "count": v("int32"),
            "qtype": v("string"),
            "category": v("string"),
            "targets": seq(v("string")),
            "relation": v("string"),
            "pair_id": v("string"),
            "pair_role": v("int8"),
            "split": v("string"),
            "source": v("string"),
            "provenance": {
                "drafted_by": v("string"),
                "annotated_by": seq(v("string")),
                "reviewed_by": seq(v("string")),
                "audit": v("string"),
            },
        }
    )

