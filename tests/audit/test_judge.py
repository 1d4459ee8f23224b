"""The LLM judge against a real loopback OpenAI-compatible server, with calibration."""

import json

import numpy as np
import pytest

from witness.audit.judge import CORRUPTIONS, corrupt, judge
from witness.llm import LLMClient, LLMConfig
from witness.testing.openai_server import OpenAIServer


def test_corruptions_change_what_they_say(small_items):
    rng = np.random.default_rng(0)
    item = small_items.to_pylist()[0]
    assert len(corrupt(item, "drop_box", rng)["boxes"]) == 1
    assert len(corrupt(item, "add_distractor", rng)["boxes"]) == 3
    shifted = corrupt(item, "shift_box", rng)["boxes"]
    assert shifted != item["boxes"] and len(shifted) == 2
    assert corrupt(item, "change_count", rng)["answer"] == "3"
    no_boxes = small_items.to_pylist()[1]
    assert corrupt(no_boxes, "drop_box", rng) is None and corrupt(no_boxes, "change_count", rng) is None


def _evidence_lines(text):
    block = text.split("Evidence boxes", 1)[1].split("Check three things", 1)[0]
    return [ln for ln in block.splitlines() if ln.startswith("- ")]


def test_judge_with_calibration(small_items):
    truth = {r["id"]: r for r in small_items.to_pylist()}

    def handler(req):
        content = req["messages"][0]["content"]
        assert content[0]["type"] == "image_url" and content[0]["image_url"]["url"].startswith("data:image/")
        text = content[1]["text"]
        # A deliberately weak judge: it notices a changed box count, never a moved box.
        n_listed = len(_evidence_lines(text))
        item = next(r for r in truth.values() if r["question"] in text)
        answer = text.split("Reference answer: ", 1)[1].splitlines()[0]
        ok_count = n_listed == len(item["boxes"])
        return json.dumps({"answer_correct": answer == item["answer"], "evidence_correct": ok_count,
                           "count_matches": answer == item["answer"], "explanation": "checked"})

    with OpenAIServer(handler) as srv:
        client = LLMClient(LLMConfig(srv.base_url, "judge", concurrency=4))
        rep = judge(small_items, client, calibrate=True, seed=0, chunk_size=4)
        assert len(srv.requests) == rep.table.num_rows  # every job sent once across chunks
    assert rep.errors == 0
    assert rep.rates["all_correct"] == 1.0
    assert rep.detection["drop_box"]["detection_rate"] == 1.0
    assert rep.detection["add_distractor"]["detection_rate"] == 1.0
    assert rep.detection["shift_box"]["detection_rate"] == 0.0
    assert rep.detection["change_count"]["detection_rate"] == 1.0
    kinds = rep.table.column("kind").to_pylist()
    assert kinds.count("original") == 3 and set(kinds) == {"original", *CORRUPTIONS}


def test_unparseable_judgment_is_an_error_not_a_verdict(small_items):
    with OpenAIServer(lambda req: "I think it is fine") as srv:
        rep = judge(small_items.slice(0, 1), LLMClient(LLMConfig(srv.base_url, "judge")))
    assert rep.errors == 1 and rep.rates["all_correct"] is None
