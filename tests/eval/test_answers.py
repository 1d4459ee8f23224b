"""ν, strict/lenient matching, yes/no and the AESP extractor (rules, LLM through a real HTTP server)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from witness.eval.answers import (
    EXTRACT_PROMPT,
    extract_answer,
    extract_answers,
    extract_rules,
    match_answers,
    match_lenient,
    match_strict,
    normalize_lenient,
    read_yes_no,
    stated_count,
    stated_counts,
    token_f1,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("3 cars", 3),
        ("There are Three cars and 2 vans", 3),
        ("TWENTY", 20),
        ("seventeen trucks", 17),
        ("zero", 0),
        ("twenty-one", 20),  # number words stop at twenty; the first cardinal is "twenty"
        ("no cars at all", None),
        ("someone", None),  # word boundaries
        ("car3", None),
        ("", None),
        (None, None),
        ("2.5 meters", 2),
        ("1234567890123 and 4", 4),  # more than 9 digits is not a count
    ],
)
def test_stated_count(text, expected):
    assert stated_count(text) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(list("abc xyz0123456789.,-twoneTWOthreeé")), max_size=30), max_size=20))
def test_stated_counts_vectorized_agrees_with_scalar(texts):
    got = stated_counts(texts).tolist()
    want = [-1 if stated_count(t) is None else stated_count(t) for t in texts]
    assert got == want


@pytest.mark.parametrize("text", ["İtwo cars", "\u0130 3 cars", "ſix", "KONE", "straße two"])
def test_stated_counts_agrees_on_non_ascii_case_mappings(text):
    # lowering changes 'İ' into two code points; ν lowers ASCII only (re.IGNORECASE | re.ASCII)
    want = stated_count(text)
    assert stated_counts([text]).tolist() == [-1 if want is None else want]


def test_strict_matching():
    assert match_strict("Yes.", "yes")
    assert match_strict("  WHITE ", "white")
    assert match_strict("the van is white", "white")
    assert not match_strict("whiteish", "white")  # not at a word boundary
    assert not match_strict("4 cars", "four cars")  # no number-word normalization in strict
    assert not match_strict("", "yes")


def test_lenient_matching_counts_decide():
    assert match_lenient("Four cars.", "4 cars")
    assert not match_lenient("3 cars", "4 cars")  # counts decide, even with overlapping tokens
    assert match_lenient("there are 4", "four vehicles")  # counts equal -> ok
    assert match_lenient("a white van", "the van is white")  # token F1 = 2/3
    assert match_lenient("white", "the van is white")  # containment
    assert not match_lenient("red", "the van is white")
    assert not match_lenient("", "white")
    assert match_lenient("", "")


def test_normalize_and_token_f1():
    assert normalize_lenient("Twenty-two, cars!") == "20 2 cars" or normalize_lenient("Twenty-two, cars!") == "20 two cars"
    assert token_f1("a b", "a b") == 1.0
    assert token_f1("", "a") == 0.0
    assert token_f1("a a b", "a c") == pytest.approx(2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2))


def test_match_answers_memoizes_identical_pairs():
    out = match_answers(["Yes", "Yes", "no"], ["yes", "yes", "yes"], lenient=True)
    assert out.tolist() == [True, True, False]
    assert out.dtype == np.bool_


@pytest.mark.parametrize(
    "text, expected",
    [("Yes.", "yes"), ("no", "no"), ("No, there are none.", "no"), ("There are no ships.", "no"),
     ("Yes, but not many", "yes"), ("There is a plane", None), ("", None), ("It isn't there", "no")],
)
def test_read_yes_no(text, expected):
    assert read_yes_no(text) == expected


def test_extract_rules():
    assert extract_rules("3", "counting").method == "direct"
    assert extract_rules("Yes", "existence").method == "direct"
    assert extract_rules("I can see five ships.", "counting").value == 5
    assert extract_rules("There are none.", "counting").value == 0
    assert extract_rules("two or three", "counting").ambiguous
    assert extract_rules("yes", "counting").ambiguous  # a yes is no count
    assert extract_rules("There are more ships.", "comparison").ambiguous
    assert extract_rules(None, "existence").ambiguous


def test_extract_prompt_snapshot():
    # A change of this prompt changes scores: update the snapshot deliberately.
    assert EXTRACT_PROMPT.format(qtype="counting", question="How many?", response="a few") == (
        "You read a model's response to a visual question and extract its final answer.\n"
        "Question type: counting.\nQuestion: How many?\nResponse: a few\n\n"
        'Reply with JSON only: {"answer": A} where A is "yes" or "no" for existence and comparison questions, '
        'an integer for counting questions, or "ambiguous" if the response gives no single clear answer or '
        "contradicts itself."
    )


class _FakeResult:
    def __init__(self, text):
        self.text = text


class _FakeLLM:
    """Stands in for LLMClient.chat_many (the interface); the HTTP path is tested below."""

    def __init__(self, replies):
        self.replies, self.requests = replies, []

    def chat_many(self, requests, *, progress=None):
        self.requests.extend(requests)
        return [_FakeResult(self.replies.pop(0)) for _ in requests]


def test_llm_stage_only_for_undecided_answers():
    llm = _FakeLLM(['{"answer": 3}', '{"answer": "ambiguous"}', "not json"])
    out = extract_answers(
        ["How many?", "How many?", "Any ship?", "Any plane?", "How many?"],
        ["2", "two or three, I think", "There is a ship", "No.", "hmm"],
        ["counting", "counting", "existence", "existence", "counting"],
        llm=llm,
    )
    assert [e.method for e in out] == ["direct", "llm", "ambiguous", "direct", "ambiguous"]
    assert out[1].value == 3
    assert len(llm.requests) == 3
    assert "two or three" in llm.requests[0]["messages"][0]["content"]


def test_llm_reply_of_wrong_type_stays_ambiguous():
    llm = _FakeLLM(['{"answer": "yes"}'])
    assert extract_answer("How many?", "some", "counting", llm=llm).ambiguous


def test_llm_extractor_over_http(tmp_path):
    server_mod = pytest.importorskip("witness.testing.openai_server")
    from witness.llm import LLMClient, LLMConfig

    def handler(request):
        content = request["messages"][0]["content"]
        return '{"answer": 4}' if "Question type: counting." in content else '```json\n{"answer": "no"}\n```'

    with server_mod.OpenAIServer(handler) as srv:
        client = LLMClient(LLMConfig(srv.base_url, "extractor", cache_dir=tmp_path / "cache"))
        out = extract_answers(["How many ships?", "Any plane?"], ["a handful, three or four", "hard to say, yes and no"],
                              ["counting", "existence"], llm=client)
        assert [(e.value, e.method) for e in out] == [(4, "llm"), ("no", "llm")]
        n_sent = len(srv.requests)
        again = extract_answers(["How many ships?", "Any plane?"], ["a handful, three or four", "hard to say, yes and no"],
                                ["counting", "existence"], llm=client)
        assert [e.value for e in again] == [4, "no"]
        assert len(srv.requests) == n_sent  # cached on disk: nothing sent twice


@pytest.mark.parametrize("text", ["I cannot tell.", "I don't know", "Not sure.", "No idea", "Hard to say",
                                  "Cannot determine from the image"])
def test_abstentions_are_ambiguous_not_negative(text):
    # these used to read as "no" (existence) and as a count of 0 (counting): an abstention was scored
    assert read_yes_no(text) is None
    assert extract_rules(text, "existence").ambiguous
    assert extract_rules(text, "counting").ambiguous


@pytest.mark.parametrize("text", ["I can't see any ship.", "There is not a ship", "No.", "There are none"])
def test_negatives_stay_negative(text):
    assert read_yes_no(text) == "no"
    assert extract_rules(text, "counting").value == 0
