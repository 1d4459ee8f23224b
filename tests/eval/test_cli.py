"""`witness eval {agc,aesp,pairs,grec,count,report}` through typer's CliRunner: outputs, files,
exit codes (0 ok, 2 bad input with one line on stderr)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from witness.cli.main import app
from witness.schema import item_record

runner = CliRunner()


def _items():
    return [
        item_record("a", "i", 100, 100, "How many cars?", "2 cars", [[0, 0, 10, 10], [20, 20, 30, 30]], ["car"] * 2,
                    count=2, qtype="counting", category="enumeration", pair_id="p", pair_role=1),
        item_record("b", "i", 100, 100, "Is the number of cars two?", "yes", [[0, 0, 10, 10], [20, 20, 30, 30]],
                    ["car"] * 2, qtype="existence", category="enumeration", pair_id="p", pair_role=2),
        item_record("c", "j", 100, 100, "Is there a bus?", "no", qtype="existence", category="existence"),
    ]


def _preds():
    return [
        {"id": "a", "raw": "<boxes>[[0, 0, 100, 100], [200, 200, 300, 300]]</boxes>\n<answer>2 cars</answer>"},
        {"id": "b", "raw": "<boxes>[[0, 0, 100, 100]]</boxes>\n<answer>yes</answer>"},
        {"id": "c", "raw": "no boxes here"},
    ]


@pytest.mark.parametrize("suite, key", [("agc", "gca_l"), ("aesp", "es_overall"), ("pairs", "consistency"),
                                        ("grec", "pr_f1_1"), ("count", "count_mae")])
def test_suite_json_and_out(suite_files, tmp_path, suite, key):
    gt, pred = suite_files(_items(), _preds())
    out = tmp_path / f"{suite}.json"
    res = runner.invoke(app, ["eval", suite, str(gt), str(pred), "--format", "eta", "--json", "--out", str(out)])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["suite"] == suite and key in d["metrics"]
    assert d["parse_rate"] == pytest.approx(2 / 3) and d["missing"] == 0
    assert json.loads(out.read_text())["metrics"] == d["metrics"]
    assert (tmp_path / f"{suite}.samples.parquet").exists()


def test_agc_table_output(suite_files):
    gt, pred = suite_files(_items(), _preds(), jsonl_items=True)
    res = runner.invoke(app, ["eval", "agc", str(gt), str(pred), "-f", "eta"])
    assert res.exit_code == 0, res.output
    assert "gca_l" in res.stdout and "by category" in res.stdout


def test_report_markdown(suite_files, tmp_path):
    gt, pred = suite_files(_items(), _preds())
    for name in ("m1", "m2"):
        assert runner.invoke(app, ["eval", "agc", str(gt), str(pred), "-f", "eta", "--out", str(tmp_path / f"{name}.json")]).exit_code == 0
    md = tmp_path / "report.md"
    res = runner.invoke(app, ["eval", "report", str(tmp_path / "m1.json"), str(tmp_path / "m2.json"), "--out", str(md)])
    assert res.exit_code == 0, res.output
    text = md.read_text()
    assert "| m1 | ✓ |" in text and "| m2 | ✓ |" in text


@pytest.mark.parametrize(
    "args, pred_text, match",
    [
        (["--format", "nope"], None, "Unknown format 'nope'. Expected one of"),
        ([], None, "Expected --format for raw model outputs"),
        (["-f", "eta"], '{"id": "a"}\n{"id": "b", "boxes": [[0, 0, 1\n', "malformed JSON"),
        (["-f", "eta"], '{"id": "a", "boxes": [[3, 0, 1, 1]]}\n', "x1 <= x2"),
        (["-f", "eta"], '{"id": "a"}\n{"id": "a"}\n', "one prediction per id"),
        (["-f", "eta"], "", "empty file"),
        (["-f", "eta"], '{"id": "q404"}\n', r"unknown id\(s\) \['q404'\]"),
    ],
)
def test_bad_input_exits_2(suite_files, args, pred_text, match):
    import re

    gt, pred = suite_files(_items(), _preds())
    if pred_text is not None:
        pred.write_text(pred_text)
    res = runner.invoke(app, ["eval", "agc", str(gt), str(pred), *args])
    assert res.exit_code == 2, res.output
    assert re.search(match, res.stderr.replace("\n", "")), res.stderr
    assert "Traceback" not in res.output


def test_gt_without_needed_column_exits_2(tmp_path):
    from witness.io import write_jsonl

    gt = write_jsonl([{"id": "a", "image_id": "i", "width": 9, "height": 9, "question": "Q?", "answer": "1"}], tmp_path / "i.jsonl")
    pred = write_jsonl([{"id": "a", "answer": "1"}], tmp_path / "p.jsonl")
    res = runner.invoke(app, ["eval", "grec", str(gt), str(pred)])
    assert res.exit_code == 2 and "['boxes']" in res.stderr
    res = runner.invoke(app, ["eval", "pairs", str(gt), str(pred)])
    assert res.exit_code == 2 and "pair_id" in res.stderr


def test_aesp_llm_options_need_both(suite_files):
    gt, pred = suite_files(_items(), _preds())
    res = runner.invoke(app, ["eval", "aesp", str(gt), str(pred), "-f", "eta", "--llm-url", "http://127.0.0.1:9/v1"])
    assert res.exit_code == 2 and "--llm-model" in res.stderr


def test_report_bad_file_exits_2(tmp_path):
    bad = tmp_path / "r.json"
    bad.write_text("nope")
    res = runner.invoke(app, ["eval", "report", str(bad)])
    assert res.exit_code == 2 and "malformed JSON" in res.stderr


def test_aesp_with_llm_extractor_over_http(suite_files, tmp_path):
    server_mod = pytest.importorskip("witness.testing.openai_server")
    items = [item_record("c", "i", 100, 100, "How many cars?", "2", [[0, 0, 10, 10], [20, 20, 30, 30]], ["car"] * 2,
                         count=2, qtype="counting")]
    gt, pred = suite_files(items, [{"id": "c", "answer": "two, or maybe three", "boxes": [[0, 0, 10, 10], [20, 20, 30, 30]]}])
    with server_mod.OpenAIServer(lambda req: '{"answer": 2}') as srv:
        args = ["eval", "aesp", str(gt), str(pred), "--llm-url", srv.base_url, "--llm-model", "extractor",
                "--llm-cache", str(tmp_path / "cache"), "--json"]
        res = runner.invoke(app, args)
        assert res.exit_code == 0, res.output
        m = json.loads(res.stdout)["metrics"]
        assert m["joint_success"] == 1.0 and m["n_ambiguous"] == 0
        assert len(srv.requests) == 1
        assert runner.invoke(app, args).exit_code == 0
        assert len(srv.requests) == 1  # the second run is answered from the cache
