"""Configs, task payloads and export conversion, without a server."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from witness.annotate.studio.configs import (
    KINDS,
    config_labels,
    config_text,
    render_config,
    validate_config,
)
from witness.annotate.studio.convert import (
    annotations_from_export,
    clean_text,
    pairs_task,
    qa_task,
    rect_results,
    review_task,
    stated_count,
)
from witness.annotate.studio.push import build_tasks, image_urls, project_kind
from witness.annotate.studio.server import find_studio_venv, server_env
from witness.errors import InputError, MissingDependencyError, UnknownNameError
from witness.schema import annotations_table, item_record, items_table, validate_annotations


@pytest.mark.parametrize("kind", KINDS)
def test_configs_validate_with_label_interface(kind):
    from label_studio_sdk.label_interface import LabelInterface

    xml = render_config(kind, ["car", "person"])
    validate_config(xml)
    names = {c.name for c in LabelInterface(xml).controls}
    expected = {
        "qa": {"box", "evidence", "question", "answer", "no_evidence"},
        "review": {"box", "box_tight", "category_correct", "question_natural", "answer_evidence_agree", "decision"},
        "pairs": {"decision", "question_1", "answer_1", "question_2", "answer_2"},
    }[kind]
    assert names == expected


def test_qa_config_per_region_evidence_choice():
    from label_studio_sdk.label_interface import LabelInterface

    li = LabelInterface(render_config("qa", ["car"]))
    ev = li.get_control("evidence")
    assert ev.attr.get("perRegion") == "true" and set(ev.labels) == {"evidence", "not evidence"}


def test_config_errors():
    with pytest.raises(UnknownNameError, match="Unknown studio config 'nope'"):
        config_text("nope")
    with pytest.raises(InputError, match="Expected at least one box class"):
        render_config("qa", [])
    with pytest.raises(InputError, match="Expected a valid Label Studio config"):
        validate_config('<View><Image name="i" value="$image"/><Choices name="c" toName="x"><Choice value="a"/></Choices></View>')


def test_labels_are_escaped_and_read_back():
    xml = render_config("review", ['a "quoted" & odd <label>', "car"])
    assert config_labels(xml) == ['a "quoted" & odd <label>', "car"]
    validate_config(xml)


@settings(max_examples=200, deadline=None)
@given(
    w=st.integers(1, 8000), h=st.integers(1, 8000),
    f=st.lists(st.floats(0, 1, allow_nan=False), min_size=4, max_size=4),
)
def test_percent_round_trip_is_exact_to_1e6_px(w, h, f):
    x1, x2 = sorted([f[0] * w, f[1] * w])
    y1, y2 = sorted([f[2] * h, f[3] * h])
    box = np.asarray([[x1, y1, x2 + 1e-3, y2 + 1e-3]], dtype=np.float32).astype(np.float64)
    res = rect_results(box, ["car"], w, h)
    task = {"id": 1, "data": {"item_id": "q", "width": w, "height": h}, "annotations": [{"completed_by": 3, "result": res}]}
    (row,), _ = annotations_from_export([task], "qa")
    assert np.abs(np.asarray(row["boxes"]) - box).max() <= 1e-6


def _qa_item(**kw):
    return item_record("q1", "img", 800, 600, "How many cars?", "2", [[80, 60, 280, 180], [0, 0, 40, 40]], ["car", "car"], **kw)


def test_qa_task_candidates_and_presets():
    cands = {"boxes": [[80, 60, 280, 180], [500, 500, 600, 590]], "labels": ["car", "person"]}
    t = qa_task(_qa_item(), "/u", cands)
    res = t["predictions"][0]["result"]
    rects = [r for r in res if r["type"] == "rectanglelabels"]
    marks = {r["id"]: r["value"]["choices"][0] for r in res if r["from_name"] == "evidence"}
    # two scene objects plus the draft box with no matching object
    assert [r["value"]["rectanglelabels"][0] for r in rects] == ["car", "person", "car"]
    assert marks == {"b0": "evidence", "b1": "not evidence", "b2": "evidence"}
    assert t["data"]["draft_question"] == "How many cars?" and "question" not in t["data"]
    own = qa_task(_qa_item(), "/u")
    assert sum(r["type"] == "rectanglelabels" for r in own["predictions"][0]["result"]) == 2
    empty = qa_task(item_record("q2", "img", 10, 10, "Any bus?", "no"), "/u")
    assert any(r["from_name"] == "no_evidence" for r in empty["predictions"][0]["result"])


def test_task_hash_changes_with_content():
    a = review_task(_qa_item(), "/u")
    b = review_task(item_record("q1", "img", 800, 600, "How many cars now?", "2", [[80, 60, 280, 180], [0, 0, 40, 40]],
                                ["car", "car"]), "/u")
    assert a["data"]["witness_hash"] == review_task(_qa_item(), "/u")["data"]["witness_hash"]
    assert a["data"]["witness_hash"] != b["data"]["witness_hash"]


def test_export_conversion_rules():
    base = {"item_id": "q1", "width": 800, "height": 600, "draft_question": "Q?", "draft_answer": "2",
            "draft_boxes": [[80, 60, 280, 180]]}
    evid = rect_results([[80, 60, 280, 180], [0, 0, 10, 10]], ["car", "sign"], 800, 600, evidence=[True, False])
    drawn = rect_results([[300, 300, 310, 310]], ["car"], 800, 600, prefix="new")  # drawn without a mark
    txt = [{"from_name": "question", "type": "textarea", "value": {"text": ["Q?"]}},
           {"from_name": "answer", "type": "textarea", "value": {"text": ["2\n\n"]}}]
    task = {"id": 7, "data": base, "drafts": [{"result": []}], "annotations": [
        {"id": 1, "completed_by": {"email": "a@x"}, "result": evid + txt, "created_at": "2026-01-02T03:04:05.123Z",
         "updated_at": "2026-01-02T03:05:05Z", "lead_time": 60.0},
        {"id": 2, "completed_by": 5, "result": evid + drawn + txt},
        {"id": 3, "completed_by": 6, "result": [], "was_cancelled": True},
    ]}
    rows, rep = annotations_from_export([task], "qa", users={5: "b@x"})
    assert rep == {"tasks": 1, "annotations": 2, "records": 2, "cancelled": 1, "drafts": 1, "unannotated": 0}
    assert rows[0]["decision"] == "accept" and rows[0]["answer"] == "2" and rows[0]["annotator"] == "a@x"
    assert rows[0]["created_at"].year == 2026 and rows[0]["lead_time"] == 60.0
    assert rows[1]["decision"] == "correct" and rows[1]["annotator"] == "b@x" and len(rows[1]["boxes"]) == 2
    validate_annotations(annotations_table(rows))
    with pytest.raises(InputError, match="Expected a project kind"):
        annotations_from_export([task], "boxes")
    with pytest.raises(InputError, match="Expected the task's image size"):
        annotations_from_export([{"id": 1, "data": {"item_id": "q"}, "annotations": [{"result": []}]}], "qa")


def test_pairs_and_review_conversion():
    a = item_record("p-a", "i", 10, 10, "Is there a car?", "yes", pair_id="p", pair_role=1)
    b = item_record("p-b", "i", 10, 10, "Is no car there?", "no", pair_id="p", pair_role=2)
    t = pairs_task(a, b, "/u")
    t["annotations"] = [{"completed_by": 1, "result": [
        {"from_name": "decision", "type": "choices", "value": {"choices": ["accept"]}}]}]
    rows, _ = annotations_from_export([t], "pairs")
    assert [(r["item_id"], r["question"], r["decision"]) for r in rows] == [
        ("p-a", "Is there a car?", "accept"), ("p-b", "Is no car there?", "accept")]


def test_clean_text_and_stated_count():
    assert clean_text({"text": ["a\n", "b\r\n"]}) == "a\n\nb"
    assert stated_count("Three cars") == 3 and stated_count("12 buses") == 12
    assert stated_count("I see 4 cars and two buses") == 4 and stated_count("none") is None


def test_build_tasks_errors(tmp_path):
    it = items_table([item_record("q1", "img", 10, 10, "Q?", "A")])
    with pytest.raises(InputError, match="Expected items with a pair_id"):
        build_tasks(it, "pairs", {"img": "/u"})
    with pytest.raises(InputError, match="Expected a project kind"):
        build_tasks(it, "boxes", {"img": "/u"})
    one = items_table([item_record("p1", "img", 10, 10, "Q?", "A", pair_id="p", pair_role=1)])
    with pytest.raises(InputError, match="Expected pair 'p' to hold roles 1 and 2"):
        build_tasks(one, "pairs", {"img": "/u"})
    from witness.schema import scene_record, scenes_table

    with pytest.raises(InputError, match="Expected a scene for image 'img'"):
        build_tasks(it, "qa", {"img": "/u"}, scenes=scenes_table([scene_record("other", 10, 10)]))


def test_image_urls(tmp_path):
    root = tmp_path / "root"
    (root / "set").mkdir(parents=True)
    (root / "set" / "a b.png").write_bytes(b"\x89PNG\r\n\x1a\nxx")
    t = items_table([item_record("q1", "a", 10, 10, "Q?", "A", image=str(root / "set" / "a b.png")),
                     item_record("q2", "b", 10, 10, "Q?", "A", image=b"\x89PNG\r\n\x1a\nyy")])
    urls, storages = image_urls(t, root)
    assert urls["a"] == "/data/local-files/?d=set/a%20b.png"
    assert urls["b"] == "/data/local-files/?d=witness-media/b.png" and (root / "witness-media" / "b.png").exists()
    assert storages == {root / "set", root / "witness-media"}
    with pytest.raises(InputError, match="Expected images under the Local Files document root"):
        image_urls(t, tmp_path / "elsewhere")
    (root / "top.png").write_bytes(b"x")
    with pytest.raises(InputError, match="Expected the image in a sub-folder"):
        image_urls(items_table([item_record("q", "t", 10, 10, "Q?", "A", image=str(root / "top.png"))]), root)
    with pytest.raises(InputError, match="Expected an image file, got a path that does not exist"):
        image_urls(items_table([item_record("q", "t", 10, 10, "Q?", "A", image=str(root / "nope.png"))]), root)
    with pytest.raises(InputError, match="Expected an image path or bytes"):
        image_urls(items_table([item_record("q", "t", 10, 10, "Q?", "A")]), root)


def test_server_helpers(tmp_path):
    env = server_env(tmp_path, document_root=tmp_path, username="a@b.c", password="pw", token="t" * 10)
    assert env["LABEL_STUDIO_LATEST_VERSION_CHECK"] == "false" and env["LABEL_STUDIO_SENTRY_DSN"] == ""
    assert not {"PORT", "HOST", "USERNAME", "PASSWORD"} & set(env)
    with pytest.raises(InputError, match="Expected an API token longer than 5"):
        server_env(tmp_path, document_root=tmp_path, username="a", password="p", token="abc")
    with pytest.raises(MissingDependencyError, match="witness studio install"):
        find_studio_venv(tmp_path)
    assert project_kind({"description": "x\nwitness kind: pairs"}) == "pairs" and project_kind({}) is None


def test_cli_rejects_bad_input_before_the_server(tmp_path):
    from typer.testing import CliRunner

    from witness.cli.main import app
    from witness.io import write_table

    items = tmp_path / "items.parquet"
    write_table(items_table([item_record("q1", "img", 10, 10, "Q?", "A")]), items)
    runner = CliRunner()
    res = runner.invoke(app, ["studio", "push", str(items), "--project", "p", "--kind", "boxes"])
    assert res.exit_code == 2 and "Expected --kind in" in res.output
    res = runner.invoke(app, ["studio", "pull", "--project", "p", "--out", str(tmp_path / "a.parquet"), "--kind", "x"])
    assert res.exit_code == 2 and "Expected --kind in" in res.output
    res = runner.invoke(app, ["studio", "push", str(items), "--project", "p"],
                        env={"LABEL_STUDIO_URL": "http://127.0.0.1:9", "LABEL_STUDIO_API_KEY": ""})
    assert res.exit_code == 2 and "Expected an API token, got none" in res.output
    res = runner.invoke(app, ["studio", "stop", "--data-dir", str(tmp_path / "none"), "--json"])
    assert res.exit_code == 0 and '"stopped": false' in res.stdout
    res = runner.invoke(app, ["studio", "screenshot", "--project", "p", "--out", str(tmp_path / "a.png"),
                              "--password", "pw-123456", "--select", "left"])
    assert res.exit_code == 2 and "Expected --select FX,FY" in res.output
    res = runner.invoke(app, ["studio", "screenshot", "--project", "p", "--out", str(tmp_path / "a.png")],
                        env={"LABEL_STUDIO_PASSWORD": ""})
    assert res.exit_code == 2 and "Expected a password to log in with" in res.output
