"""Importers: detection datasets on disk to a scenes table (:data:`witness.schema.SCENE_SCHEMA`).

One plain dict, :data:`IMPORTERS`, maps a format name to a function
``import_<fmt>(src, images=None) -> ImportResult``:

=============  ===============================================================================
format         what ``src`` is
=============  ===============================================================================
``coco``       an instances JSON (``images``, ``annotations``, ``categories``); ``images`` is
               the image root (default: the JSON's folder)
``voc``        a folder with ``Annotations/*.xml`` and ``JPEGImages/`` (VOC, DIOR, NWPU VHR-10)
``kitti``      a folder with ``label_2/*.txt`` and ``image_2/`` (KITTI / Rope3D 2D boxes)
``yolo``       an Ultralytics folder: ``data.yaml`` (``names``), ``images/``, ``labels/``
               (or ``images/<split>/``, ``labels/<split>/``)
``labelstudio`` a Label Studio JSON (or JSON_MIN) export with ``rectanglelabels`` results;
               ``images`` is the local-files document root
=============  ===============================================================================

Every box becomes witness's absolute pixel ``xyxy`` through :mod:`witness.boxes` (the VOC rule is
``x1 = xmin - 1, y1 = ymin - 1, x2 = xmax, y2 = ymax``: VOC indices are 1-based and inclusive).
Image sizes come from the image headers (Pillow opens the file lazily and never decodes the
pixels). Object ids are ``<image_id>:<k>``, ``k`` counting the kept objects of the image from 0.
The table is checked with :func:`witness.schema.validate_scenes`: a box overshooting the image by at
most one pixel is clipped and counted in ``warnings["clipped_boxes"]``; more is an error.

Bad input raises a one-line :class:`~witness.errors.InputError` naming the file, the record and the
field; what can be repaired safely is repaired and counted in :attr:`ImportResult.warnings`.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable
from urllib.parse import parse_qs, unquote, urlparse

import numpy as np
import orjson
import pyarrow as pa

from ..boxes import normalized_to_xyxy, percent_to_xyxy, xywh_to_xyxy
from ..errors import InputError, UnknownNameError
from ..schema import OVERSHOOT_TOLERANCE_PX, scene_record, scenes_table, validate_scenes

__all__ = [
    "IMAGE_EXTENSIONS",
    "ImportResult",
    "IMPORTERS",
    "get_importer",
    "import_dataset",
    "import_coco",
    "import_voc",
    "import_kitti",
    "import_yolo",
    "import_labelstudio",
    "image_size",
    "voc_to_xyxy",
    "kitti_to_xyxy",
    "yolo_to_xyxy",
]

#: Image file extensions the folder importers look for, in order of preference.
IMAGE_EXTENSIONS: tuple[str, ...] = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")


@dataclass(frozen=True)
class ImportResult:
    """A validated scenes table and the counted, safely repaired problems.

    ``warnings`` maps a short key (``clipped_boxes``, ``dontcare_skipped``, ...) to a count; keys
    with a zero count are left out.
    """

    table: pa.Table
    warnings: dict[str, int] = field(default_factory=dict)

    @property
    def n_scenes(self) -> int:
        return self.table.num_rows

    @property
    def n_objects(self) -> int:
        return sum(len(o or ()) for o in self.table.column("objects").to_pylist())

    def label_counts(self) -> dict[str, int]:
        """Objects per label, most frequent first."""
        c: Counter = Counter()
        for objs in self.table.column("objects").to_pylist():
            c.update(o["label"] for o in objs or ())
        return dict(c.most_common())


# --------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------


def image_size(path: str | os.PathLike, *, where: str = "") -> tuple[int, int]:
    """``(width, height)`` in pixels from the image header; the pixels are never decoded.

    Raises :class:`InputError` for a missing or unreadable image.

    >>> import tempfile, PIL.Image
    >>> p = Path(tempfile.mkdtemp()) / "a.png"; PIL.Image.new("RGB", (64, 48)).save(p)
    >>> image_size(p)
    (64, 48)
    """
    from PIL import Image, UnidentifiedImageError

    path = Path(path)
    loc = f", {where}" if where else ""
    if not path.is_file():
        raise InputError(f"Expected an image file, got a path that does not exist ({path}{loc}). Check the image root (--images).")
    try:
        with Image.open(path) as im:
            return int(im.width), int(im.height)
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise InputError(f"Expected a readable image, got unreadable data ({path}{loc}): {exc}. Replace the file.") from None


def _find_image(folder: Path, stem: str) -> Path | None:
    for ext in IMAGE_EXTENSIONS:
        for e in (ext, ext.upper()):
            p = folder / f"{stem}{e}"
            if p.is_file():
                return p
    return None


def _bump(warnings: dict[str, int], key: str, n: int = 1) -> None:
    warnings[key] = warnings.get(key, 0) + n


def _keep_boxes(xyxy: np.ndarray, w: int, h: int, locs: list[str]) -> np.ndarray:
    """Check ``(N, 4)`` boxes of one image at once; return which to keep.

    Raises :class:`InputError` (naming the first offending record) for a box that is not finite,
    has ``x2 < x1`` or ``y2 < y1``, or overshoots the image by more than
    :data:`~witness.schema.OVERSHOOT_TOLERANCE_PX`; returns False for boxes of zero size after
    clipping (dropped and counted by the caller).
    """

    def fail(mask: np.ndarray, what: str, fix: str) -> None:
        k = int(np.flatnonzero(mask)[0])
        got = [round(float(v), 3) for v in xyxy[k]]
        raise InputError(f"Expected {what}, got {got} ({locs[k]}). {fix}.")

    finite = np.isfinite(xyxy).all(axis=1)
    if not finite.all():
        fail(~finite, "finite box coordinates", "Fix the box")
    inverted = (xyxy[:, 2] < xyxy[:, 0]) | (xyxy[:, 3] < xyxy[:, 1])
    if inverted.any():
        fail(inverted, "a box with x1 <= x2 and y1 <= y2", "Fix the box")
    over = np.stack([-xyxy[:, 0], -xyxy[:, 1], xyxy[:, 2] - w, xyxy[:, 3] - h], axis=1).max(axis=1)
    beyond = over > OVERSHOOT_TOLERANCE_PX
    if beyond.any():
        fail(beyond, f"a box inside the {w}x{h} image", "Check the box convention and the image size")
    x1, y1 = np.maximum(xyxy[:, 0], 0.0), np.maximum(xyxy[:, 1], 0.0)
    x2, y2 = np.minimum(xyxy[:, 2], float(w)), np.minimum(xyxy[:, 3], float(h))
    return (x2 > x1) & (y2 > y1)


class _SceneBuilder:
    """Collects scenes, objects and warnings; :meth:`finish` validates them into a table."""

    def __init__(self, source: str, src: Path):
        self.source, self.src = source, src
        self.rows: list[dict] = []
        self.seen: dict[str, str] = {}
        self.warnings: dict[str, int] = {}

    def add(
        self,
        image_id: str,
        image_path: Path,
        width: int,
        height: int,
        objects: Iterable[tuple[str, np.ndarray, dict[str, Any], str]],
        *,
        split: str | None = None,
        record: str = "",
    ) -> None:
        """``objects`` are ``(label, xyxy, attributes, location for errors)``."""
        if image_id in self.seen:
            raise InputError(
                f"Expected unique image ids, got {image_id!r} twice ({self.seen[image_id]} and {record}). "
                "Give every image one record."
            )
        self.seen[image_id] = record
        objects = list(objects)
        objs = []
        if objects:
            xyxy = np.asarray([o[1] for o in objects], dtype=np.float64).reshape(-1, 4)
            keep = _keep_boxes(xyxy, width, height, [o[3] for o in objects])
            n_dropped = int((~keep).sum())
            if n_dropped:
                _bump(self.warnings, "degenerate_boxes_skipped", n_dropped)
            boxes = xyxy.tolist()
            for k in np.flatnonzero(keep).tolist():
                label, _, attrs, _ = objects[k]
                attributes = {str(a): _attr(v) for a, v in attrs.items() if v is not None}
                objs.append({"id": f"{image_id}:{len(objs)}", "label": label, "box": boxes[k], "attributes": attributes})
        self.rows.append(
            scene_record(
                image_id,
                width,
                height,
                objs,
                image={"bytes": None, "path": str(Path(image_path).resolve())},
                source=self.source,
                split=split,
            )
        )

    def finish(self) -> ImportResult:
        if not self.rows:
            raise InputError(f"Expected at least one image in the {self.source} data, got none ({self.src}). Check SRC.")
        table, report = validate_scenes(scenes_table(self.rows), source=self.src)
        if report.clipped_boxes:
            _bump(self.warnings, "clipped_boxes", report.clipped_boxes)
        return ImportResult(table, {k: v for k, v in sorted(self.warnings.items()) if v})


def _attr(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _load_json(path: Path) -> Any:
    if not path.is_file():
        raise InputError(f"Expected a JSON file, got a path that does not exist ({path}). Check SRC.")
    try:
        return orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise InputError(f"Expected valid JSON, got malformed JSON ({path}): {exc}. Fix or re-export the file.") from None


def _folder(src: Path, name: str, fmt: str) -> Path:
    p = src / name
    if not p.is_dir():
        raise InputError(f"Expected a {name}/ folder in the {fmt} dataset, got none ({p}). Point SRC at the dataset root.")
    return p


# --------------------------------------------------------------------------------------------
# Box conventions (thin wrappers over witness.boxes, documented here with their formats)
# --------------------------------------------------------------------------------------------


def voc_to_xyxy(boxes) -> np.ndarray:
    """VOC ``[xmin, ymin, xmax, ymax]`` (1-based, inclusive pixel indices) to continuous pixel xyxy.

    Rule: ``x1 = xmin - 1, y1 = ymin - 1, x2 = xmax, y2 = ymax``. Pixel ``i`` (1-based) covers
    ``[i - 1, i)`` in witness's continuous frame, so a box over pixels 1..10 is ``[0, 10)``: ten
    pixels wide, the same width VOC's own ``xmax - xmin + 1`` gives.

    >>> voc_to_xyxy([[1, 1, 10, 20]]).tolist()
    [[0.0, 0.0, 10.0, 20.0]]
    """
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4).copy()
    b[:, :2] -= 1.0
    return b


def kitti_to_xyxy(boxes) -> np.ndarray:
    """KITTI ``left top right bottom`` (0-based pixel coordinates, floats) to pixel xyxy: unchanged.

    KITTI's devkit measures a box as ``right - left``, so its corners already are continuous
    coordinates.

    >>> kitti_to_xyxy([[712.4, 143.0, 810.73, 307.92]]).round(2).tolist()
    [[712.4, 143.0, 810.73, 307.92]]
    """
    return np.asarray(boxes, dtype=np.float64).reshape(-1, 4).copy()


def yolo_to_xyxy(boxes, width: float, height: float) -> np.ndarray:
    """YOLO normalized ``[cx, cy, w, h]`` (0–1 of the image size) to pixel xyxy.

    ``x1 = (cx - w/2) * W``, ``y1 = (cy - h/2) * H``, ``x2 = (cx + w/2) * W``, ``y2 = (cy + h/2) * H``.

    >>> yolo_to_xyxy([[0.5, 0.5, 0.25, 0.5]], 640, 480).tolist()
    [[240.0, 120.0, 400.0, 360.0]]
    """
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    corner_wh = np.stack([b[:, 0] - b[:, 2] / 2, b[:, 1] - b[:, 3] / 2, b[:, 2], b[:, 3]], axis=1)
    return normalized_to_xyxy(xywh_to_xyxy(corner_wh), width, height)


# --------------------------------------------------------------------------------------------
# COCO
# --------------------------------------------------------------------------------------------


def import_coco(src: str | os.PathLike, images: str | os.PathLike | None = None) -> ImportResult:
    """Import a COCO instances JSON.

    ``bbox`` ``[x, y, w, h]`` (pixels, top-left) becomes xyxy via :func:`witness.boxes.xywh_to_xyxy`;
    labels are category names; ``iscrowd`` and ``area`` are kept as attributes. ``image_id`` is the
    COCO image id as a string; images without annotations become scenes with no objects. Image
    files are found at ``images / file_name`` (default root: the JSON's folder) and their header
    size must equal the JSON's ``width``/``height`` where those are given.

    >>> import tempfile, json, PIL.Image
    >>> d = Path(tempfile.mkdtemp()); PIL.Image.new("RGB", (100, 80)).save(d / "a.png")
    >>> _ = (d / "i.json").write_text(json.dumps({"images": [{"id": 1, "file_name": "a.png"}],
    ...     "categories": [{"id": 3, "name": "car"}],
    ...     "annotations": [{"id": 9, "image_id": 1, "category_id": 3, "bbox": [10, 20, 30, 40]}]}))
    >>> import_coco(d / "i.json").table.column("objects")[0][0]["box"].as_py()
    [10.0, 20.0, 40.0, 60.0]
    """
    src = Path(src)
    data = _load_json(src)
    root = Path(images) if images is not None else src.parent
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise InputError(f"Expected a COCO instances object with an 'images' list, got {type(data).__name__} ({src}). Pass an instances JSON.")
    cats: dict[Any, str] = {}
    for k, c in enumerate(data.get("categories") or []):
        if not isinstance(c, dict) or "id" not in c or "name" not in c:
            raise InputError(f"Expected a category with 'id' and 'name', got {c!r} ({src} categories[{k}]). Fix the category.")
        cats[c["id"]] = str(c["name"])
    b = _SceneBuilder("coco", src)
    per_image: dict[Any, list[tuple[int, dict]]] = {}
    img_ids: dict[Any, int] = {}
    for k, im in enumerate(data["images"]):
        if not isinstance(im, dict) or "id" not in im or "file_name" not in im:
            raise InputError(f"Expected an image with 'id' and 'file_name', got {im!r} ({src} images[{k}]). Fix the image record.")
        if im["id"] in img_ids:
            raise InputError(
                f"Expected unique image ids, got {im['id']!r} twice ({src} images[{img_ids[im['id']]}] and images[{k}], field 'id'). "
                "Give every image its own id."
            )
        img_ids[im["id"]] = k
        per_image[im["id"]] = []
    for k, ann in enumerate(data.get("annotations") or []):
        loc = f"{src} annotations[{k}]"
        if not isinstance(ann, dict):
            raise InputError(f"Expected an annotation object, got {ann!r} ({loc}). Fix the annotation.")
        if ann.get("image_id") not in per_image:
            raise InputError(
                f"Expected an annotation of a listed image, got image_id {ann.get('image_id')!r} ({loc}, id {ann.get('id')!r}, field 'image_id'). "
                "Add the image or drop the annotation."
            )
        if ann.get("category_id") not in cats:
            raise InputError(
                f"Expected a category_id in {sorted(cats, key=str)}, got {ann.get('category_id')!r} "
                f"({loc}, id {ann.get('id')!r}, field 'category_id'). Add the category."
            )
        bbox = ann.get("bbox")
        if not isinstance(bbox, list) or len(bbox) != 4 or not all(isinstance(v, (int, float)) for v in bbox):
            raise InputError(f"Expected bbox [x, y, w, h] of 4 numbers, got {bbox!r} ({loc}, id {ann.get('id')!r}, field 'bbox'). Fix the box.")
        per_image[ann["image_id"]].append((k, ann))
    for k, im in enumerate(data["images"]):
        path = root / str(im["file_name"])
        rec = f"{src} images[{k}]"
        w, h = image_size(path, where=f"{rec}, field 'file_name'")
        jw, jh = im.get("width"), im.get("height")
        if (jw is not None and int(jw) != w) or (jh is not None and int(jh) != h):
            raise InputError(
                f"Expected the image size {jw}x{jh} stated in the JSON, got {w}x{h} from the header of {path} ({rec}, field 'width'). "
                "Fix the JSON or the image."
            )
        anns = per_image[im["id"]]
        xyxy = xywh_to_xyxy([a["bbox"] for _, a in anns]) if anns else np.zeros((0, 4))
        objects = [
            (
                cats[a["category_id"]],
                xyxy[j],
                {"iscrowd": a.get("iscrowd"), "area": a.get("area")},
                f"{src} annotations[{ak}], id {a.get('id')!r}, field 'bbox'",
            )
            for j, (ak, a) in enumerate(anns)
        ]
        b.add(str(im["id"]), path, w, h, objects, record=rec)
    return b.finish()


# --------------------------------------------------------------------------------------------
# Pascal VOC (DIOR, NWPU VHR-10)
# --------------------------------------------------------------------------------------------


def _xml_text(node: ET.Element, tag: str) -> str | None:
    child = node.find(tag)
    return None if child is None or child.text is None else child.text.strip()


def import_voc(src: str | os.PathLike, images: str | os.PathLike | None = None) -> ImportResult:
    """Import a Pascal VOC folder: ``Annotations/*.xml`` and ``JPEGImages/`` (or ``images``).

    Boxes follow :func:`voc_to_xyxy` (1-based inclusive to continuous pixels). ``difficult``,
    ``truncated`` and ``pose`` become attributes. ``image_id`` is the XML file's stem; the image is
    ``<filename>`` from the XML, else ``<stem>.<ext>``.

    >>> import tempfile, PIL.Image
    >>> d = Path(tempfile.mkdtemp()); (d / "Annotations").mkdir(); (d / "JPEGImages").mkdir()
    >>> PIL.Image.new("RGB", (50, 40)).save(d / "JPEGImages" / "x.jpg")
    >>> _ = (d / "Annotations" / "x.xml").write_text("<annotation><filename>x.jpg</filename><object>"
    ...     "<name>ship</name><bndbox><xmin>1</xmin><ymin>1</ymin><xmax>10</xmax><ymax>20</ymax></bndbox>"
    ...     "</object></annotation>")
    >>> import_voc(d).table.column("objects")[0][0]["box"].as_py()
    [0.0, 0.0, 10.0, 20.0]
    """
    src = Path(src)
    ann_dir = _folder(src, "Annotations", "voc")
    img_dir = Path(images) if images is not None else _folder(src, "JPEGImages", "voc")
    b = _SceneBuilder("voc", src)
    files = sorted(ann_dir.glob("*.xml"))
    if not files:
        raise InputError(f"Expected VOC XML files, got none ({ann_dir}). Check SRC.")
    for xml in files:
        try:
            root = ET.parse(xml).getroot()
        except ET.ParseError as exc:
            raise InputError(f"Expected well-formed XML, got malformed XML ({xml}): {exc}. Fix the file.") from None
        fname = _xml_text(root, "filename")
        path = img_dir / fname if fname else None
        if path is None or not path.is_file():
            path = _find_image(img_dir, xml.stem) or (path if path is not None else img_dir / f"{xml.stem}.jpg")
        w, h = image_size(path, where=f"{xml}, field 'filename'")
        size = root.find("size")
        if size is not None:
            sw, sh = _xml_text(size, "width"), _xml_text(size, "height")
            try:
                sw_i, sh_i = int(float(sw or 0)), int(float(sh or 0))
            except ValueError:
                raise InputError(f"Expected an integer size, got width {sw!r} height {sh!r} ({xml}, field 'size'). Fix the XML.") from None
            if sw_i and sh_i and (sw_i, sh_i) != (w, h):
                raise InputError(
                    f"Expected the size {sw_i}x{sh_i} stated in the XML, got {w}x{h} from the header of {path} ({xml}, field 'size'). "
                    "Fix the XML or the image."
                )
        objects = []
        for k, obj in enumerate(root.findall("object")):
            loc = f"{xml} object[{k}]"
            name = _xml_text(obj, "name")
            if not name:
                raise InputError(f"Expected an object <name>, got none ({loc}, field 'name'). Name the class.")
            bb = obj.find("bndbox")
            if bb is None:
                raise InputError(f"Expected a <bndbox>, got none ({loc}, field 'bndbox'). Add the box.")
            vals = []
            for tag in ("xmin", "ymin", "xmax", "ymax"):
                t = _xml_text(bb, tag)
                try:
                    vals.append(float(t))  # type: ignore[arg-type]
                except (TypeError, ValueError):
                    raise InputError(f"Expected a number in <{tag}>, got {t!r} ({loc}, field 'bndbox.{tag}'). Fix the box.") from None
            attrs = {t: _xml_text(obj, t) for t in ("difficult", "truncated", "pose")}
            objects.append((name, voc_to_xyxy([vals])[0], attrs, f"{loc} '{name}', field 'bndbox'"))
        b.add(xml.stem, path, w, h, objects, record=str(xml))
    return b.finish()


# --------------------------------------------------------------------------------------------
# KITTI (Rope3D 2D boxes)
# --------------------------------------------------------------------------------------------

_KITTI_MIN_FIELDS = 15


def import_kitti(src: str | os.PathLike, images: str | os.PathLike | None = None) -> ImportResult:
    """Import a KITTI folder: ``label_2/*.txt`` and ``image_2/`` (or ``images``).

    Each line: ``type truncated occluded alpha left top right bottom h w l x y z ry [score]``. The
    2D box is used as is (:func:`kitti_to_xyxy`); ``truncated``, ``occluded`` and ``alpha`` become
    attributes; ``DontCare`` lines are skipped and counted (``dontcare_skipped``). ``image_id`` is
    the label file's stem; images without a label file are skipped and counted
    (``images_without_labels``).

    >>> import tempfile, PIL.Image
    >>> d = Path(tempfile.mkdtemp()); (d / "label_2").mkdir(); (d / "image_2").mkdir()
    >>> PIL.Image.new("RGB", (200, 100)).save(d / "image_2" / "000001.png")
    >>> _ = (d / "label_2" / "000001.txt").write_text(
    ...     "Car 0.00 1 -1.5 10.5 20 60.25 80 1.5 1.6 4 1 2 30 -1.5\\nDontCare -1 -1 -10 0 0 5 5 -1 -1 -1 -1000 -1000 -1000 -10\\n")
    >>> r = import_kitti(d); r.table.column("objects")[0][0]["box"].as_py(), r.warnings
    ([10.5, 20.0, 60.25, 80.0], {'dontcare_skipped': 1})
    """
    src = Path(src)
    lab_dir = _folder(src, "label_2", "kitti")
    img_dir = Path(images) if images is not None else _folder(src, "image_2", "kitti")
    b = _SceneBuilder("kitti", src)
    files = sorted(lab_dir.glob("*.txt"))
    if not files:
        raise InputError(f"Expected KITTI label files, got none ({lab_dir}). Check SRC.")
    stems = {f.stem for f in files}
    for f in files:
        path = _find_image(img_dir, f.stem)
        if path is None:
            raise InputError(
                f"Expected an image {f.stem}.png/.jpg in {img_dir}, got none ({f}, field 'image'). Add the image or check --images."
            )
        w, h = image_size(path, where=str(f))
        objects = []
        try:
            text = f.read_text()
        except UnicodeDecodeError as exc:
            raise InputError(f"Expected a text label file, got undecodable bytes ({f}): {exc}. Replace the file.") from None
        for lineno, line in enumerate(text.splitlines(), start=1):
            parts = line.split()
            if not parts:
                continue
            loc = f"{f} line {lineno}"
            if len(parts) not in (_KITTI_MIN_FIELDS, _KITTI_MIN_FIELDS + 1):
                raise InputError(
                    f"Expected 15 or 16 fields (type truncated occluded alpha left top right bottom h w l x y z ry [score]), "
                    f"got {len(parts)} ({loc}). Fix the line."
                )
            label = parts[0]
            if label == "DontCare":
                _bump(b.warnings, "dontcare_skipped")
                continue
            try:
                nums = [float(v) for v in parts[1:8]]
            except ValueError:
                raise InputError(f"Expected numbers in fields 2-8, got {parts[1:8]} ({loc}, field 'bbox'). Fix the line.") from None
            trunc, occl, alpha = nums[0], nums[1], nums[2]
            attrs = {"truncated": f"{trunc:g}", "occluded": f"{int(occl)}" if occl.is_integer() else f"{occl:g}", "alpha": f"{alpha:g}"}
            objects.append((label, kitti_to_xyxy([nums[3:7]])[0], attrs, f"{loc} '{label}', field 'bbox'"))
        b.add(f.stem, path, w, h, objects, record=str(f))
    extra = [p for p in img_dir.iterdir() if p.suffix.lower() in IMAGE_EXTENSIONS and p.stem not in stems]
    if extra:
        _bump(b.warnings, "images_without_labels", len(extra))
    return b.finish()


# --------------------------------------------------------------------------------------------
# YOLO (Ultralytics)
# --------------------------------------------------------------------------------------------


def _yolo_names(src: Path) -> tuple[dict[int, str], Path]:
    import yaml

    for name in ("data.yaml", "data.yml", "dataset.yaml"):
        p = src / name
        if p.is_file():
            break
    else:
        raise InputError(f"Expected a data.yaml with 'names' in the YOLO dataset, got none ({src}). Add data.yaml.")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        msg = str(exc).replace("\n", " ")
        raise InputError(f"Expected valid YAML, got malformed YAML ({p}): {msg}. Fix the file.") from None
    names = data.get("names") if isinstance(data, dict) else None
    if isinstance(names, list):
        return {i: str(n) for i, n in enumerate(names)}, p
    if isinstance(names, dict):
        try:
            return {int(k): str(v) for k, v in names.items()}, p
        except (TypeError, ValueError):
            raise InputError(f"Expected integer class ids as 'names' keys, got {list(names)} ({p}, field 'names'). Fix data.yaml.") from None
    raise InputError(f"Expected 'names' as a list or a dict of class names, got {names!r} ({p}, field 'names'). Fix data.yaml.")


def import_yolo(src: str | os.PathLike, images: str | os.PathLike | None = None) -> ImportResult:
    """Import an Ultralytics YOLO folder.

    Layout: ``data.yaml`` with ``names`` (a list, or a dict ``{id: name}``), ``images/`` and
    ``labels/``, or ``images/<split>/`` and ``labels/<split>/`` (the split is recorded in the scene's
    ``split``). Each label line is ``class cx cy w h`` normalized to 0–1 (:func:`yolo_to_xyxy`). An
    image without a label file is a scene with no objects (Ultralytics' background image).
    ``image_id`` is the image stem, prefixed with ``<split>/`` in the split layout.

    >>> import tempfile, PIL.Image
    >>> d = Path(tempfile.mkdtemp()); (d / "images").mkdir(); (d / "labels").mkdir()
    >>> _ = (d / "data.yaml").write_text("names: [car, bus]\\n")
    >>> PIL.Image.new("RGB", (640, 480)).save(d / "images" / "a.jpg")
    >>> _ = (d / "labels" / "a.txt").write_text("1 0.5 0.5 0.25 0.5\\n")
    >>> o = import_yolo(d).table.column("objects")[0][0]; o["label"].as_py(), o["box"].as_py()
    ('bus', [240.0, 120.0, 400.0, 360.0])
    """
    src = Path(src)
    names, yaml_path = _yolo_names(src)
    img_root = Path(images) if images is not None else _folder(src, "images", "yolo")
    lab_root = _folder(src, "labels", "yolo")
    direct = sorted(p for p in img_root.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS)
    splits: list[tuple[str | None, Path, Path]] = []
    if direct:
        splits.append((None, img_root, lab_root))
    for d in sorted(p for p in img_root.iterdir() if p.is_dir()):
        splits.append((d.name, d, lab_root / d.name))
    b = _SceneBuilder("yolo", src)
    n_images = 0
    for split, idir, ldir in splits:
        for path in sorted(p for p in idir.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS):
            n_images += 1
            w, h = image_size(path)
            lab = ldir / f"{path.stem}.txt"
            objects = []
            if lab.is_file():
                for lineno, line in enumerate(lab.read_text().splitlines(), start=1):
                    parts = line.split()
                    if not parts:
                        continue
                    loc = f"{lab} line {lineno}"
                    if len(parts) != 5:
                        raise InputError(
                            f"Expected 5 fields 'class cx cy w h', got {len(parts)} ({loc}). "
                            "Segmentation labels are not boxes: export detection labels."
                        )
                    try:
                        cls_f = float(parts[0])
                        vals = [float(v) for v in parts[1:]]
                    except ValueError:
                        raise InputError(f"Expected numbers 'class cx cy w h', got {parts} ({loc}). Fix the line.") from None
                    if not cls_f.is_integer() or int(cls_f) not in names:
                        raise InputError(
                            f"Expected a class id in {sorted(names)}, got {parts[0]} ({loc}, field 'class'). "
                            f"Add it to 'names' in {yaml_path.name} or fix the label."
                        )
                    label = names[int(cls_f)]
                    objects.append((label, yolo_to_xyxy([vals], w, h)[0], {}, f"{loc} '{label}', field 'box'"))
            image_id = path.stem if split is None else f"{split}/{path.stem}"
            b.add(image_id, path, w, h, objects, split=split, record=str(path))
    if not n_images:
        raise InputError(f"Expected images in {img_root} or its split folders, got none ({src}). Check SRC.")
    return b.finish()


# --------------------------------------------------------------------------------------------
# Label Studio
# --------------------------------------------------------------------------------------------

_IMAGE_KEYS = ("image", "img", "image_url", "url")


def _ls_image_ref(data: dict) -> str | None:
    for key in _IMAGE_KEYS:
        if isinstance(data.get(key), str):
            return data[key]
    for v in data.values():
        if isinstance(v, str) and Path(urlparse(v).path).suffix.lower() in IMAGE_EXTENSIONS:
            return v
    return None


def _ls_resolve(ref: str, root: Path, json_dir: Path) -> Path:
    """A Label Studio image reference to a local path.

    ``/data/local-files/?d=REL`` -> ``root / REL``; a URL or ``/data/upload/...`` -> ``root / basename``
    (Label Studio prefixes uploads with a random 8-character id and a dash, which is tried too);
    a plain path -> itself if absolute, else under ``root``, else beside the JSON.
    """
    parsed = urlparse(ref)
    if parsed.path.rstrip("/").endswith("/data/local-files") or "local-files" in parsed.path:
        rel = parse_qs(parsed.query).get("d", [""])[0]  # parse_qs already percent-decodes
        return root / rel
    if parsed.scheme in ("http", "https", "s3", "gs") or ref.startswith("/data/"):
        name = Path(unquote(parsed.path)).name
        p = root / name
        if not p.is_file() and len(name) > 9 and name[8] == "-":
            alt = root / name[9:]
            if alt.is_file():
                return alt
        return p
    p = Path(ref)
    if p.is_absolute():
        return p
    return root / p if (root / p).exists() or root != json_dir else json_dir / p


def _ls_regions(task: dict, k: int, src: Path, warnings: dict[str, int]) -> tuple[list[dict], bool]:
    """The rectangle regions of one task and whether the task is in the JSON_MIN shape."""
    if "annotations" in task or "data" in task:
        anns = task.get("annotations") or []
        if not isinstance(anns, list):
            raise InputError(f"Expected an annotations list, got {type(anns).__name__} ({src} task[{k}], field 'annotations'). Re-export.")
        anns = [a for a in anns if isinstance(a, dict) and not a.get("was_cancelled")]
        if not anns:
            return [], False
        if len(anns) > 1:
            _bump(warnings, "extra_annotations_ignored", len(anns) - 1)
        result = anns[0].get("result") or []
        if not isinstance(result, list):
            raise InputError(f"Expected a result list, got {type(result).__name__} ({src} task[{k}], field 'annotations.result'). Re-export.")
        regions = []
        for r in result:
            if isinstance(r, dict) and r.get("type") == "rectanglelabels":
                v = r.get("value") or {}
                if not isinstance(v, dict):
                    raise InputError(f"Expected a region value object, got {type(v).__name__} ({src} task[{k}], field 'result.value'). Re-export.")
                v = dict(v)
                v.setdefault("original_width", r.get("original_width"))
                v.setdefault("original_height", r.get("original_height"))
                regions.append(v)
        return regions, False
    regions = []  # JSON_MIN: region lists under the control's name
    for v in task.values():
        if isinstance(v, list):
            regions.extend(r for r in v if isinstance(r, dict) and "rectanglelabels" in r)
    return regions, True


class _LSScene:
    """One image of a Label Studio export: the objects of all its tasks, merged."""

    def __init__(self, path: Path, width: int, height: int, record: str):
        self.path, self.width, self.height, self.record = path, width, height, record
        self.objects: list[tuple[str, np.ndarray, dict[str, Any], str]] = []
        self._kept: Counter = Counter()

    def merge(self, objects: list[tuple[str, np.ndarray, dict[str, Any], str]], warnings: dict[str, int]) -> None:
        """Add one task's objects as a multiset union: an object (label, float32 box) that earlier
        tasks already hold as often as this task has it so far is a repeat, dropped and counted."""
        keys = [(label, np.asarray(box, dtype=np.float32).tobytes()) for label, box, _, _ in objects]
        seen: Counter = Counter()
        for key, obj in zip(keys, objects, strict=True):
            seen[key] += 1
            if seen[key] <= self._kept[key]:
                _bump(warnings, "duplicate_objects_merged")
                continue
            self.objects.append(obj)
        for key, n in seen.items():
            self._kept[key] = max(self._kept[key], n)


def import_labelstudio(src: str | os.PathLike, images: str | os.PathLike | None = None) -> ImportResult:
    """Import a Label Studio JSON export (or JSON_MIN) with ``rectanglelabels`` results.

    Each image is a scene; the first annotation of a task that was not cancelled is used (others
    are counted in ``extra_annotations_ignored``). ``value.{x, y, width, height}`` are percent of
    the original image size (top-left corner) and become pixels via
    :func:`witness.boxes.percent_to_xyxy` with the size read from the image header (which must
    equal ``original_width/height``). A region with several labels keeps the first
    (``extra_labels_ignored``). ``image_id`` is ``data.image_id`` when the task has one, else the
    image file stem. ``images`` is the root for ``/data/local-files/?d=`` paths, uploads and URLs
    (default: the JSON's folder).

    Several tasks on one image (witness's own ``qa`` projects: one task per question) are merged
    into one scene: the objects are the multiset union of the tasks' rectangles, an object being
    the same when its label and its box (float32 pixels, as stored) are identical. Tasks folded
    into an earlier one are counted in ``tasks_merged``, their repeated objects in
    ``duplicate_objects_merged``. The same ``image_id`` on two different image files is an error.

    >>> import tempfile, json, PIL.Image
    >>> d = Path(tempfile.mkdtemp()); PIL.Image.new("RGB", (800, 600)).save(d / "a.png")
    >>> task = {"id": 1, "data": {"image": "/data/local-files/?d=a.png"}, "annotations": [{"result": [
    ...     {"type": "rectanglelabels", "original_width": 800, "original_height": 600,
    ...      "value": {"x": 10, "y": 10, "width": 25, "height": 20, "rectanglelabels": ["car"]}}]}]}
    >>> _ = (d / "e.json").write_text(json.dumps([task]))
    >>> import_labelstudio(d / "e.json").table.column("objects")[0][0]["box"].as_py()
    [80.0, 60.0, 280.0, 180.0]
    """
    src = Path(src)
    data = _load_json(src)
    root = Path(images) if images is not None else src.parent
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise InputError(f"Expected a list of Label Studio tasks, got {type(data).__name__} ({src}). Export the project as JSON.")
    b = _SceneBuilder("labelstudio", src)
    scenes: dict[str, _LSScene] = {}
    for k, task in enumerate(data):
        rec = f"{src} task[{k}]" + (f" id {task.get('id')!r}" if isinstance(task, dict) and "id" in task else "")
        if not isinstance(task, dict):
            raise InputError(f"Expected a task object, got {type(task).__name__} ({rec}). Re-export the project.")
        regions, is_min = _ls_regions(task, k, src, b.warnings)
        tdata = task if is_min else (task.get("data") or {})
        ref = _ls_image_ref(tdata) if isinstance(tdata, dict) else None
        if ref is None:
            raise InputError(f"Expected an image reference in the task data, got keys {sorted(tdata) if isinstance(tdata, dict) else tdata!r} ({rec}, field 'data.image'). Name the image key 'image'.")
        path = _ls_resolve(ref, root, src.parent)
        image_id = str(tdata.get("image_id")) if tdata.get("image_id") is not None else path.stem
        scene = scenes.get(image_id)
        if scene is not None and scene.path.resolve() != path.resolve():
            raise InputError(
                f"Expected unique image ids, got {image_id!r} twice for two images ({scene.record}: {scene.path}; "
                f"{rec}: {path}). Give every image its own data.image_id."
            )
        if scene is None:
            w, h = image_size(path, where=f"{rec}, field 'data.image'")
            scene = scenes[image_id] = _LSScene(path, w, h, rec)
        else:
            w, h = scene.width, scene.height
            _bump(b.warnings, "tasks_merged")
        objects = []
        for j, v in enumerate(regions):
            loc = f"{rec} region[{j}]"
            labels = v.get("rectanglelabels") or []
            if isinstance(labels, str):
                labels = [labels]
            if not isinstance(labels, list) or not all(isinstance(lab, str) for lab in labels):
                raise InputError(f"Expected a list of label names, got {labels!r} ({loc}, field 'rectanglelabels'). Re-export.")
            if not labels:
                raise InputError(f"Expected a label on the rectangle, got none ({loc}, field 'rectanglelabels'). Label the region.")
            if len(labels) > 1:
                _bump(b.warnings, "extra_labels_ignored", len(labels) - 1)
            ow, oh = v.get("original_width"), v.get("original_height")
            try:
                size = None if ow is None or oh is None else (int(ow), int(oh))
                rotation = float(v.get("rotation") or 0.0)
            except (TypeError, ValueError):
                raise InputError(
                    f"Expected numbers original_width, original_height and rotation, got {ow!r}, {oh!r}, {v.get('rotation')!r} "
                    f"({loc}, field 'original_width'). Re-export."
                ) from None
            if size is not None and size != (w, h):
                raise InputError(
                    f"Expected original size {ow}x{oh} to match the image header, got {w}x{h} ({loc}, {path}, field 'original_width'). "
                    "Export against the same images."
                )
            if rotation % 360 != 0:
                raise InputError(f"Expected an axis-aligned rectangle, got rotation {v.get('rotation')} ({loc}, field 'rotation'). Redraw it unrotated.")
            try:
                pct = [float(v[key]) for key in ("x", "y", "width", "height")]
            except (KeyError, TypeError, ValueError):
                raise InputError(f"Expected numbers x, y, width, height, got {v!r} ({loc}, field 'value'). Re-export.") from None
            objects.append((str(labels[0]), pct, {}, f"{loc} '{labels[0]}', field 'value'"))
        if objects:
            xyxy = percent_to_xyxy([o[1] for o in objects], w, h)
            scene.merge([(o[0], xyxy[j], o[2], o[3]) for j, o in enumerate(objects)], b.warnings)
    for image_id, scene in scenes.items():
        b.add(image_id, scene.path, scene.width, scene.height, scene.objects, record=scene.record)
    return b.finish()


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------

Importer = Callable[..., ImportResult]

#: Format name -> importer. Add a format by adding an entry (or pass ``module:attr``).
IMPORTERS: dict[str, Importer] = {
    "coco": import_coco,
    "voc": import_voc,
    "kitti": import_kitti,
    "yolo": import_yolo,
    "labelstudio": import_labelstudio,
}


def get_importer(name: str) -> Importer:
    """The importer registered under ``name``, or a ``module:attr`` path to one.

    >>> get_importer("coco").__name__
    'import_coco'
    >>> get_importer("csv")
    Traceback (most recent call last):
    ...
    witness.errors.UnknownNameError: Unknown importer 'csv'. Expected one of ['coco', 'kitti', 'labelstudio', 'voc', 'yolo'] or 'module:attr'.
    """
    if name in IMPORTERS:
        return IMPORTERS[name]
    if ":" in name:
        import importlib

        mod, _, attr = name.partition(":")
        try:
            fn = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError):
            raise UnknownNameError("importer", name, list(IMPORTERS)) from None
        if callable(fn):
            return fn
    raise UnknownNameError("importer", name, list(IMPORTERS))


def import_dataset(fmt: str, src: str | os.PathLike, images: str | os.PathLike | None = None) -> ImportResult:
    """Import ``src`` with the importer registered as ``fmt`` (see :data:`IMPORTERS`).

    >>> import_dataset("nope", ".")
    Traceback (most recent call last):
    ...
    witness.errors.UnknownNameError: Unknown importer 'nope'. Expected one of ['coco', 'kitti', 'labelstudio', 'voc', 'yolo'] or 'module:attr'.
    """
    fn = get_importer(fmt)
    src = Path(src)
    if not src.exists():
        raise InputError(f"Expected a {fmt} dataset at SRC, got a path that does not exist ({src}). Check the path.")
    if images is not None and not Path(images).is_dir():
        raise InputError(f"Expected an image folder for --images, got {images} which is not a folder. Check the path.")
    return fn(src, images=images)

