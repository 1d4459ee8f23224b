"""Rule drafts: grounded questions whose answers and evidence follow exactly from the annotations.

AESP (``shared/papers/001``) builds existence, counting and comparison questions from detection
boxes by rule; RoadSceneVQA-G (``000``) asks for answers witnessed by a set of boxes (several, one,
or none) across the capability taxonomy of its Table III. :func:`draft_rules` does both from a
scenes table: every question is drafted from the labels, pixel boxes and (where present) the
attributes of one scene, and its evidence is exactly the set of objects that decide the answer.

Question types (``qtype``, default ``category`` from :data:`witness.schema.QTYPE_CATEGORY`):

* ``existence`` — "Is there a car?" yes with every car as evidence; no (a class of the dataset's
  vocabulary absent from the image) with empty evidence.
* ``counting`` — "How many cars?" for every class present, one absent class (count 0) and, where
  every instance of a class carries an attribute, one attribute-filtered count ("How many red
  cars?"). ``count`` = number of evidence boxes = the number the answer states.
* ``comparison`` — "Are there more A than B?": ``targets = [A, B]``, ``relation`` more/fewer/equal,
  evidence every instance of A and B, answer yes/no (AESP: more ⇔ n_A > n_B, fewer ⇔ n_A < n_B,
  equal ⇔ n_A = n_B).
* ``identification`` — "What is the largest object?", "What type of object is red?", "What is the
  object nearest to the crosswalk?": answer a class, evidence the one object.
* ``selection`` — "Which car is the leftmost?", "Which vehicle is waiting?": answer a description
  that picks the object out without the property asked about, evidence the object.
* ``attribute`` — "What colour is the bus in the second lane?": answer the attribute value.
* ``spatial`` — "Is the bus left of the van?" (yes/no, evidence both), "How many pedestrians are on
  the crosswalk?" (count, evidence those on it), "Which car is nearest to the crosswalk?".

Never ambiguous: a referring expression is used only when it matches exactly one object of the
scene; a superlative only when it holds with a margin (see :func:`left_of`, :func:`nearest_unique`,
:data:`LARGEST_RATIO`); an attribute filter only when every candidate object carries the attribute.
Attribute values outside :data:`ATTRIBUTE_VALUES` read as missing (COCO's ``area`` is a pixel area);
a class with a crowd region (COCO ``iscrowd = 1``) in the scene is never counted, compared or ranked.

Deterministic: each scene gets its own RNG seeded from ``(seed, crc32(image_id))``, so a scene's
drafts do not depend on the other scenes in the table.
"""

from __future__ import annotations

import importlib
import zlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InputError, SchemaError, UnknownNameError
from ..schema import QTYPE_CATEGORY, QTYPES, item_record, items_table, validate_items
from . import templates as T

__all__ = [
    "RULE_TYPES",
    "RULES",
    "REGION_LABELS",
    "VEHICLE_LABELS",
    "ATTRIBUTE_KEYS",
    "ATTRIBUTE_VALUES",
    "LARGEST_RATIO",
    "NEAREST_MARGIN",
    "SceneView",
    "Draft",
    "RuleContext",
    "DraftSummary",
    "scene_views",
    "scene_rng",
    "refer",
    "left_of",
    "on_crosswalk",
    "nearest_unique",
    "get_rule",
    "register_rule",
    "draft_rules",
    "drafts_to_items",
    "summarize_drafts",
]

#: Labels that name a region of the road rather than an object (not counted as a "thing").
REGION_LABELS: frozenset[str] = frozenset({"crosswalk"})
#: Labels that "Which vehicle ...?" ranges over.
VEHICLE_LABELS: frozenset[str] = frozenset(
    {"car", "truck", "bus", "van", "motorcycle", "motorbike", "train", "tram", "trailer", "suv", "vehicle"}
)
#: "The largest" holds when the largest box area is at least this many times the second largest.
LARGEST_RATIO = 1.25
#: "Nearest" holds when the second-nearest object is this share of the image width farther away.
NEAREST_MARGIN = 0.05
#: Attribute keys the drafter understands (demo scenes; imported scenes may have none).
ATTRIBUTE_KEYS: tuple[str, ...] = ("color", "lane", "direction", "motion", "area")
#: The values the drafter understands for keys whose templates name the alternatives ("Is X
#: moving or waiting?"). Other values of these keys (COCO's ``area`` is a pixel area) are read as
#: unknown, like a missing attribute; a ``color`` must be a word and a ``lane`` a number.
ATTRIBUTE_VALUES: dict[str, frozenset[str]] = {
    "motion": frozenset({"moving", "waiting"}),
    "direction": frozenset({"approaching", "receding"}),
    "area": frozenset({"road", "crosswalk", "sidewalk"}),
}


@dataclass(frozen=True)
class SceneView:
    """One scene as arrays: ``labels`` (N,), ``boxes`` (N, 4) pixel xyxy, ``attrs[key]`` (N,)
    object arrays holding the attribute value or None."""

    image_id: str
    width: int
    height: int
    image: Any
    source: str | None
    split: str | None
    labels: np.ndarray
    boxes: np.ndarray
    attrs: Mapping[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.labels)

    def attr(self, key: str) -> np.ndarray:
        """Values of attribute ``key`` (None where an object lacks it)."""
        got = self.attrs.get(key)
        return got if got is not None else np.full(len(self.labels), None, dtype=object)

    @cached_property
    def crowd(self) -> np.ndarray:
        """Mask of crowd regions (COCO ``iscrowd = 1``): one box over many instances of a class."""
        return self.attr("iscrowd") == "1" if len(self.labels) else np.zeros(0, bool)

    @cached_property
    def things(self) -> np.ndarray:
        """Mask of single objects: neither regions (a crosswalk) nor crowd regions."""
        if not len(self.labels):
            return np.zeros(0, bool)
        return ~np.isin(self.labels, list(REGION_LABELS)) & ~self.crowd


@dataclass(frozen=True)
class Draft:
    """One drafted question: ``idx`` are the indices (into the scene's objects) of the evidence."""

    qtype: str | None
    question: str
    answer: str
    idx: tuple[int, ...] = ()
    count: int | None = None
    targets: tuple[str, ...] = ()
    relation: str | None = None
    category: str | None = None


@dataclass(frozen=True)
class DraftSummary:
    """What a drafting run produced: items per qtype and category, grounded and multi-box shares."""

    n_items: int
    n_images: int
    per_qtype: Mapping[str, int]
    per_category: Mapping[str, int]
    grounded_share: float
    multi_box_share: float
    n_pairs: int = 0

    def as_dict(self) -> dict:
        return {
            "n_items": self.n_items,
            "n_images": self.n_images,
            "n_pairs": self.n_pairs,
            "per_qtype": dict(self.per_qtype),
            "per_category": dict(self.per_category),
            "grounded_share": self.grounded_share,
            "multi_box_share": self.multi_box_share,
        }


@dataclass
class RuleContext:
    """What a rule may know beyond its scene: the dataset vocabulary (every label of the scenes
    table), the same without region labels, and the colours the dataset uses."""

    vocab: tuple[str, ...]
    things_vocab: tuple[str, ...] = field(default=())
    colors: tuple[str, ...] = field(default=())


# --------------------------------------------------------------------------------------------
# Scenes as arrays
# --------------------------------------------------------------------------------------------


def scene_views(scenes: pa.Table) -> list[SceneView]:
    """Split a scenes table into :class:`SceneView` objects, flattening objects columnar.

    >>> from witness.schema import scene_record, scenes_table
    >>> t = scenes_table([scene_record("i", 100, 50, [{"label": "car", "box": [0, 0, 10, 10],
    ...                                                 "attributes": {"color": "red"}}])])
    >>> v = scene_views(t)[0]
    >>> v.labels.tolist(), v.boxes.shape, v.attr("color").tolist(), v.attr("lane").tolist()
    (['car'], (1, 4), ['red'], [None])
    """
    required = {"image_id", "width", "height", "objects"}
    missing = required - set(scenes.column_names)
    if missing:
        raise SchemaError(
            f"Expected a scenes table with columns {sorted(required)}, got one without {sorted(missing)}. "
            "Read scenes with witness.io.read_scenes."
        )
    n = scenes.num_rows
    objects = scenes.column("objects").combine_chunks()
    if objects.null_count:
        objects = pc.fill_null(objects, pa.scalar([], objects.type))
    n_obj = pc.list_value_length(objects).to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(n_obj, out=offsets[1:])
    flat = pc.list_flatten(objects)
    labels = np.asarray(flat.field("label").to_pylist(), dtype=object)
    if len(flat):
        boxes = pc.list_flatten(flat.field("box")).to_numpy(zero_copy_only=False).astype(np.float64).reshape(-1, 4)
    else:
        boxes = np.zeros((0, 4))
    attrs: dict[str, np.ndarray] = {}
    if "attributes" in flat.type.names and len(flat):
        amap = flat.field("attributes")
        a_off = amap.offsets.to_numpy(zero_copy_only=False).astype(np.int64)  # nulls have no entries
        owner = np.repeat(np.arange(len(a_off) - 1), np.diff(a_off))
        lo, hi = int(a_off[0]), int(a_off[-1])
        keys = np.asarray(amap.keys.slice(lo, hi - lo).to_pylist(), dtype=object)
        vals = np.asarray(amap.items.slice(lo, hi - lo).to_pylist(), dtype=object)
        for key in np.unique(keys) if len(keys) else ():
            col = np.full(len(labels), None, dtype=object)
            sel = keys == key
            col[owner[sel]] = vals[sel]
            attrs[str(key)] = _understood(str(key), col)
    ids = scenes.column("image_id").to_pylist()
    widths = scenes.column("width").to_pylist()
    heights = scenes.column("height").to_pylist()
    images = scenes.column("image").to_pylist() if "image" in scenes.column_names else [None] * n
    sources = scenes.column("source").to_pylist() if "source" in scenes.column_names else [None] * n
    splits = scenes.column("split").to_pylist() if "split" in scenes.column_names else [None] * n
    views = []
    for r in range(n):
        a, b = offsets[r], offsets[r + 1]
        views.append(
            SceneView(
                image_id=str(ids[r]),
                width=int(widths[r]),
                height=int(heights[r]),
                image=images[r],
                source=sources[r],
                split=splits[r],
                labels=labels[a:b],
                boxes=boxes[a:b],
                attrs={k: v[a:b] for k, v in attrs.items() if any(x is not None for x in v[a:b])},
            )
        )
    return views


def _understood(key: str, col: np.ndarray) -> np.ndarray:
    """Values of a drafter attribute key outside :data:`ATTRIBUTE_VALUES` (or a colour that is not
    a word) become None: unknown, so never used to describe, filter or answer."""
    allowed = ATTRIBUTE_VALUES.get(key)
    if allowed is not None:
        ok = np.array([v in allowed for v in col], dtype=bool)
    elif key == "color":
        ok = np.array([isinstance(v, str) and v.replace(" ", "").replace("-", "").isalpha() for v in col], dtype=bool)
    else:
        return col
    return np.where(ok, col, None)


def scene_rng(seed: int, image_id: str) -> np.random.Generator:
    """The RNG of one scene: seeded from ``(seed, crc32(image_id))``, independent of table order.

    >>> int(scene_rng(0, "a").integers(1000)) == int(scene_rng(0, "a").integers(1000))
    True
    """
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(str(image_id).encode())])


# --------------------------------------------------------------------------------------------
# Geometry and reference rules
# --------------------------------------------------------------------------------------------


def left_of(boxes: np.ndarray) -> np.ndarray:
    """``(N, N)`` booleans: box i lies entirely left of box j (``x2_i <= x1_j``, pixels).

    "Left of" is asked only when the boxes do not overlap horizontally, so the answer never depends
    on where inside a box one looks.

    >>> left_of(np.array([[0, 0, 10, 10], [10, 0, 20, 10], [5, 0, 15, 10]])).astype(int).tolist()
    [[0, 1, 0], [0, 0, 0], [0, 0, 0]]
    """
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    return b[:, None, 2] <= b[None, :, 0]


def on_crosswalk(view: SceneView) -> np.ndarray:
    """``(N,)`` booleans: is each object on a crosswalk?

    Rule: the object's ``area`` attribute says so where present (``area == "crosswalk"``); otherwise
    its foot point (bottom-centre ``((x1 + x2) / 2, y2)``, pixels) lies inside a crosswalk box.
    Crosswalks themselves are never on a crosswalk.

    >>> from witness.schema import scene_record, scenes_table
    >>> t = scenes_table([scene_record("i", 100, 100, [
    ...     {"label": "crosswalk", "box": [0, 50, 100, 70]},
    ...     {"label": "pedestrian", "box": [10, 30, 20, 60]},
    ...     {"label": "pedestrian", "box": [40, 10, 50, 40]}])])
    >>> on_crosswalk(scene_views(t)[0]).tolist()
    [False, True, False]
    """
    n = len(view)
    out = np.zeros(n, dtype=bool)
    if n == 0:
        return out
    cw = view.boxes[view.labels == "crosswalk"]
    if len(cw):
        fx = (view.boxes[:, 0] + view.boxes[:, 2]) / 2
        fy = view.boxes[:, 3]
        out = ((fx[:, None] >= cw[None, :, 0]) & (fx[:, None] <= cw[None, :, 2])
               & (fy[:, None] >= cw[None, :, 1]) & (fy[:, None] <= cw[None, :, 3])).any(axis=1)
    area = view.attr("area")
    has = np.array([a is not None for a in area], dtype=bool)
    out = np.where(has, area == "crosswalk", out)
    return out & view.things


def nearest_unique(dist: np.ndarray, margin: float) -> int | None:
    """Index of the smallest distance when it beats the second smallest by ``margin``, else None.

    >>> nearest_unique(np.array([5.0, 30.0, 12.0]), 5.0), nearest_unique(np.array([5.0, 8.0]), 5.0)
    (0, None)
    """
    if len(dist) == 0:
        return None
    order = np.argsort(dist, kind="stable")
    if len(dist) > 1 and dist[order[1]] - dist[order[0]] < margin:
        return None
    return int(order[0])


def _crosswalk_distance(view: SceneView) -> np.ndarray | None:
    """Distance (pixels) from each object's centre to the one crosswalk box (0 inside), or None."""
    cw = view.boxes[view.labels == "crosswalk"]
    if len(cw) != 1:
        return None
    c = cw[0]
    cx = (view.boxes[:, 0] + view.boxes[:, 2]) / 2
    cy = (view.boxes[:, 1] + view.boxes[:, 3]) / 2
    dx = np.maximum(np.maximum(c[0] - cx, cx - c[2]), 0)
    dy = np.maximum(np.maximum(c[1] - cy, cy - c[3]), 0)
    return np.hypot(dx, dy)


def _extreme(view: SceneView, cand: np.ndarray, side: str) -> int | None:
    """The candidate entirely left (or right) of every other candidate, or None."""
    idx = np.flatnonzero(cand)
    if len(idx) < 2:
        return None
    lo = left_of(view.boxes[idx])
    if side == "right":
        lo = lo.T
    others = lo.sum(axis=1)
    hit = np.flatnonzero(others == len(idx) - 1)
    return int(idx[hit[0]]) if len(hit) == 1 else None


def _largest(view: SceneView, cand: np.ndarray) -> int | None:
    idx = np.flatnonzero(cand)
    if len(idx) < 2:
        return None
    b = view.boxes[idx]
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    order = np.argsort(-area, kind="stable")
    if area[order[0]] < LARGEST_RATIO * area[order[1]]:
        return None
    return int(idx[order[0]])


def _phrases(view: SceneView, i: int, exclude: Iterable[str]) -> Iterator[tuple[str, np.ndarray]]:
    """Candidate referring expressions of object i with the mask of objects each one matches."""
    ex = set(exclude)
    lab = view.labels[i]
    nm = T.name(lab)
    same = view.labels == lab
    yield f"the {nm}", same
    if same.sum() == 1:
        return
    # an attribute describes only when every object of the class carries it (else "the red car"
    # could also be a car whose colour nobody annotated)
    known = {k for k in ("color", "lane", "motion", "direction", "area") if not any(v is None for v in view.attr(k)[same])}
    ex = ex | ({"color", "lane", "motion", "direction", "area"} - known)
    color, lane = view.attr("color"), view.attr("lane")
    motion, direction, area = view.attr("motion"), view.attr("direction"), view.attr("area")
    lane_word = None
    if lane[i] is not None and str(lane[i]).isdigit():
        lane_word = T.ordinal(int(lane[i]))
    if "color" not in ex and color[i] is not None:
        yield f"the {color[i]} {nm}", same & (color == color[i])
    if "lane" not in ex and lane_word:
        yield f"the {nm} in the {lane_word} lane", same & (lane == lane[i])
    if "motion" not in ex and motion[i] is not None:
        yield f"the {motion[i]} {nm}", same & (motion == motion[i])
    if "direction" not in ex and direction[i] is not None:
        yield f"the {direction[i]} {nm}", same & (direction == direction[i])
    if "area" not in ex and area[i] is not None:
        yield f"the {nm} on the {area[i]}", same & (area == area[i])
    if "color" not in ex and "lane" not in ex and color[i] is not None and lane_word:
        yield f"the {color[i]} {nm} in the {lane_word} lane", same & (color == color[i]) & (lane == lane[i])
    if "position" not in ex:
        for side in ("left", "right"):
            if _extreme(view, same, side) == i:
                yield f"the {side}most {nm}", np.arange(len(view)) == i


def refer(view: SceneView, i: int, *, exclude: Iterable[str] = ()) -> str | None:
    """The shortest referring expression that picks out object ``i`` and no other, or None.

    Tried in order: "the car", "the red car", "the car in the second lane", "the waiting car",
    "the approaching car", "the car on the crosswalk", "the red car in the second lane", "the
    leftmost car" / "the rightmost car" (entirely left/right of every other car). An attribute
    describes only when every object of the class carries it. ``exclude`` drops attribute keys (and
    ``"position"``) that the question itself asks about.

    >>> from witness.schema import scene_record, scenes_table
    >>> t = scenes_table([scene_record("i", 100, 100, [
    ...     {"label": "car", "box": [0, 0, 10, 10], "attributes": {"color": "red"}},
    ...     {"label": "car", "box": [20, 0, 30, 10], "attributes": {"color": "red"}},
    ...     {"label": "bus", "box": [40, 0, 60, 10], "attributes": {"color": "blue"}}])])
    >>> v = scene_views(t)[0]
    >>> refer(v, 2), refer(v, 0), refer(v, 0, exclude=["position"])
    ('the bus', 'the leftmost car', None)
    """
    for phrase, mask in _phrases(view, i, exclude):
        if int(mask.sum()) == 1 and mask[i]:
            return phrase
    return None


# --------------------------------------------------------------------------------------------
# Rule generators: one function per question type
# --------------------------------------------------------------------------------------------


def _pick(rng: np.random.Generator, seq: Sequence):
    return seq[int(rng.integers(len(seq)))]


def _fill(template: str, **kw: Any) -> str:
    a = kw.get("a")
    b = kw.get("b")
    d = kw.get("d")
    value = kw.get("value")
    n = kw.get("n")
    extra = {}
    if a is not None:
        extra.update(a=T.name(a), as_=T.plural(a), an_a=T.with_article(a), a_cap=T.capitalize(T.name(a)),
                     an_a_cap=T.capitalize(T.with_article(a)))
    if b is not None:
        extra.update(b=T.name(b), bs=T.plural(b))
    if d is not None:
        extra.update(d=d, d_cap=T.capitalize(d))
    if value is not None:
        extra.update(value=value, value_cap=T.capitalize(str(value)))
    if n is not None:
        extra.update(n=n, n_word=T.number_word(n), n_word_cap=T.capitalize(T.number_word(n)))
    merged = {**kw, **extra}
    return T.capitalize(template.format(**merged))


def _q(rng: np.random.Generator, kind: str, **kw: Any) -> str:
    return _fill(_pick(rng, T.QUESTION_TEMPLATES[kind]), **kw)


def _a(rng: np.random.Generator, kind: str, **kw: Any) -> str:
    return _fill(_pick(rng, T.ANSWER_TEMPLATES[kind]), **kw)


def _yes_no(rng: np.random.Generator, truth: bool) -> str:
    return _a(rng, "yes" if truth else "no")


def _present_things(view: SceneView) -> list[str]:
    """Classes of single objects in the scene, without those that also have a crowd region (their
    number of instances is unknown, so they are not counted, compared or ranked)."""
    return sorted(set(view.labels[view.things].tolist()) - _crowd_classes(view))


def _crowd_classes(view: SceneView) -> set[str]:
    return set(view.labels[view.crowd].tolist())


def _existence(view: SceneView, rng: np.random.Generator, ctx: RuleContext) -> list[Draft]:
    out = []
    present = sorted(set(view.labels.tolist()))
    if present:
        a = _pick(rng, present)
        idx = tuple(np.flatnonzero(view.labels == a).tolist())
        kind = "existence_yes" if len(idx) == 1 else "existence_yes_many"
        out.append(Draft("existence", _q(rng, "existence", a=a), _a(rng, kind, a=a), idx, targets=(a,)))
    absent = [c for c in ctx.vocab if c not in set(present)]
    if absent:
        b = _pick(rng, absent)
        out.append(Draft("existence", _q(rng, "existence", a=b), _a(rng, "existence_no", a=b), (), targets=(b,)))
    return out


def _count_answer(rng: np.random.Generator, n: int, a: str, desc: str | None = None) -> str:
    if desc is None:
        return _a(rng, "count_one" if n == 1 else "count", a=a, n=n)
    return _a(rng, "count_attr_one" if n == 1 else "count_attr", a=a, n=n, desc=desc)


def _filters(view: SceneView, cand: np.ndarray) -> list[tuple[str, str, np.ndarray]]:
    """Attribute filters (key, adjective, mask) defined for every candidate object."""
    out = []
    for key in ("color", "motion", "direction"):
        vals = view.attr(key)
        if not cand.any() or any(v is None for v in vals[cand]):
            continue
        for v in sorted(set(vals[cand].tolist())):
            out.append((key, str(v), cand & (vals == v)))
    return out


def _counting(view: SceneView, rng: np.random.Generator, ctx: RuleContext) -> list[Draft]:
    out = []
    for a in _present_things(view):
        idx = tuple(np.flatnonzero(view.labels == a).tolist())
        out.append(Draft("counting", _q(rng, "counting", a=a), _count_answer(rng, len(idx), a), idx, len(idx), (a,)))
    absent = [c for c in ctx.things_vocab if c not in set(view.labels.tolist())]
    if absent:
        b = _pick(rng, absent)
        out.append(Draft("counting", _q(rng, "counting", a=b), _count_answer(rng, 0, b), (), 0, (b,)))
    options = []
    for a in _present_things(view):
        options.extend((a, desc, mask) for _key, desc, mask in _filters(view, view.labels == a))
    if options:
        a, desc, mask = _pick(rng, options)
        idx = tuple(np.flatnonzero(mask).tolist())
        out.append(Draft("counting", _q(rng, "counting_attr", a=a, desc=desc),
                         _count_answer(rng, len(idx), a, desc), idx, len(idx), (a,)))
    return out


def _comparison(view: SceneView, rng: np.random.Generator, ctx: RuleContext) -> list[Draft]:
    present = _present_things(view)
    if not present or len(ctx.things_vocab) < 2:
        return []
    a = _pick(rng, present)
    others = [c for c in ctx.things_vocab if c != a and c not in _crowd_classes(view)]
    if not others:
        return []
    # prefer a second class that is present; an absent one (count 0) a third of the time
    present_others = [c for c in present if c != a]
    b = _pick(rng, present_others) if present_others and rng.random() < 2 / 3 else _pick(rng, others)
    na, nb = int((view.labels == a).sum()), int((view.labels == b).sum())
    relation = _pick(rng, ("more", "fewer", "equal"))
    truth = {"more": na > nb, "fewer": na < nb, "equal": na == nb}[relation]
    idx = tuple(np.flatnonzero((view.labels == a) | (view.labels == b)).tolist())
    q = _q(rng, f"comparison_{relation}", a=a, b=b)
    return [Draft("comparison", q, _yes_no(rng, truth), idx, None, (a, b), relation)]


def _unique_value(view: SceneView, cand: np.ndarray) -> list[tuple[str, str, int]]:
    """(key, phrase, object) where exactly one candidate has that attribute value."""
    out = []
    phrases = {"color": "{v}", "motion": "{v}", "direction": "{v}", "area": "on the {v}"}
    for key, pattern in phrases.items():
        vals = view.attr(key)
        if not cand.any() or any(v is None for v in vals[cand]):
            continue
        for v in sorted(set(vals[cand].tolist())):
            hit = np.flatnonzero(cand & (vals == v))
            if len(hit) == 1:
                out.append((key, pattern.format(v=v), int(hit[0])))
    return out


def _identification(view: SceneView, rng: np.random.Generator, ctx: RuleContext) -> list[Draft]:
    # a crowd region competes ("the largest object" may be a crowd of people) but is never the answer
    things = view.things | view.crowd
    options: list[tuple[str, dict, int]] = []
    i = _largest(view, things)
    if i is not None:
        options.append(("identification_largest", {}, i))
    for side in ("left", "right"):
        i = _extreme(view, things, side)
        if i is not None:
            options.append((f"identification_{side}most", {}, i))
    for _key, phrase, i in _unique_value(view, things):
        if things.sum() >= 2:
            options.append(("identification_unique", {"desc": phrase}, i))
    dist = _crosswalk_distance(view)
    if dist is not None and things.sum() >= 2:
        cand = np.flatnonzero(things)
        k = nearest_unique(dist[cand], NEAREST_MARGIN * view.width)
        if k is not None:
            options.append(("identification_nearest", {}, int(cand[k])))
    options = [o for o in options if not view.crowd[o[2]]]
    if not options:
        return []
    kind, kw, i = _pick(rng, options)
    lab = view.labels[i]
    return [Draft("identification", _q(rng, kind, **kw), _a(rng, "class", a=lab), (i,), targets=(lab,))]


def _selection(view: SceneView, rng: np.random.Generator, ctx: RuleContext) -> list[Draft]:
    options: list[tuple[str, dict, int, tuple[str, ...]]] = []
    for a in _present_things(view):
        same = view.labels == a
        if same.sum() < 2:
            continue
        for sup in ("largest", "leftmost", "rightmost"):
            i = _largest(view, same) if sup == "largest" else _extreme(view, same, sup[:-4])
            if i is not None:
                options.append(("selection_superlative", {"a": a, "sup": sup}, i, ("position",)))
    vehicles = view.things & np.isin(view.labels, list(VEHICLE_LABELS))
    group, group_pl, cand = ("vehicle", "vehicles", vehicles) if vehicles.sum() >= 2 else ("object", "objects", view.things)
    if cand.sum() >= 2:
        for key, phrase, i in _unique_value(view, cand):
            options.append(("selection_unique", {"group": group, "group_pl": group_pl, "desc": phrase}, i, (key,)))
    rng.shuffle(options)
    for kind, kw, i, exclude in options:
        d = refer(view, i, exclude=exclude)
        if d is None:
            continue
        lab = view.labels[i]
        return [Draft("selection", _q(rng, kind, **kw), _a(rng, "description", d=d), (i,), targets=(lab,))]
    return []


def _value_phrase(key: str, value: str) -> str | None:
    if key == "lane":
        word = T.ordinal(int(value)) if str(value).isdigit() else None
        return f"the {word} lane from the left" if word else None
    if key == "area":
        return f"on the {value}"
    return str(value)


def _attribute(view: SceneView, rng: np.random.Generator, ctx: RuleContext) -> list[Draft]:
    out = []
    keys = [k for k in ("color", "motion", "direction", "lane", "area") if k in view.attrs]
    order = rng.permutation(len(keys)) if keys else []
    for k in order:
        key = keys[int(k)]
        vals = view.attr(key)
        cand = np.flatnonzero(view.things & np.array([v is not None for v in vals], dtype=bool))
        rng.shuffle(cand)
        for i in cand:
            x = refer(view, int(i), exclude=(key,))
            value = _value_phrase(key, vals[i])
            if x is None or value is None:
                continue
            lab = view.labels[i]
            q = _q(rng, f"attribute_{key}", x=x)
            out.append(Draft("attribute", q, _a(rng, "value", value=value), (int(i),), targets=(lab,)))
            break
        if len(out) == 2:
            break
    return out


def _spatial(view: SceneView, rng: np.random.Generator, ctx: RuleContext) -> list[Draft]:
    options: list[Callable[[], Draft | None]] = []
    things = np.flatnonzero(view.things)
    refs = {int(i): refer(view, int(i), exclude=("position",)) for i in things}
    named = [i for i, r in refs.items() if r is not None]
    if len(named) >= 2:
        lo = left_of(view.boxes)
        pairs = [(i, j) for i in named for j in named if i < j and (lo[i, j] or lo[j, i])]
        if pairs:
            def left_right(pairs=pairs, lo=lo) -> Draft:
                i, j = _pick(rng, pairs)
                if rng.random() < 0.5:
                    i, j = j, i
                side = _pick(rng, ("left", "right"))
                truth = bool(lo[i, j]) if side == "left" else bool(lo[j, i])
                q = _q(rng, f"spatial_{side}", x=refs[i], y=refs[j])
                return Draft("spatial", q, _yes_no(rng, truth), (i, j), targets=(view.labels[i], view.labels[j]))
            options.append(left_right)
    if (view.labels == "crosswalk").any():
        present = _present_things(view)
        if present:
            def crossing_count(present=present) -> Draft:
                on = on_crosswalk(view)
                a = "pedestrian" if "pedestrian" in present and rng.random() < 0.6 else _pick(rng, present)
                idx = tuple(np.flatnonzero(on & (view.labels == a)).tolist())
                kind = "spatial_on_crosswalk" if (view.labels == "crosswalk").sum() == 1 else "spatial_on_crosswalks"
                return Draft("spatial", _q(rng, kind, a=a), _count_answer(rng, len(idx), a),
                             idx, len(idx), (a,))
            options.append(crossing_count)
    dist = _crosswalk_distance(view)
    if dist is not None:
        near = []
        for a in _present_things(view):
            cand = np.flatnonzero(view.labels == a)
            if len(cand) < 2:
                continue
            k = nearest_unique(dist[cand], NEAREST_MARGIN * view.width)
            if k is not None:
                d = refer(view, int(cand[k]), exclude=("position", "area"))
                if d is not None:
                    near.append((a, int(cand[k]), d))
        if near:
            def nearest(near=near) -> Draft:
                a, i, d = _pick(rng, near)
                return Draft("spatial", _q(rng, "spatial_nearest", a=a), _a(rng, "description", d=d), (i,), targets=(a,))
            options.append(nearest)
    out = []
    for k in rng.permutation(len(options))[:2] if options else []:
        out.append(options[int(k)]())
    return out


#: The rule generators by question type: ``fn(view, rng, ctx) -> list[Draft]``.
RULES: dict[str, Callable[[SceneView, np.random.Generator, Any], list[Draft]]] = {
    "existence": _existence,
    "counting": _counting,
    "comparison": _comparison,
    "identification": _identification,
    "selection": _selection,
    "attribute": _attribute,
    "spatial": _spatial,
}
#: The built-in rule types, in drafting order.
RULE_TYPES: tuple[str, ...] = tuple(RULES)


def register_rule(name: str, fn: Callable[[SceneView, np.random.Generator, Any], list[Draft]]) -> None:
    """Register a rule generator ``fn(view, rng, ctx) -> list[Draft]`` under ``name``."""
    RULES[name] = fn


def get_rule(name: str) -> Callable[[SceneView, np.random.Generator, Any], list[Draft]]:
    """A registered rule by name, or a ``module:attr`` path to one.

    >>> get_rule("counting").__name__
    '_counting'
    >>> get_rule("nonsense")
    Traceback (most recent call last):
    ...
    witness.errors.UnknownNameError: Unknown question type 'nonsense'. Expected one of ['attribute', 'comparison', 'counting', 'existence', 'identification', 'selection', 'spatial'] or 'module:attr'.
    """
    if name in RULES:
        return RULES[name]
    if ":" in name:
        mod, _, attr = name.partition(":")
        try:
            return getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError) as exc:
            raise InputError(f"Expected an importable rule 'module:attr', got {name!r} ({exc}). Check the path.") from exc
    raise UnknownNameError("question type", name, list(RULES))


def _parse_types(types: str | Iterable[str] | None) -> list[str]:
    if types is None:
        return list(RULE_TYPES)
    if isinstance(types, str):
        types = [t for t in types.split(",")]
    out = [t.strip() for t in types if t and t.strip()]
    if not out:
        raise InputError(f"Expected at least one question type from {list(RULES)}, got none. Name the types to draft.")
    for t in out:
        get_rule(t)
    return out


def _context(views: list[SceneView]) -> RuleContext:
    vocab = sorted({str(x) for v in views for x in v.labels.tolist()})
    colors = sorted({str(c) for v in views for c in v.attr("color").tolist() if c is not None})
    return RuleContext(tuple(vocab), tuple(c for c in vocab if c not in REGION_LABELS), tuple(colors))


def drafts_to_items(
    view: SceneView, drafts: Sequence[Draft], *, drafted_by: str = "rules", id_fn: Callable[[Draft, int], str] | None = None,
    pair: Callable[[int], tuple[str | None, int | None]] | None = None,
) -> list[dict]:
    """Item rows (:func:`witness.schema.item_record`) for the drafts of one scene.

    Ids are ``<image_id>:<qtype>:<k>``, ``k`` counting from 0 within the qtype, unless ``id_fn``
    says otherwise; boxes and labels are those of the evidence objects, in ``idx`` order.
    """
    rows = []
    seen: dict[str, int] = {}
    for n, d in enumerate(drafts):
        k = seen.get(d.qtype, 0)
        seen[d.qtype] = k + 1
        item_id = id_fn(d, n) if id_fn else f"{view.image_id}:{d.qtype}:{k}"
        idx = list(d.idx)
        pair_id, role = pair(n) if pair else (None, None)
        rows.append(
            item_record(
                item_id, view.image_id, view.width, view.height, d.question, d.answer,
                view.boxes[idx].tolist() if idx else [], view.labels[idx].tolist() if idx else [],
                image=view.image, count=d.count, qtype=d.qtype,
                category=d.category or QTYPE_CATEGORY.get(d.qtype or ""), targets=d.targets, relation=d.relation,
                pair_id=pair_id, pair_role=role, split=view.split, source=view.source or "",
                provenance={"drafted_by": drafted_by},
            )
        )
    return rows


def _round_robin(drafts: list[Draft], limit: int, rng: np.random.Generator) -> list[Draft]:
    by_type: dict[str, list[Draft]] = {}
    for d in drafts:
        by_type.setdefault(d.qtype, []).append(d)
    order = list(by_type)
    rng.shuffle(order)
    picked: list[Draft] = []
    while len(picked) < limit and any(by_type.values()):
        for t in order:
            if by_type[t] and len(picked) < limit:
                picked.append(by_type[t].pop(0))
    keep = set(map(id, picked))
    return [d for d in drafts if id(d) in keep]


def draft_rules(
    scenes: pa.Table,
    *,
    types: str | Iterable[str] | None = None,
    seed: int = 0,
    per_image: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> pa.Table:
    """Draft grounded questions from a scenes table by rule; return an items table (ITEM_SCHEMA).

    ``types``: question types from :data:`RULE_TYPES` (or ``module:attr`` rules), default all.
    ``per_image``: at most this many questions per image, taken round-robin across types.
    ``progress``: called with the number of scenes just drafted (for a progress bar).
    Every answer and evidence set follows from the annotations (see the module docstring); the
    output passes :func:`witness.schema.validate_items`. Deterministic for a seed.

    >>> from witness.schema import scene_record, scenes_table
    >>> scenes = scenes_table([scene_record("img1", 640, 480, [
    ...     {"label": "car", "box": [10, 10, 60, 40]}, {"label": "car", "box": [100, 10, 150, 40]},
    ...     {"label": "truck", "box": [300, 10, 400, 90]}])])
    >>> items = draft_rules(scenes, types="counting")
    >>> [(q, c) for q, c in zip(items.column("id").to_pylist(), items.column("count").to_pylist())]
    [('img1:counting:0', 2), ('img1:counting:1', 1)]
    """
    if per_image is not None and (not isinstance(per_image, (int, np.integer)) or per_image < 1):
        raise InputError(f"Expected per_image to be a positive integer, got {per_image!r}. Pass e.g. per_image=10.")
    names = _parse_types(types)
    rules = [get_rule(t) for t in names]
    views = scene_views(scenes)
    ctx = _context(views)
    rows: list[dict] = []
    for view in views:
        rng = scene_rng(seed, view.image_id)
        drafts: list[Draft] = []
        for rule in rules:
            drafts.extend(rule(view, rng, ctx))
        if per_image is not None and len(drafts) > per_image:
            drafts = _round_robin(drafts, int(per_image), rng)
        rows.extend(drafts_to_items(view, drafts))
        if progress is not None:
            progress(1)
    table = items_table(rows)
    bad = sorted({q for q in table.column("qtype").to_pylist() if q not in QTYPES})
    if bad:
        raise InputError(f"Expected rules to draft qtypes from {list(QTYPES)}, got {bad}. Fix the rule's Draft.qtype.")
    return validate_items(table)[0]


def summarize_drafts(items: pa.Table) -> DraftSummary:
    """Counts per qtype and category (null counted as ``"none"``); grounded share = items with ≥ 1 evidence box; multi-box share
    = items with ≥ 2 boxes (both over all items; NaN for an empty table).

    >>> from witness.schema import item_record, items_table
    >>> s = summarize_drafts(items_table([item_record("a", "i", 9, 9, "q?", "no", qtype="existence")]))
    >>> s.per_qtype, s.grounded_share
    ({'existence': 1}, 0.0)
    """
    n = items.num_rows
    n_boxes = pc.fill_null(pc.list_value_length(items.column("boxes")), 0).to_numpy(zero_copy_only=False)
    per_q: dict[str, int] = {}
    for q in items.column("qtype").to_pylist():
        per_q[q or "none"] = per_q.get(q or "none", 0) + 1
    per_c: dict[str, int] = {}
    for c in items.column("category").to_pylist():
        per_c[c or "none"] = per_c.get(c or "none", 0) + 1
    pairs = {p for p in items.column("pair_id").to_pylist() if p is not None}
    return DraftSummary(
        n_items=n,
        n_images=len(set(items.column("image_id").to_pylist())),
        per_qtype=per_q,
        per_category=per_c,
        grounded_share=float((n_boxes > 0).mean()) if n else float("nan"),
        multi_box_share=float((n_boxes > 1).mean()) if n else float("nan"),
        n_pairs=len(pairs),
    )
