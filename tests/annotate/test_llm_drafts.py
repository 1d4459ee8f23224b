"""`witness draft llm` against a real OpenAI-compatible HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image
from typer.testing import CliRunner

from witness.annotate.llm_drafts import (
    LLM_QTYPES,
    REJECT_REASONS,
    DraftConfig,
    build_messages,
    check_reply,
    draft_llm,
    load_prompt,
    rejects_path,
    response_format,
    scene_rows,
    write_drafts,
)
from witness.cli.main import app
from witness.errors import InputError
from witness.io import iter_jsonl, read_items, write_table
from witness.llm import LLMClient, LLMConfig
from witness.schema import items_table, scene_record, scenes_table, validate_items
from witness.testing import Delay, OpenAIServer, completion

SECRET = "sk-draft-SECRET-0123456789abcdef"
SNAPSHOTS = Path(__file__).parent / "snapshots"
KEY_ENV = "WITNESS_DRAFT_TEST_KEY"


# -- fixtures ---------------------------------------------------------------------------------


def _scene(tmp_path: Path, image_id: str, *, color=(90, 90, 90)) -> dict:
    path = tmp_path / "images" / f"{image_id}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (200, 100), color).save(path)
    return scene_record(
        image_id,
        200,
        100,
        [
            {"id": f"{image_id}-o1", "label": "car", "box": [10, 10, 60, 40], "attributes": {"color": "red"}},
            {"id": f"{image_id}-o2", "label": "car", "box": [120, 10, 180, 40]},
            {"id": f"{image_id}-o3", "label": "person", "box": [80, 50, 95, 95]},
        ],
        image=str(path.resolve()),
        source="synthetic",
        split="train",
    )


def _scenes(tmp_path: Path, n: int):
    return scenes_table([_scene(tmp_path, f"s{i}", color=(i * 20 % 255, 90, 90)) for i in range(n)])


def _scene_of(req: dict) -> str:
    text = req["messages"][1]["content"][0]["text"]
    return re.search(r'"id": "([^"]+)-o1"', text).group(1)


def _good(s: str) -> str:
    return json.dumps(
        {
            "drafts": [
                {"qtype": "counting", "question": "How many cars are there?", "answer": "2", "evidence": [f"{s}-o1", f"{s}-o2"], "targets": ["car"], "category": None, "relation": None},
                {"qtype": "existence", "question": "Is there a bus?", "answer": "No.", "evidence": [], "targets": ["bus"], "category": None, "relation": None},
                {"qtype": "attribute", "question": "What colour is the car on the left?", "answer": "red", "evidence": [f"{s}-o1"], "targets": ["car"], "category": None, "relation": None},
                {"qtype": "spatial", "question": "Is the person right of the left car?", "answer": "yes", "evidence": [f"{s}-o3", f"{s}-o1"], "targets": ["person", "car"], "category": None, "relation": None},
            ]
        }
    )


def _cfg(srv, tmp_path=None, **kw) -> LLMConfig:
    base = dict(max_retries=3, backoff_base=0.01, backoff_max=0.05, timeout=5.0, api_key_env=KEY_ENV,
                cache_dir=None if tmp_path is None else tmp_path / "cache")
    base.update(kw)
    return LLMConfig(srv.base_url, "test-model", **base)


# -- prompts ----------------------------------------------------------------------------------


def _snapshot(name: str, value) -> None:
    path = SNAPSHOTS / name
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if os.environ.get("WITNESS_UPDATE_SNAPSHOTS") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing snapshot {path}; create it with WITNESS_UPDATE_SNAPSHOTS=1"
    assert text == path.read_text(encoding="utf-8"), f"prompt drifted from {path}; rerun with WITNESS_UPDATE_SNAPSHOTS=1 if intended"


def _fixed_scene() -> dict:
    rows = scene_rows(scenes_table([scene_record("snap", 640, 480, [
        {"id": "o1", "label": "car", "box": [32, 48, 320, 240], "attributes": {"color": "red", "state": "parked"}},
        {"id": "o2", "label": "pedestrian", "box": [400, 100, 460, 300]},
    ], image="/nonexistent/snap.png")]))
    return rows[0]


@pytest.mark.parametrize("pairs", [False, True])
def test_prompt_snapshots(pairs):
    cfg = DraftConfig(pairs=pairs, qtypes=("existence", "counting", "comparison", "spatial") if pairs else LLM_QTYPES)
    msgs = build_messages(_fixed_scene(), cfg, image_url="data:image/png;base64,SNAPSHOT")
    kind = "pairs" if pairs else "draft"
    _snapshot(f"llm_{kind}_messages.json", msgs)
    _snapshot(f"llm_{kind}_response_format.json", response_format(cfg))


def test_prompt_carries_image_objects_and_instructions(tmp_path):
    scene = scene_rows(_scenes(tmp_path, 1))[0]
    msgs = build_messages(scene, DraftConfig(qtypes=("counting", "spatial"), max_side=64))
    text = msgs[1]["content"][0]["text"]
    assert '"id": "s0-o1", "label": "car", "box": [50, 100, 300, 400], "attributes": {"color": "red"}' in text
    assert "counting:" in text and "spatial:" in text and "existence:" not in text
    url = msgs[1]["content"][1]["image_url"]["url"]
    import base64
    import io

    assert Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).size == (64, 32)


def test_prompt_errors(tmp_path):
    with pytest.raises(InputError, match="Expected a prompt file"):
        load_prompt("nope.txt")
    scene = scene_rows(scenes_table([scene_record("x", 10, 10, [])]))[0]
    with pytest.raises(InputError, match=r"Expected an image \(bytes or path\) for the scene"):
        build_messages(scene, DraftConfig())
    with pytest.raises(InputError, match="Expected question types from"):
        DraftConfig(qtypes=("counting", "guessing"))
    with pytest.raises(InputError, match="Expected at least one question type"):
        DraftConfig(qtypes=())
    with pytest.raises(InputError, match="Expected per_type and n_pairs >= 1"):
        DraftConfig(per_type=0)
    with pytest.raises(InputError, match="Expected max_side >= 32"):
        DraftConfig(max_side=8)


# -- drafting ---------------------------------------------------------------------------------


def test_good_drafts_become_valid_items(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    scenes = _scenes(tmp_path, 3)
    with OpenAIServer(lambda req: completion(_good(_scene_of(req)), prompt_tokens=500, completion_tokens=80)) as srv:
        client = LLMClient(_cfg(srv, price_prompt_per_1k=1.0, price_completion_per_1k=2.0))
        res = draft_llm(scenes, client, DraftConfig(qtypes=("counting", "existence", "attribute", "spatial")))
    assert len(srv.requests) == 3
    body = srv.requests[0]
    assert body["response_format"]["type"] == "json_schema"
    assert body["messages"][1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    items = res.items
    assert len(items) == 12 and res.rejects == []
    validate_items(items)
    rows = {r["id"]: r for r in items.to_pylist()}
    count = next(r for r in rows.values() if r["image_id"] == "s1" and r["qtype"] == "counting")
    assert count["boxes"] == [[10, 10, 60, 40], [120, 10, 180, 40]] and count["labels"] == ["car", "car"]
    assert count["count"] == 2 and count["category"] == "enumeration" and count["targets"] == ["car"]
    assert count["provenance"]["drafted_by"] == "llm:test-model" and count["provenance"]["audit"] == "verified:rules"
    assert count["image"]["path"].endswith("s1.png") and count["split"] == "train" and count["source"] == "synthetic"
    audits = {r["qtype"]: r["provenance"]["audit"] for r in rows.values() if r["image_id"] == "s0"}
    assert audits == {"counting": "verified:rules", "existence": "verified:rules", "attribute": "verified:rules", "spatial": "verified:rules"}
    s = res.summary
    assert (s.scenes, s.requests, s.cached, s.failed, s.accepted, s.rejected) == (3, 3, 0, 0, 12, 0)
    assert (s.prompt_tokens, s.completion_tokens) == (1500, 240)
    assert s.cost == pytest.approx(1.5 + 0.48)


BAD_REPLIES = {
    "malformed_json": "I think there are two cars {not json",
    "bad_shape": '{"questions": []}',
    "unknown_evidence": {"qtype": "counting", "question": "How many cars?", "answer": "2", "evidence": ["{s}-o1", "{s}-o9"]},
    "count_mismatch": {"qtype": "counting", "question": "How many cars?", "answer": "3 cars", "evidence": ["{s}-o1", "{s}-o2"]},
    "count_missing": {"qtype": "counting", "question": "How many cars?", "answer": "several", "evidence": ["{s}-o1"]},
    "empty_question": {"qtype": "existence", "question": "  ", "answer": "yes", "evidence": ["{s}-o3"]},
    "empty_answer": {"qtype": "existence", "question": "Any person?", "answer": "", "evidence": ["{s}-o3"]},
    "unknown_qtype": {"qtype": "poetry", "question": "Why?", "answer": "because", "evidence": []},
    "duplicate_evidence": {"qtype": "selection", "question": "Which car is red?", "answer": "the left one", "evidence": ["{s}-o1", "{s}-o1"]},
    "existence_mismatch": {"qtype": "existence", "question": "Is there a person?", "answer": "no", "evidence": ["{s}-o3"]},
    "spatial_mismatch": {"qtype": "spatial", "question": "Is the left car right of the person?", "answer": "yes", "evidence": ["{s}-o1", "{s}-o3"]},
    "evidence_label_mismatch": {"qtype": "counting", "question": "How many people?", "answer": "2", "evidence": ["{s}-o1", "{s}-o3"], "targets": ["person"]},
}


def _bad_reply(reason: str, s: str) -> str:
    r = BAD_REPLIES[reason]
    if isinstance(r, str):
        return r
    return json.dumps({"drafts": [json.loads(json.dumps(r).replace("{s}", s))]})


def test_every_refusal_goes_to_rejects_with_its_reason(tmp_path):
    reasons = list(BAD_REPLIES)
    scenes = _scenes(tmp_path, len(reasons) + 1)
    by_scene = {f"s{i}": r for i, r in enumerate(reasons)}

    def handler(req):
        s = _scene_of(req)
        if s in by_scene:
            return _bad_reply(by_scene[s], s)
        d = json.loads(_good(s))["drafts"][0]  # a duplicate question in one scene
        return json.dumps({"drafts": [d, {**d, "question": "how many  cars are there"}]})

    with OpenAIServer(handler) as srv:
        res = draft_llm(scenes, LLMClient(_cfg(srv)), DraftConfig(qtypes=LLM_QTYPES + ("comparison",)))
    got = {r["image_id"]: r["reason"] for r in res.rejects}
    assert got == {**by_scene, f"s{len(reasons)}": "duplicate_question"}
    assert set(res.summary.reasons) <= set(REJECT_REASONS)
    assert res.summary.reasons["count_mismatch"] == 1 and res.summary.rejected == len(reasons) + 1
    assert len(res.items) == 1  # the first of the duplicated pair
    mm = next(r for r in res.rejects if r["reason"] == "count_mismatch")
    assert "states 3, evidence has 2" in mm["detail"] and mm["draft"]["answer"] == "3 cars"
    bad = next(r for r in res.rejects if r["reason"] == "malformed_json")
    assert bad["raw"].startswith("I think")
    out, rej = write_drafts(res, tmp_path / "out" / "drafts.parquet")
    assert rej == tmp_path / "out" / "drafts.rejects.jsonl"
    lines = [obj for _, obj in iter_jsonl(rej)]
    assert sorted(r["reason"] for r in lines) == sorted(got.values())
    assert read_items(out)[0].num_rows == 1


def test_unverifiable_and_qualified_drafts_are_kept_unverified(tmp_path):
    scenes = _scenes(tmp_path, 1)
    reply = json.dumps({"drafts": [
        {"qtype": "reasoning", "question": "Should the car yield to the person?", "answer": "yes", "evidence": ["s0-o1", "s0-o3"], "category": "normative_reasoning"},
        {"qtype": "counting", "question": "How many cars are parked on the left?", "answer": "1", "evidence": ["s0-o1"], "targets": ["car"]},
        {"qtype": "existence", "question": "Is there a blue car?", "answer": "no", "evidence": [], "targets": ["car"]},
    ]})
    with OpenAIServer(lambda req: reply) as srv:
        res = draft_llm(scenes, LLMClient(_cfg(srv)), DraftConfig())
    rows = res.items.to_pylist()
    assert [r["provenance"]["audit"] for r in rows] == ["unverified"] * 3
    assert rows[0]["category"] == "normative_reasoning" and rows[1]["count"] == 1
    assert res.summary.unverified == 3 and res.summary.verified == 0


# -- pairs ------------------------------------------------------------------------------------


def _pair(s, q1, q2, category="enumeration"):
    return {"category": category, "questions": [q1, q2]}


def test_pairs_are_validated_and_checked_against_the_scene(tmp_path):
    scenes = _scenes(tmp_path, 1)
    s = "s0"
    more = {"qtype": "comparison", "question": "Are there more cars than people?", "answer": "yes", "evidence": [f"{s}-o1", f"{s}-o2", f"{s}-o3"], "targets": ["car", "person"], "relation": "more"}
    fewer = {"qtype": "comparison", "question": "Are there fewer people than cars?", "answer": "yes", "evidence": [f"{s}-o1", f"{s}-o2", f"{s}-o3"], "targets": ["person", "car"], "relation": "fewer"}
    wrong = {**fewer, "question": "Are there fewer cars than people?", "targets": ["car", "person"]}
    count = {"qtype": "counting", "question": "How many cars are there?", "answer": "two", "evidence": [f"{s}-o1", f"{s}-o2"], "targets": ["car"]}
    exact = {"qtype": "existence", "question": "Is there exactly one car?", "answer": "yes", "evidence": [f"{s}-o1"], "targets": ["car"]}
    attr1 = {"qtype": "attribute", "question": "Is the left car red?", "answer": "yes", "evidence": [f"{s}-o1"]}
    attr2 = {"qtype": "attribute", "question": "What colour is the left car?", "answer": "red", "evidence": [f"{s}-o1"]}
    left = {"qtype": "spatial", "question": "Is the person left of the right car?", "answer": "yes", "evidence": [f"{s}-o3", f"{s}-o2"]}
    right = {"qtype": "spatial", "question": "Is the right car right of the person?", "answer": "yes", "evidence": [f"{s}-o2", f"{s}-o3"]}
    reply = json.dumps({"pairs": [
        _pair(s, more, fewer),
        _pair(s, {**more, "question": "Do cars outnumber people?"}, wrong),
        _pair(s, {**count, "question": "How many cars can you see?"}, exact),
        _pair(s, count, {**count, "question": "What is the number of cars?"}, None),
        _pair(s, attr1, attr2, "attribute_recognition"),
        _pair(s, left, right, "spatial_reasoning"),
        {"category": "x", "questions": [more]},
        _pair(s, more, {**more, "question": "How many people?", "answer": "7"}),
    ]})
    with OpenAIServer(lambda req: reply) as srv:
        res = draft_llm(scenes, LLMClient(_cfg(srv)), DraftConfig(pairs=True, qtypes=("existence", "counting", "comparison", "attribute", "spatial")))
    assert srv.requests[0]["response_format"]["json_schema"]["name"] == "witness_pairs"
    reasons = [r["reason"] for r in res.rejects]
    assert reasons == ["comparison_mismatch", "pair_evidence_differs", "pair_incomplete", "count_mismatch"]
    assert "question 2" in res.rejects[0]["detail"]
    items = res.items.to_pylist()
    validate_items(res.items)
    assert len(items) == 8
    by_pair: dict[str, list] = {}
    for r in items:
        by_pair.setdefault(r["pair_id"], []).append(r)
    assert all(sorted(x["pair_role"] for x in v) == [1, 2] for v in by_pair.values())
    audit = {v[0]["question"]: v[0]["provenance"]["audit"] for v in by_pair.values()}
    assert audit == {
        "Are there more cars than people?": "verified:rules",
        "How many cars are there?": "verified:rules",
        "Is the left car red?": "unverified",  # a yes/no attribute answer names no attribute value
        "Is the person left of the right car?": "verified:rules",
    }
    assert {r["category"] for r in by_pair[items[0]["pair_id"]]} == {"enumeration"}
    assert items[0]["relation"] == "more" and items[0]["targets"] == ["car", "person"]


def test_unreadable_images_are_rejected_without_a_request(tmp_path):
    rows = [_scene(tmp_path, "s0"), _scene(tmp_path, "s1"), scene_record("s2", 10, 10, [], image=str(tmp_path / "gone.png"))]
    (tmp_path / "images" / "s1.png").write_bytes(b"not a png")
    with OpenAIServer(lambda req: _good(_scene_of(req))) as srv:
        res = draft_llm(scenes_table(rows), LLMClient(_cfg(srv)), DraftConfig(qtypes=("counting", "existence", "attribute", "spatial")))
    assert len(srv.requests) == 1
    assert [(r["image_id"], r["reason"]) for r in res.rejects] == [("s1", "image_unreadable"), ("s2", "image_unreadable")]
    assert "gone.png" in res.rejects[1]["detail"] and res.summary.accepted == 4


def test_batches_give_the_same_drafts_and_duplicate_scenes_are_refused(tmp_path):
    scenes = _scenes(tmp_path, 5)
    cfg = DraftConfig(qtypes=("counting", "existence", "attribute", "spatial"))
    done: list[int] = []
    with OpenAIServer(lambda req: _good(_scene_of(req))) as srv:
        whole = draft_llm(scenes, LLMClient(_cfg(srv)), cfg)
        batched = draft_llm(scenes, LLMClient(_cfg(srv)), cfg, batch_size=2, progress=done.append)
    assert whole.items.equals(batched.items) and sum(done) == 5
    assert batched.summary.requests == 5
    dup = scenes_table([_scene(tmp_path, "s0"), _scene(tmp_path, "s0")])
    with pytest.raises(InputError, match="Expected unique image ids, got 's0'"):
        draft_llm(dup, LLMClient(LLMConfig("http://127.0.0.1:9/v1", "m")), cfg)
    with pytest.raises(InputError, match="Expected batch_size >= 1"):
        draft_llm(scenes, LLMClient(LLMConfig("http://127.0.0.1:9/v1", "m")), cfg, batch_size=0)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from(["", "yes", "no", "2", "o1", "o2", "car", "counting", "existence", "comparison", "more", "Is the car left of o2?"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(
        ["drafts", "pairs", "questions", "qtype", "question", "answer", "evidence", "targets", "relation", "category"]), inner, max_size=7),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(_json, st.booleans())
def test_check_reply_never_crashes_on_arbitrary_json(value, pairs):
    scene = {"image_id": "i", "width": 100, "height": 100, "image": None, "split": None, "source": "",
             "objects": [{"id": "o1", "label": "car", "box": [0, 0, 10, 10], "attributes": {}},
                         {"id": "o2", "label": "car", "box": [50, 0, 60, 10], "attributes": {"color": "red"}}]}
    cfg = DraftConfig(pairs=pairs, qtypes=("existence", "counting", "comparison", "spatial", "attribute"))
    items, rejects = check_reply(scene, json.dumps(value), cfg, model="m")
    assert all(r["reason"] in REJECT_REASONS for r in rejects)
    if items:
        validate_items(items_table(items))


def test_check_reply_reports_failed_requests():
    scene = {"image_id": "x", "width": 10, "height": 10, "objects": []}
    items, rejects = check_reply(scene, None, DraftConfig(), model="m", error="HTTP 500 (InternalServerError): boom")
    assert items == [] and rejects[0]["reason"] == "request_failed" and "HTTP 500" in rejects[0]["detail"]


# -- robustness -------------------------------------------------------------------------------


def test_429_500_and_slow_replies_are_retried_while_drafting(tmp_path):
    scenes = _scenes(tmp_path, 4)
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def handler(req):
        s = _scene_of(req)
        with lock:
            seen[s] = seen.get(s, 0) + 1
            k = seen[s]
        if s == "s0" and k == 1:
            return (429, {"error": {"message": "rate limited"}}, {"retry-after": "0"})
        if s == "s1" and k == 1:
            return (500, {"error": {"message": "oops"}})
        if s == "s2" and k == 1:
            return Delay(2.0, _good(s))
        if s == "s3":
            return (503, {"error": {"message": "down"}})
        return _good(s)

    with OpenAIServer(handler) as srv:
        res = draft_llm(scenes, LLMClient(_cfg(srv, timeout=0.5, max_retries=2)), DraftConfig(qtypes=("counting", "existence", "attribute", "spatial")))
    assert seen == {"s0": 2, "s1": 2, "s2": 2, "s3": 3}
    assert res.summary.retries == 1 + 1 + 1 + 2 and res.summary.failed == 1
    assert [r["reason"] for r in res.rejects] == ["request_failed"] and "HTTP 503" in res.rejects[0]["detail"]
    assert sorted({r["image_id"] for r in res.items.to_pylist()}) == ["s0", "s1", "s2"]


# -- CLI --------------------------------------------------------------------------------------


def _write_scenes(tmp_path: Path, n: int) -> Path:
    p = tmp_path / "scenes.parquet"
    write_table(_scenes(tmp_path, n), p)
    return p


def _cli_args(srv, scenes: Path, out: Path, *extra: str) -> list[str]:
    return ["draft", "llm", str(scenes), "--model", "test-model", "--base-url", srv.base_url, "--api-key-env", KEY_ENV,
            "--out", str(out), "--types", "counting,existence", "--types", "attribute,spatial", "--max-retries", "1", *extra]


def test_cli_drafts_rerun_sends_nothing_and_never_leaks_the_key(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    scenes = _write_scenes(tmp_path, 5)
    out = tmp_path / "run" / "drafts.parquet"
    runner = CliRunner()
    with OpenAIServer(lambda req: _good(_scene_of(req))) as srv:
        r1 = runner.invoke(app, _cli_args(srv, scenes, out, "--json", "--concurrency", "3"))
        assert r1.exit_code == 0, r1.output
        first = json.loads(r1.stdout)
        assert len(srv.requests) == 5
        r2 = runner.invoke(app, _cli_args(srv, scenes, out, "--json"))
        assert r2.exit_code == 0, r2.output
        second = json.loads(r2.stdout)
        r3 = runner.invoke(app, _cli_args(srv, scenes, out))  # the table view
    assert len(srv.requests) == 5  # zero duplicate requests on the re-runs
    assert all(h["authorization"] == f"Bearer {SECRET}" for h in srv.headers)
    assert (first["requests"], first["cached"], first["accepted"]) == (5, 0, 20)
    assert (second["requests"], second["cached"], second["accepted"]) == (0, 5, 20)
    assert r3.exit_code == 0 and "accepted" in r3.stdout
    assert first["cache"] == str(tmp_path / "run" / "drafts.llm-cache")
    table, _ = read_items(out)
    assert table.num_rows == 20 and set(table.column("image_id").to_pylist()) == {f"s{i}" for i in range(5)}
    for f in [p for p in tmp_path.rglob("*") if p.is_file()]:
        assert SECRET.encode() not in f.read_bytes(), f
    for r in (r1, r2, r3):
        assert SECRET not in r.output


def test_cli_bad_input_exits_2_with_one_line(tmp_path):
    scenes = _write_scenes(tmp_path, 1)
    runner = CliRunner()
    r = runner.invoke(app, ["draft", "llm", str(scenes), "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--out",
                            str(tmp_path / "d.parquet"), "--types", "counting,guessing"])
    assert r.exit_code == 2 and "Expected question types from" in r.output
    r = runner.invoke(app, ["draft", "llm", str(scenes), "--model", "m", "--base-url", "localhost:9", "--out", str(tmp_path / "d.parquet")])
    assert r.exit_code == 2 and "Expected a base URL starting with http" in r.output


def test_cli_failed_requests_exit_1_and_rerun_sends_only_those(tmp_path):
    scenes = _write_scenes(tmp_path, 3)
    out = tmp_path / "drafts.parquet"
    down = {"s1"}

    def handler(req):
        s = _scene_of(req)
        return (500, {"error": {"message": "down"}}) if s in down else _good(s)

    runner = CliRunner()
    with OpenAIServer(handler) as srv:
        r1 = runner.invoke(app, _cli_args(srv, scenes, out, "--json"))
        assert r1.exit_code == 1, r1.output
        assert json.loads(r1.stdout)["reasons"] == {"request_failed": 1}
        assert [r["reason"] for _, r in iter_jsonl(rejects_path(out))] == ["request_failed"]
        n1 = len(srv.requests)
        down.clear()
        r2 = runner.invoke(app, _cli_args(srv, scenes, out, "--json"))
    assert r2.exit_code == 0
    assert n1 == 2 + 2 and [_scene_of(q) for q in srv.requests[n1:]] == ["s1"]
    assert json.loads(r2.stdout)["accepted"] == 12
    assert list(iter_jsonl(rejects_path(out))) == []


@pytest.mark.slow
def test_killed_run_resumes_without_duplicate_requests(tmp_path):
    """Run the CLI in a subprocess, kill it after some replies, re-run: nothing answered is sent
    again and every draft is present."""
    n_scenes, n_before_kill = 12, 5
    scenes = _write_scenes(tmp_path, n_scenes)
    out = tmp_path / "drafts.parquet"
    cache = tmp_path / "drafts.llm-cache"
    answered: list[str] = []
    lock = threading.Lock()

    def stalling(req):
        s = _scene_of(req)
        with lock:
            if len(answered) >= n_before_kill:
                return Delay(30.0, _good(s))  # never arrives: the run is killed first
            answered.append(s)
        return _good(s)

    env = {**os.environ, KEY_ENV: SECRET}
    with OpenAIServer(stalling) as srv:
        cmd = [sys.executable, "-m", "witness.cli.main", *_cli_args(srv, scenes, out, "--concurrency", "2", "--timeout", "60")]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.time() + 60
        while time.time() < deadline and len(list(cache.rglob("*.json"))) < n_before_kill:
            time.sleep(0.05)
        proc.kill()
        proc.wait(timeout=10)
        assert len(list(cache.rglob("*.json"))) == n_before_kill
        assert not out.exists()
    first_answered = set(answered)
    with OpenAIServer(lambda req: _good(_scene_of(req))) as srv2:
        r = subprocess.run([sys.executable, "-m", "witness.cli.main", *_cli_args(srv2, scenes, out, "--json")],
                           env=env, capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr.decode()
        resent = [_scene_of(q) for q in srv2.requests]
    assert not first_answered & set(resent)  # nothing already received is requested again
    assert len(resent) == len(set(resent)) == n_scenes - n_before_kill
    summary = json.loads(r.stdout)
    assert (summary["cached"], summary["requests"], summary["accepted"]) == (n_before_kill, n_scenes - n_before_kill, 4 * n_scenes)
    table = pq.read_table(out)
    assert set(table.column("image_id").to_pylist()) == {f"s{i}" for i in range(n_scenes)}
    assert SECRET.encode() not in r.stdout + r.stderr


def test_verified_only_when_the_evidence_is_every_object_of_the_targets():
    """A rule vouches for an answer only against the scene: evidence of another class than the
    targets, or a comparison that leaves out objects of its classes, stays unverified."""
    s = {"image_id": "i", "width": 200, "height": 100, "image": None, "split": None, "source": "",
         "objects": [{"id": "c1", "label": "car", "box": [10, 10, 60, 40], "attributes": {}},
                     {"id": "c2", "label": "car", "box": [120, 10, 180, 40], "attributes": {}},
                     {"id": "c3", "label": "car", "box": [70, 10, 110, 40], "attributes": {}},
                     {"id": "p1", "label": "person", "box": [80, 50, 95, 95], "attributes": {}}]}
    drafts = [
        # the scene has no bus: "yes" with a car as evidence must not count as checked
        {"qtype": "existence", "question": "Is there a bus?", "answer": "yes", "evidence": ["c1"], "targets": ["bus"]},
        # 3 ids = 3 cars in the scene, but the evidence holds a person and misses c3
        {"qtype": "counting", "question": "How many cars or buses?", "answer": "3", "evidence": ["c1", "c2", "p1"], "targets": ["car", "bus"]},
        # 1 car vs 1 person on the evidence, 3 cars vs 1 person in the scene
        {"qtype": "comparison", "question": "Are there more cars than people?", "answer": "no", "evidence": ["c1", "p1"],
         "targets": ["car", "person"], "relation": "more"},
        # the same, checked against the whole scene
        {"qtype": "existence", "question": "Is there a person?", "answer": "yes", "evidence": ["p1"], "targets": ["person"]},
        {"qtype": "counting", "question": "How many cars?", "answer": "3", "evidence": ["c1", "c2", "c3"], "targets": ["car"]},
        {"qtype": "comparison", "question": "Are there fewer people than cars?", "answer": "yes", "evidence": ["c1", "c2", "c3", "p1"],
         "targets": ["person", "car"], "relation": "fewer"},
    ]
    items, rejects = check_reply(s, json.dumps({"drafts": drafts}), DraftConfig(qtypes=("existence", "counting", "comparison")), model="m")
    assert rejects == []
    assert [r["provenance"]["audit"] for r in items] == ["unverified"] * 3 + ["verified:rules"] * 3


def test_counts_over_a_crowd_region_stay_unverified():
    s = {"image_id": "i", "width": 200, "height": 100, "image": None, "split": None, "source": "",
         "objects": [{"id": "p1", "label": "person", "box": [10, 10, 30, 60], "attributes": {"iscrowd": "0"}},
                     {"id": "p2", "label": "person", "box": [50, 10, 150, 90], "attributes": {"iscrowd": "1"}},
                     {"id": "c1", "label": "car", "box": [160, 10, 190, 40], "attributes": {"iscrowd": "0"}}]}
    drafts = [
        {"qtype": "counting", "question": "How many people?", "answer": "2", "evidence": ["p1", "p2"], "targets": ["person"]},
        {"qtype": "comparison", "question": "Are there more people than cars?", "answer": "yes", "evidence": ["p1", "p2", "c1"],
         "targets": ["person", "car"], "relation": "more"},
        {"qtype": "counting", "question": "How many cars?", "answer": "1", "evidence": ["c1"], "targets": ["car"]},
    ]
    items, rejects = check_reply(s, json.dumps({"drafts": drafts}), DraftConfig(qtypes=("counting", "comparison")), model="m")
    assert rejects == []
    assert [r["provenance"]["audit"] for r in items] == ["unverified", "unverified", "verified:rules"]
