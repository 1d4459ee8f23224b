"""Agreement over Annotation records: field paths, rater selection, grounded agreement."""

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from witness.audit.agreement import agreement, field_values, grounded_agreement
from witness.errors import InputError, SchemaError
from witness.schema import annotation_record, annotations_table


def _table(ratings):
    """ratings: {item: {rater: (answer, boxes)}}"""
    rows = []
    for item, per in ratings.items():
        for who, (ans, boxes) in per.items():
            rows.append(annotation_record(item, who, "annotator", answer=ans, boxes=boxes))
    return annotations_table(rows)


def test_two_raters_is_cohen_and_matches_sklearn():
    rng = np.random.default_rng(0)
    a = rng.choice(["yes", "no", "2"], 80)
    b = np.where(rng.random(80) < 0.8, a, rng.choice(["yes", "no", "2"], 80))
    t = _table({f"q{i}": {"ann": (a[i], []), "bob": (b[i], [])} for i in range(80)})
    rep = agreement(t, "answer", n_boot=0)
    assert rep.result.method == "cohen"
    assert rep.result.kappa == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    assert rep.raters == ["ann", "bob"]


def test_many_raters_two_ratings_each_is_fleiss():
    rng = np.random.default_rng(1)
    rows, counts = {}, []
    for i in range(60):
        pair = rng.choice(["a", "b", "c", "d"], 2, replace=False)
        v1 = rng.choice(["yes", "no"])
        v2 = v1 if rng.random() < 0.8 else ("no" if v1 == "yes" else "yes")
        rows[f"q{i}"] = {pair[0]: (v1, []), pair[1]: (v2, [])}
        counts.append([int(v1 == "no") + int(v2 == "no"), int(v1 == "yes") + int(v2 == "yes")])
    rep = agreement(_table(rows), "answer", n_boot=0)
    assert rep.result.method == "fleiss"
    assert rep.result.kappa == pytest.approx(sm_fleiss_kappa(np.array(counts)), abs=1e-12)


def test_latest_annotation_of_a_rater_wins():
    from datetime import datetime, timezone

    t0, t1 = datetime(2026, 1, 1, tzinfo=timezone.utc), datetime(2026, 1, 2, tzinfo=timezone.utc)
    rows = [
        annotation_record("q1", "ann", "annotator", answer="no", created_at=t1),
        annotation_record("q1", "ann", "annotator", answer="yes", created_at=t0),
        annotation_record("q1", "bob", "annotator", answer="no", created_at=t0),
        annotation_record("q2", "ann", "annotator", answer="yes", created_at=t0),
        annotation_record("q2", "bob", "annotator", answer="yes", created_at=t0),
    ]
    rep = agreement(annotations_table(rows), "answer", n_boot=0)
    assert rep.result.observed == 1.0


def test_dotted_field_and_errors():
    t = annotations_table([annotation_record("q1", "a", "reviewer", verdicts={"box_tight": True})])
    assert field_values(t, "verdicts.box_tight") == [True]
    with pytest.raises(SchemaError, match="field 'nope' in 'verdicts'"):
        field_values(t, "verdicts.nope")
    with pytest.raises(SchemaError, match="column 'nope'"):
        field_values(t, "nope")
    with pytest.raises(InputError, match="at least two"):
        agreement(t, "verdicts.box_tight", n_boot=0)
    with pytest.raises(InputError, match="none from"):
        agreement(t, "verdicts.box_tight", raters=["a", "zed"], n_boot=0)


def test_grounded_agreement_hand_worked():
    box = [0.0, 0.0, 10.0, 10.0]
    far = [50.0, 50.0, 60.0, 60.0]
    g = grounded_agreement({
        "q1": {"a": np.array([box]), "b": np.array([box])},                  # F1 1, same count
        "q2": {"a": np.array([box, far]), "b": np.array([box])},             # F1 2/3, counts differ
        "q3": {"a": np.zeros((0, 4)), "b": np.array([far])},                 # F1 0, decision differs
    })
    assert g.n_pairs == 3
    assert g.count_agreement == pytest.approx(1 / 3)
    assert g.box_f1 == pytest.approx((1 + 2 / 3 + 0) / 3)
    assert g.box_f1_perfect == pytest.approx(1 / 3)


def test_per_category_breakdown():
    rows = {f"q{i}": {"a": ("yes", []), "b": ("yes" if i % 3 else "no", [])} for i in range(12)}
    cats = {f"q{i}": ("existence" if i < 6 else "enumeration") for i in range(12)}
    rep = agreement(_table(rows), "answer", categories=cats, n_boot=0)
    assert set(rep.by) == {"existence", "enumeration"}
    assert rep.by["existence"].n_items == 6
