"""Reading answers: stated counts, yes/no, strict and lenient matching, the AESP extractor.

Definitions (``shared/ARCHITECTURE.md``, metric contract; RoadSceneVQA-G appendix "Answer matching
in GCA"; AESP answer extraction):

* ``ν(a)``, :func:`stated_count`: the first cardinal number in ``a``: a run of 1–9 ASCII digits
  between word boundaries, or a number word ``zero`` … ``twenty`` (case-insensitive), else
  ``None``. ``"2.5"`` reads as 2 (the first digit run); longer digit runs are not counts.
* strict match, :func:`match_strict`: lowercase and trim both; equal, or the reference found in the
  prediction at word boundaries.
* lenient match, :func:`match_lenient`: lowercase, punctuation to spaces, number words to digits;
  where both answers state a count the counts decide (equal: ok, different: not ok); otherwise
  containment either way at word boundaries, or token F1 ≥ 0.5.
* :func:`read_yes_no`, :func:`extract_answer` / :func:`extract_answers`: the AESP extractor. An
  answer that *is* yes / no / an integer is read directly; otherwise rules; otherwise (only when an
  :class:`~witness.llm.LLMClient` is given) an LLM reads the question and the response. What stays
  undecidable is ``ambiguous`` (support ``s = 0``) and counted.

The hot path of the suites calls :func:`stated_counts` over a whole column (pyarrow's RE2 regex in
C++), which agrees with :func:`stated_count` on every string (same pattern, ASCII semantics).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

__all__ = [
    "NUMBER_WORDS",
    "stated_count",
    "stated_counts",
    "normalize_lenient",
    "token_f1",
    "match_strict",
    "match_lenient",
    "match_answers",
    "read_yes_no",
    "Extracted",
    "extract_rules",
    "extract_answer",
    "extract_answers",
    "EXTRACT_PROMPT",
]

NUMBER_WORDS: dict[str, int] = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
# Longest words first so "seventeen" is not read as "seven".
_WORDS_ALT = "|".join(sorted(NUMBER_WORDS, key=len, reverse=True))
_COUNT_PATTERN = r"\b(?P<n>\d{1,9}|" + _WORDS_ALT + r")\b"
_COUNT_RE = re.compile(_COUNT_PATTERN, re.IGNORECASE | re.ASCII)
_WORD_RE = re.compile(r"\b(" + _WORDS_ALT + r")\b", re.ASCII)
_PUNCT_RE = re.compile(r"[^\w\s]+")
_SPACE_RE = re.compile(r"\s+")


def stated_count(text: str | None) -> int | None:
    """``ν(a)``: the first cardinal number stated in ``text`` (digits or zero … twenty), else None.

    >>> stated_count("There are Three cars and 2 vans.")
    3
    >>> stated_count("seventeen") , stated_count("no cars") , stated_count(None)
    (17, None, None)
    """
    if not text:
        return None
    m = _COUNT_RE.search(text)
    if m is None:
        return None
    tok = m.group(1).lower()
    return int(tok) if tok[0].isdigit() else NUMBER_WORDS[tok]


def stated_counts(texts: Sequence[str | None]) -> np.ndarray:
    """``ν`` over a column: int64 array, ``-1`` where no count is stated (vectorized, RE2).

    >>> stated_counts(["4 cars", "none", None, "Two"]).tolist()
    [4, -1, -1, 2]
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = texts if isinstance(texts, (pa.Array, pa.ChunkedArray)) else pa.array(list(texts), pa.string())
    if len(arr) == 0:
        return np.zeros(0, dtype=np.int64)
    # ASCII lowering only, as re.IGNORECASE | re.ASCII does: utf8_lower would turn 'İ' into 'i̇' and move a word boundary
    m = pc.extract_regex(pc.ascii_lower(arr), _COUNT_PATTERN)
    tok = pc.struct_field(m, [0])
    out = np.full(len(arr), -1, dtype=np.int64)
    is_digit = pc.fill_null(pc.utf8_is_digit(tok), False).to_numpy(zero_copy_only=False)
    if is_digit.any():
        digits = pc.cast(pc.filter(tok, pa.array(is_digit)), pa.int64()).to_numpy(zero_copy_only=False)
        out[is_digit] = digits
    is_word = pc.fill_null(pc.invert(pc.utf8_is_digit(tok)), False).to_numpy(zero_copy_only=False)
    if is_word.any():
        words = pc.filter(tok, pa.array(is_word))
        keys = pa.array(list(NUMBER_WORDS))
        idx = pc.index_in(words, value_set=keys).to_numpy(zero_copy_only=False)
        out[is_word] = np.asarray(list(NUMBER_WORDS.values()), dtype=np.int64)[idx]
    return out


def normalize_lenient(text: str | None) -> str:
    """Lowercase, punctuation to spaces, number words to digits, spaces collapsed.

    >>> normalize_lenient("Four cars, parked!")
    '4 cars parked'
    """
    if not text:
        return ""
    t = _PUNCT_RE.sub(" ", text.lower())
    t = _WORD_RE.sub(lambda m: str(NUMBER_WORDS[m.group(1)]), t)
    return _SPACE_RE.sub(" ", t).strip()


def token_f1(pred: str, ref: str) -> float:
    """Token-level F1 of two whitespace-tokenized strings (SQuAD style, multiset overlap).

    ``F1 = 2 P R / (P + R)``, ``P = overlap / |pred|``, ``R = overlap / |ref|``; 1.0 for two empty
    strings, 0.0 when exactly one is empty.

    >>> token_f1("a red car", "the red car")
    0.6666666666666666
    """
    p, r = pred.split(), ref.split()
    if not p and not r:
        return 1.0
    if not p or not r:
        return 0.0
    overlap = sum((Counter(p) & Counter(r)).values())
    if overlap == 0:
        return 0.0
    prec, rec = overlap / len(p), overlap / len(r)
    return 2 * prec * rec / (prec + rec)


def _contains_words(hay: str, needle: str) -> bool:
    if not needle:
        return False
    if needle == hay:
        return True
    return re.search(r"(?<!\w)" + re.escape(needle) + r"(?!\w)", hay) is not None


def match_strict(pred: str | None, ref: str | None) -> bool:
    """GCA-s ``ans_ok``: lowercase and trim; equal, or the reference inside the prediction at word
    boundaries (RoadSceneVQA-G appendix; contract).

    >>> match_strict("Yes, there is.", "yes"), match_strict("4 cars", "four cars")
    (True, False)
    """
    p = (pred or "").strip().lower()
    r = (ref or "").strip().lower()
    if p == r:
        return True
    return _contains_words(p, r)


def match_lenient(pred: str | None, ref: str | None) -> bool:
    """GCA-l ``ans_ok``: normalize case, punctuation and number words; when both state a count the
    counts decide; otherwise containment either way (word boundaries) or token F1 ≥ 0.5.

    >>> match_lenient("There are four cars.", "4 cars"), match_lenient("3 cars", "4 cars")
    (True, False)
    >>> match_lenient("a white van", "the van is white")
    True
    """
    p, r = normalize_lenient(pred), normalize_lenient(ref)
    if p == r:
        return True
    cp, cr = stated_count(p), stated_count(r)
    if cp is not None and cr is not None:
        return cp == cr
    if not p or not r:
        return False
    if _contains_words(p, r) or _contains_words(r, p):
        return True
    return token_f1(p, r) >= 0.5


def match_answers(preds: Sequence[str | None], refs: Sequence[str | None], *, lenient: bool) -> np.ndarray:
    """:func:`match_lenient` (or :func:`match_strict`) over two columns: a boolean array.

    >>> match_answers(["yes", "No."], ["yes", "yes"], lenient=False).tolist()
    [True, False]
    """
    import pyarrow as pa

    fn = match_lenient if lenient else match_strict
    if len(preds) != len(refs):
        raise ValueError(f"Expected as many predictions as references, got {len(preds)} and {len(refs)}.")
    if len(preds) == 0:
        return np.zeros(0, dtype=bool)
    # answers repeat: each distinct (prediction, reference) pair is judged once
    p = (preds if isinstance(preds, pa.Array) else pa.array(list(preds), pa.string())).dictionary_encode()
    r = (refs if isinstance(refs, pa.Array) else pa.array(list(refs), pa.string())).dictionary_encode()
    pc_ = np.asarray(p.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    rc_ = np.asarray(r.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    pc_ = np.where(p.indices.is_null().to_numpy(zero_copy_only=False), len(p.dictionary), pc_)
    rc_ = np.where(r.indices.is_null().to_numpy(zero_copy_only=False), len(r.dictionary), rc_)
    key = pc_ * (len(r.dictionary) + 1) + rc_
    uniq, inverse = np.unique(key, return_inverse=True)
    pv = p.dictionary.to_pylist() + [None]
    rv = r.dictionary.to_pylist() + [None]
    w = len(r.dictionary) + 1
    verdict = np.fromiter((fn(pv[k // w], rv[k % w]) for k in uniq.tolist()), dtype=bool, count=len(uniq))
    return verdict[inverse.reshape(-1)]


# --------------------------------------------------------------------------------------------
# yes / no and the AESP extractor
# --------------------------------------------------------------------------------------------

_YES = {"yes", "yeah", "yep", "true", "correct", "indeed", "affirmative"}
_NO = {"no", "not", "none", "nope", "false", "never", "nothing", "neither", "nor", "cannot", "isn", "aren", "doesn", "don", "t"}
_TOKEN_RE = re.compile(r"[a-z]+|\d+")
# An abstention is not a negative answer: "I cannot tell" must not read as "no" (or as a count of 0).
_ABSTAIN_RE = re.compile(
    r"\b(?:not sure|unsure|uncertain|unclear|no idea|(?:do not|don['\u2019]?t|cannot|can not|can['\u2019]?t|"
    r"unable to|impossible to|hard to|difficult to)\s+(?:tell|determine|say|know|answer|be sure|judge))\b"
)


def read_yes_no(text: str | None) -> str | None:
    """Read a yes/no answer: the text *is* yes or no (punctuation and case ignored), or it starts
    with yes/no as a word, or it holds only affirmative or only negative words. An abstention
    ("not sure", "I cannot tell", "no idea", "hard to say") and anything else is None.

    >>> read_yes_no("Yes."), read_yes_no("No, there is none."), read_yes_no("There are no cars")
    ('yes', 'no', 'no')
    >>> read_yes_no("There is a car") is None, read_yes_no("I cannot tell.") is None
    (True, True)
    """
    if not text:
        return None
    low = text.lower()
    if _ABSTAIN_RE.search(low):
        return None
    toks = _TOKEN_RE.findall(low)
    if not toks:
        return None
    if toks[0] in ("yes", "no"):
        return toks[0]
    has_yes = any(t in _YES for t in toks)
    has_no = any(t in _NO for t in toks)
    if has_yes and not has_no:
        return "yes"
    if has_no and not has_yes:
        return "no"
    return None


@dataclass(frozen=True)
class Extracted:
    """An extracted answer: ``value`` is ``"yes"``, ``"no"``, an int, or None (ambiguous);
    ``method`` is ``direct``, ``rule``, ``llm`` or ``ambiguous``."""

    value: str | int | None
    method: str

    @property
    def ambiguous(self) -> bool:
        return self.value is None


_DIRECT_RE = re.compile(r"^\s*([a-z]+|\d+)\s*[.!]?\s*$", re.ASCII)


def _direct(text: str) -> str | int | None:
    m = _DIRECT_RE.match(text.lower())
    if not m:
        return None
    tok = m.group(1)
    if tok in ("yes", "no"):
        return tok
    if tok.isdigit():
        return int(tok)
    return NUMBER_WORDS.get(tok)


def extract_rules(response: str | None, qtype: str) -> Extracted:
    """The rule stage of the AESP extractor (before any LLM).

    * *direct*: the response is just ``yes``/``no`` or one integer (digits or a number word);
    * *rule*, existence/comparison: :func:`read_yes_no`; counting: the distinct counts stated in
      the response (digits or number words) are exactly one value, or none is stated and the
      response is negative (``"there are none"`` → 0);
    * otherwise ``ambiguous``.

    >>> extract_rules("3", "counting"), extract_rules("I see three planes.", "counting").value
    (Extracted(value=3, method='direct'), 3)
    >>> extract_rules("two or three", "counting").method
    'ambiguous'
    """
    if not response or not response.strip():
        return Extracted(None, "ambiguous")
    d = _direct(response)
    if d is not None and (qtype == "counting") == isinstance(d, int):
        return Extracted(d, "direct")
    if qtype == "counting":
        vals = {int(t) if t[0].isdigit() else NUMBER_WORDS[t.lower()] for t in _COUNT_RE.findall(response)}
        if len(vals) == 1:
            return Extracted(vals.pop(), "rule")
        if not vals and read_yes_no(response) == "no":
            return Extracted(0, "rule")
        return Extracted(None, "ambiguous")
    yn = read_yes_no(response)
    return Extracted(yn, "rule") if yn is not None else Extracted(None, "ambiguous")


#: The LLM extractor's instruction (snapshot-tested: a change here changes scores).
EXTRACT_PROMPT = (
    "You read a model's response to a visual question and extract its final answer.\n"
    "Question type: {qtype}.\nQuestion: {question}\nResponse: {response}\n\n"
    "Reply with JSON only: {{\"answer\": A}} where A is \"yes\" or \"no\" for existence and "
    "comparison questions, an integer for counting questions, or \"ambiguous\" if the response "
    "gives no single clear answer or contradicts itself."
)


def _llm_value(text: str | None, qtype: str) -> str | int | None:
    from ..errors import InputError
    from ..llm import parse_json_reply

    if text is None:
        return None
    try:
        obj = parse_json_reply(text)
    except InputError:
        return None
    val: Any = obj.get("answer") if isinstance(obj, dict) else obj
    if qtype == "counting":
        if isinstance(val, bool):
            return None
        if isinstance(val, int):
            return val if val >= 0 else None
        if isinstance(val, float) and val.is_integer() and val >= 0:
            return int(val)
        if isinstance(val, str) and val.strip().isdigit():
            return int(val.strip())
        return None
    if isinstance(val, str) and val.strip().lower() in ("yes", "no"):
        return val.strip().lower()
    return None


def extract_answers(
    questions: Sequence[str],
    responses: Sequence[str | None],
    qtypes: Sequence[str],
    *,
    llm: Any = None,
    progress: Any = None,
) -> list[Extracted]:
    """The AESP extractor over many responses: rules first, then (with ``llm``, an
    :class:`~witness.llm.LLMClient`) one batched LLM pass over what the rules left undecided.

    The LLM reply is JSON ``{"answer": "yes" | "no" | int | "ambiguous"}``; a reply that does not
    fit the question type, a failed request, or ``"ambiguous"`` stays ambiguous (``s = 0``).
    Requests are cached on disk by the client (``LLMConfig.cache_dir``), so a re-run sends nothing.

    >>> [e.value for e in extract_answers(["Any ship?", "How many?"], ["No.", "maybe 2 or 3"],
    ...                                   ["existence", "counting"])]
    ['no', None]
    """
    out = [extract_rules(r, q) for r, q in zip(responses, qtypes, strict=False)]
    todo = [i for i, e in enumerate(out) if e.ambiguous and responses[i] and str(responses[i]).strip()]
    if llm is None or not todo:
        return out
    requests = [
        {
            "messages": [
                {
                    "role": "user",
                    "content": EXTRACT_PROMPT.format(qtype=qtypes[i], question=questions[i], response=responses[i]),
                }
            ],
            "response_format": {"type": "json_object"},
        }
        for i in todo
    ]
    results = llm.chat_many(requests, progress=progress)
    for i, res in zip(todo, results, strict=False):
        val = _llm_value(res.text, qtypes[i])
        out[i] = Extracted(val, "llm") if val is not None else Extracted(None, "ambiguous")
    return out


def extract_answer(question: str, response: str | None, qtype: str, *, llm: Any = None) -> Extracted:
    """One response through :func:`extract_answers`.

    >>> extract_answer("Are there more ships than planes?", "Yes, more ships.", "comparison")
    Extracted(value='yes', method='rule')
    """
    return extract_answers([question], [response], [qtype], llm=llm)[0]


