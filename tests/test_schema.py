"""Records: builders, conform, and every documented validation error of items, scenes, annotations."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from witness.errors import SchemaError
from witness.schema import (
    CATEGORIES,
    ITEM_SCHEMA,
    QTYPE_CATEGORY,
    QTYPES,
    SCENE_SCHEMA,
    annotation_record,
    annotations_table,
    conform,
    flat_boxes,
    hf_features,
    item_record,
    items_table,
    scene_record,
    scenes_table,
    validate_annotations,
    validate_items,
    validate_scenes,
)


def _item(i="q1", boxes=((10, 10, 20, 20),), labels=None, **kw) -> dict:
    boxes = [list(b) for b in boxes]
    labels = ["car"] * len(boxes) if labels is None else labels
    kw.setdefault("qtype", "existence")
    return item_record(i, kw.pop("image_id", "img"), kw.pop("width", 100), kw.pop("height", 80),
                       kw.pop("question", "Any car?"), "yes", boxes, labels, **kw)


def _validate(*rows) -> tuple[pa.Table, object]:
    return validate_items(items_table(list(rows)), source="items.parquet")


# ------------------------------------------------------------------------------ items


def test_valid_items_pass_unchanged() -> None:
    t, rep = _validate(_item("q1"), _item("q2", boxes=()), _item("q3", boxes=((0, 0, 100, 80),)))
    assert rep.n_records == 3 and rep.n_boxes == 2 and rep.clipped_boxes == 0 and rep.warnings == ()
    assert t.schema.equals(ITEM_SCHEMA)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_box(bad: float) -> None:
    with pytest.raises(SchemaError, match=r"Expected finite box coordinates, got .* \(item 'q2', items.parquet row 1, field 'boxes'\)"):
        _validate(_item("q1"), _item("q2", boxes=((10, bad, 20, 20),)))


@pytest.mark.parametrize("box", [(20, 10, 10, 20), (10, 20, 20, 10), (10, 10, 10, 20)])
def test_inverted_or_empty_box(box) -> None:
    with pytest.raises(SchemaError, match=r"Expected a box with x1 < x2 and y1 < y2, got .*item 'q1'"):
        _validate(_item("q1", boxes=(box,)))


@pytest.mark.parametrize("box", [(10, 10, 101.5, 20), (-1.01, 10, 20, 20), (10, 10, 20, 81.2)])
def test_outside_image_beyond_one_pixel(box) -> None:
    with pytest.raises(SchemaError, match=r"Expected a box inside the 100x80 image, got .*item 'q1'.*pixel xyxy"):
        _validate(_item("q1", boxes=(box,)))


def test_one_pixel_overshoot_is_clipped_and_counted() -> None:
    t, rep = _validate(
        _item("q1", boxes=((-1, 10, 20, 20), (10, 10, 101, 80.5))),
        _item("q2", boxes=((5, 5, 6, 6),)),
    )
    assert rep.clipped_boxes == 2 and rep.n_boxes == 3
    assert "clipped 2 box(es)" in rep.warnings[0]
    xyxy, off = flat_boxes(t.column("boxes"))
    assert xyxy.tolist() == [[0, 10, 20, 20], [10, 10, 100, 80], [5, 5, 6, 6]]
    assert off.tolist() == [0, 2, 3]
    assert t.column("boxes").type == ITEM_SCHEMA.field("boxes").type


def test_overshoot_that_collapses_the_box() -> None:
    with pytest.raises(SchemaError, match="Expected a box that keeps a positive size after clipping"):
        _validate(_item("q1", boxes=((100, 10, 100.5, 20),)))


def test_labels_not_parallel() -> None:
    with pytest.raises(SchemaError, match=r"Expected one label per evidence box \(1 boxes\), got 2 labels \(item 'q1'.*field 'labels'"):
        _validate(_item("q1", labels=["car", "bus"]))


def test_counting_count_mismatch() -> None:
    with pytest.raises(SchemaError, match=r"Expected count 1 \(the number of evidence boxes\) for a counting item, got 3"):
        _validate(_item("q1", qtype="counting", count=3))
    with pytest.raises(SchemaError, match=r"for a counting item, got None"):
        _validate(_item("q1", qtype="counting"))
    _validate(_item("q1", qtype="counting", count=1), _item("q2", boxes=(), qtype="counting", count=0))


def test_duplicate_item_ids() -> None:
    with pytest.raises(SchemaError, match=r"Expected unique item ids, got 'q1' twice"):
        _validate(_item("q1"), _item("q2"), _item("q1"))


def test_empty_question_and_bad_size() -> None:
    with pytest.raises(SchemaError, match=r"Expected a question, got '  ' \(item 'q1'"):
        _validate(_item("q1", question="  "))
    with pytest.raises(SchemaError, match=r"Expected a positive image size, got 0x80 \(item 'q1'"):
        _validate(_item("q1", width=0, boxes=()))


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"qtype": "howmany"}, r"Expected qtype in \[.*\], got 'howmany'"),
        ({"category": "vibes"}, r"Expected category in \[.*\], got 'vibes'"),
        ({"relation": "bigger"}, r"Expected relation in \[.*\], got 'bigger'"),
        ({"qtype": "comparison", "relation": "more", "targets": ["car"]}, r"Expected a comparison item with relation and two targets"),
        ({"qtype": "comparison", "targets": ["car", "bus"]}, r"got relation None, targets \['car', 'bus'\]"),
    ],
)
def test_vocabularies_and_comparison(kw: dict, match: str) -> None:
    with pytest.raises(SchemaError, match=match):
        _validate(_item("q1", **kw))


def test_valid_comparison() -> None:
    _, rep = _validate(_item("q1", qtype="comparison", relation="fewer", targets=["car", "bus"]))
    assert rep.n_records == 1


def test_pair_roles() -> None:
    ok = [_item("a", pair_id="p", pair_role=1), _item("b", pair_id="p", pair_role=2)]
    assert _validate(*ok)[1].n_records == 2
    with pytest.raises(SchemaError, match=r"Expected pair 'p' to hold exactly roles 1 and 2, got roles \[1, 1\]"):
        _validate(_item("a", pair_id="p", pair_role=1), _item("b", pair_id="p", pair_role=1))
    with pytest.raises(SchemaError, match=r"Expected pair 'p' to hold exactly roles 1 and 2, got roles \[1\]"):
        _validate(_item("a", pair_id="p", pair_role=1))
    with pytest.raises(SchemaError, match=r"got roles \[1, 2, 2\]"):
        _validate(*ok, _item("c", pair_id="p", pair_role=2))
    with pytest.raises(SchemaError, match=r"Expected pair_role to be null without a pair_id, got 2 \(item 'a'"):
        _validate(_item("a", pair_role=2))


def test_pair_on_two_images() -> None:
    with pytest.raises(SchemaError, match=r"Expected both questions of pair 'p' on one image, got 'i1' and 'i2' \(item 'b'"):
        _validate(_item("a", pair_id="p", pair_role=1, image_id="i1"), _item("b", pair_id="p", pair_role=2, image_id="i2"))


def test_box_with_three_numbers() -> None:
    t = items_table([_item("q1")])
    bad = pa.array([[[1.0, 2.0, 3.0]]], ITEM_SCHEMA.field("boxes").type)
    t = t.set_column(t.schema.get_field_index("boxes"), "boxes", bad)
    with pytest.raises(SchemaError, match=r"Expected boxes of 4 numbers \[x1, y1, x2, y2\], got 3 numbers \(row 0\)"):
        validate_items(t)


def test_validation_of_many_rows_is_columnar_and_names_the_right_row() -> None:
    rows = [_item(f"q{k}", boxes=((k % 50, 1, k % 50 + 5, 6),)) for k in range(2000)]
    rows[1733]["boxes"] = [[1, 1, 200, 6]]
    with pytest.raises(SchemaError, match=r"item 'q1733', items.parquet row 1733"):
        _validate(*rows)


# ------------------------------------------------------------------------------ conform / builders


def test_conform_adds_nullable_columns_and_casts() -> None:
    t = conform(pa.table({"id": ["a"], "answer": ["yes"], "scores": pa.array([[0.5]], pa.list_(pa.float64()))}), "prediction")
    assert t.column_names == ["id", "answer", "boxes", "scores", "raw"]
    assert t.column("scores").type == pa.list_(pa.float32())
    assert t.column("boxes").null_count == 1


def test_conform_errors() -> None:
    with pytest.raises(SchemaError, match=r"Expected column 'id' in the item file, got columns \['question'\] \(x.parquet\)"):
        conform(pa.table({"question": ["q"]}), "item", source="x.parquet")
    with pytest.raises(SchemaError, match=r"Expected a item column, got unknown column 'nope'"):
        conform(pa.table({"id": ["a"]}), "item", columns=["id", "nope"])
    with pytest.raises(SchemaError, match=r"Expected column 'width' of type int32, got string"):
        conform(pa.table({"id": ["a"], "width": ["wide"]}), "item", columns=["id", "width"])


def test_builders_round_trip_through_tables() -> None:
    r = _item("q1", provenance={"drafted_by": "rules", "annotated_by": ["ann"]}, pair_id="p", pair_role=1)
    t = items_table([r])
    back = t.to_pylist()[0]
    assert back["provenance"] == {"drafted_by": "rules", "annotated_by": ["ann"], "reviewed_by": [], "audit": None}
    assert back["boxes"] == [[10.0, 10.0, 20.0, 20.0]]
    assert item_record("q", "i", 1, 1, "?", "a", image=b"\x89PNG")["image"] == {"bytes": b"\x89PNG", "path": None}
    assert item_record("q", "i", 1, 1, "?", "a", image="x.png")["image"] == {"bytes": None, "path": "x.png"}


def test_vocabularies_are_consistent() -> None:
    assert set(QTYPE_CATEGORY) == set(QTYPES)
    assert set(QTYPE_CATEGORY.values()) <= set(CATEGORIES)
    assert len(CATEGORIES) == 9


def test_hf_features_match_the_arrow_schema() -> None:
    pytest.importorskip("datasets")
    f = hf_features()
    assert list(f) == ITEM_SCHEMA.names
    for got, want in zip(f.arrow_schema, ITEM_SCHEMA, strict=True):
        assert got.type == want.type, got.name


# ------------------------------------------------------------------------------ scenes


def _scene(image_id="s1", objects=None, w=100, h=80) -> dict:
    objects = objects if objects is not None else [{"id": "o1", "label": "car", "box": [1, 1, 10, 10], "attributes": {"color": "red"}}]
    return scene_record(image_id, w, h, objects, image=f"{image_id}.jpg")


def test_valid_scenes_and_attributes_round_trip() -> None:
    t, rep = validate_scenes(scenes_table([_scene("a"), _scene("b", objects=[])]))
    assert rep.n_records == 2 and rep.n_boxes == 1
    assert t.schema.equals(SCENE_SCHEMA)
    assert t.column("objects").to_pylist()[0][0]["attributes"] == [("color", "red")]


def test_scene_errors() -> None:
    with pytest.raises(SchemaError, match=r"Expected unique image ids, got 'a' 2 times"):
        validate_scenes(scenes_table([_scene("a"), _scene("a")]))
    with pytest.raises(SchemaError, match=r"Expected a box inside the 100x80 image, got .*item 'a'.*field 'objects.box'"):
        validate_scenes(scenes_table([_scene("a", [{"id": "o", "label": "car", "box": [1, 1, 150, 10]}])]))
    with pytest.raises(SchemaError, match=r"Expected finite box coordinates"):
        validate_scenes(scenes_table([_scene("a", [{"id": "o", "label": "car", "box": [1, 1, np.nan, 10]}])]))
    with pytest.raises(SchemaError, match=r"Expected a box with x1 < x2 and y1 < y2"):
        validate_scenes(scenes_table([_scene("a", [{"id": "o", "label": "car", "box": [9, 1, 2, 10]}])]))
    dup = [{"id": "o", "label": "car", "box": [1, 1, 5, 5]}, {"id": "o", "label": "bus", "box": [2, 2, 6, 6]}]
    with pytest.raises(SchemaError, match=r"Expected unique object ids within a scene, got 'o' twice"):
        validate_scenes(scenes_table([_scene("a", dup)]))
    with pytest.raises(SchemaError, match=r"Expected a positive image size, got 100x0"):
        validate_scenes(scenes_table([_scene("a", [], h=0)]))


def test_scene_null_label_and_short_box() -> None:
    t = scenes_table([_scene("a")])
    objs = t.column("objects").combine_chunks()
    flat = objs.flatten()
    new = pa.StructArray.from_arrays(
        [flat.field("id"), pa.array([None], pa.string()), flat.field("box"), flat.field("attributes")],
        fields=list(flat.type),
    )
    t2 = t.set_column(t.schema.get_field_index("objects"), "objects", pa.ListArray.from_arrays(objs.offsets, new))
    with pytest.raises(SchemaError, match=r"Expected an object label, got null \(item 'a'"):
        validate_scenes(t2)
    short = pa.StructArray.from_arrays(
        [flat.field("id"), flat.field("label"), pa.array([[1.0, 2.0]], pa.list_(pa.float32())), flat.field("attributes")],
        fields=list(flat.type),
    )
    t3 = t.set_column(t.schema.get_field_index("objects"), "objects", pa.ListArray.from_arrays(objs.offsets, short))
    with pytest.raises(SchemaError, match=r"Expected an object box of 4 numbers, got 2"):
        validate_scenes(t3)


def test_scene_overshoot_clipped_and_counted() -> None:
    t, rep = validate_scenes(scenes_table([_scene("a", [{"id": "o", "label": "car", "box": [-0.5, 1, 100.8, 10]}])]))
    assert rep.clipped_boxes == 1
    assert t.column("objects").to_pylist()[0][0]["box"] == [0.0, 1.0, 100.0, 10.0]


# ------------------------------------------------------------------------------ annotations


def test_annotations() -> None:
    t = validate_annotations(annotations_table([annotation_record("q1", "ann", "reviewer", decision="accept")]))
    assert t.num_rows == 1
    with pytest.raises(SchemaError, match=r"Expected role in \[.*\], got 'boss' \(item 'q1'"):
        validate_annotations(annotations_table([annotation_record("q1", "ann", "boss")]))
    with pytest.raises(SchemaError, match=r"Expected decision in \[.*\], got 'maybe'"):
        validate_annotations(annotations_table([annotation_record("q1", "ann", decision="maybe")]))


# ------------------------------------------------------------------------------ properties

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_COORD = st.floats(min_value=-5, max_value=105) | st.sampled_from([math.nan, math.inf, -math.inf])


@settings(max_examples=200)
@given(st.lists(st.lists(_COORD, min_size=4, max_size=4), max_size=6))
def test_validate_items_either_raises_or_returns_boxes_inside(boxes) -> None:
    """Any boxes: validation raises SchemaError, or every returned box is finite, ordered, inside."""
    row = item_record("q", "i", 100, 100, "Any car?", "yes", boxes, ["car"] * len(boxes))
    try:
        t, rep = validate_items(items_table([row]))
    except SchemaError as exc:
        assert str(exc).startswith("Expected ")
        return
    xyxy, _ = flat_boxes(t.column("boxes"))
    assert np.isfinite(xyxy).all()
    assert (xyxy[:, 0] < xyxy[:, 2]).all() and (xyxy[:, 1] < xyxy[:, 3]).all()
    assert (xyxy >= 0).all() and (xyxy <= 100).all()
    orig = np.asarray(boxes, dtype=np.float32).reshape(-1, 4).astype(np.float64)
    assert rep.clipped_boxes == int(((orig < 0) | (orig > 100)).any(axis=1).sum())
