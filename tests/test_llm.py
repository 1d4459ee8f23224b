"""The shared LLM client against a real OpenAI-compatible HTTP server on 127.0.0.1."""

from __future__ import annotations

import base64
import io
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from witness.errors import InputError
from witness.llm import (
    ChatResult,
    LLMClient,
    LLMConfig,
    LLMUsage,
    backoff_delay,
    estimate_cost,
    image_data_url,
    parse_json_reply,
    request_key,
)
from witness.testing import Delay, OpenAIServer, completion

SECRET = "sk-test-SECRET-do-not-leak-1234567890"


def _cfg(srv, **kw):
    base = dict(max_retries=3, backoff_base=0.01, backoff_max=0.05, timeout=5.0, api_key_env="WITNESS_TEST_KEY")
    base.update(kw)
    return LLMConfig(srv.base_url, "test-model", **base)


def _msgs(text="hi"):
    return [{"role": "user", "content": text}]


def _png(w=64, h=32, mode="RGB"):
    buf = io.BytesIO()
    Image.new(mode, (w, h), (255, 0, 0, 128) if mode == "RGBA" else (255, 0, 0)).save(buf, "PNG")
    return buf.getvalue()


# -- happy path -------------------------------------------------------------------------------


def test_chat_sends_image_parts_response_format_and_reads_usage(monkeypatch):
    monkeypatch.setenv("WITNESS_TEST_KEY", SECRET)
    with OpenAIServer(lambda req: completion('{"ok": true}', prompt_tokens=120, completion_tokens=7)) as srv:
        client = LLMClient(_cfg(srv))
        url = image_data_url(_png())
        msgs = [{"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": url}}]}]
        rf = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}
        r = client.chat(msgs, response_format=rf)
    assert r.ok and r.text == '{"ok": true}' and not r.cached
    assert (r.prompt_tokens, r.completion_tokens, r.attempts, r.structured) == (120, 7, 1, True)
    body = srv.requests[0]
    assert body["model"] == "test-model" and body["temperature"] == 0.0
    assert body["response_format"] == rf
    assert body["messages"][0]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert srv.headers[0]["authorization"] == f"Bearer {SECRET}"  # the key reaches the server only


def test_chat_many_keeps_input_order_and_bounds_concurrency():
    in_flight, peak, lock = [0], [0], threading.Lock()

    def handler(req):
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.05)
        with lock:
            in_flight[0] -= 1
        return "echo:" + req["messages"][0]["content"]

    done = []
    with OpenAIServer(handler) as srv:
        client = LLMClient(_cfg(srv, concurrency=3))
        res = client.chat_many([{"messages": _msgs(str(i))} for i in range(12)], progress=done.append)
    assert [r.text for r in res] == [f"echo:{i}" for i in range(12)]
    assert 1 < peak[0] <= 3
    assert sum(done) == 12


def test_identical_requests_in_one_call_are_sent_once():
    with OpenAIServer(lambda req: "same") as srv:
        res = LLMClient(_cfg(srv)).chat_many([{"messages": _msgs("x")}] * 4)
    assert len(srv.requests) == 1
    assert [r.text for r in res] == ["same"] * 4
    u = LLMUsage.of(res)
    assert (u.requests, u.cached, u.prompt_tokens) == (1, 3, 10)  # sent and billed once


# -- retries ----------------------------------------------------------------------------------


def test_429_and_500_are_retried_then_succeed():
    script = iter([(429, {"error": {"message": "slow down"}}, {"retry-after": "0"}), (500, {"error": {"message": "boom"}}), "fine"])
    with OpenAIServer(lambda req: next(script)) as srv:
        r = LLMClient(_cfg(srv)).chat(_msgs())
    assert r.text == "fine" and r.attempts == 3 and len(srv.requests) == 3


def test_persistent_500_gives_an_error_after_max_retries():
    with OpenAIServer(lambda req: (503, {"error": {"message": "down"}})) as srv:
        r = LLMClient(_cfg(srv, max_retries=2)).chat_many([{"messages": _msgs()}])[0]
    assert not r.ok and r.text is None and "HTTP 503" in r.error
    assert r.attempts == 3 and len(srv.requests) == 3


def test_a_key_echoed_by_the_server_is_scrubbed_from_errors(monkeypatch):
    monkeypatch.setenv("WITNESS_TEST_KEY", SECRET)
    with OpenAIServer(lambda req: (401, {"error": {"message": f"Incorrect API key provided: {SECRET}"}})) as srv:
        client = LLMClient(_cfg(srv))
        r1 = client.chat(_msgs())
        r2 = client.chat_many([{"messages": _msgs("2")}])[0]
    for r in (r1, r2):
        assert "HTTP 401" in r.error and SECRET not in r.error and "***" in r.error


def test_401_is_not_retried_and_names_the_key_variable(monkeypatch):
    monkeypatch.delenv("WITNESS_TEST_KEY", raising=False)
    with OpenAIServer(lambda req: (401, {"error": {"message": "bad key"}})) as srv:
        r = LLMClient(_cfg(srv)).chat(_msgs())
    assert "HTTP 401" in r.error and len(srv.requests) == 1
    assert "$WITNESS_TEST_KEY is not set" in r.error


def test_reply_slower_than_timeout_is_retried_then_reported():
    with OpenAIServer(lambda req: Delay(1.5, "late")) as srv:
        t0 = time.perf_counter()
        r = LLMClient(_cfg(srv, timeout=0.3, max_retries=1)).chat_many([{"messages": _msgs()}])[0]
        elapsed = time.perf_counter() - t0
    assert r.error is not None and "timeout" in r.error.lower()
    assert len(srv.requests) == 2 and elapsed < 1.5


def test_timeout_then_success():
    script = iter([Delay(1.0, "late"), "on time"])
    with OpenAIServer(lambda req: next(script)) as srv:
        r = LLMClient(_cfg(srv, timeout=0.3)).chat(_msgs())
    assert r.text == "on time" and r.attempts == 2


def test_backoff_is_exponential_with_jitter_and_honours_retry_after():
    import random

    rng = random.Random(0)
    d = [backoff_delay(k, base=1.0, cap=100.0, rng=rng) for k in (1, 2, 3, 4)]
    for k, v in enumerate(d):
        assert 0.5 * 2**k <= v <= 2**k
    assert backoff_delay(3, base=1.0, cap=2.0) <= 2.0
    assert backoff_delay(1, base=0.01, cap=5.0, retry_after=3.0) == 3.0


def test_response_format_refused_falls_back_to_text():
    def handler(req):
        if "response_format" in req:
            return (400, {"error": {"message": "response_format not supported"}})
        return 'Here: ```json\n{"a": 1,}\n```'

    rf = {"type": "json_object"}
    with OpenAIServer(handler) as srv:
        client = LLMClient(_cfg(srv))
        r1 = client.chat(_msgs("1"), response_format=rf)
        r2 = client.chat_many([{"messages": _msgs("2"), "response_format": rf}])[0]
    assert r1.ok and not r1.structured and parse_json_reply(r1.text) == {"a": 1}
    assert r2.ok and not r2.structured
    assert ["response_format" in q for q in srv.requests] == [True, False, False]


def test_a_400_with_another_cause_keeps_structured_output():
    def handler(req):
        if req["messages"][0]["content"] == "too long":
            return (400, {"error": {"message": "context length exceeded"}})
        return "ok"

    rf = {"type": "json_object"}
    with OpenAIServer(handler) as srv:
        client = LLMClient(_cfg(srv))
        bad = client.chat(_msgs("too long"), response_format=rf)
        good = client.chat(_msgs("fine"), response_format=rf)
    assert "HTTP 400" in bad.error and "context length" in bad.error and bad.attempts == 2
    assert good.ok and good.structured
    assert ["response_format" in q for q in srv.requests] == [True, False, True]


# -- cache ------------------------------------------------------------------------------------


def test_cache_resumes_and_never_sends_twice(tmp_path, monkeypatch):
    monkeypatch.setenv("WITNESS_TEST_KEY", SECRET)
    reqs = [{"messages": _msgs(str(i))} for i in range(6)]
    with OpenAIServer(lambda req: "a" + req["messages"][0]["content"]) as srv:
        client = LLMClient(_cfg(srv, cache_dir=tmp_path / "cache"))
        first = client.chat_many(reqs[:3])  # a run that stopped halfway
        second = client.chat_many(reqs)
        third = LLMClient(_cfg(srv, cache_dir=tmp_path / "cache")).chat_many(reqs)
        single = client.chat(_msgs("0"))
    assert len(srv.requests) == 6
    assert [r.cached for r in first] == [False] * 3
    assert [r.cached for r in second] == [True] * 3 + [False] * 3
    assert all(r.cached and r.attempts == 0 for r in third) and single.cached
    assert [r.text for r in third] == [f"a{i}" for i in range(6)]
    files = list((tmp_path / "cache").rglob("*.json"))
    assert len(files) == 6
    for f in files:
        assert SECRET not in f.read_text()
    assert SECRET not in repr(client)


def test_errors_are_not_cached(tmp_path):
    script = iter([(500, "x"), "ok"])
    with OpenAIServer(lambda req: next(script)) as srv:
        c = LLMClient(_cfg(srv, cache_dir=tmp_path, max_retries=0))
        assert c.chat(_msgs()).error is not None
        assert c.chat(_msgs()).text == "ok"
    assert len(list(tmp_path.rglob("*.json"))) == 1


def test_cache_key_covers_model_messages_and_image():
    a = request_key("m", [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": image_data_url(_png(8, 8))}}]}])
    b = request_key("m", [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": image_data_url(_png(9, 8))}}]}])
    assert a != b
    assert request_key("m", _msgs(), response_format={"type": "json_object"}) != request_key("m", _msgs())
    assert request_key("m", _msgs(), temperature=0.5) != request_key("m", _msgs())


# -- images -----------------------------------------------------------------------------------


def test_image_data_url_downscales_and_passes_small_images_through(tmp_path):
    small = _png(40, 20)
    assert image_data_url(small) == "data:image/png;base64," + base64.b64encode(small).decode()
    p = tmp_path / "big.png"
    p.write_bytes(_png(300, 100, "RGBA"))
    url = image_data_url(p, max_side=150)
    assert url.startswith("data:image/png;base64,")
    assert Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).size == (150, 50)
    assert image_data_url(p, max_side=150) == url  # deterministic
    assert image_data_url("https://example.org/a.jpg") == "https://example.org/a.jpg"


def test_image_data_url_errors(tmp_path):
    with pytest.raises(InputError, match="Expected a readable image file"):
        image_data_url(tmp_path / "missing.png")
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not an image")
    with pytest.raises(InputError, match="Expected an image, got data PIL cannot read"):
        image_data_url(bad)
    with pytest.raises(InputError, match="Expected max_side >= 1"):
        image_data_url(_png(), max_side=0)
    with pytest.raises(InputError, match="Expected image bytes or a path"):
        image_data_url(12)  # type: ignore[arg-type]


# -- JSON replies -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, value",
    [
        ('{"a": 1}', {"a": 1}),
        ("[1, 2, 3,]", [1, 2, 3]),
        ('```json\n{"q": "x, ]"}\n```', {"q": "x, ]"}),
        ('Sure, here you go:\n{"drafts": [{"q": "Any car?",},],}\nHope it helps', {"drafts": [{"q": "Any car?"}]}),
        ('<think>maybe {"no": 1}</think>{"yes": 2}', {"yes": 2}),
        ('```\n[{"a": "b"}]\n```', [{"a": "b"}]),
    ],
)
def test_parse_json_reply_tolerates_model_habits(text, value):
    assert parse_json_reply(text) == value


def test_parse_json_reply_errors():
    with pytest.raises(InputError, match="Expected JSON in the reply, got 'no json here'"):
        parse_json_reply("no json here")
    with pytest.raises(InputError, match="got empty text"):
        parse_json_reply("   ")
    with pytest.raises(InputError, match="Expected reply text"):
        parse_json_reply(None)  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_parse_json_reply_never_crashes(text):
    try:
        parse_json_reply(text)
    except InputError:
        pass


# -- config -----------------------------------------------------------------------------------


def test_config_errors():
    with pytest.raises(InputError, match="Expected a base URL starting with http"):
        LLMConfig("localhost:8000", "m")
    with pytest.raises(InputError, match="Expected a model name"):
        LLMConfig("http://x/v1", "")
    with pytest.raises(InputError, match="Expected concurrency >= 1"):
        LLMConfig("http://x/v1", "m", concurrency=0)
    with pytest.raises(InputError, match="Expected max_retries >= 0"):
        LLMConfig("http://x/v1", "m", max_retries=-1)
    with pytest.raises(InputError, match="Expected a positive timeout"):
        LLMConfig("http://x/v1", "m", timeout=0)
    with pytest.raises(InputError, match="Expected an LLMConfig"):
        LLMClient({"base_url": "http://x/v1"})  # type: ignore[arg-type]


def test_bad_requests_are_refused_before_sending():
    c = LLMClient(LLMConfig("http://127.0.0.1:9/v1", "m"))
    with pytest.raises(InputError, match="Expected a request dict with 'messages'"):
        c.chat_many([{"msgs": []}])
    with pytest.raises(InputError, match="Expected messages as a non-empty list"):
        c.chat([])


def test_usage_and_cost():
    res = [ChatResult("a", 1000, 100, False, None, 2), ChatResult(None, 0, 0, False, "HTTP 500", 4), ChatResult("c", 50, 5, True, None, 0)]
    u = LLMUsage.of(res)
    assert (u.requests, u.cached, u.errors, u.retries, u.prompt_tokens, u.completion_tokens) == (2, 1, 1, 4, 1000, 100)
    assert estimate_cost(u.prompt_tokens, u.completion_tokens, price_prompt_per_1k=1.0, price_completion_per_1k=2.0) == pytest.approx(1.2)
