"""Push items into a Label Studio project as tasks with pre-annotations, idempotently.

A push creates the project when it does not exist (labelling config of its kind, overlap), serves
images through Local Files storage (one storage per top-level folder under the document root: Label
Studio refuses the root itself), and imports tasks in chunks with predictions in exact percent
coordinates. The item id (the pair id for ``pairs``) is the key: a task whose ``witness_id`` exists
is left alone when its ``witness_hash`` is unchanged, and updated (data and pre-annotation) when it
changed; nothing is imported twice.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping
from urllib.parse import quote

import pyarrow as pa

from ...errors import InputError
from .client import StudioClient
from .configs import KINDS, config_labels, render_config, validate_config
from .convert import MODEL_VERSION, pairs_task, qa_task, review_task

__all__ = ["PushReport", "push_items", "image_urls", "build_tasks", "project_kind", "KIND_PREFIX"]

#: Projects record their kind in their description: ``witness kind: qa``.
KIND_PREFIX = "witness kind: "


@dataclass(frozen=True)
class PushReport:
    """What a push did: the project, and tasks added, unchanged and changed (by witness id)."""

    project_id: int
    project: str
    kind: str
    created: bool
    config_updated: bool
    added: int
    unchanged: int
    changed: int
    changed_ids: tuple[str, ...] = field(default=())
    storages: tuple[str, ...] = field(default=())
    url: str = ""

    def as_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


def project_kind(project: Mapping[str, Any]) -> str | None:
    """The kind a witness project recorded in its description (None for other projects).

    >>> project_kind({"description": "witness kind: review"})
    'review'
    """
    desc = str(project.get("description") or "")
    for line in desc.splitlines():
        if line.startswith(KIND_PREFIX):
            return line[len(KIND_PREFIX):].strip()
    return None


def _image_ext(data: bytes) -> str:
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return ".png"
    if data[:3] == b"\xff\xd8\xff":
        return ".jpg"
    return ".img"


def image_urls(
    items: pa.Table, document_root: str | os.PathLike, *, image_root: str | os.PathLike | None = None,
    media_dir: str | os.PathLike | None = None,
) -> tuple[dict[str, str], set[Path]]:
    """Local Files URLs of the items' images, and the storage folders that must serve them.

    An image path is used as is (relative paths against ``image_root``); an image given only as
    bytes is written once to ``media_dir`` (default ``<document_root>/witness-media``). Every file
    must lie in a sub-folder of ``document_root``. URL: ``/data/local-files/?d=<path under root>``.
    """
    root = Path(document_root).expanduser().absolute()
    media = Path(media_dir) if media_dir else root / "witness-media"
    base = Path(image_root) if image_root else Path.cwd()
    ids = items.column("image_id").to_pylist()
    images = items.column("image").to_pylist()
    urls: dict[str, str] = {}
    storages: set[Path] = set()
    for row, (iid, img) in enumerate(zip(ids, images, strict=True)):
        if iid in urls:
            continue
        img = img or {}
        path = img.get("path")
        p = None
        if path:
            p = Path(path)
            p = (p if p.is_absolute() else base / p).absolute()
            if not p.exists():
                p = None if img.get("bytes") else p
                if p is not None:
                    raise InputError(
                        f"Expected an image file, got a path that does not exist ({p}, item row {row}, image {iid!r}). "
                        "Fix the image path or pass --image-root."
                    )
        if p is None:
            data = img.get("bytes")
            if not data:
                raise InputError(f"Expected an image path or bytes, got neither (row {row}, image {iid!r}). Attach the images.")
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(iid))
            p = (media / f"{safe}{_image_ext(data)}").absolute()
            if not p.exists() or p.stat().st_size != len(data):
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(data)
        try:
            rel = p.relative_to(root)
        except ValueError:
            raise InputError(
                f"Expected images under the Local Files document root {root}, got {p} (image {iid!r}). "
                "Start the server with --document-root covering the images, or set LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT."
            ) from None
        if len(rel.parts) < 2:
            raise InputError(
                f"Expected the image in a sub-folder of the document root {root}, got {p} (image {iid!r}). "
                "Label Studio refuses the root itself as storage: move images into a folder."
            )
        storages.add(root / rel.parts[0])
        urls[iid] = "/data/local-files/?d=" + quote(rel.as_posix())
    return urls, storages


def _scene_candidates(scenes: pa.Table | None) -> dict[str, dict] | None:
    if scenes is None:
        return None
    out = {}
    for sid, objs in zip(scenes.column("image_id").to_pylist(), scenes.column("objects").to_pylist(), strict=True):
        objs = objs or []
        out[sid] = {"boxes": [o["box"] for o in objs], "labels": [o["label"] for o in objs]}
    return out


def build_tasks(items: pa.Table, kind: str, urls: Mapping[str, str], *, scenes: pa.Table | None = None) -> tuple[list[dict], set[str]]:
    """Task payloads for ``items`` and the box classes their config needs.

    ``qa``: candidates are the objects of the item's scene when ``scenes`` is given (an item whose
    scene is missing is an error), else its own evidence boxes. ``pairs``: one task per ``pair_id``
    with both roles present.
    """
    if kind not in KINDS:
        raise InputError(f"Expected a project kind in {list(KINDS)}, got {kind!r}. Use qa, review or pairs.")
    rows = items.to_pylist()
    labels: set[str] = set()
    tasks: list[dict] = []
    if kind == "pairs":
        groups: dict[str, dict[int, dict]] = {}
        for r, it in enumerate(rows):
            if it.get("pair_id") is None:
                raise InputError(f"Expected items with a pair_id for a pairs project, got none (item {it['id']!r}, row {r}). "
                                 "Push pairs drafted by `witness draft pairs`.")
            groups.setdefault(it["pair_id"], {})[int(it.get("pair_role") or 0)] = it
        for pid, g in groups.items():
            if set(g) != {1, 2}:
                raise InputError(f"Expected pair {pid!r} to hold roles 1 and 2, got roles {sorted(g)}. Push both questions.")
            tasks.append(pairs_task(g[1], g[2], urls[g[1]["image_id"]]))
        return tasks, labels
    cands = _scene_candidates(scenes) if kind == "qa" else None
    for r, it in enumerate(rows):
        labels.update(it.get("labels") or [])
        if kind == "qa":
            c = None
            if cands is not None:
                if it["image_id"] not in cands:
                    raise InputError(f"Expected a scene for image {it['image_id']!r}, got none (item {it['id']!r}, row {r}). "
                                     "Pass the scenes file the items were drafted from.")
                c = cands[it["image_id"]]
                labels.update(c["labels"])
            tasks.append(qa_task(it, urls[it["image_id"]], c))
        else:
            tasks.append(review_task(it, urls[it["image_id"]]))
    return tasks, labels


def push_items(
    client: StudioClient,
    items: pa.Table,
    *,
    project: str,
    kind: str,
    document_root: str | os.PathLike,
    overlap: int = 2,
    scenes: pa.Table | None = None,
    config: str | None = None,
    image_root: str | os.PathLike | None = None,
    media_dir: str | os.PathLike | None = None,
    chunk_size: int = 1000,
    on_progress: Callable[[int], None] | None = None,
) -> PushReport:
    """Create or update project ``project`` of ``kind`` and push ``items`` as tasks (idempotent).

    ``overlap`` is how many people annotate each task (Label Studio's ``maximum_annotations``,
    honoured by the labelling queue, 100 % of tasks). ``config`` overrides the built-in labelling
    config (XML text, labels marker allowed). A config Label Studio refuses raises
    :class:`~witness.errors.ServiceError` quoting its message.
    """
    if overlap < 1:
        raise InputError(f"Expected an overlap of at least 1, got {overlap}. Use --overlap 2 for two annotators per item.")
    urls, storage_dirs = image_urls(items, document_root, image_root=image_root, media_dir=media_dir)
    tasks, labels = build_tasks(items, kind, urls, scenes=scenes)
    keys = [t["data"]["witness_id"] for t in tasks]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise InputError(f"Expected unique item ids, got {dup!r} twice. Give every item its own id.")

    existing = client.find_project(project)
    created = config_updated = False
    if existing is not None:
        have = project_kind(existing)
        if have != kind:
            raise InputError(
                f"Expected project {project!r} to be a {kind!r} project, got kind {have!r}. "
                "Push to a new project name, or use the project's kind."
            )
        labels |= set(config_labels(existing.get("label_config") or ""))
    xml = render_config(config or kind, labels)
    if config is None:
        validate_config(xml)
    if existing is None:
        proj = client.create_project(
            title=project, description=f"{KIND_PREFIX}{kind}\nCreated by witness studio push.", label_config=xml,
            maximum_annotations=overlap, overlap_cohort_percentage=100, show_overlap_first=True,
            show_collab_predictions=True, model_version=MODEL_VERSION, show_skip_button=True,
        )
        created = True
    else:
        proj = existing
        update: dict[str, Any] = {}
        if (existing.get("label_config") or "").strip() != xml.strip():
            update["label_config"] = xml
            config_updated = True
        if existing.get("maximum_annotations") != overlap:
            update["maximum_annotations"] = overlap
        if update:
            proj = client.update_project(existing["id"], **update)
    pid = int(proj["id"])

    have_paths = {s.get("path") for s in client.local_storages(pid)}
    for d in sorted(storage_dirs):
        if str(d) not in have_paths:
            client.add_local_storage(pid, str(d), title=f"witness images: {d.name}")

    index = {} if created else {t["witness_id"]: t for t in client.task_index(pid) if t.get("witness_id")}
    new, changed, unchanged = [], [], 0
    for t in tasks:
        old = index.get(t["data"]["witness_id"])
        if old is None:
            new.append(t)
        elif old.get("witness_hash") == t["data"]["witness_hash"]:
            unchanged += 1
        else:
            changed.append((int(old["id"]), t))
    done = unchanged
    if on_progress:
        on_progress(done)
    for start in range(0, len(new), chunk_size):
        chunk = new[start:start + chunk_size]
        client.import_tasks(pid, chunk)
        done += len(chunk)
        if on_progress:
            on_progress(done)
    for tid, t in changed:
        client.update_task(tid, t["data"])
        client.replace_predictions(tid, t["predictions"])
        done += 1
        if on_progress:
            on_progress(done)
    return PushReport(
        project_id=pid, project=project, kind=kind, created=created, config_updated=config_updated,
        added=len(new), unchanged=unchanged, changed=len(changed),
        changed_ids=tuple(t["data"]["witness_id"] for _, t in changed),
        storages=tuple(str(d) for d in sorted(storage_dirs)), url=f"{client.url}/projects/{pid}/data",
    )
