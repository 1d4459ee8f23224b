"""Against a real Label Studio server: push, annotate as two users, pull, round trip, errors."""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest
from typer.testing import CliRunner

from witness.annotate.studio.client import StudioClient, connect
from witness.annotate.studio.convert import rect_results
from witness.annotate.studio.pull import items_from_annotations, pull_annotations
from witness.annotate.studio.push import push_items
from witness.annotate.studio.server import free_port
from witness.errors import ServiceError
from witness.schema import validate_annotations

pytestmark = pytest.mark.studio


def _users(client: StudioClient, *emails: str) -> list[int]:
    ids = []
    for e in emails:
        found = next((u for u in client.users() if u.get("email") == e), None)
        ids.append(int((found or client.create_user(e))["id"]))
    return ids


def _tasks(client: StudioClient, pid: int) -> dict[str, int]:
    return {t["witness_id"]: int(t["id"]) for t in client.task_index(pid)}


def _text(name: str, text: str) -> dict:
    return {"id": name, "from_name": name, "to_name": "image", "type": "textarea", "value": {"text": [text]}}


def test_qa_round_trip_two_users(studio, demo_items):
    client = studio["client"]
    name = f"qa-{demo_items['tag']}"
    items = demo_items["items"].filter(np.array([r is None for r in demo_items["items"].column("pair_id").to_pylist()]))
    rep = push_items(client, items, project=name, kind="qa", scenes=demo_items["scenes"], document_root=studio["root"])
    assert rep.created and rep.added == 3 and rep.unchanged == 0
    tasks = _tasks(client, rep.project_id)
    assert set(tasks) == {"q-count", "q-exist", "q-ident"}
    ann1, ann2 = _users(client, "ann1@witness.test", "ann2@witness.test")
    W, H = 640, 480
    # annotator 1: marks three boxes evidence on q-count (one drawn at sub-pixel coordinates), edits the answer
    b3 = [123.456789, 77.777, 234.5, 199.125]
    cars = [[10.5, 20.25, 100.125, 200.75], [300.0, 100.0, 400.3, 220.9], b3]
    res = rect_results(cars + [[500.0, 300.0, 550.5, 420.0]], ["car", "car", "car", "person"], W, H,
                       evidence=[True, True, True, False])
    res += [_text("question", "How many cars are there?\n"), _text("answer", "Three cars.\n")]
    client.create_annotation(tasks["q-count"], res, completed_by=ann1, lead_time=12.5)
    # annotator 2: accepts the draft of q-count unchanged
    res2 = rect_results(cars[:2] + [[500.0, 300.0, 550.5, 420.0]], ["car", "car", "person"], W, H,
                        evidence=[True, True, False])
    res2 += [_text("question", "How many cars are there?"), _text("answer", "2")]
    client.create_annotation(tasks["q-count"], res2, completed_by=ann2, lead_time=3.0)
    # annotator 2: no evidence needed on q-exist; annotator 1 skips it (cancelled)
    client.create_annotation(tasks["q-exist"], [
        _text("question", "Is there a bicycle?"), _text("answer", "no"),
        {"id": "ne", "from_name": "no_evidence", "to_name": "image", "type": "choices",
         "value": {"choices": ["no evidence needed"]}}], completed_by=ann2)
    client.create_annotation(tasks["q-exist"], [], completed_by=ann1, was_cancelled=True)
    # a draft (saved, not submitted) on q-ident is counted, not converted
    client.request("POST", f"/api/tasks/{tasks['q-ident']}/drafts", json={"result": [_text("answer", "a tru")]})

    table, report = pull_annotations(client, name)
    validate_annotations(table)
    assert report["kind"] == "qa" and report["records"] == 3 and report["cancelled"] == 1
    assert report["unannotated"] == 1 and report["drafts"] == 1  # q-ident
    rows = table.to_pylist()
    by = {(r["item_id"], r["annotator"]): r for r in rows}
    r1 = by[("q-count", "ann1@witness.test")]
    assert r1["answer"] == "Three cars." and r1["question"] == "How many cars are there?"  # trailing newline stripped
    assert r1["decision"] == "correct" and r1["role"] == "annotator" and r1["lead_time"] == 12.5
    got = np.asarray(r1["boxes"], dtype=np.float64)
    want = np.asarray(cars, dtype=np.float32).astype(np.float64)
    assert got.shape == (3, 4) and np.abs(got - want).max() <= 1e-6
    assert r1["labels"] == ["car", "car", "car"] and r1["created_at"] is not None
    r2 = by[("q-count", "ann2@witness.test")]
    assert r2["decision"] == "accept" and len(r2["boxes"]) == 2
    r3 = by[("q-exist", "ann2@witness.test")]
    assert r3["boxes"] == [] and r3["decision"] == "accept"

    out, irep = items_from_annotations(table, items)
    got_items = {r["id"]: r for r in out.to_pylist()}
    assert irep["without_annotation"] == 1 and set(got_items) == {"q-count", "q-exist"}
    latest = got_items["q-count"]  # ann2 annotated last
    assert latest["count"] == 2 and latest["provenance"]["annotated_by"] == ["ann1@witness.test", "ann2@witness.test"]


def test_qa_export_imports_as_one_scene_per_image(studio, demo_items, tmp_path):
    """A qa project has one task per question: its real JSON export imports as one scene per image."""
    from witness.dataset.importers import import_labelstudio
    from witness.schema import items_table

    client = studio["client"]
    name = f"qa-import-{demo_items['tag']}"
    (count,) = [r for r in demo_items["items"].to_pylist() if r["id"] == "q-count"]
    person = [500.0, 300.0, 550.5, 420.0]
    exist = {**count, "id": "q-person", "question": "Is there a person?", "answer": "yes", "boxes": [person],
             "labels": ["person"], "count": None, "qtype": "existence", "category": "existence"}
    rep = push_items(client, items_table([count, exist]), project=name, kind="qa", scenes=demo_items["scenes"],
                     document_root=studio["root"])
    tasks = _tasks(client, rep.project_id)
    (ann1,) = _users(client, "ann1@witness.test")
    cars = [[10.5, 20.25, 100.125, 200.75], [300.0, 100.0, 400.3, 220.9]]
    client.create_annotation(tasks["q-count"], rect_results(cars + [person], ["car", "car", "person"], 640, 480,
                                                            evidence=[True, True, False]), completed_by=ann1)
    moved = [501.0, 300.0, 551.5, 420.0]  # this annotator moved the person: a second object
    client.create_annotation(tasks["q-person"], rect_results(cars + [moved], ["car", "car", "person"], 640, 480,
                                                             evidence=[False, False, True]), completed_by=ann1)
    export = tmp_path / "export.json"
    export.write_text(json.dumps(client.snapshot_export(rep.project_id)))
    res = import_labelstudio(export, images=studio["root"])
    assert res.n_scenes == 1 and res.table.column("image_id").to_pylist() == [f"{demo_items['tag']}-img-a"]
    assert res.warnings == {"tasks_merged": 1, "duplicate_objects_merged": 2}
    objs = res.table.column("objects")[0].as_py()
    assert sorted(o["label"] for o in objs) == ["car", "car", "person", "person"]
    got = np.asarray(sorted(o["box"] for o in objs))
    np.testing.assert_allclose(got, np.asarray(sorted(cars + [person, moved]), dtype=np.float32), atol=1e-3)


def test_repush_adds_nothing_and_reports_changes(studio, demo_items):
    client = studio["client"]
    name = f"repush-{demo_items['tag']}"
    items = demo_items["items"]
    first = push_items(client, items.slice(0, 1), project=name, kind="review", document_root=studio["root"])
    assert first.added == 1 and not first.config_updated
    first = push_items(client, items, project=name, kind="review", document_root=studio["root"])
    assert first.added == 4 and first.unchanged == 1 and first.config_updated  # the bus and truck classes arrived
    from witness.annotate.studio.configs import config_labels

    assert config_labels(client.find_project(name)["label_config"]) == ["bus", "car", "truck"]
    again = push_items(client, items, project=name, kind="review", document_root=studio["root"])
    assert (again.created, again.added, again.unchanged, again.changed) == (False, 0, 5, 0)
    rows = items.to_pylist()
    rows[0]["question"] = "How many cars can you see?"
    import pyarrow as pa

    from witness.schema import ITEM_SCHEMA

    changed = push_items(client, pa.Table.from_pylist(rows, schema=ITEM_SCHEMA), project=name, kind="review",
                         document_root=studio["root"])
    assert changed.added == 0 and changed.changed == 1 and changed.changed_ids == ("q-count",)
    index = client.task_index(changed.project_id)
    assert len(index) == 5 and len({t["witness_id"] for t in index}) == 5
    with pytest.raises(Exception, match="Expected project .* to be a 'qa' project, got kind 'review'"):
        push_items(client, items, project=name, kind="qa", document_root=studio["root"])


def test_review_and_pairs_round_trip(studio, demo_items):
    client = studio["client"]
    (rev,) = _users(client, "reviewer1@witness.test")
    items = demo_items["items"]
    review = push_items(client, items, project=f"review-{demo_items['tag']}", kind="review", document_root=studio["root"])
    tid = _tasks(client, review.project_id)["q-ident"]
    checks = [{"id": k, "from_name": k, "to_name": "image", "type": "choices", "value": {"choices": [v]}}
              for k, v in (("box_tight", "yes"), ("category_correct", "yes"), ("question_natural", "no"),
                           ("decision", "reject"))]
    client.create_annotation(tid, checks, completed_by=rev)
    table, rep = pull_annotations(client, f"review-{demo_items['tag']}")
    (row,) = table.to_pylist()
    assert row["role"] == "reviewer" and row["decision"] == "discard" and row["annotator"] == "reviewer1@witness.test"
    assert row["verdicts"] == {"box_tight": True, "category_correct": True, "question_natural": False,
                               "answer_evidence_agree": None}

    pairs = items.filter(np.array([r is not None for r in items.column("pair_id").to_pylist()]))
    prep = push_items(client, pairs, project=f"pairs-{demo_items['tag']}", kind="pairs", document_root=studio["root"])
    assert prep.added == 1
    ptid = _tasks(client, prep.project_id)["p1"]
    client.create_annotation(ptid, [
        {"id": "d", "from_name": "decision", "to_name": "image", "type": "choices", "value": {"choices": ["correct"]}},
        _text("question_1", "Is there a bus?"), _text("answer_1", "yes"),
        _text("question_2", "Is there no bus in the image?\n"), _text("answer_2", "no")], completed_by=rev)
    ptable, _ = pull_annotations(client, f"pairs-{demo_items['tag']}")
    got = {r["item_id"]: r for r in ptable.to_pylist()}
    assert set(got) == {"p1-1", "p1-2"}
    assert got["p1-2"]["question"] == "Is there no bus in the image?" and got["p1-2"]["decision"] == "correct"


def test_server_down_says_how_to_start():
    with pytest.raises(ServiceError, match="got no answer.*witness studio serve"):
        connect(f"http://127.0.0.1:{free_port()}", "x" * 20)


def test_wrong_token(studio):
    with pytest.raises(ServiceError, match="HTTP 401.*LABEL_STUDIO_API_KEY"):
        connect(studio["url"], "not-the-token-123456")


def test_missing_token(studio):
    with pytest.raises(ServiceError, match="Expected an API token, got none"):
        connect(studio["url"], None)


def test_refused_config_is_quoted(studio, demo_items):
    bad = ('<View><Image name="image" value="$image"/>'
           '<Choices name="c" toName="nowhere"><Choice value="a"/></Choices></View>')
    with pytest.raises(ServiceError, match=r'got 400: .*toName=\\?"nowhere\\?"'):
        push_items(studio["client"], demo_items["items"], project=f"bad-{demo_items['tag']}", kind="review",
                   config=bad, document_root=studio["root"])


def test_unknown_project(studio):
    with pytest.raises(Exception, match="Expected a Label Studio project named 'no-such-project'"):
        pull_annotations(studio["client"], "no-such-project")


def test_cli_users_push_pull_items(studio, demo_items, tmp_path, monkeypatch):
    from witness.annotate.studio.screenshot import login_cookies
    from witness.cli.main import app
    from witness.io import write_table
    from witness.schema import items_table

    monkeypatch.setenv("LABEL_STUDIO_URL", studio["url"])
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", studio["token"])
    monkeypatch.setenv("WITNESS_STUDIO_VENV", str(studio["venv"]))
    monkeypatch.setenv("WITNESS_STUDIO_DATA", str(studio["data_dir"]))
    runner = CliRunner()
    email = f"cli-{uuid.uuid4().hex[:6]}@witness.test"
    res = runner.invoke(app, ["studio", "users", "add", email, "--role", "reviewer", "--password", "s3cret-pass!", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["role"] == "reviewer"
    assert "sessionid" in login_cookies(studio["url"], email, "s3cret-pass!")  # the password works
    bad = runner.invoke(app, ["studio", "users", "add", email, "--role", "boss"])
    assert bad.exit_code == 2 and "Expected --role" in bad.output

    items_path = tmp_path / "items.parquet"
    write_table(items_table(demo_items["items"].to_pylist()), items_path)
    name = f"cli-{demo_items['tag']}"
    res = runner.invoke(app, ["studio", "push", str(items_path), "--project", name, "--kind", "review",
                              "--document-root", str(studio["root"]), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["added"] == 5
    out = tmp_path / "ann.parquet"
    res = runner.invoke(app, ["studio", "pull", "--project", name, "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["tasks"] == 5 and out.exists()
    res = runner.invoke(app, ["studio", "items", "--annotations", str(out), "--items", str(items_path),
                              "--out", str(tmp_path / "items2.parquet"), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["without_annotation"] == 5  # review annotations are not qa edits
    down = runner.invoke(app, ["studio", "pull", "--project", name, "--out", str(out)],
                         env={"LABEL_STUDIO_URL": f"http://127.0.0.1:{free_port()}"})
    assert down.exit_code == 2 and "witness studio serve" in down.output


def test_serve_makes_the_token_the_admins(studio):
    from witness.annotate.studio.server import ensure_admin_token

    kw = dict(username=studio["admin"], password=studio["password"], document_root=studio["root"])
    assert ensure_admin_token(studio["venv"], studio["data_dir"], studio["url"], token=studio["token"], **kw) is False
    other = "another-admin-token-987654"
    try:
        assert ensure_admin_token(studio["venv"], studio["data_dir"], studio["url"], token=other, **kw) is True
        connect(studio["url"], other).close()
        with pytest.raises(ServiceError, match="HTTP 401"):
            connect(studio["url"], studio["token"])
    finally:
        ensure_admin_token(studio["venv"], studio["data_dir"], studio["url"], token=studio["token"], **kw)
    connect(studio["url"], studio["token"]).close()
    from witness.annotate.studio.screenshot import login_cookies

    assert "sessionid" in login_cookies(studio["url"], studio["admin"], studio["password"])
    # a token that works with a password that does not: the password is set too
    new_kw = dict(kw, password="a-new-admin-password")
    try:
        assert ensure_admin_token(studio["venv"], studio["data_dir"], studio["url"], token=studio["token"], **new_kw)
        assert "sessionid" in login_cookies(studio["url"], studio["admin"], "a-new-admin-password")
    finally:
        ensure_admin_token(studio["venv"], studio["data_dir"], studio["url"], token=studio["token"], **kw)
    assert "sessionid" in login_cookies(studio["url"], studio["admin"], studio["password"])


def test_serve_refuses_a_second_server_and_a_busy_port(studio, tmp_path):
    from witness.annotate.studio.server import start_server

    kw = dict(username="a@b.test", password="pw-123456", token="t" * 12)
    with pytest.raises(ServiceError, match="Expected no server running on this data directory"):
        start_server(studio["venv"], studio["data_dir"], port=free_port(), **kw)
    port = int(studio["url"].rsplit(":", 1)[1])
    with pytest.raises(ServiceError, match=f"Expected port {port} on 127.0.0.1 to be free"):
        start_server(studio["venv"], tmp_path / "d", port=port, **kw)
