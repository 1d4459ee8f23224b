"""Rule drafts: every answer and evidence set re-derived from the hand-built scene."""

from __future__ import annotations

import re
import time

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from witness.annotate import rules as R
from witness.annotate.rules import (
    RULE_TYPES,
    Draft,
    draft_rules,
    refer,
    scene_views,
    summarize_drafts,
)
from witness.errors import InputError, SchemaError, UnknownNameError
from witness.io import read_items, write_table
from witness.schema import QTYPE_CATEGORY, validate_items

from .conftest import make_scenes, obj, random_demo_scenes

WORDS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve".split())}


def stated(answer: str) -> int | None:
    """First cardinal number of an answer (digits or number words), as the AGC suite reads it."""
    for tok in re.findall(r"[a-z]+|\d+", answer.lower()):
        if tok.isdigit():
            return int(tok)
        if tok in WORDS:
            return WORDS[tok]
    return None


def yes(answer: str) -> bool:
    first = answer.split()[0].strip(".,").lower()
    assert first in ("yes", "no"), answer
    return first == "yes"


def rows(items: pa.Table) -> list[dict]:
    return items.to_pylist()


def objects_of(scenes: pa.Table) -> dict[str, list[dict]]:
    return {r["image_id"]: r["objects"] for r in scenes.to_pylist()}


def boxes_of(objs, pred) -> list[tuple]:
    return sorted(tuple(o["box"]) for o in objs if pred(o))


def key(boxes) -> list[tuple]:
    return sorted(tuple(b) for b in boxes)


def attrs(o) -> dict:
    a = o["attributes"]
    return dict(a) if a else {}


# ------------------------------------------------------------------ counting and existence


def test_counting_three_cars_exact_evidence(count_scenes):
    items = rows(draft_rules(count_scenes, types="counting"))
    car = [r for r in items if r["image_id"] == "cars" and r["targets"] == ["car"]]
    assert len(car) == 1
    r = car[0]
    assert r["count"] == 3 and stated(r["answer"]) == 3
    objs = objects_of(count_scenes)["cars"]
    assert key(r["boxes"]) == boxes_of(objs, lambda o: o["label"] == "car")
    assert r["labels"] == ["car"] * 3
    truck = [r for r in items if r["image_id"] == "cars" and r["targets"] == ["truck"]][0]
    assert truck["count"] == 1 and stated(truck["answer"]) == 1 and truck["labels"] == ["truck"]


def test_counting_zero_and_seven_plus(count_scenes):
    items = rows(draft_rules(count_scenes, types=["counting"]))
    zero = [r for r in items if r["image_id"] == "cars" and r["count"] == 0]
    assert zero and all(r["boxes"] == [] and stated(r["answer"]) == 0 for r in zero)
    assert all(t not in ("car", "truck") for r in zero for t in r["targets"])
    crowd = [r for r in items if r["image_id"] == "crowd" and r["targets"] == ["pedestrian"]][0]
    assert crowd["count"] == 8 and len(crowd["boxes"]) == 8 and stated(crowd["answer"]) == 8


def test_existence_yes_all_instances_no_empty(count_scenes):
    objs = objects_of(count_scenes)
    vocab = {o["label"] for v in objs.values() for o in v}
    for seed in range(5):
        items = rows(draft_rules(count_scenes, types="existence", seed=seed))
        for r in items:
            present = {o["label"] for o in objs[r["image_id"]]}
            (target,) = r["targets"]
            assert target in vocab
            if yes(r["answer"]):
                assert target in present
                assert key(r["boxes"]) == boxes_of(objs[r["image_id"]], lambda o, t=target: o["label"] == t)
            else:
                assert target not in present and r["boxes"] == []
        assert {yes(r["answer"]) for r in items if r["image_id"] == "cars"} == {True, False}


# ------------------------------------------------------------------ comparison


def test_comparison_more_cars_than_trucks():
    scenes = make_scenes(("a", [obj(f"c{k}", "car", [10 + 60 * k, 10, 50 + 60 * k, 50]) for k in range(3)]
                          + [obj("t", "truck", [400, 10, 500, 90])]))
    found = None
    for seed in range(200):
        for r in rows(draft_rules(scenes, types="comparison", seed=seed)):
            if r["targets"] == ["car", "truck"] and r["relation"] == "more":
                found = r
        if found:
            break
    assert found is not None
    assert yes(found["answer"]) and len(found["boxes"]) == 4 and sorted(found["labels"]) == ["car"] * 3 + ["truck"]
    assert found["count"] is None


def test_comparison_rederived_on_random_scenes(demo_scenes):
    objs = objects_of(demo_scenes)
    items = [r for r in rows(draft_rules(demo_scenes, types="comparison")) if r["qtype"] == "comparison"]
    assert items
    for r in items:
        a, b = r["targets"]
        na = sum(o["label"] == a for o in objs[r["image_id"]])
        nb = sum(o["label"] == b for o in objs[r["image_id"]])
        truth = {"more": na > nb, "fewer": na < nb, "equal": na == nb}[r["relation"]]
        assert yes(r["answer"]) == truth
        assert len(r["boxes"]) == na + nb and set(r["labels"]) <= {a, b}
    assert {r["relation"] for r in items} == {"more", "fewer", "equal"}


# ------------------------------------------------------------------ identification, selection, attribute


def test_identification_largest_is_the_bus():
    scenes = make_scenes(("a", [obj("b", "bus", [0, 0, 300, 200]), obj("c", "car", [400, 300, 450, 340])]))
    hits = []
    for seed in range(30):
        hits += [r for r in rows(draft_rules(scenes, types="identification", seed=seed)) if "largest" in r["question"] or "biggest" in r["question"] or "most space" in r["question"]]
    assert hits
    for r in hits:
        assert "bus" in r["answer"].lower() and r["labels"] == ["bus"] and r["boxes"] == [[0, 0, 300, 200]]


def test_identification_and_selection_answer_their_evidence(road_scene, demo_scenes):
    for scenes in (road_scene, demo_scenes):
        for seed in range(3):
            items = rows(draft_rules(scenes, types="identification,selection", seed=seed))
            for r in items:
                assert len(r["boxes"]) == 1, r
                assert r["labels"][0].replace("_", " ") in r["answer"].lower(), r


def test_selection_answer_picks_out_one_object(road_scene):
    views = {v.image_id: v for v in scene_views(road_scene)}
    seen = 0
    for seed in range(20):
        for r in rows(draft_rules(road_scene, types="selection", seed=seed)):
            v = views[r["image_id"]]
            i = int(np.flatnonzero((v.boxes == np.array(r["boxes"][0])).all(axis=1))[0])
            desc = r["answer"].rstrip(".").removeprefix("It is ")
            phrases = [p for p, m in R._phrases(v, i, ()) if p == desc.lower() or p == desc[0].lower() + desc[1:]]
            assert phrases, (desc, r)
            seen += 1
    assert seen


def test_attribute_answer_is_the_objects_value(road_scene, demo_scenes):
    for scenes in (road_scene, demo_scenes):
        objs = objects_of(scenes)
        for r in rows(draft_rules(scenes, types="attribute")):
            (b,) = r["boxes"]
            (o,) = [o for o in objs[r["image_id"]] if o["box"] == b]
            a = attrs(o)
            ans = r["answer"].lower()
            q = r["question"].lower()
            if "colo" in q:
                assert a["color"] in ans
            elif "moving or waiting" in q or "moving, or is it waiting" in q:
                assert a["motion"] in ans
            elif "approaching or receding" in q or "approaching the camera or" in q:
                assert a["direction"] in ans
            elif "on the road, " in q or q.startswith("where is"):
                assert a["area"] in ans
            else:
                assert "lane" in q
                assert ["first", "second", "third", "fourth"][int(a["lane"]) - 1] in ans
            assert stated(r["answer"]) is None and r["count"] is None


def test_no_ambiguous_attribute_question_with_two_red_cars():
    # two red cars overlapping horizontally: no expression picks out one of them
    scenes = make_scenes(("a", [obj("c1", "car", [10, 10, 100, 60], color="red"),
                                obj("c2", "car", [50, 100, 140, 150], color="red"),
                                obj("b", "bus", [300, 10, 500, 200], color="blue")]))
    v = scene_views(scenes)[0]
    assert refer(v, 0) is None and refer(v, 1) is None and refer(v, 2) == "the bus"
    for seed in range(30):
        for r in rows(draft_rules(scenes, seed=seed)):
            if r["qtype"] in ("attribute", "selection", "spatial", "identification"):
                assert "the red car" not in r["question"].lower()
                assert "the car" not in r["question"].lower()
            if r["qtype"] == "attribute":
                assert r["labels"] == ["bus"] and "blue" in r["answer"].lower()


def test_refer_prefers_shortest_unique(road_scene):
    v = scene_views(road_scene)[0]
    assert refer(v, 4) == "the truck"
    assert refer(v, 1) == "the car in the first lane"
    assert refer(v, 3) == "the blue car"
    assert refer(v, 3, exclude=["color"]) == "the car in the third lane"


# ------------------------------------------------------------------ spatial


def test_spatial_rederived(road_scene, demo_scenes):
    for scenes in (road_scene, demo_scenes):
        objs = objects_of(scenes)
        views = {v.image_id: v for v in scene_views(scenes)}
        items = rows(draft_rules(scenes, types="spatial"))
        assert items
        for r in items:
            q = r["question"].lower()
            if " left " in q or " right " in q:
                (x1a, _, x2a, _), (x1b, _, x2b, _) = r["boxes"]
                assert x2a <= x1b or x2b <= x1a  # asked only without horizontal overlap
                truth = x2a <= x1b if " left " in q else x2b <= x1a
                assert yes(r["answer"]) == truth
            elif q.startswith(("how many", "count")):
                (target,) = r["targets"]
                on = R.on_crosswalk(views[r["image_id"]])
                labels = views[r["image_id"]].labels
                assert r["count"] == len(r["boxes"]) == int((on & (labels == target)).sum())
                assert stated(r["answer"]) == r["count"]
                for b in r["boxes"]:
                    (o,) = [o for o in objs[r["image_id"]] if o["box"] == b]
                    assert attrs(o).get("area", "crosswalk") == "crosswalk"
            else:
                assert len(r["boxes"]) == 1 and ("nearest" in q or "closest" in q)


def test_on_crosswalk_count_in_road_scene(road_scene):
    hits = []
    for seed in range(40):
        hits += [r for r in rows(draft_rules(road_scene, types="spatial", seed=seed))
                 if r["targets"] == ["pedestrian"] and r["count"] is not None]
    assert hits
    for r in hits:
        assert r["count"] == 1 and r["boxes"] == [[300, 250, 320, 340]]


# ------------------------------------------------------------------ the table as a whole


def test_output_validates_and_copies_scene_fields(road_scene):
    items = draft_rules(road_scene)
    validate_items(items)
    assert items.schema.equals(validate_items(items)[0].schema)
    rs = rows(items)
    assert set(r["qtype"] for r in rs) == set(RULE_TYPES)
    for r in rs:
        assert re.fullmatch(rf"{r['image_id']}:{r['qtype']}:\d+", r["id"])
        assert r["category"] == QTYPE_CATEGORY[r["qtype"]]
        assert r["provenance"]["drafted_by"] == "rules"
        assert r["split"] == "train" and r["source"] == "test"
        assert r["image"]["path"] == f"/img/{r['image_id']}.jpg"
        assert r["width"] == 640 and r["height"] == 480
        assert len(r["labels"]) == len(r["boxes"])
        if r["qtype"] == "counting":
            assert r["count"] == len(r["boxes"])
        if r["count"] is None:
            assert stated(r["answer"]) is None, r
        else:
            assert stated(r["answer"]) == r["count"], r
    for image_id in ("road", "other"):
        for q in RULE_TYPES:
            ks = [int(r["id"].rsplit(":", 1)[1]) for r in rs if r["image_id"] == image_id and r["qtype"] == q]
            assert ks == list(range(len(ks)))


def test_deterministic_for_a_seed(demo_scenes):
    a = draft_rules(demo_scenes, seed=3)
    b = draft_rules(demo_scenes, seed=3)
    assert a.equals(b)
    c = draft_rules(demo_scenes, seed=4)
    assert a.column("question").to_pylist() != c.column("question").to_pylist()
    # a scene's drafts do not depend on the other scenes (vocabulary aside)
    one = draft_rules(demo_scenes.slice(5, 1), seed=3, types="counting")
    assert one.column("question").to_pylist()[0] in a.column("question").to_pylist()


def test_per_image_limit_round_robin(road_scene):
    items = rows(draft_rules(road_scene, per_image=3))
    for image_id in ("road", "other"):
        mine = [r for r in items if r["image_id"] == image_id]
        assert len(mine) == 3 and len({r["qtype"] for r in mine}) == 3


def test_label_only_scenes(demo_scenes):
    scenes = random_demo_scenes(30, seed=5, attributes=False)
    items = draft_rules(scenes)
    validate_items(items)
    qtypes = set(items.column("qtype").to_pylist())
    assert "attribute" not in qtypes and {"existence", "counting", "comparison"} <= qtypes


def test_templates_vary(demo_scenes):
    qs = {r["question"].split(" ")[0] for r in rows(draft_rules(demo_scenes, types="counting"))}
    assert len(qs) >= 3


def my_rule(view, rng, ctx):
    return [Draft("scene", "Is this a road scene?", "Yes.")]


def test_module_attr_rule(road_scene):
    items = rows(draft_rules(road_scene, types=["tests.annotate.test_rules:my_rule"]))
    assert [r["id"] for r in items] == ["road:scene:0", "other:scene:0"]
    assert items[0]["category"] == "scene_inference"


def test_summary(road_scene):
    s = summarize_drafts(draft_rules(road_scene))
    assert s.n_images == 2 and s.n_items == sum(s.per_qtype.values()) == sum(s.per_category.values())
    assert 0 < s.grounded_share <= 1 and 0 < s.multi_box_share < s.grounded_share


def test_speed_300_scenes():
    scenes = random_demo_scenes(300, seed=2)
    t0 = time.perf_counter()
    items = draft_rules(scenes)
    dt = time.perf_counter() - t0
    assert items.num_rows >= 300 * 8
    assert dt < 10.0, dt


# ------------------------------------------------------------------ errors


def test_unknown_type():
    with pytest.raises(UnknownNameError, match=r"Unknown question type 'colour'\. Expected one of \['attribute'"):
        draft_rules(make_scenes(("a", [])), types="counting,colour")


def test_empty_types():
    with pytest.raises(InputError, match="Expected at least one question type"):
        draft_rules(make_scenes(("a", [])), types=" , ")


def test_bad_module_attr():
    with pytest.raises(InputError, match="Expected an importable rule 'module:attr'"):
        draft_rules(make_scenes(("a", [])), types="tests.annotate.nowhere:rule")


def test_bad_per_image():
    with pytest.raises(InputError, match="Expected per_image to be a positive integer, got 0"):
        draft_rules(make_scenes(("a", [])), per_image=0)


def test_not_a_scenes_table():
    with pytest.raises(SchemaError, match=r"Expected a scenes table with columns .* without \['objects'\]"):
        draft_rules(pa.table({"image_id": ["a"], "width": [1], "height": [1]}))


def test_rule_with_unknown_qtype(road_scene):
    R.register_rule("_bad", lambda v, rng, ctx: [Draft("colour", "q?", "a")])
    try:
        with pytest.raises(InputError, match=r"Expected rules to draft qtypes from .*got \['colour'\]"):
            draft_rules(road_scene, types="_bad")
    finally:
        R.RULES.pop("_bad")


# ------------------------------------------------------------------ CLI


def test_cli_round_trip(tmp_path, road_scene):
    from witness.cli.main import app

    scenes = tmp_path / "scenes.parquet"
    write_table(road_scene, scenes)
    out = tmp_path / "items.parquet"
    runner = CliRunner()
    res = runner.invoke(app, ["draft", "rules", str(scenes), "--out", str(out), "--seed", "1", "--json"])
    assert res.exit_code == 0, res.output
    import json

    data = json.loads(res.stdout)
    items, _ = read_items(out)
    assert data["n_items"] == items.num_rows and items.equals(draft_rules(road_scene, seed=1))
    res = runner.invoke(app, ["draft", "rules", str(scenes), "--out", str(out), "--types", "counting,existence"])
    assert res.exit_code == 0, res.output
    assert "grounded share" in res.stdout and "counting" in res.stdout
    assert set(read_items(out)[0].column("qtype").to_pylist()) == {"counting", "existence"}


def test_cli_unknown_type_exit_2(tmp_path, road_scene):
    from witness.cli.main import app

    scenes = tmp_path / "scenes.parquet"
    write_table(road_scene, scenes)
    res = CliRunner().invoke(app, ["draft", "rules", str(scenes), "--out", str(tmp_path / "x.parquet"), "--types", "colour"])
    assert res.exit_code == 2
    assert "Unknown question type 'colour'" in res.output and "'spatial'" in res.output
    assert not (tmp_path / "x.parquet").exists()


def test_refer_ignores_attribute_missing_on_a_sibling():
    # the second car has no colour: "the red car" might be it too
    scenes = make_scenes(("a", [obj("c1", "car", [10, 10, 100, 60], color="red"),
                                obj("c2", "car", [50, 100, 140, 150]),
                                obj("b", "bus", [300, 10, 500, 200], color="blue")]))
    v = scene_views(scenes)[0]
    assert refer(v, 0) is None
    for r in rows(draft_rules(scenes, types="attribute,selection,spatial")):
        assert "red car" not in r["question"].lower() and "red car" not in r["answer"].lower()


def test_empty_scene_and_null_objects(count_scenes):
    empty = make_scenes(("void", []))
    rows_ = rows(draft_rules(pa.concat_tables([count_scenes, empty])))
    void = [r for r in rows_ if r["image_id"] == "void"]
    assert void and all(r["boxes"] == [] for r in void)
    assert {r["qtype"] for r in void} == {"existence", "counting"}
    assert all(not yes(r["answer"]) for r in void if r["qtype"] == "existence")
    nulls = empty.set_column(empty.schema.get_field_index("objects"), "objects",
                             pa.array([None], empty.schema.field("objects").type))
    assert draft_rules(nulls).num_rows == 0  # no vocabulary at all: nothing to ask


def test_progress_called_per_scene(count_scenes):
    ticks = []
    draft_rules(count_scenes, progress=ticks.append)
    assert ticks == [1, 1, 1]


_box = st.tuples(st.integers(0, 600), st.integers(0, 440), st.integers(1, 40), st.integers(1, 40))
_object = st.tuples(st.sampled_from(["car", "truck", "person", "crosswalk"]), _box,
                    st.sampled_from([None, "red", "blue"]), st.sampled_from([None, "1", "2"]))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(_object, max_size=9), min_size=1, max_size=3), st.integers(0, 3))
def test_random_scenes_always_validate(scenes_spec, seed):
    from witness.annotate.pairs import draft_pairs, pair_answers_consistent

    scenes = make_scenes(*[
        (f"i{k}", [obj(f"o{j}", lab, [x, y, x + w, y + h], **{k2: v for k2, v in (("color", c), ("lane", ln)) if v})
                   for j, (lab, (x, y, w, h), c, ln) in enumerate(objs)])
        for k, objs in enumerate(scenes_spec)
    ])
    items = draft_rules(scenes, seed=seed)
    validate_items(items)
    for r in rows(items):
        assert (stated(r["answer"]) == r["count"]) if r["count"] is not None else stated(r["answer"]) is None
    pairs = rows(draft_pairs(scenes, seed=seed))
    for one, two in zip(pairs[::2], pairs[1::2], strict=True):
        assert one["pair_id"] == two["pair_id"] and pair_answers_consistent(one, two)


def test_imported_coco_attributes_are_not_read_as_demo_attributes():
    """COCO's ``area`` is a pixel area and ``iscrowd = 1`` marks one box over many people: neither
    may become "the person on the 5000" or a count of crowd boxes as single instances."""
    crowd_box = [100, 300, 300, 450]
    scenes = make_scenes((
        "coco",
        [obj("p1", "person", [10, 10, 60, 110], iscrowd=0, area=5000),
         obj("p2", "person", [200, 10, 240, 100], iscrowd=0, area=3600),
         obj("c1", "car", [400, 200, 550, 300], iscrowd=0, area=15000),
         obj("c2", "car", [580, 200, 630, 260], iscrowd=0, area=3000),
         obj("p3", "person", crowd_box, iscrowd=1, area=30000)],
    ), ("other", [obj("t1", "truck", [0, 0, 100, 100], iscrowd=0, area=10000)]))
    seen = set()
    for seed in range(30):
        for r in rows(draft_rules(scenes, seed=seed)):
            if r["image_id"] != "coco":
                continue
            seen.add(r["qtype"])
            text = f"{r['question']} {r['answer']}"
            assert not re.search(r"\d{3,}", text), r  # no pixel area in a question or an answer
            assert "on the road" not in r["question"], r  # no area question from COCO's area
            if r["qtype"] in ("counting", "comparison") or r["count"] is not None:
                assert "person" not in r["targets"], r  # how many people a crowd box holds is unknown
            if r["qtype"] != "existence":
                assert crowd_box not in r["boxes"], r  # a crowd box is never "the person"
            if r["qtype"] == "counting" and r["targets"] == ["car"]:
                assert r["count"] == 2
    assert {"existence", "counting", "identification"} <= seen
    v = scene_views(scenes)[0]
    assert v.attr("area").tolist() == [None] * 5 and v.crowd.tolist() == [False] * 4 + [True]


def test_attribute_values_outside_the_templates_are_unknown():
    """"Is X moving or waiting?" must not be answered "Parked.": motion, direction and area values the
    templates do not name, and colours that are not words, read as missing."""
    scenes = make_scenes(("a", [obj("c1", "car", [0, 0, 50, 50], motion="parked", color="#ff0000", direction="left", area="grass"),
                                obj("b1", "bus", [100, 0, 200, 50], motion="moving", color="red", direction="receding", area="road")]))
    v = scene_views(scenes)[0]
    assert v.attr("motion").tolist() == [None, "moving"] and v.attr("color").tolist() == [None, "red"]
    assert v.attr("direction").tolist() == [None, "receding"] and v.attr("area").tolist() == [None, "road"]
    for seed in range(20):
        for r in rows(draft_rules(scenes, seed=seed, types="attribute")):
            assert r["labels"] == ["bus"], r
