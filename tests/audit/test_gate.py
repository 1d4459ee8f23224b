"""The release gate: admits what passed, refuses a failing dataset and writes nothing then."""

import json

import pytest

from witness.audit.gate import gate
from witness.errors import GateError
from witness.schema import annotations_table, item_record, items_table

from .conftest import reviews


def test_gate_releases_admitted_items_with_report(tmp_path, small_items, passing_annotations):
    # q3 fails review: one reviewer says the question is unnatural
    rows = [r for r in passing_annotations.to_pylist() if r["item_id"] != "q3"]
    rows += reviews("q3", ("r1", "accept", None), ("r2", "accept", "question_natural"))
    rep = gate(small_items, annotations_table(rows), tmp_path / "rel", min_kappa=-1.0, n_boot=0,
               kappa_field="verdicts.question_natural")
    assert rep.passed and rep.n_admitted == 2
    assert rep.kappa["kappa"] == 0.0  # p_o = 2/3 = p_e: agreement no better than chance
    assert rep.excluded == {"review: question_natural failed": 1}
    report = json.loads((tmp_path / "rel" / "gate" / "report.json").read_text())
    assert report["n_admitted"] == 2 and report["count_box_agreement"] == 1.0
    assert "gate/report.md" in (tmp_path / "rel" / "README.md").read_text()


def test_low_kappa_refuses_and_writes_nothing(tmp_path, small_items, passing_annotations):
    out = tmp_path / "rel"
    with pytest.raises(GateError, match="below the minimum") as info:
        gate(small_items, passing_annotations, out, min_kappa=0.8, n_boot=0)  # everyone accepts: kappa undefined
    assert not out.exists()
    assert info.value.report.passed is False


def test_split_leakage_refuses(tmp_path, png):
    items = items_table([
        item_record("a", "img", 100, 80, "Is there a bus?", "no", qtype="existence", split="train", image=png),
        item_record("b", "img", 100, 80, "Is there a van?", "no", qtype="existence", split="test", image=png),
    ])
    rows = reviews("a", ("r1", "accept", None), ("r2", "accept", None)) + reviews("b", ("r1", "accept", None), ("r2", "accept", None))
    with pytest.raises(GateError, match="split leakage"):
        gate(items, annotations_table(rows), tmp_path / "rel", min_kappa=0.0, n_boot=0)
    assert not (tmp_path / "rel").exists()


def test_pair_released_whole_or_not(tmp_path, png):
    items = items_table([
        item_record("p:1", "img", 100, 80, "Are there more cars than buses?", "yes", qtype="comparison", targets=["car", "bus"],
                    relation="more", pair_id="p", pair_role=1, image=png),
        item_record("p:2", "img", 100, 80, "Are there fewer buses than cars?", "yes", qtype="comparison", targets=["bus", "car"],
                    relation="fewer", pair_id="p", pair_role=2, image=png),
        item_record("s", "img", 100, 80, "Is there a van?", "no", qtype="existence", image=png),
    ])
    rows = reviews("p:1", ("r1", "accept", None), ("r2", "accept", None)) + reviews("p:2", ("r1", "discard", None), ("r2", "accept", None))
    rows += reviews("s", ("r1", "accept", None), ("r2", "discard", None))
    with pytest.raises(GateError, match="no item passed") as info:
        gate(items, annotations_table(rows), tmp_path / "rel", min_kappa=-1.0, n_boot=0)
    assert info.value.report.excluded == {"pair partner excluded": 1, "review: discarded": 2}


def test_annotations_of_other_items_do_not_count(tmp_path, small_items, passing_annotations):
    # Reviewers disagree wildly on another batch: it must not move this batch's kappa.
    other = []
    for i in range(30):
        other += reviews(f"other{i}", ("r1", "accept" if i % 2 else "discard", None), ("r2", "discard" if i % 2 else "accept", None))
    rows = reviews("q1", ("r1", "accept", None), ("r2", "accept", None)) + reviews("q2", ("r1", "accept", None), ("r2", "accept", None))
    rows += reviews("q3", ("r1", "discard", None), ("r2", "discard", None))
    rep = gate(small_items, annotations_table(rows + other), tmp_path / "rel", min_kappa=0.9, n_boot=0)
    assert rep.kappa["n_items"] == 3 and rep.kappa["kappa"] == 1.0
