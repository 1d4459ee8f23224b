"""Consensus review: hand-worked pass and fail cases."""

from witness.audit.review import consensus
from witness.schema import annotation_record, annotations_table

from .conftest import reviews


def test_two_passing_reviews_pass(small_items, passing_annotations):
    res = consensus(passing_annotations, small_items)
    assert res.n_items == 3 and res.n_passed == 3 and res.n_disagreements == 0


def test_one_failing_check_fails_and_is_a_disagreement(small_items):
    rows = reviews("q1", ("r1", "accept", None), ("r2", "accept", "box_tight"))
    res = consensus(annotations_table(rows), small_items.slice(0, 1))
    row = res.table.to_pylist()[0]
    assert not row["passed"] and row["disagreement"]
    assert row["reasons"] == ["box_tight failed (r2)"]
    assert [j["reviewer"] for j in row["judgments"]] == ["r1", "r2"]
    assert res.reasons == {"box_tight failed": 1}


def test_single_review_is_not_enough(small_items):
    res = consensus(annotations_table(reviews("q2", ("r1", "accept", None))), small_items.slice(1, 1))
    assert res.table.to_pylist()[0]["reasons"] == ["fewer than 2 reviews"]


def test_discard_fails(small_items):
    rows = reviews("q2", ("r1", "discard", None), ("r2", "accept", None))
    assert consensus(annotations_table(rows), small_items.slice(1, 1)).n_passed == 0


def test_numeric_answer_must_equal_evidence_count():
    rows = [annotation_record("q9", "ann", "annotator", answer="There are three cars.", boxes=[[0, 0, 1, 1], [2, 2, 3, 3]])]
    rows += reviews("q9", ("r1", "accept", None), ("r2", "accept", None))
    res = consensus(annotations_table(rows))
    row = res.table.to_pylist()[0]
    assert not row["passed"]
    assert row["stated_count"] == 3 and row["n_boxes"] == 2
    assert row["reasons"] == ["count mismatch (stated 3, 2 evidence boxes)"]
