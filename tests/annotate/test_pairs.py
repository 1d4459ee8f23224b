"""Logically equivalent pairs: both answers re-derived from the scene, and derivable from each other."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from witness.annotate.pairs import (
    PAIR_CATEGORIES,
    PAIR_KINDS,
    derive_answer,
    draft_pairs,
    pair_answers_consistent,
    pair_kind,
    yes_no,
)
from witness.annotate.rules import refer, scene_views
from witness.errors import InputError, UnknownNameError
from witness.io import read_items, write_table
from witness.schema import CATEGORIES, validate_items

from .conftest import make_scenes, obj, random_demo_scenes


def pairs_of(items) -> list[tuple[dict, dict]]:
    rows = items.to_pylist()
    by: dict[str, dict[int, dict]] = {}
    for r in rows:
        by.setdefault(r["pair_id"], {})[r["pair_role"]] = r
    assert all(sorted(v) == [1, 2] for v in by.values())
    return [(v[1], v[2]) for v in by.values()]


def key(boxes) -> list[tuple]:
    return sorted(tuple(b) for b in boxes)


def rederive(objs: list[dict], view, one: dict, two: dict) -> tuple[bool, bool]:
    """Both answers from the scene alone, by the kind the questions have; checks evidence too."""
    kind = pair_kind(one, two).name
    labels = [o["label"] for o in objs]
    if kind.startswith("comparison"):
        a, b = one["targets"]
        assert two["targets"] == [b, a]
        na, nb = labels.count(a), labels.count(b)
        both = key(o["box"] for o in objs if o["label"] in (a, b))
        assert key(one["boxes"]) == both == key(two["boxes"])
        if kind == "comparison_equal":
            assert one["relation"] == two["relation"] == "equal"
            return na == nb, nb == na
        assert (one["relation"], two["relation"]) == ("more", "fewer")
        return na > nb, nb < na
    if kind == "spatial_left_right":
        bx, by = one["boxes"]
        assert two["boxes"] == [by, bx]
        i, j = (next(k for k, o in enumerate(objs) if o["box"] == b) for b in (bx, by))
        for k in (i, j):  # each object named by a unique expression
            assert refer(view, k, exclude=("position",)) in one["question"].lower()
        return bx[2] <= by[0], by[0] >= bx[2]
    if kind == "existence_free":
        (a,) = one["targets"]
        inst = key(o["box"] for o in objs if o["label"] == a)
        assert key(one["boxes"]) == inst == key(two["boxes"])
        return bool(inst), not inst
    (b,) = one["boxes"]
    assert two["boxes"] == [b]
    (o,) = [o for o in objs if o["box"] == b]
    attrs = dict(o["attributes"])
    if kind.startswith("attribute_color"):
        value = re.search(r"(\w+)\?$", one["question"]).group(1)
        truth = attrs["color"] == value
        return truth, truth if kind == "attribute_color_same" else not truth
    if kind == "state_motion":
        return attrs["motion"] == "moving", attrs["motion"] == "waiting"
    assert kind == "state_direction"
    return attrs["direction"] == "approaching", attrs["direction"] == "receding"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_pair_rederived_and_derivable(seed, demo_scenes):
    items = draft_pairs(demo_scenes, seed=seed)
    validate_items(items)
    objs = {r["image_id"]: r["objects"] for r in demo_scenes.to_pylist()}
    views = {v.image_id: v for v in scene_views(demo_scenes)}
    kinds = set()
    for one, two in pairs_of(items):
        assert one["image_id"] == two["image_id"]
        assert re.fullmatch(rf"{one['image_id']}:pair:\d+", one["pair_id"])
        assert (one["id"], two["id"]) == (one["pair_id"] + ":1", one["pair_id"] + ":2")
        kind = pair_kind(one, two)
        kinds.add(kind.name)
        assert one["category"] == two["category"] == kind.category in CATEGORIES
        assert one["qtype"] == kind.qtype
        assert two["qtype"] == (None if kind.name == "existence_free" else kind.qtype)
        a1, a2 = rederive(objs[one["image_id"]], views[one["image_id"]], one, two)
        assert yes_no(one["answer"]) is a1 and yes_no(two["answer"]) is a2, (one, two)
        assert pair_answers_consistent(one, two)
        flipped = dict(two, answer="No." if a2 else "Yes.")
        assert not pair_answers_consistent(one, flipped)
        assert one["provenance"]["drafted_by"] == "pairs" and one["count"] is None
    assert len(kinds) >= 6


def test_all_categories_on_road_scene(road_scene):
    items = draft_pairs(road_scene)
    cats = {r["category"] for r in items.to_pylist() if r["image_id"] == "road"}
    assert cats == set(PAIR_CATEGORIES)


def test_cars_trucks_pair():
    scenes = make_scenes(("a", [obj(f"c{k}", "car", [10 + 60 * k, 10, 50 + 60 * k, 50]) for k in range(3)]
                          + [obj("t", "truck", [400, 10, 500, 90])]))
    found = None
    for seed in range(50):
        for one, two in pairs_of(draft_pairs(scenes, seed=seed, categories="enumeration")):
            if one["targets"] == ["car", "truck"] and one["relation"] == "more":
                found = (one, two)
    assert found
    one, two = found
    assert one["question"].startswith(("Are there more cars than trucks", "Does the image show more cars than trucks"))
    assert "fewer trucks than cars" in two["question"]
    assert one["answer"] == two["answer"] == "Yes." and len(one["boxes"]) == 4


def test_label_only_scenes_have_no_attribute_pairs():
    items = draft_pairs(random_demo_scenes(20, seed=4, attributes=False))
    cats = set(items.column("category").to_pylist())
    assert {"enumeration", "existence"} <= cats
    assert not cats & {"attribute_recognition", "behavioral_reasoning"}


def test_deterministic(demo_scenes):
    assert draft_pairs(demo_scenes, seed=7).equals(draft_pairs(demo_scenes, seed=7))
    assert draft_pairs(demo_scenes, seed=7).column("question") != draft_pairs(demo_scenes, seed=8).column("question")


def test_categories_filter(road_scene):
    items = draft_pairs(road_scene, categories=["existence", "spatial_reasoning"])
    assert set(items.column("category").to_pylist()) == {"existence", "spatial_reasoning"}


def test_relation_table():
    assert {k.relation for k in PAIR_KINDS.values()} == {"same", "opposite"}
    assert derive_answer("Yes.", "spatial_left_right") == "Yes."
    assert derive_answer("no", PAIR_KINDS["state_motion"]) == "Yes."


def test_unknown_category():
    with pytest.raises(UnknownNameError, match=r"Unknown pair category 'colour'\. Expected one of \['attribute_recognition'"):
        draft_pairs(make_scenes(("a", [])), categories="colour")


def test_empty_categories():
    with pytest.raises(InputError, match="Expected at least one pair category"):
        draft_pairs(make_scenes(("a", [])), categories=",")


def test_pair_kind_unknown_questions():
    with pytest.raises(InputError, match="Expected a question pair drafted from witness's pair templates"):
        pair_kind({"question": "How many cars?"}, {"question": "What colour is the bus?"})


def test_derive_answer_needs_yes_no():
    with pytest.raises(InputError, match="Expected a yes/no answer 1, got '3 cars'"):
        derive_answer("3 cars", "comparison_equal")


def test_consistent_needs_yes_no_answer_2():
    with pytest.raises(InputError, match="Expected a yes/no answer 2, got 'maybe'"):
        pair_answers_consistent({"question": "Is there a bus in the image?", "answer": "Yes."},
                                {"question": "Is the scene free of buses?", "answer": "maybe"})


def test_cli_round_trip(tmp_path, road_scene):
    from witness.cli.main import app

    scenes = tmp_path / "scenes.parquet"
    write_table(road_scene, scenes)
    out = tmp_path / "pairs.parquet"
    res = CliRunner().invoke(app, ["draft", "pairs", str(scenes), "--out", str(out), "--seed", "2", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    items, _ = read_items(out)
    assert items.equals(draft_pairs(road_scene, seed=2))
    assert data["n_pairs"] * 2 == data["n_items"] == items.num_rows
    res = CliRunner().invoke(app, ["draft", "pairs", str(scenes), "--out", str(out)])
    assert res.exit_code == 0 and "multi-box share" in res.stdout


def test_cli_unknown_category_exit_2(tmp_path, road_scene):
    from witness.cli.main import app

    scenes = tmp_path / "scenes.parquet"
    write_table(road_scene, scenes)
    res = CliRunner().invoke(app, ["draft", "pairs", str(scenes), "--out", str(tmp_path / "p.parquet"), "--categories", "colour"])
    assert res.exit_code == 2 and "Unknown pair category 'colour'" in res.output


def test_pair_kind_ambiguous_questions():
    with pytest.raises(InputError, match="Expected a question pair of one kind, got .* matching"):
        pair_kind({"question": "Is the car red?"}, {"question": "Is the colour of the car not red?"})
