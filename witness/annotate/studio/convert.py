"""Pure conversions between witness records and Label Studio tasks, results and exports.

No network here: :mod:`.push` and :mod:`.pull` talk to the server, these functions build task
payloads and read exported tasks back.

Geometry goes through :mod:`witness.boxes` only: a pixel box ``[x1, y1, x2, y2]`` becomes the
Label Studio region ``x = 100 x1 / W``, ``y = 100 y1 / H``, ``width = 100 (x2 - x1) / W``,
``height = 100 (y2 - y1) / H`` (percent of the original image, top-left corner) with
:func:`witness.boxes.xyxy_to_percent`, and back with :func:`witness.boxes.percent_to_xyxy`; the
round trip is exact to float64 rounding (~1e-13 px), far below the float32 of the records.

Task keys (``data``): ``witness_id`` (the item id, or the pair id for ``pairs``; the idempotency
key of a push), ``witness_hash`` (what the task shows; a re-push updates a task whose hash
changed), ``item_id``, ``image`` (a Local Files URL), ``width``, ``height`` and per kind:
``draft_question``/``draft_answer``/``draft_boxes`` (qa), ``question``/``answer`` (review),
``item_id_1``/``item_id_2``/``draft_question_1``... (pairs). Data keys never equal control names.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any, Iterable, Mapping

import numpy as np
import orjson

from ...boxes import iou_matrix, percent_to_xyxy, xyxy_to_percent
from ...errors import InputError
from ...schema import annotation_record

__all__ = [
    "MODEL_VERSION",
    "EVIDENCE",
    "NOT_EVIDENCE",
    "NO_EVIDENCE",
    "ROLE_OF_KIND",
    "PullReport",
    "rect_results",
    "qa_task",
    "review_task",
    "pairs_task",
    "task_hash",
    "clean_text",
    "stated_count",
    "annotations_from_export",
]

#: The model version of witness pre-annotations (the project shows predictions of this version).
MODEL_VERSION = "witness-draft"
EVIDENCE, NOT_EVIDENCE, NO_EVIDENCE = "evidence", "not evidence", "no evidence needed"
#: Whose judgment an annotation of each project kind is.
ROLE_OF_KIND = {"qa": "annotator", "review": "reviewer", "pairs": "annotator"}


def rect_results(
    boxes, labels: Iterable[str], width: int, height: int, *, evidence: Iterable[bool] | None = None, prefix: str = "b"
) -> list[dict]:
    """Label Studio ``rectanglelabels`` results (and per-box evidence choices) for pixel boxes.

    Region ``k`` gets id ``f"{prefix}{k}"``; with ``evidence`` each box also gets a per-region
    ``choices`` result under the same id (``evidence`` / ``not evidence``).

    >>> r = rect_results([[80, 60, 280, 180]], ["car"], 800, 600, evidence=[True])
    >>> r[0]["value"]["x"], r[0]["value"]["width"], r[1]["value"]["choices"]
    (10.0, 25.0, ['evidence'])
    """
    pct = xyxy_to_percent(boxes, width, height)
    labels = list(labels)
    flags = None if evidence is None else list(evidence)
    out: list[dict] = []
    for k, (x, y, w, h) in enumerate(pct.tolist()):
        geo = {"x": x, "y": y, "width": w, "height": h, "rotation": 0}
        rid = f"{prefix}{k}"
        common = {"id": rid, "to_name": "image", "original_width": int(width), "original_height": int(height),
                  "image_rotation": 0}
        out.append({**common, "from_name": "box", "type": "rectanglelabels",
                    "value": {**geo, "rectanglelabels": [labels[k]]}})
        if flags is not None:
            out.append({**common, "from_name": "evidence", "type": "choices",
                        "value": {**geo, "choices": [EVIDENCE if flags[k] else NOT_EVIDENCE]}})
    return out


def _text_result(name: str, text: str | None) -> list[dict]:
    if text is None:
        return []
    return [{"id": name, "from_name": name, "to_name": "image", "type": "textarea", "value": {"text": [text]}}]


def task_hash(data: Mapping[str, Any], result: list[dict]) -> str:
    """A short hash of what a task shows (its data without the hash, and its pre-annotation).

    >>> task_hash({"a": 1}, []) == task_hash({"a": 1, "witness_hash": "x"}, [])
    True
    """
    shown = {k: v for k, v in data.items() if k != "witness_hash"}
    return hashlib.sha1(orjson.dumps([shown, result], option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def _finish(data: dict, result: list[dict]) -> dict:
    data["witness_hash"] = task_hash(data, result)
    return {"data": data, "predictions": [{"model_version": MODEL_VERSION, "score": 1.0, "result": result}]}


def qa_task(item: Mapping[str, Any], image_url: str, candidates: Mapping[str, Any] | None = None) -> dict:
    """A ``qa`` task: the draft as editable text, candidate boxes pre-marked evidence or not.

    ``candidates`` (``boxes``, ``labels``: every object of the item's scene) are the boxes shown;
    a candidate is pre-marked evidence when it overlaps a draft evidence box with IoU >= 0.99;
    draft evidence boxes with no such candidate are added. Without ``candidates`` the pool is the
    item's own evidence boxes. An item without evidence is pre-set "no evidence needed".

    >>> from witness.schema import item_record
    >>> it = item_record("q1", "img", 800, 600, "Any car?", "yes", [[80, 60, 280, 180]], ["car"])
    >>> t = qa_task(it, "/data/local-files/?d=img.png",
    ...             {"boxes": [[80, 60, 280, 180], [0, 0, 10, 10]], "labels": ["car", "sign"]})
    >>> [r["value"].get("choices") for r in t["predictions"][0]["result"] if r["from_name"] == "evidence"]
    [['evidence'], ['not evidence']]
    """
    w, h = int(item["width"]), int(item["height"])
    ev = np.asarray(item.get("boxes") or [], dtype=np.float64).reshape(-1, 4)
    ev_labels = list(item.get("labels") or [])
    if candidates is None:
        boxes, labels, flags = ev, ev_labels, [True] * len(ev)
    else:
        cb = np.asarray(candidates.get("boxes") or [], dtype=np.float64).reshape(-1, 4)
        cl = list(candidates.get("labels") or [])
        if len(ev) and len(cb):
            ious = iou_matrix(cb, ev)
            flags = list((ious >= 0.99).any(axis=1))
            unmatched = ~(ious >= 0.99).any(axis=0)
        else:
            flags = [False] * len(cb)
            unmatched = np.ones(len(ev), dtype=bool)
        boxes = np.concatenate([cb, ev[unmatched]]) if unmatched.any() else cb
        labels = cl + [ev_labels[k] for k in np.flatnonzero(unmatched)]
        flags = flags + [True] * int(unmatched.sum())
    result = rect_results(boxes, labels, w, h, evidence=flags)
    result += _text_result("question", item["question"]) + _text_result("answer", item["answer"])
    if len(ev) == 0:
        result.append({"id": "no_evidence", "from_name": "no_evidence", "to_name": "image", "type": "choices",
                       "value": {"choices": [NO_EVIDENCE]}})
    data = {
        "witness_id": item["id"], "item_id": item["id"], "image": image_url, "width": w, "height": h,
        "draft_question": item["question"], "draft_answer": item["answer"],
        "draft_boxes": ev.tolist(), "draft_labels": ev_labels,
        "qtype": item.get("qtype"), "category": item.get("category"),
    }
    return _finish(data, result)


def review_task(item: Mapping[str, Any], image_url: str) -> dict:
    """A ``review`` task: the item's question and answer as text, its evidence boxes pre-drawn.

    >>> from witness.schema import item_record
    >>> t = review_task(item_record("q1", "i", 100, 100, "Q?", "A", [[0, 0, 50, 50]], ["car"]), "/x")
    >>> t["data"]["question"], len(t["predictions"][0]["result"])
    ('Q?', 1)
    """
    w, h = int(item["width"]), int(item["height"])
    result = rect_results(item.get("boxes") or [], item.get("labels") or [], w, h)
    data = {"witness_id": item["id"], "item_id": item["id"], "image": image_url, "width": w, "height": h,
            "question": item["question"], "answer": item["answer"]}
    return _finish(data, result)


def pairs_task(first: Mapping[str, Any], second: Mapping[str, Any], image_url: str) -> dict:
    """A ``pairs`` task for the two questions of one pair (roles 1 and 2); texts pre-filled.

    >>> from witness.schema import item_record
    >>> a = item_record("p1a", "i", 10, 10, "Is there a car?", "yes", pair_id="p1", pair_role=1)
    >>> b = item_record("p1b", "i", 10, 10, "Is a car absent?", "no", pair_id="p1", pair_role=2)
    >>> t = pairs_task(a, b, "/x")
    >>> t["data"]["witness_id"], t["data"]["item_id_2"]
    ('p1', 'p1b')
    """
    w, h = int(first["width"]), int(first["height"])
    result: list[dict] = []
    data: dict[str, Any] = {"witness_id": first["pair_id"], "item_id": first["pair_id"], "image": image_url,
                            "width": w, "height": h}
    for r, it in ((1, first), (2, second)):
        data[f"item_id_{r}"] = it["id"]
        data[f"draft_question_{r}"] = it["question"]
        data[f"draft_answer_{r}"] = it["answer"]
        result += _text_result(f"question_{r}", it["question"]) + _text_result(f"answer_{r}", it["answer"])
    return _finish(data, result)


# --------------------------------------------------------------------------------------------
# Export -> Annotation records
# --------------------------------------------------------------------------------------------


def clean_text(value: Any) -> str | None:
    """The text of a ``textarea`` value: submissions joined by newlines, trailing newlines stripped.

    >>> clean_text({"text": ["Two cars.\\n"]})
    'Two cars.'
    >>> clean_text(None) is None
    True
    """
    if value is None:
        return None
    texts = value.get("text") if isinstance(value, Mapping) else value
    if isinstance(texts, str):
        texts = [texts]
    return "\n".join(str(t) for t in texts).rstrip("\r\n \t")


def stated_count(answer: str | None) -> int | None:
    """ν(a): the first cardinal number stated in an answer (digits or zero … twenty), else None.

    The contract of ``shared/ARCHITECTURE.md``, read by :func:`witness.eval.answers.stated_count`
    so that every area reads counts the same way.

    >>> stated_count("There are Three cars and 2 buses."), stated_count("yes"), stated_count("12")
    (3, None, 12)
    """
    from ...eval.answers import stated_count as _nu

    return _nu(answer)


def _ts(value: Any):
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def _who(completed_by: Any, users: Mapping[int, str]) -> str:
    if isinstance(completed_by, Mapping):
        return str(completed_by.get("email") or completed_by.get("username") or f"user:{completed_by.get('id')}")
    if completed_by is None:
        return "unknown"
    return users.get(int(completed_by), f"user:{completed_by}")


def _choice(results: list[dict], name: str) -> str | None:
    for r in results:
        if r.get("from_name") == name and r.get("type") == "choices" and "x" not in r.get("value", {}):
            ch = r["value"].get("choices") or []
            return ch[0] if ch else None
    return None


def _text(results: list[dict], name: str) -> str | None:
    for r in results:
        if r.get("from_name") == name and r.get("type") == "textarea":
            return clean_text(r.get("value"))
    return None


def _boxes(results: list[dict], width: int, height: int, *, evidence_only: bool) -> tuple[list, list]:
    """Pixel boxes and labels of the rectangles; with ``evidence_only`` those not marked "not evidence"."""
    marks = {r.get("id"): (r["value"].get("choices") or [None])[0]
             for r in results if r.get("from_name") == "evidence" and r.get("type") == "choices"}
    rects = [r for r in results if r.get("type") == "rectanglelabels"]
    if evidence_only:
        rects = [r for r in rects if marks.get(r.get("id"), EVIDENCE) == EVIDENCE]
    if not rects:
        return [], []
    pct = np.array([[r["value"]["x"], r["value"]["y"], r["value"]["width"], r["value"]["height"]] for r in rects],
                   dtype=np.float64)
    xyxy = percent_to_xyxy(pct, width, height)
    labels = [(r["value"].get("rectanglelabels") or [""])[0] for r in rects]
    return xyxy.tolist(), labels


def _same_boxes(a: list, b: list) -> bool:
    if len(a) != len(b):
        return False
    if not a:
        return True
    ious = iou_matrix(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    return bool((ious.max(axis=1) >= 0.99).all() and (ious.max(axis=0) >= 0.99).all())


class PullReport(dict):
    """Counts of a conversion: tasks, annotations, records, cancelled (skipped), drafts, unannotated."""


def annotations_from_export(
    tasks: Iterable[Mapping[str, Any]], kind: str, *, source: str = "", users: Mapping[int, str] | None = None
) -> tuple[list[dict], PullReport]:
    """Annotation records (rows of ``ANNOTATION_SCHEMA``) from exported Label Studio tasks.

    Rules: one record per completed annotation (several per task are kept); cancelled (skipped)
    annotations and drafts are counted, not converted. ``qa``: question and answer from the text
    areas (trailing newlines stripped), boxes = the rectangles not marked "not evidence" (a box the
    annotator drew without a mark counts as evidence), none when "no evidence needed" is set;
    decision ``accept`` when question, answer and evidence equal the draft, else ``correct``.
    ``review``: the four checks (yes/no -> True/False, unset -> null); accept -> ``accept``,
    reject -> ``discard``. ``pairs``: one record for each question of the pair; texts from the
    corrected text areas when the decision is ``correct``, else the drafts.
    Boxes are percent -> pixels with :func:`witness.boxes.percent_to_xyxy` on the task's size.

    >>> task = {"id": 1, "data": {"item_id": "q1", "width": 800, "height": 600, "draft_question": "Q?",
    ...         "draft_answer": "2", "draft_boxes": []}, "drafts": [],
    ...         "annotations": [{"completed_by": {"email": "a@x"}, "was_cancelled": False, "lead_time": 3.5,
    ...             "result": rect_results([[80, 60, 280, 180]], ["car"], 800, 600, evidence=[True])}]}
    >>> rows, rep = annotations_from_export([task], "qa")
    >>> rows[0]["boxes"], rows[0]["decision"], rep["records"]
    ([[80.0, 60.0, 280.0, 180.0]], 'correct', 1)
    """
    if kind not in ROLE_OF_KIND:
        raise InputError(f"Expected a project kind in {sorted(ROLE_OF_KIND)}, got {kind!r}. Use qa, review or pairs.")
    users = users or {}
    role = ROLE_OF_KIND[kind]
    rows: list[dict] = []
    rep = PullReport(tasks=0, annotations=0, records=0, cancelled=0, drafts=0, unannotated=0)
    for task in tasks:
        rep["tasks"] += 1
        data = task.get("data") or {}
        rep["drafts"] += len(task.get("drafts") or [])
        anns = task.get("annotations") or []
        done = [a for a in anns if not a.get("was_cancelled")]
        rep["cancelled"] += len(anns) - len(done)
        if not done:
            rep["unannotated"] += 1
        w, h = int(data.get("width") or 0), int(data.get("height") or 0)
        for a in done:
            rep["annotations"] += 1
            res = a.get("result") or []
            common = dict(
                annotator=_who(a.get("completed_by"), users), role=role,
                created_at=_ts(a.get("created_at")), updated_at=_ts(a.get("updated_at")),
                lead_time=None if a.get("lead_time") is None else float(a["lead_time"]), source=source,
            )
            if kind == "qa":
                q, ans = _text(res, "question"), _text(res, "answer")
                if w <= 0 or h <= 0:
                    raise InputError(f"Expected the task's image size, got {w}x{h} (task {task.get('id')}). Re-push the items.")
                boxes, labels = _boxes(res, w, h, evidence_only=True)
                if _choice(res, "no_evidence") == NO_EVIDENCE:
                    boxes, labels = [], []
                unchanged = (q == data.get("draft_question") and ans == data.get("draft_answer")
                             and _same_boxes(boxes, data.get("draft_boxes") or []))
                rows.append(annotation_record(data.get("item_id"), question=q, answer=ans, boxes=boxes, labels=labels,
                                              decision="accept" if unchanged else "correct", **common))
            elif kind == "review":
                verdicts = {}
                for key in ("box_tight", "category_correct", "question_natural", "answer_evidence_agree"):
                    c = _choice(res, key)
                    verdicts[key] = None if c is None else c == "yes"
                d = _choice(res, "decision")
                boxes, labels = _boxes(res, w, h, evidence_only=False) if w > 0 and h > 0 else ([], [])
                has_boxes = any(r.get("type") == "rectanglelabels" for r in res)
                rows.append(annotation_record(
                    data.get("item_id"), verdicts=verdicts,
                    decision={"accept": "accept", "reject": "discard"}.get(d) if d else None,
                    boxes=boxes if has_boxes else None, labels=labels if has_boxes else None, **common))
            else:
                d = _choice(res, "decision")
                for r in (1, 2):
                    corrected = d == "correct"
                    q = _text(res, f"question_{r}") if corrected else data.get(f"draft_question_{r}")
                    ans = _text(res, f"answer_{r}") if corrected else data.get(f"draft_answer_{r}")
                    rows.append(annotation_record(data.get(f"item_id_{r}"), question=q, answer=ans, decision=d, **common))
            rep["records"] = len(rows)
    return rows, rep
