"""An MLLM judge of released items, calibrated on deliberately corrupted evidence.

RoadSceneVQA-G (Appendix C, Table X; calibration in Appendix E-D) audits a stratified sample with a
strong MLLM that receives the image, the question, the reference answer and the evidence boxes, and
verifies answer correctness, evidence correctness and count-box agreement. The judge is fallible (it
caught about half of deliberately corrupted evidence sets), so its audit reads as a floor. witness
does both:

* :func:`judge` asks the judge about each item (one request per item through
  :class:`witness.llm.LLMClient`: cached, retried, bounded concurrency);
* with ``calibrate=True`` it also judges corrupted copies and reports, per corruption kind, the
  *detection rate*: the share of corrupted copies the judge flags.

Corruptions (seeded, each applied where it can be):

=================  ==============================================================  ===================
kind               what changes                                                    detected when
=================  ==============================================================  ===================
``drop_box``       one evidence box removed (items with >= 1 box)                  evidence_correct false
``add_distractor`` a box of the same size added where no evidence box overlaps it  evidence_correct false
``shift_box``      one box moved by 60 % of its width (IoU with itself < 0.5)      evidence_correct false
``change_count``   the number stated in the answer raised by one                   count_matches or answer_correct false
=================  ==============================================================  ===================
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from ..boxes import iou_matrix
from ..errors import InputError

__all__ = ["CORRUPTIONS", "JUDGE_SCHEMA", "JudgeReport", "corrupt", "judge_messages", "judge"]

CORRUPTIONS: tuple[str, ...] = ("drop_box", "add_distractor", "shift_box", "change_count")

JUDGE_SCHEMA = pa.schema(
    [
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("answer_correct", pa.bool_()),
        pa.field("evidence_correct", pa.bool_()),
        pa.field("count_matches", pa.bool_()),
        pa.field("flagged", pa.bool_()),
        pa.field("explanation", pa.string()),
        pa.field("error", pa.string()),
    ]
)

_RESPONSE_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "judgment",
        "schema": {
            "type": "object",
            "properties": {
                "answer_correct": {"type": "boolean"},
                "evidence_correct": {"type": "boolean"},
                "count_matches": {"type": "boolean"},
                "explanation": {"type": "string"},
            },
            "required": ["answer_correct", "evidence_correct", "count_matches"],
        },
    },
}

_NUMBER = re.compile(r"\d+")
_WORDS = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty".split()


def _raise_count(answer: str, n: int) -> str | None:
    """The answer with its stated count ``n`` replaced by ``n + 1`` (digits or a number word)."""
    m = _NUMBER.search(answer)
    if m and int(m.group()) == n:
        return answer[: m.start()] + str(n + 1) + answer[m.end():]
    for i, w in enumerate(_WORDS):
        mm = re.search(rf"\b{w}\b", answer, flags=re.I)
        if mm and i == n:
            return answer[: mm.start()] + str(n + 1) + answer[mm.end():]
    return None


def corrupt(item: dict, kind: str, rng: np.random.Generator) -> dict | None:
    """A corrupted copy of ``item`` (a dict of ITEM_SCHEMA fields), or None where ``kind`` cannot apply.

    >>> it = {"id": "q1", "width": 100, "height": 100, "answer": "2", "boxes": [[0, 0, 10, 10], [50, 50, 60, 60]],
    ...       "labels": ["car", "car"]}
    >>> len(corrupt(it, "drop_box", np.random.default_rng(0))["boxes"])
    1
    >>> corrupt(it, "change_count", np.random.default_rng(0))["answer"]
    '3'
    """
    from ..eval.answers import stated_count

    boxes = np.asarray(item.get("boxes") or [], dtype=np.float64).reshape(-1, 4)
    labels = list(item.get("labels") or [])
    w, h = float(item["width"]), float(item["height"])
    out = dict(item)
    if kind == "drop_box":
        if len(boxes) == 0:
            return None
        k = int(rng.integers(len(boxes)))
        out["boxes"] = np.delete(boxes, k, axis=0).tolist()
        out["labels"] = labels[:k] + labels[k + 1:]
    elif kind == "add_distractor":
        size = boxes[int(rng.integers(len(boxes)))] if len(boxes) else np.array([0, 0, w / 8, h / 8])
        bw, bh = min(size[2] - size[0], w - 1), min(size[3] - size[1], h - 1)
        for _ in range(50):
            x, y = rng.uniform(0, w - bw), rng.uniform(0, h - bh)
            cand = np.array([[x, y, x + bw, y + bh]])
            if len(boxes) == 0 or iou_matrix(cand, boxes).max() == 0:
                out["boxes"] = np.vstack([boxes, cand]).tolist()
                out["labels"] = labels + [labels[0] if labels else "object"]
                break
        else:
            return None
    elif kind == "shift_box":
        if len(boxes) == 0:
            return None
        k = int(rng.integers(len(boxes)))
        b = boxes[k].copy()
        dx = 0.6 * (b[2] - b[0])
        b[[0, 2]] += dx if b[2] + dx <= w else -dx
        if b[0] < 0:
            return None
        shifted = boxes.copy()
        shifted[k] = b
        out["boxes"] = shifted.tolist()
    elif kind == "change_count":
        n = stated_count(item.get("answer") or "")
        if n is None:
            return None
        new = _raise_count(item["answer"], n)
        if new is None:
            return None
        out["answer"] = new
    else:
        raise InputError(f"Expected a corruption in {list(CORRUPTIONS)}, got {kind!r}.")
    return out


def _template() -> str:
    return resources.files("witness.audit").joinpath("prompts/judge.txt").read_text(encoding="utf-8")


def judge_messages(item: dict, *, max_side: int = 1024, image_loader: Callable[[dict], Any] | None = None) -> list[dict]:
    """The chat messages asking the judge about one item: the prompt file filled in, plus the image."""
    from ..llm import image_data_url

    boxes = item.get("boxes") or []
    labels = item.get("labels") or [""] * len(boxes)
    evidence = "[]" if not boxes else "\n".join(
        f"- {lab}: [{', '.join(f'{v:.0f}' for v in b)}]" for lab, b in zip(labels, boxes)
    )
    text = _template().format(
        question=item["question"], answer=item["answer"], evidence=evidence, width=item["width"], height=item["height"]
    )
    content: list[dict] = [{"type": "text", "text": text}]
    image = item.get("image") or {}
    src = image_loader(item) if image_loader else (image.get("bytes") or image.get("path"))
    if src:
        content.insert(0, {"type": "image_url", "image_url": {"url": image_data_url(src, max_side=max_side)}})
    return [{"role": "user", "content": content}]


@dataclass(frozen=True)
class JudgeReport:
    """Per-item judgments and, when calibrated, detection rates per corruption kind."""

    table: pa.Table
    n_items: int
    rates: dict[str, float | None]
    detection: dict[str, dict[str, float | int | None]]
    errors: int

    def to_dict(self) -> dict:
        return {"n_items": self.n_items, "rates": self.rates, "detection": self.detection, "errors": self.errors}


def _verdict(text: str | None) -> dict | None:
    from ..llm import parse_json_reply

    if text is None:
        return None
    try:
        obj = parse_json_reply(text)
    except Exception:
        return None
    if not isinstance(obj, dict):
        return None
    out = {}
    for k in ("answer_correct", "evidence_correct", "count_matches"):
        v = obj.get(k)
        out[k] = v if isinstance(v, bool) else None
    out["explanation"] = str(obj.get("explanation", ""))[:500]
    return out


def judge(
    items: pa.Table,
    client: Any,
    *,
    calibrate: bool = False,
    seed: int = 0,
    max_side: int = 1024,
    progress: Callable[[int], None] | None = None,
    chunk_size: int = 256,
) -> JudgeReport:
    """Judge every item (and, with ``calibrate``, corrupted copies); see the module docstring.

    ``client`` is a :class:`witness.llm.LLMClient`; requests go out ``chunk_size`` at a time (each
    carries its image, so a chunk bounds memory). Rates are over items the judge answered:
    ``answer_correct``, ``evidence_correct``, ``count_matches`` and ``all_correct``.
    """
    rows = items.to_pylist()
    if not rows:
        raise InputError("Expected items to judge, got none.")
    rng = np.random.default_rng(seed)
    jobs: list[tuple[str, str, dict]] = [(r["id"], "original", r) for r in rows]
    if calibrate:
        for r in rows:
            for kind in CORRUPTIONS:
                c = corrupt(r, kind, rng)
                if c is not None:
                    jobs.append((r["id"], kind, c))
    # Requests carry the image as a data URL: build and send them a chunk at a time, so that memory
    # stays bounded by the chunk, not by the sample (the client caches each answer as it arrives).
    results = []
    for start in range(0, len(jobs), chunk_size):
        chunk = jobs[start : start + chunk_size]
        requests = [{"messages": judge_messages(it, max_side=max_side), "response_format": _RESPONSE_FORMAT} for _, _, it in chunk]
        results.extend(client.chat_many(requests, progress=progress))
    out = []
    for (item_id, kind, _), res in zip(jobs, results):
        v = _verdict(res.text) if res.ok else None
        error = res.error if not res.ok else (None if v is not None else "unparseable judgment")
        v = v or {"answer_correct": None, "evidence_correct": None, "count_matches": None, "explanation": None}
        if kind == "change_count":
            flagged = None if v["count_matches"] is None else (v["count_matches"] is False or v["answer_correct"] is False)
        elif kind == "original":
            flagged = None if v["evidence_correct"] is None else not (v["answer_correct"] and v["evidence_correct"] and v["count_matches"])
        else:
            flagged = None if v["evidence_correct"] is None else v["evidence_correct"] is False
        out.append({"item_id": item_id, "kind": kind, **v, "flagged": flagged, "error": error})
    table = pa.Table.from_pylist(out, schema=JUDGE_SCHEMA)
    orig = [o for o in out if o["kind"] == "original" and o["error"] is None]

    def rate(key: str) -> float | None:
        vals = [o[key] for o in orig if o[key] is not None]
        return float(np.mean(vals)) if vals else None

    rates = {k: rate(k) for k in ("answer_correct", "evidence_correct", "count_matches")}
    rates["all_correct"] = float(np.mean([not o["flagged"] for o in orig if o["flagged"] is not None])) if orig else None
    detection = {}
    if calibrate:
        for kind in CORRUPTIONS:
            got = [o["flagged"] for o in out if o["kind"] == kind and o["flagged"] is not None]
            n = sum(1 for o in out if o["kind"] == kind)
            detection[kind] = {"n": n, "judged": len(got), "detection_rate": float(np.mean(got)) if got else None}
    return JudgeReport(table, len(rows), rates, detection, sum(1 for o in out if o["error"]))
