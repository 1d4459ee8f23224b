"""`witness demo` end to end on a few scenes (the full default size runs in `make demo`)."""

import json

import pytest
from typer.testing import CliRunner

from witness.cli.main import app

runner = CliRunner()


def _check_release(out):
    import datasets

    summary = json.loads((out / "summary.json").read_text())
    assert summary["scenes"] == 12
    assert summary["gate"]["passed"] is True
    assert (out / "release" / "gate" / "report.md").exists()
    ds = datasets.load_dataset(str(out / "release"))
    assert sum(ds.num_rows.values()) == summary["gate"]["n_admitted"]
    item = ds["train"][0]
    assert item["image"].size == (960, 540)
    assert len(item["boxes"]) == len(item["labels"])
    return summary


@pytest.mark.slow
def test_demo_without_training(tmp_path):
    out = tmp_path / "demo"
    res = runner.invoke(app, ["demo", "--out", str(out), "--n", "12", "--no-train", "--min-kappa", "0"])
    assert res.exit_code == 0, res.output
    summary = _check_release(out)
    assert summary["smoke"] is None
    assert sorted(p.name for p in (out / "stats").glob("*.png")) == [
        "box_area.png", "box_centers.png", "boxes_per_question.png", "count_vs_boxes.png"]


@pytest.mark.train
def test_demo_with_the_training_smoke_run(tmp_path):
    out = tmp_path / "demo"
    res = runner.invoke(app, ["demo", "--out", str(out), "--n", "12", "--min-kappa", "0"])
    assert res.exit_code == 0, res.output
    summary = _check_release(out)
    assert summary["smoke"]["smoke"] is True and summary["smoke"]["sft_steps"] == 2
    report = json.loads((out / "smoke" / "agc.json").read_text())
    assert report["suite"] == "agc" and report["n"] == summary["smoke"]["predicted"]
