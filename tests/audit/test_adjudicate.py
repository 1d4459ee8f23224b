"""Blind re-adjudication figures on a hand-worked case."""

import pytest

from witness.audit.adjudicate import adjudicate
from witness.errors import InputError
from witness.schema import annotation_record, annotations_table

B1, B2 = [0, 0, 10, 10], [20, 20, 30, 30]


def test_hand_worked(small_items):
    rows = [
        # q1 counting "2" with two boxes: x confirms both; y says 3 and adds a box -> disputed
        annotation_record("q1", "x", "adjudicator", answer="two", boxes=[B1, B2]),
        annotation_record("q1", "y", "adjudicator", answer="3", boxes=[B1, B2, [50, 50, 60, 60]]),
        # q2 existence "no", no boxes: both confirm
        annotation_record("q2", "x", "adjudicator", answer="No.", boxes=[]),
        annotation_record("q2", "y", "adjudicator", answer="no", boxes=[]),
        # q3 "yes" with one box: both confirm the answer, both find the box
        annotation_record("q3", "x", "adjudicator", answer="yes", boxes=[[0, 0, 10, 10.5]]),
        annotation_record("q3", "y", "adjudicator", answer="Yes", boxes=[B1]),
    ]
    r = adjudicate(small_items, annotations_table(rows))
    assert r.n_items == 3
    assert r.answer_confirmed == pytest.approx(2 / 3)
    assert r.evidence_confirmed == pytest.approx(2 / 3)
    assert r.count_box_agreement == 0.0 and r.n_counting == 1
    assert r.disputed == ["q1"]
    assert r.per_adjudicator["x"]["answer_confirmed"] == 1.0


def test_needs_adjudicators(small_items):
    with pytest.raises(InputError, match="role 'adjudicator'"):
        adjudicate(small_items, annotations_table([annotation_record("q1", "x", "annotator", answer="2")]))
