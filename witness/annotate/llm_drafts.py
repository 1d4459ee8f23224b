"""LLM drafts: grounded questions (RoadSceneVQA-G) and logically equivalent pairs (ConVLM's proposer).

An LLM sees one scene (the image as a data URL, downscaled to ``max_side``, plus the candidate
objects: ids, classes, boxes on the 0–1000 grid, attributes) and per-type instructions, and answers
JSON: ``{"drafts": [{qtype, question, answer, evidence, targets, category, relation}]}`` or, for
pairs, ``{"pairs": [{category, questions: [q1, q2]}]}``. Structured output (``response_format`` with
a JSON schema) is asked for; a server that refuses it gets plain text read by
:func:`witness.llm.parse_json_reply`. Prompts live in ``witness/annotate/prompts/llm_*``.

Drafts are never ground truth: accepted drafts become pre-annotations (Items, ``provenance.drafted_by
= "llm:<model>"``) for people to correct. Validation is never silent; each refused draft becomes a
reject ``{image_id, reason, detail, draft}`` and the summary counts every reason:

* ``image_unreadable`` (the scene's image is missing or not an image; no request is sent),
  ``request_failed`` (the server failed after retries), ``malformed_json`` (no JSON in the reply),
  ``bad_shape`` (not the asked-for structure);
* ``empty_question``, ``empty_answer``, ``duplicate_question`` (same question twice in one scene,
  compared lowercased with spaces collapsed and trailing ``?.!`` dropped), ``unknown_qtype``;
* ``unknown_evidence`` (an id not in the scene's candidate pool), ``duplicate_evidence``;
* ``count_mismatch``: the answer states a number ``ν(a)`` (:func:`witness.eval.answers.stated_count`)
  different from the number of evidence ids (RoadSceneVQA-G: "every numeric answer equals the
  cardinality of its box set"); ``count_missing``: a counting answer states no number;
* scene rules, where they can decide (else the draft is kept with ``provenance.audit =
  "unverified"``; drafts a rule checked get ``"verified:rules"``):
  existence: "yes" needs evidence, "no" none (``existence_mismatch``); comparison on the evidence
  labels, more: yes iff n_A > n_B, fewer: yes iff n_A < n_B, equal: yes iff n_A = n_B
  (``comparison_mismatch``; ``bad_comparison`` without relation or two targets); "X left/right of
  Y" with two evidence ids and a yes/no answer, decided when the boxes do not overlap horizontally
  (``spatial_mismatch``); existence, counting and comparison evidence labels outside the stated
  targets, when every target is a class of the scene (``evidence_label_mismatch``).
  ``verified:rules`` means: a counting answer's evidence is every scene object of its target
  classes and nothing else (an unqualified count); an existence "yes" cites evidence, all of its
  target classes, a "no" names targets of which the scene has none; a comparison answer was
  decided and its evidence is every scene object of both targets (counts and comparisons over a
  class with a crowd region, COCO ``iscrowd = 1``, never are); a left/right answer was
  decided; an attribute answer names an attribute value of its evidence. Everything else
  (qualified counts and comparisons, evidence of classes outside ``targets``, reasoning, scene
  inference, identification, selection) stays ``unverified`` for people to check;
* pairs: ``pair_incomplete`` (not exactly two questions), ``pair_evidence_differs`` (an existence,
  counting or comparison pair whose two evidence sets differ), and each member's own reasons; a pair
  is kept or refused whole.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from ..boxes import xyxy_to_grid
from ..errors import InputError
from ..llm import LLMClient, LLMUsage, estimate_cost, image_data_url, parse_json_reply
from ..schema import (
    CATEGORIES,
    QTYPE_CATEGORY,
    QTYPES,
    RELATIONS,
    item_record,
    items_table,
    validate_items,
)

__all__ = [
    "LLM_QTYPES",
    "PAIR_QTYPES",
    "REJECT_REASONS",
    "DraftConfig",
    "DraftSummary",
    "DraftResult",
    "load_prompt",
    "scene_rows",
    "build_messages",
    "response_format",
    "check_reply",
    "draft_llm",
    "write_drafts",
    "rejects_path",
]

#: Question types the LLM drafter asks for by default (comparison is available on request).
LLM_QTYPES: tuple[str, ...] = (
    "existence",
    "counting",
    "identification",
    "selection",
    "attribute",
    "spatial",
    "scene",
    "reasoning",
)

#: Question types the pair proposer asks for by default (ConVLM: counting, spatial, reasoning, ...).
PAIR_QTYPES: tuple[str, ...] = ("existence", "counting", "comparison", "spatial", "attribute", "reasoning")

#: Every reason a draft can be refused for (the summary counts each).
REJECT_REASONS: tuple[str, ...] = (
    "image_unreadable",
    "request_failed",
    "malformed_json",
    "bad_shape",
    "empty_question",
    "empty_answer",
    "duplicate_question",
    "unknown_qtype",
    "unknown_evidence",
    "duplicate_evidence",
    "count_mismatch",
    "count_missing",
    "existence_mismatch",
    "comparison_mismatch",
    "bad_comparison",
    "spatial_mismatch",
    "evidence_label_mismatch",
    "pair_incomplete",
    "pair_evidence_differs",
)

_SAME_EVIDENCE_QTYPES = {"existence", "counting", "comparison"}


@dataclass(frozen=True)
class DraftConfig:
    """What to ask for: ``qtypes`` (from :data:`~witness.schema.QTYPES`), ``per_type`` questions of
    each type per scene (or ``n_pairs`` pairs with ``pairs=True``), the image's longer side in
    pixels (``max_side``) and whether to ask for structured output (``structured``).

    >>> DraftConfig(qtypes=("counting",)).per_type
    1
    """

    qtypes: tuple[str, ...] = LLM_QTYPES
    per_type: int = 1
    pairs: bool = False
    n_pairs: int = 3
    max_side: int = 1024
    structured: bool = True

    def __post_init__(self) -> None:
        qtypes = tuple(self.qtypes)
        object.__setattr__(self, "qtypes", qtypes)
        if not qtypes:
            raise InputError(f"Expected at least one question type, got none (DraftConfig.qtypes). Use some of {list(QTYPES)}.")
        bad = [q for q in qtypes if q not in QTYPES]
        if bad:
            raise InputError(f"Expected question types from {list(QTYPES)}, got {bad} (--types). Fix the type names.")
        if self.per_type < 1 or self.n_pairs < 1:
            raise InputError(f"Expected per_type and n_pairs >= 1, got {self.per_type} and {self.n_pairs} (DraftConfig). Ask for at least one.")
        if self.max_side < 32:
            raise InputError(f"Expected max_side >= 32 pixels, got {self.max_side} (--max-side). Use e.g. 1024.")


@dataclass(frozen=True)
class DraftSummary:
    """Counts of one drafting run: scenes, requests sent / answered from the cache / failed,
    retries, drafts accepted (pairs count two items), verified by rules, unverified, rejects per
    reason, tokens, estimated cost (``price`` per 1K tokens) and wall time in seconds."""

    scenes: int
    requests: int
    cached: int
    failed: int
    retries: int
    accepted: int
    verified: int
    unverified: int
    rejected: int
    reasons: dict[str, int]
    prompt_tokens: int
    completion_tokens: int
    cost: float
    seconds: float
    model: str

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class DraftResult:
    """Accepted drafts (an Items table, validated), rejects (dicts) and the summary."""

    items: pa.Table
    rejects: list[dict] = field(default_factory=list)
    summary: DraftSummary | None = None


# --------------------------------------------------------------------------------------------
# Prompts
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def load_prompt(name: str) -> str:
    """The text of prompt file ``witness/annotate/prompts/<name>`` (package data).

    >>> "evidence" in load_prompt("llm_draft_system.txt")
    True
    """
    try:
        return resources.files("witness.annotate").joinpath("prompts", name).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"Expected a prompt file, got {name!r} which does not exist (witness/annotate/prompts). Check the name.") from None


@functools.lru_cache(maxsize=1)
def _qtype_instructions() -> dict[str, str]:
    return json.loads(load_prompt("llm_qtypes.json"))


def scene_rows(scenes: pa.Table) -> list[dict]:
    """Scenes as plain dicts (attributes as dicts), as :func:`build_messages` takes them."""
    rows = scenes.to_pylist()
    for r in rows:
        for o in r.get("objects") or []:
            a = o.get("attributes")
            if isinstance(a, list):
                o["attributes"] = dict(a)
    return rows


def _objects_block(scene: dict) -> str:
    objs = scene.get("objects") or []
    if not objs:
        return "(none)"
    boxes = np.array([o["box"] for o in objs], dtype=np.float64).reshape(-1, 4)
    grid = np.rint(xyxy_to_grid(boxes, scene["width"], scene["height"])).astype(int)
    lines = []
    for o, g in zip(objs, grid, strict=True):
        entry: dict[str, Any] = {"id": o["id"], "label": o["label"], "box": [int(v) for v in g]}
        if o.get("attributes"):
            entry["attributes"] = dict(sorted(dict(o["attributes"]).items()))
        lines.append(json.dumps(entry, ensure_ascii=False))
    return "\n".join(lines)


def _image_of(scene: dict) -> bytes | str:
    img = scene.get("image") or {}
    if img.get("bytes"):
        return img["bytes"]
    if img.get("path"):
        return img["path"]
    raise InputError(
        f"Expected an image (bytes or path) for the scene, got none (scene {scene.get('image_id')!r}, field 'image'). "
        "Import scenes with their images."
    )


def build_messages(scene: dict, config: DraftConfig, *, image_url: str | None = None) -> list[dict]:
    """The chat messages for one scene: the system prompt, then one user message with the text
    (image size, candidate objects with boxes on the 0–1000 grid, per-type instructions) and the
    image as a data URL downscaled to ``config.max_side`` (``image_url`` overrides it, for tests).

    >>> s = {"image_id": "i", "width": 100, "height": 50, "image": None,
    ...      "objects": [{"id": "o1", "label": "car", "box": [0, 0, 50, 25], "attributes": {}}]}
    >>> m = build_messages(s, DraftConfig(qtypes=("counting",)), image_url="data:image/png;base64,AA==")
    >>> [p["type"] for p in m[1]["content"]], '"box": [0, 0, 500, 500]' in m[1]["content"][0]["text"]
    (['text', 'image_url'], True)
    """
    instr = _qtype_instructions()
    lines = "\n".join(f"- {instr[q]}" for q in config.qtypes)
    values = {
        "width": scene["width"],
        "height": scene["height"],
        "n_objects": len(scene.get("objects") or []),
        "objects": _objects_block(scene),
        "per_type": config.per_type,
        "n_pairs": config.n_pairs,
        "instructions": lines,
    }
    kind = "pairs" if config.pairs else "draft"
    system = load_prompt(f"llm_{kind}_system.txt").strip()
    user = Template(load_prompt(f"llm_{kind}_user.txt")).substitute(values).strip()
    url = image_url if image_url is not None else image_data_url(_image_of(scene), max_side=config.max_side)
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": [{"type": "text", "text": user}, {"type": "image_url", "image_url": {"url": url}}]},
    ]


def _draft_schema(qtypes: tuple[str, ...]) -> dict:
    return {
        "type": "object",
        "properties": {
            "qtype": {"type": "string", "enum": list(qtypes)},
            "question": {"type": "string"},
            "answer": {"type": "string"},
            "evidence": {"type": "array", "items": {"type": "string"}},
            "targets": {"type": "array", "items": {"type": "string"}},
            "category": {"type": ["string", "null"], "enum": [*CATEGORIES, None]},
            "relation": {"type": ["string", "null"], "enum": [*RELATIONS, None]},
        },
        "required": ["qtype", "question", "answer", "evidence", "targets", "category", "relation"],
        "additionalProperties": False,
    }


def response_format(config: DraftConfig) -> dict:
    """The ``response_format`` (OpenAI structured outputs, strict JSON schema) for ``config``.

    >>> response_format(DraftConfig())["json_schema"]["name"]
    'witness_drafts'
    """
    draft = _draft_schema(config.qtypes)
    if config.pairs:
        schema = {
            "type": "object",
            "properties": {
                "pairs": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"category": {"type": ["string", "null"]}, "questions": {"type": "array", "items": draft}},
                        "required": ["category", "questions"],
                        "additionalProperties": False,
                    },
                }
            },
            "required": ["pairs"],
            "additionalProperties": False,
        }
        name = "witness_pairs"
    else:
        schema = {
            "type": "object",
            "properties": {"drafts": {"type": "array", "items": draft}},
            "required": ["drafts"],
            "additionalProperties": False,
        }
        name = "witness_drafts"
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


class _Refused(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(reason)
        self.reason, self.detail = reason, detail


def _norm_question(q: str) -> str:
    return re.sub(r"\s+", " ", q.strip().lower()).rstrip("?.! ")


def _str_list(value: Any, name: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
        raise _Refused("bad_shape", f"expected {name} as a list of strings, got {json.dumps(value)[:80]}")
    return [str(v) for v in value]


_LEFT_RIGHT = re.compile(r"\b(left|right)\s+(?:side\s+)?of\b", re.I)


def _check_draft(d: Any, scene: dict, by_id: dict[str, dict], qtypes: tuple[str, ...]) -> dict:
    """Validate one draft; return its normalized fields (+ ``verified``) or raise :class:`_Refused`."""
    from ..eval.answers import read_yes_no, stated_count

    if not isinstance(d, dict):
        raise _Refused("bad_shape", f"expected a draft object, got {type(d).__name__}")
    question = d.get("question")
    answer = d.get("answer")
    if not isinstance(question, str) or not question.strip():
        raise _Refused("empty_question", f"question {question!r}")
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        answer = str(int(answer)) if float(answer).is_integer() else str(answer)
    if not isinstance(answer, str) or not answer.strip():
        raise _Refused("empty_answer", f"answer {answer!r}")
    qtype = d.get("qtype")
    if qtype not in QTYPES or qtype not in qtypes:
        raise _Refused("unknown_qtype", f"qtype {qtype!r}, expected one of {list(qtypes)}")
    evidence = _str_list(d.get("evidence"), "evidence")
    targets = _str_list(d.get("targets"), "targets")
    unknown = [e for e in evidence if e not in by_id]
    if unknown:
        raise _Refused("unknown_evidence", f"evidence ids {unknown} are not in the candidate pool {sorted(by_id)[:20]}")
    if len(set(evidence)) != len(evidence):
        dup = [e for e, n in Counter(evidence).items() if n > 1]
        raise _Refused("duplicate_evidence", f"evidence ids {dup} listed more than once")
    n = len(evidence)
    labels = [by_id[e]["label"] for e in evidence]
    count = stated_count(answer)
    if qtype == "counting" and count is None:
        raise _Refused("count_missing", f"counting answer {answer!r} states no number")
    if count is not None and count != n:
        raise _Refused("count_mismatch", f"answer {answer!r} states {count}, evidence has {n} id(s)")
    known_labels = {o["label"] for o in by_id.values()}
    if targets and all(t in known_labels for t in targets) and any(lab not in targets for lab in labels):
        if qtype in _SAME_EVIDENCE_QTYPES:
            raise _Refused("evidence_label_mismatch", f"evidence labels {sorted(set(labels))} outside targets {targets}")
    category = d.get("category")
    if category not in CATEGORIES:
        category = QTYPE_CATEGORY[qtype]
    relation = d.get("relation")
    verified = False
    yn = read_yes_no(answer)
    # objects of the target classes in the whole scene (the candidate pool is the scene's annotation)
    n_scene = sum(o["label"] in targets for o in by_id.values()) if targets else None
    # a rule vouches for an answer only when every evidence object is of a target class (targets
    # that are not scene labels, like "vehicle" or an absent "bus", cannot be checked)
    labels_in_targets = bool(targets) and all(lab in targets for lab in labels)
    # a crowd region (COCO iscrowd = 1) is one box over many instances: counts over its class are unknown
    crowd = any(o["label"] in targets and str(dict(o.get("attributes") or {}).get("iscrowd")) == "1" for o in by_id.values())
    if qtype == "counting":
        # the count is checked against the evidence above; against the scene only when the evidence
        # is every object of its target classes (an unqualified "How many cars?")
        verified = labels_in_targets and n_scene == n and not crowd
    elif qtype == "existence":
        if yn is None:
            raise _Refused("existence_mismatch", f"existence answer {answer!r} is neither yes nor no")
        if (yn == "yes") != (n > 0):
            raise _Refused("existence_mismatch", f"answer {answer!r} with {n} evidence id(s)")
        verified = labels_in_targets if yn == "yes" else n_scene == 0
    elif qtype == "comparison":
        if relation not in RELATIONS or len(targets) != 2:
            raise _Refused("bad_comparison", f"relation {relation!r}, targets {targets}: expected a relation in {list(RELATIONS)} and two targets")
        if yn is not None:
            na, nb = labels.count(targets[0]), labels.count(targets[1])
            truth = {"more": na > nb, "fewer": na < nb, "equal": na == nb}[relation]
            if (yn == "yes") != truth:
                raise _Refused("comparison_mismatch", f"answer {answer!r} but evidence has {na} {targets[0]} and {nb} {targets[1]} ({relation})")
            # decided on the evidence; it speaks for the scene only when the evidence is every
            # object of both classes (else a qualified comparison, or missing evidence)
            scene_labels = [o["label"] for o in by_id.values()]
            verified = labels_in_targets and not crowd and (na, nb) == (scene_labels.count(targets[0]), scene_labels.count(targets[1]))
    elif qtype == "spatial":
        m = _LEFT_RIGHT.search(question)
        if m and n == 2 and yn is not None:
            a, b = (np.asarray(by_id[e]["box"], dtype=np.float64) for e in evidence)
            a_left, b_left = a[2] <= b[0], b[2] <= a[0]
            if a_left or b_left:
                truth = a_left if m.group(1).lower() == "left" else b_left
                if (yn == "yes") != truth:
                    raise _Refused("spatial_mismatch", f"answer {answer!r} but box {evidence[0]} is {'left' if a_left else 'right'} of {evidence[1]}")
                verified = True
    elif qtype == "attribute" and n:
        values = {str(v).lower() for e in evidence for v in (by_id[e].get("attributes") or {}).values()}
        verified = bool(values) and any(re.search(rf"\b{re.escape(v)}\b", answer.lower()) for v in values)
    if relation not in RELATIONS:
        relation = None
    if qtype != "comparison":
        relation = None
    if not targets:
        targets = list(dict.fromkeys(labels))
    return {
        "qtype": qtype,
        "question": question.strip(),
        "answer": answer.strip(),
        "evidence": evidence,
        "boxes": [by_id[e]["box"] for e in evidence],
        "labels": labels,
        "count": count,
        "category": category,
        "targets": targets,
        "relation": relation,
        "verified": verified,
    }


def _item_id(image_id: str, kind: str, question: str) -> str:
    h = hashlib.sha1(f"{image_id}\x00{question}".encode()).hexdigest()[:10]
    return f"{image_id}:{kind}:{h}"


def _item(scene: dict, c: dict, model: str, *, id: str, pair_id: str | None = None, pair_role: int | None = None,
          audit: str | None = None) -> dict:
    return item_record(
        id,
        scene["image_id"],
        scene["width"],
        scene["height"],
        c["question"],
        c["answer"],
        c["boxes"],
        c["labels"],
        image=scene.get("image"),
        count=c["count"],
        qtype=c["qtype"],
        category=c["category"],
        targets=c["targets"],
        relation=c["relation"],
        pair_id=pair_id,
        pair_role=pair_role,
        split=scene.get("split"),
        source=scene.get("source") or "",
        provenance={"drafted_by": f"llm:{model}", "audit": audit or ("verified:rules" if c["verified"] else "unverified")},
    )


def _reject(scene: dict, reason: str, detail: str, draft: Any = None, **extra: Any) -> dict:
    row = {"image_id": scene["image_id"], "reason": reason, "detail": detail, "draft": draft}
    row.update(extra)
    return row


def check_reply(scene: dict, text: str | None, config: DraftConfig, *, model: str, error: str | None = None) -> tuple[list[dict], list[dict]]:
    """Validate one LLM reply for one scene: ``(item rows, reject rows)`` by the rules of the module
    docstring. ``error`` (a failed request) gives one ``request_failed`` reject.

    >>> s = {"image_id": "i", "width": 100, "height": 100, "image": None, "split": None, "source": "",
    ...      "objects": [{"id": "o1", "label": "car", "box": [0, 0, 10, 10], "attributes": {}}]}
    >>> reply = '{"drafts": [{"qtype": "counting", "question": "How many cars?", "answer": "2", "evidence": ["o1"]}]}'
    >>> items, rejects = check_reply(s, reply, DraftConfig(), model="m")
    >>> len(items), rejects[0]["reason"]
    (0, 'count_mismatch')
    """
    if error is not None or text is None:
        return [], [_reject(scene, "request_failed", error or "no reply")]
    try:
        data = parse_json_reply(text)
    except InputError as exc:
        return [], [_reject(scene, "malformed_json", str(exc), raw=text[:2000])]
    key = "pairs" if config.pairs else "drafts"
    if isinstance(data, list):
        data = {key: data}
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        return [], [_reject(scene, "bad_shape", f"expected an object with a {key!r} list", raw=text[:2000])]
    by_id = {o["id"]: o for o in scene.get("objects") or []}
    items: list[dict] = []
    rejects: list[dict] = []
    seen: set[str] = set()
    for k, d in enumerate(data[key]):
        if not config.pairs:
            try:
                c = _check_draft(d, scene, by_id, config.qtypes)
                nq = _norm_question(c["question"])
                if nq in seen:
                    raise _Refused("duplicate_question", f"question {c['question']!r} asked twice")
            except _Refused as r:
                rejects.append(_reject(scene, r.reason, r.detail, d, index=k))
                continue
            seen.add(nq)
            items.append(_item(scene, c, model, id=_item_id(scene["image_id"], "llm", c["question"])))
            continue
        qs = d.get("questions") if isinstance(d, dict) else None
        if not isinstance(qs, list) or len(qs) != 2:
            got = len(qs) if isinstance(qs, list) else type(qs).__name__
            rejects.append(_reject(scene, "pair_incomplete", f"expected 2 questions, got {got}", d, index=k))
            continue
        try:
            checked = []
            for role, q in enumerate(qs, start=1):
                try:
                    checked.append(_check_draft(q, scene, by_id, config.qtypes))
                except _Refused as r:
                    raise _Refused(r.reason, f"question {role}: {r.detail}") from None
            n1, n2 = (_norm_question(c["question"]) for c in checked)
            if n1 == n2 or n1 in seen or n2 in seen:
                raise _Refused("duplicate_question", f"question {checked[0]['question']!r} / {checked[1]['question']!r} repeats a question")
            c1, c2 = checked
            if c1["qtype"] in _SAME_EVIDENCE_QTYPES and c2["qtype"] in _SAME_EVIDENCE_QTYPES and set(c1["evidence"]) != set(c2["evidence"]):
                raise _Refused("pair_evidence_differs", f"evidence {c1['evidence']} vs {c2['evidence']}")
        except _Refused as r:
            rejects.append(_reject(scene, r.reason, r.detail, d, index=k))
            continue
        seen.update((n1, n2))
        pair_id = _item_id(scene["image_id"], "llmpair", c1["question"] + "\x00" + c2["question"])
        audit = "verified:rules" if c1["verified"] and c2["verified"] else "unverified"
        pair_cat = d.get("category") if d.get("category") in CATEGORIES else None
        for role, c in ((1, c1), (2, c2)):
            if pair_cat and c["category"] == QTYPE_CATEGORY[c["qtype"]]:
                c = {**c, "category": pair_cat}
            items.append(_item(scene, c, model, id=f"{pair_id}:{role}", pair_id=pair_id, pair_role=role, audit=audit))
    return items, rejects


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


def draft_llm(scenes: pa.Table, client: LLMClient, config: DraftConfig = DraftConfig(), *,
              progress: Callable[[int], None] | None = None, batch_size: int = 512) -> DraftResult:
    """Draft grounded questions (or pairs) for every scene with one request per scene through
    ``client`` (cached, retried, concurrent); validate every reply; return the accepted Items
    (validated by :func:`witness.schema.validate_items`), the rejects and a :class:`DraftSummary`.

    Scenes go in batches of ``batch_size`` (prompts with their image data URLs are built per batch,
    so memory stays bounded on large runs). ``progress(n)`` is called as requests finish. Token
    cost uses the client's ``price_*_per_1k`` (billed requests only; cache hits cost nothing).
    """
    t0 = time.perf_counter()
    rows = scene_rows(scenes)
    ids = [r["image_id"] for r in rows]
    if len(set(ids)) != len(ids):
        dup = next(i for i, n in Counter(ids).items() if n > 1)
        raise InputError(f"Expected unique image ids, got {dup!r} more than once (scenes). Give every image one scene.")
    if batch_size < 1:
        raise InputError(f"Expected batch_size >= 1, got {batch_size} (draft_llm). Use e.g. 512.")
    warm = threading.Thread(target=client.preload, daemon=True)  # import openai while prompts build
    warm.start()  # no join: chat_many imports openai itself (waiting on the import lock) if it sends
    rf = response_format(config) if config.structured else None
    rejects: list[dict] = []
    items: list[dict] = []
    results: list = []
    for lo in range(0, len(rows), batch_size):
        requests, sent_rows = [], []
        for s in rows[lo : lo + batch_size]:
            try:
                req: dict[str, Any] = {"messages": build_messages(s, config)}
            except InputError as exc:  # one unreadable image must not stop a long run
                rejects.append(_reject(s, "image_unreadable", str(exc)))
                if progress is not None:
                    progress(1)
                continue
            if rf is not None:
                req["response_format"] = rf
            requests.append(req)
            sent_rows.append(s)
        batch = client.chat_many(requests, progress=progress)
        for s, r in zip(sent_rows, batch, strict=True):
            its, rej = check_reply(s, r.text, config, model=client.config.model, error=r.error)
            items.extend(its)
            rejects.extend(rej)
        results.extend(batch)
    table = items_table(items)
    table, _ = validate_items(table, source="llm drafts")
    usage = LLMUsage.of(results)
    audits = table.column("provenance").combine_chunks().field("audit").to_pylist() if len(table) else []
    c = client.config
    summary = DraftSummary(
        scenes=len(rows),
        requests=usage.requests,
        cached=usage.cached,
        failed=usage.errors,
        retries=usage.retries,
        accepted=len(table),
        verified=sum(a == "verified:rules" for a in audits),
        unverified=sum(a == "unverified" for a in audits),
        rejected=len(rejects),
        reasons=dict(sorted(Counter(r["reason"] for r in rejects).items())),
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cost=estimate_cost(usage.prompt_tokens, usage.completion_tokens,
                           price_prompt_per_1k=c.price_prompt_per_1k, price_completion_per_1k=c.price_completion_per_1k),
        seconds=time.perf_counter() - t0,
        model=c.model,
    )
    return DraftResult(table, rejects, summary)


def rejects_path(out: str | Path) -> Path:
    """The rejects file beside ``out``: ``drafts.parquet`` -> ``drafts.rejects.jsonl``.

    >>> rejects_path("runs/drafts.parquet").as_posix()
    'runs/drafts.rejects.jsonl'
    """
    out = Path(out)
    return out.with_name(out.stem + ".rejects.jsonl")


def write_drafts(result: DraftResult, out: str | Path) -> tuple[Path, Path]:
    """Write the drafts (Parquet, atomic) and the rejects (JSONL beside them, atomic); return both
    paths. The rejects file is written even when empty, so an old one never lingers."""
    from ..io import write_jsonl, write_table

    out = Path(out)
    write_table(result.items, out)
    rp = rejects_path(out)
    write_jsonl(result.rejects, rp)
    return out, rp
