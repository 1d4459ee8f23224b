"""Reports: JSON form, samples file beside it, Markdown side by side (Table IV layout)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from witness.errors import InputError
from witness.eval.agc import evaluate_agc
from witness.eval.data import samples_from_records
from witness.eval.report import read_report, render_markdown, samples_path, write_report
from witness.schema import item_record


def _report(answer="2 cars", boxes=((0, 0, 10, 10), (20, 20, 30, 30))):
    items = [item_record("a", "i", 100, 100, "How many cars?", "2 cars", [[0, 0, 10, 10], [20, 20, 30, 30]],
                         ["car"] * 2, qtype="counting", category="enumeration"),
             item_record("b", "i", 100, 100, "Any bus?", "no", qtype="existence", category="existence")]
    preds = [{"id": "a", "answer": answer, "boxes": [list(b) for b in boxes]}, {"id": "b", "answer": "yes", "boxes": [[50, 50, 60, 60]]}]
    return evaluate_agc(samples_from_records(items, preds))


def test_write_and_read_report(tmp_path):
    rep = _report(boxes=((0, 0, 10, 10),))
    path = write_report(rep, tmp_path / "m1.json", model="model-1")
    d = json.loads(path.read_text())
    assert set(d) == {"suite", "n", "parse_rate", "missing", "metrics", "by", "model"}
    assert d["metrics"]["recall_4_6"] is None  # undefined -> null
    assert all(0.0 <= v <= 1.0 for k, v in d["metrics"].items() if isinstance(v, float) and k != "cnt_mae")
    samples = pq.read_table(samples_path(path)).to_pylist()
    assert samples[0]["missed_boxes"] == [[20.0, 20.0, 30.0, 30.0]]
    assert samples[1]["extra_boxes"] == [[50.0, 50.0, 60.0, 60.0]]
    assert samples[0]["say_point_mismatch"] is True  # says 2, points 1
    assert samples[1]["answer_ok_lenient"] is False
    assert read_report(path)["model"] == "model-1"


def test_markdown_side_by_side(tmp_path):
    p1 = write_report(_report(), tmp_path / "good.json")
    p2 = write_report(_report(answer="3 cars", boxes=((0, 0, 10, 10),)), tmp_path / "worse.json")
    md = render_markdown([read_report(p1), read_report(p2)])
    lines = md.splitlines()
    assert lines[2].startswith("| Method | Ans. | METEOR | BERTScore | F1 | AP | GDA | SPC | CntAcc | GCA |")
    assert lines[4].startswith("| good | ✓ |") and lines[5].startswith("| worse | ✓ |")
    assert "Per category (Table XVII layout)" in md
    assert "| enumeration | 1 |" in md


def test_markdown_other_suites_and_errors(tmp_path):
    d = {"model": "m", "suite": "grec", "n": 3, "parse_rate": 1.0, "missing": 0,
         "metrics": {"pr_f1_1": 0.5, "n_acc": None, "t_acc": 1.0, "n_target": 3}, "by": {}}
    md = render_markdown([d])
    assert "| m | 3 | 50.0 | – | 100.0 | 3 |" in md
    with pytest.raises(InputError, match="at least one report"):
        render_markdown([])
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="malformed JSON"):
        read_report(bad)
    other = tmp_path / "other.json"
    other.write_text("[1, 2]")
    with pytest.raises(InputError, match="witness eval report"):
        read_report(other)
    with pytest.raises(InputError, match="does not exist"):
        read_report(tmp_path / "nope.json")
