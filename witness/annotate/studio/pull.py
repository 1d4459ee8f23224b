"""Pull a project's annotations into Annotation records, and turn ``qa`` annotations into Items.

:func:`pull_annotations` takes a snapshot export (full predictions, annotators' e-mails, drafts) and
converts it with :func:`~witness.annotate.studio.convert.annotations_from_export`.
:func:`items_from_annotations` is the round trip into items: the annotated question, answer and
evidence of each item replace the draft, ``count`` = ν(answer), ready for the audit's gate.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pyarrow as pa

from ...errors import InputError
from ...schema import annotations_table, items_table
from .client import StudioClient
from .convert import PullReport, annotations_from_export, stated_count
from .push import project_kind

__all__ = ["pull_annotations", "items_from_annotations"]

_MIN = datetime.min.replace(tzinfo=timezone.utc)


def pull_annotations(client: StudioClient, project: str, *, kind: str | None = None) -> tuple[pa.Table, PullReport]:
    """Annotation records (``ANNOTATION_SCHEMA``) of project ``project``, and a report of counts.

    ``kind`` defaults to the kind the project recorded when witness created it.
    """
    proj = client.find_project(project)
    if proj is None:
        names = sorted(p.get("title") for p in client.projects())
        raise InputError(f"Expected a Label Studio project named {project!r}, got none (projects: {names}). "
                         "Check the name, or push items first with `witness studio push`.")
    kind = kind or project_kind(proj)
    if kind is None:
        raise InputError(f"Expected project {project!r} to record its kind, got none. Pass --kind qa|review|pairs.")
    tasks = client.snapshot_export(int(proj["id"]))
    rows, report = annotations_from_export(tasks, kind, source=f"label-studio:{project}")
    report["project_id"] = int(proj["id"])
    report["kind"] = kind
    return annotations_table(rows), report


def items_from_annotations(annotations: pa.Table, items: pa.Table) -> tuple[pa.Table, dict[str, Any]]:
    """Items whose question, answer and evidence are the annotators' (the ``qa`` round trip).

    Rule: per item, the latest annotation (by ``updated_at``, then ``created_at``) of role
    ``annotator`` that sets boxes is used; its question and answer replace the draft's where set;
    ``boxes``/``labels`` are the boxes it marked evidence; ``count`` = ν(answer) (the first cardinal
    number stated, see :func:`~witness.annotate.studio.convert.stated_count`);
    ``provenance.annotated_by`` lists everyone who annotated the item. Items without an annotation,
    and items whose chosen annotation is ``discard``, are left out and counted.

    >>> from witness.schema import annotation_record, annotations_table, item_record, items_table
    >>> it = items_table([item_record("q1", "i", 100, 100, "How many cars?", "2", [[0, 0, 9, 9]], ["car"])])
    >>> an = annotations_table([annotation_record("q1", "a@x", question="How many cars?", answer="Three cars.\\n",
    ...                          boxes=[[0, 0, 9, 9], [10, 10, 20, 20], [30, 30, 40, 40]], labels=["car"] * 3)])
    >>> out, rep = items_from_annotations(an, it)
    >>> out.column("count").to_pylist(), rep["items"]
    ([3], 1)
    """
    ann = annotations.to_pylist()
    by_item: dict[str, list[dict]] = {}
    for a in ann:
        if a.get("role") == "annotator" and a.get("boxes") is not None:
            by_item.setdefault(a["item_id"], []).append(a)
    rows = items.to_pylist()
    known = {r["id"] for r in rows}
    unknown = sorted(set(by_item) - known)
    if unknown:
        raise InputError(f"Expected annotations of the given items, got {len(unknown)} unknown item id(s), e.g. "
                         f"{unknown[0]!r}. Pass the items file that was pushed.")
    out, missing, discarded = [], 0, 0
    for r in rows:
        group = by_item.get(r["id"])
        if not group:
            missing += 1
            continue
        best = max(group, key=lambda a: (a.get("updated_at") or a.get("created_at") or _MIN, a.get("created_at") or _MIN))
        if best.get("decision") == "discard":
            discarded += 1
            continue
        new = dict(r)
        if best.get("question"):
            new["question"] = best["question"]
        if best.get("answer") is not None:
            new["answer"] = best["answer"].rstrip("\r\n")
        new["boxes"] = best["boxes"]
        new["labels"] = best.get("labels") or []
        new["count"] = stated_count(new["answer"])
        prov = dict(r.get("provenance") or {})
        prov["annotated_by"] = sorted({a["annotator"] for a in group})
        prov.setdefault("reviewed_by", [])
        new["provenance"] = prov
        out.append(new)
    report = {"items": len(out), "without_annotation": missing, "discarded": discarded,
              "annotations_used": sum(len(by_item.get(r["id"], [])) for r in rows)}
    return items_table(out), report
