"""`audit` / `witness audit` verbs through typer's CliRunner."""

import json

import numpy as np
from typer.testing import CliRunner

from witness.cli.audit import app as audit_app
from witness.cli.main import app as witness_app
from witness.io import write_table
from witness.schema import annotation_record, annotations_table

from .conftest import reviews

runner = CliRunner()


def _annotations(tmp_path, n=40, agree=0.9, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        a = "accept" if rng.random() < 0.6 else "discard"
        b = a if rng.random() < agree else ("discard" if a == "accept" else "accept")
        rows += [annotation_record(f"q{i}", "r1", "reviewer", decision=a, verdicts={"box_tight": a == "accept"}),
                 annotation_record(f"q{i}", "r2", "reviewer", decision=b, verdicts={"box_tight": b == "accept"})]
    path = tmp_path / "ann.parquet"
    write_table(annotations_table(rows), path)
    return path


def test_kappa_json_and_min_threshold(tmp_path):
    path = _annotations(tmp_path)
    res = runner.invoke(audit_app, ["kappa", str(path), "--field", "verdicts.box_tight", "--json", "--bootstrap", "200"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert {"kappa", "method", "n_items", "observed", "expected", "ci95", "by"} <= set(d)
    assert d["method"] == "cohen" and d["n_items"] == 40
    res = runner.invoke(witness_app, ["audit", "kappa", str(path), "--field", "decision", "--min", "0.99"])
    assert res.exit_code == 1
    assert "below the minimum" in res.output


def test_kappa_bad_field_is_exit_2(tmp_path):
    path = _annotations(tmp_path)
    res = runner.invoke(audit_app, ["kappa", str(path), "--field", "verdicts.nope"])
    assert res.exit_code == 2
    assert "Expected a field 'nope'" in res.output


def test_review_and_sample(tmp_path, small_items, passing_annotations):
    items_path = write_table(small_items, tmp_path / "items.parquet")
    ann_path = write_table(passing_annotations, tmp_path / "ann.parquet")
    res = runner.invoke(audit_app, ["review", str(ann_path), "--items", str(items_path), "--out", str(tmp_path / "c.parquet"), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["n_passed"] == 3
    res = runner.invoke(audit_app, ["sample", str(items_path), "--n", "2", "--stratify", "category", "--out", str(tmp_path / "s.parquet"), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["n"] == 2
    assert (tmp_path / "s.blind.parquet").exists()


def test_gate_refusal_exit_1_and_no_release(tmp_path, small_items, passing_annotations):
    items_path = write_table(small_items, tmp_path / "items.parquet")
    ann_path = write_table(passing_annotations, tmp_path / "ann.parquet")
    res = runner.invoke(audit_app, ["gate", str(items_path), "--annotations", str(ann_path), "--out", str(tmp_path / "rel")])
    assert res.exit_code == 1
    assert "Release refused" in res.output
    assert not (tmp_path / "rel").exists()


def test_gate_pass(tmp_path, small_items):
    rows = []
    for q in ["q1", "q2"]:
        rows += reviews(q, ("r1", "accept", None), ("r2", "accept", None))
    # both reviewers discard q3: kappa is defined (1.0) and q3 is not released
    rows += reviews("q3", ("r1", "discard", None), ("r2", "discard", None))
    items_path = write_table(small_items, tmp_path / "items.parquet")
    ann_path = write_table(annotations_table(rows), tmp_path / "ann.parquet")
    res = runner.invoke(audit_app, ["gate", str(items_path), "--annotations", str(ann_path), "--out", str(tmp_path / "rel"), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["passed"] and d["n_admitted"] == 2 and d["kappa"]["kappa"] == 1.0
    assert d["excluded"] == {"review: discarded": 1}
