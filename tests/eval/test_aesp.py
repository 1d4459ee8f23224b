"""AESP suite: support rules per question type, the evaluation subset, coverage without IoU,
max-cardinality matching, LLM extraction and per-qtype keys."""

from __future__ import annotations

import pytest

from witness.errors import SchemaError
from witness.eval.aesp import evaluate_aesp
from witness.eval.data import load_samples, samples_from_records
from witness.schema import item_record

SHIP = [[0, 0, 10, 10], [20, 0, 30, 10], [40, 0, 50, 10]]
PLANE = [[0, 50, 10, 60]]


def _items():
    return [
        # existence, reference yes
        item_record("e1", "i", 100, 100, "Is there a ship?", "yes", SHIP[:1], ["ship"], qtype="existence"),
        # existence, reference no: outside the evaluation subset
        item_record("e2", "i", 100, 100, "Is there a car?", "no", qtype="existence"),
        # counting, 3 ships
        item_record("c1", "i", 100, 100, "How many ships?", "3", SHIP, ["ship"] * 3, count=3, qtype="counting"),
        # comparison: more ships than planes? yes
        item_record("m1", "i", 100, 100, "Are there more ships than planes?", "yes", SHIP + PLANE,
                    ["ship"] * 3 + ["plane"], qtype="comparison", targets=["ship", "plane"], relation="more"),
        # other qtype: skipped
        item_record("x1", "i", 100, 100, "What colour?", "grey", SHIP[:1], ["ship"], qtype="attribute"),
    ]


def test_aesp_hand_worked():
    preds = [
        {"id": "e1", "answer": "Yes", "boxes": [[2, 2, 8, 8]]},  # centre (5,5) covered: supported, correct
        {"id": "e2", "answer": "Yes, there is one.", "boxes": []},  # wrong and unsupported (n_c = 0); not in subset
        {"id": "c1", "answer": "I count two ships.", "boxes": [[0, 0, 32, 12]]},  # one big box covers 2 centres: n_c = 2 = â
        {"id": "m1", "answer": "no", "boxes": [[0, 50, 10, 60]]},  # n_A = 0, n_B = 1 -> "no" supported (0 <= 1), wrong
        {"id": "x1", "answer": "grey", "boxes": []},
    ]
    r = evaluate_aesp(samples_from_records(_items(), preds))
    m = r.metrics
    assert m["n_skipped"] == 1 and r.n == 4 and m["n_eval"] == 3
    assert m["accuracy"] == pytest.approx(1 / 4)  # only e1 is right
    assert m["es_overall"] == pytest.approx(3 / 3)  # e1, c1, m1 supported
    assert m["es_correct"] == pytest.approx(1.0)
    assert m["joint_success"] == pytest.approx(1 / 3)
    # max-cardinality matching on the subset: e1 box IoU .36 < .5; c1 big box vs 3 ships < .5; m1 exact plane
    assert m["precision"] == pytest.approx(1 / 3)
    assert m["recall"] == pytest.approx(1 / 8)
    assert r.by["qtype"]["counting"]["es_overall"] == 1.0
    assert r.by["qtype"]["existence"]["n_eval"] == 1
    detail = r.samples.to_pylist()
    assert [d["coverage"] for d in detail][:3] == [1, 0, 2]


@pytest.mark.parametrize(
    "relation, answer, boxes, supported",
    [
        ("more", "yes", SHIP[:2] + PLANE, True),  # 2 > 1
        ("more", "no", SHIP[:1] + PLANE, True),  # 1 <= 1
        ("more", "yes", [], False),  # 0 > 0 fails
        ("more", "no", [], True),  # both zero: "no" is supported by grounding nothing
        ("fewer", "yes", PLANE + SHIP[:2], False),  # n_A = 2 ships, n_B = 1 plane: 2 < 1 is false
        ("fewer", "no", PLANE + SHIP[:2], True),
        ("equal", "yes", SHIP[:1] + PLANE, True),
        ("equal", "no", SHIP[:1] + PLANE, False),
    ],
)
def test_comparison_support(relation, answer, boxes, supported):
    items = [item_record("m", "i", 100, 100, "Q?", "yes", SHIP + PLANE, ["ship"] * 3 + ["plane"], qtype="comparison",
                         targets=["ship", "plane"], relation=relation)]
    r = evaluate_aesp(samples_from_records(items, [{"id": "m", "answer": answer, "boxes": boxes}]))
    assert r.metrics["es_overall"] == float(supported)


def test_counting_support_is_judged_against_the_model_answer():
    items = [item_record("c", "i", 100, 100, "How many?", "3", SHIP, ["ship"] * 3, count=3, qtype="counting")]
    r = evaluate_aesp(samples_from_records(items, [{"id": "c", "answer": "2", "boxes": SHIP[:2]}]))
    assert r.metrics["es_overall"] == 1.0 and r.metrics["accuracy"] == 0.0 and r.metrics["joint_success"] == 0.0


def test_ambiguous_answers_score_zero_and_are_counted():
    items = [item_record("c", "i", 100, 100, "How many?", "3", SHIP, ["ship"] * 3, count=3, qtype="counting")]
    r = evaluate_aesp(samples_from_records(items, [{"id": "c", "answer": "two or three", "boxes": SHIP[:2]}]))
    assert r.metrics["n_ambiguous"] == 1 and r.metrics["es_overall"] == 0.0


def test_llm_extractor_is_used_for_undecided_answers():
    class R:
        def __init__(self, text):
            self.text = text

    class LLM:
        def chat_many(self, requests, *, progress=None):
            return [R('{"answer": 2}') for _ in requests]

    items = [item_record("c", "i", 100, 100, "How many?", "2", SHIP[:2], ["ship"] * 2, count=2, qtype="counting")]
    r = evaluate_aesp(samples_from_records(items, [{"id": "c", "answer": "two or three", "boxes": SHIP[:2]}]), llm=LLM())
    assert r.metrics["n_ambiguous"] == 0 and r.metrics["joint_success"] == 1.0
    assert r.samples.column("extractor").to_pylist() == ["llm"]


def test_aesp_needs_qtype(tmp_path):
    from witness.io import write_jsonl

    gt = write_jsonl([{"id": "a", "image_id": "i", "width": 10, "height": 10, "question": "Q?", "answer": "1",
                       "boxes": []}], tmp_path / "items.jsonl")
    pred = write_jsonl([{"id": "a", "answer": "1"}], tmp_path / "p.jsonl")
    s = load_samples(gt, pred, "aesp")
    r = evaluate_aesp(s)  # a GT with no question types: nothing in scope
    assert r.n == 0 and r.metrics["n_skipped"] == 1
    del s.columns["qtype"]
    with pytest.raises(SchemaError, match="Expected the item column 'qtype'"):
        evaluate_aesp(s)


def test_comparison_without_labels_or_relation_is_refused():
    # a GT without labels used to crash with a numpy broadcast error (or, with one box, count nothing)
    item = _items()[3]
    no_labels = dict(item, labels=[])
    with pytest.raises(SchemaError, match=r"Expected one label per reference box \(4 boxes\).*got 0 labels"):
        evaluate_aesp(samples_from_records([no_labels], [{"id": "m1", "answer": "yes", "boxes": SHIP}]))
    one_box = dict(item, boxes=SHIP[:1], labels=[])
    with pytest.raises(SchemaError, match="one label per reference box"):
        evaluate_aesp(samples_from_records([one_box], [{"id": "m1", "answer": "yes", "boxes": SHIP}]))
    # no relation: support used to be silently 0 whatever the boxes
    no_rel = dict(item, relation=None)
    with pytest.raises(SchemaError, match=r"relation in \['more', 'fewer', 'equal'\].*item 'm1'"):
        evaluate_aesp(samples_from_records([no_rel], [{"id": "m1", "answer": "yes", "boxes": SHIP}]))
