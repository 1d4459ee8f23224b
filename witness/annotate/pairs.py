"""Logically equivalent question pairs drafted by rule (ConVBench / ConVLM, ``shared/papers/003``).

ConVBench pairs two questions on one image whose answers determine each other:
``a₁ ← f(I, q₂, a₂, q₁)`` and ``a₂ ← f(I, q₁, a₁, q₂)``. Its proposer is an LVLM; here the pairs are
drafted from the annotations, so both answers and both evidence sets follow exactly from the
scene, and the derivation ``f`` is a fixed relation per pair kind (:data:`PAIR_KINDS`):

========================  ==========================================================  ========  ======================  ==========================
kind                      example (question 1 / question 2)                           answers   ``category``            ConVBench category
========================  ==========================================================  ========  ======================  ==========================
comparison_more_fewer     Are there more cars than trucks? / ... fewer trucks than    same      enumeration             Complex Counting (CC)
                          cars?
comparison_equal          Are there as many cars as trucks? / Is the number of        same      enumeration             Complex Counting (CC)
                          trucks equal to the number of cars?
spatial_left_right        Is the bus left of the van? / Is the van right of the bus?  same      spatial_reasoning       Spatial Reasoning (SR)
existence_free            Is there a cyclist? / Is the scene free of cyclists?        opposite  existence               — (nearest: CC, a count ≥ 1)
attribute_color_same      Is the bus red? / Is the colour of the bus red?             same      attribute_recognition   — (witness extension)
attribute_color_negated   Is the bus red? / Is the bus not red?                       opposite  attribute_recognition   — (witness extension)
state_motion              Is the car moving? / Is the car waiting?                    opposite  behavioral_reasoning    Action and State (AS)
state_direction           Is the car approaching? / Is the car receding?              opposite  behavioral_reasoning    Action and State (AS)
========================  ==========================================================  ========  ======================  ==========================

Every answer is "Yes." or "No."; :func:`pair_answers_consistent` checks that answer 2 follows from
answer 1 by the kind's relation, recovering the kind from the two question texts. Both items of a
pair carry the kind's ``qtype``, except the negated existence question (role 2 of
``existence_free``), whose ``qtype`` is null: AESP scores ``existence`` items as "yes means an
instance is present", which that question inverts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

import numpy as np
import pyarrow as pa

from ..errors import InputError, UnknownNameError
from ..schema import items_table, validate_items
from . import templates as T
from .rules import (
    Draft,
    SceneView,
    _context,
    _crowd_classes,
    _pick,
    _present_things,
    drafts_to_items,
    left_of,
    refer,
    scene_rng,
    scene_views,
)

__all__ = [
    "PairKind",
    "PAIR_KINDS",
    "PAIR_CATEGORIES",
    "CONVBENCH_CATEGORIES",
    "COLORS",
    "draft_pairs",
    "pair_kind",
    "yes_no",
    "derive_answer",
    "pair_answers_consistent",
]

#: ConVBench's six categories (abbreviation -> name).
CONVBENCH_CATEGORIES: dict[str, str] = {
    "AS": "Action and State",
    "CC": "Complex Counting",
    "SR": "Spatial Reasoning",
    "CI": "Causal and Intent",
    "CR": "Commonsense Reasoning",
    "TP": "Temporal Perception",
}

#: Colours asked about when the scene's own colours are too few (the demo palette).
COLORS: tuple[str, ...] = ("red", "white", "black", "blue", "silver", "yellow", "green")


@dataclass(frozen=True)
class PairKind:
    """One kind of pair: its question type, category (Table III), ConVBench category and relation.

    ``relation`` is ``"same"`` (answer 2 = answer 1) or ``"opposite"`` (yes <-> no). ``qtype2`` is
    the qtype of question 2 where it differs: the negated existence question ("Is the scene free of
    cyclists?") has none, because AESP reads an ``existence`` item as "yes means present".
    """

    name: str
    qtype: str
    category: str
    convbench: str | None
    relation: str
    qtype2: str | None = "same"

    @property
    def qtype_of_role2(self) -> str | None:
        return self.qtype if self.qtype2 == "same" else self.qtype2


#: The pair kinds, keyed by name (see the module docstring).
PAIR_KINDS: dict[str, PairKind] = {
    k.name: k
    for k in (
        PairKind("comparison_more_fewer", "comparison", "enumeration", "CC", "same"),
        PairKind("comparison_equal", "comparison", "enumeration", "CC", "same"),
        PairKind("spatial_left_right", "spatial", "spatial_reasoning", "SR", "same"),
        PairKind("existence_free", "existence", "existence", None, "opposite", qtype2=None),
        PairKind("attribute_color_same", "attribute", "attribute_recognition", None, "same"),
        PairKind("attribute_color_negated", "attribute", "attribute_recognition", None, "opposite"),
        PairKind("state_motion", "attribute", "behavioral_reasoning", "AS", "opposite"),
        PairKind("state_direction", "attribute", "behavioral_reasoning", "AS", "opposite"),
    )
}

#: The categories pairs can carry, in drafting order.
PAIR_CATEGORIES: tuple[str, ...] = (
    "enumeration",
    "spatial_reasoning",
    "existence",
    "attribute_recognition",
    "behavioral_reasoning",
)

_REGEX = {
    name: [(T.template_regex(q1), T.template_regex(q2)) for q1, q2 in T.PAIR_TEMPLATES[name]]
    for name in PAIR_KINDS
}


def yes_no(answer: str | None) -> bool | None:
    """Read a yes/no answer: True for "yes…", False for "no…", None otherwise.

    >>> yes_no("Yes."), yes_no(" no, there is none"), yes_no("maybe")
    (True, False, None)
    """
    if answer is None:
        return None
    words = answer.strip().lower().replace(",", " ").replace(".", " ").split()
    if not words:
        return None
    return True if words[0] == "yes" else False if words[0] == "no" else None


def _field(item: Mapping | object, key: str):
    return item[key] if isinstance(item, Mapping) else getattr(item, key)


def pair_kind(item1: Mapping, item2: Mapping) -> PairKind:
    """The :class:`PairKind` whose templates produce both questions (role 1, role 2).

    Raises :class:`InputError` when no kind, or kinds with different relations, match.

    >>> pair_kind({"question": "Is the bus left of the van?"}, {"question": "Is the van right of the bus?"}).name
    'spatial_left_right'
    """
    q1, q2 = str(_field(item1, "question")), str(_field(item2, "question"))
    hits = [
        PAIR_KINDS[name]
        for name, pats in _REGEX.items()
        if any(r1.fullmatch(q1) and r2.fullmatch(q2) for r1, r2 in pats)
    ]
    if not hits:
        raise InputError(
            f"Expected a question pair drafted from witness's pair templates, got {q1!r} / {q2!r}. "
            "Pass items from draft_pairs in role order (1, 2)."
        )
    if len({h.relation for h in hits}) > 1:
        raise InputError(
            f"Expected a question pair of one kind, got {q1!r} / {q2!r} matching {[h.name for h in hits]}. "
            "Reword one question."
        )
    return hits[0]


def derive_answer(answer1: str, kind: PairKind | str) -> str:
    """Answer 2 from answer 1 by the kind's relation: same -> unchanged yes/no, opposite -> flipped.

    >>> derive_answer("Yes.", "existence_free"), derive_answer("No.", "spatial_left_right")
    ('No.', 'No.')
    """
    k = PAIR_KINDS[kind] if isinstance(kind, str) else kind
    v = yes_no(answer1)
    if v is None:
        raise InputError(f"Expected a yes/no answer 1, got {answer1!r} (pair kind {k.name!r}). Answer yes or no.")
    return "Yes." if (v if k.relation == "same" else not v) else "No."


def pair_answers_consistent(item1: Mapping, item2: Mapping) -> bool:
    """True when answer 2 follows from answer 1 (ConVBench: ``a₂ ← f(I, q₁, a₁, q₂)``).

    ``f`` is the relation of :func:`pair_kind` (``same``: a₂ = a₁; ``opposite``: a₂ = ¬a₁), read on
    yes/no answers. Items are mappings with ``question`` and ``answer`` (rows of an items table).

    >>> pair_answers_consistent({"question": "Is there a bus in the image?", "answer": "Yes."},
    ...                         {"question": "Is the scene free of buses?", "answer": "No."})
    True
    """
    kind = pair_kind(item1, item2)
    a2 = yes_no(str(_field(item2, "answer")))
    if a2 is None:
        raise InputError(f"Expected a yes/no answer 2, got {_field(item2, 'answer')!r} (pair kind {kind.name!r}). Answer yes or no.")
    return derive_answer(str(_field(item1, "answer")), kind) == ("Yes." if a2 else "No.")


# --------------------------------------------------------------------------------------------
# Drafting
# --------------------------------------------------------------------------------------------


def _yn(v: bool) -> str:
    return "Yes." if v else "No."


def _fill(template: str, **kw) -> str:
    extra = {}
    for key, cls in (("a", kw.get("a")), ("b", kw.get("b"))):
        if cls is not None:
            extra[key] = T.name(cls)
            extra["as_" if key == "a" else "bs"] = T.plural(cls)
            if key == "a":
                extra["an_a"] = T.with_article(cls)
    return T.capitalize(template.format(**{**kw, **extra}))


def _pair(rng, kind: str, **kw) -> tuple[str, str]:
    q1, q2 = _pick(rng, T.PAIR_TEMPLATES[kind])
    return _fill(q1, **kw), _fill(q2, **kw)


def _make(kind: str, q1: str, q2: str, a1: bool, idx1, idx2, **extra) -> tuple[Draft, Draft]:
    k = PAIR_KINDS[kind]
    a2 = a1 if k.relation == "same" else not a1
    d1 = Draft(k.qtype, q1, _yn(a1), tuple(idx1), category=k.category, **extra.get("one", {}))
    d2 = Draft(k.qtype_of_role2, q2, _yn(a2), tuple(idx2), category=k.category, **extra.get("two", {}))
    return d1, d2


def _comparison_pair(view: SceneView, rng, ctx) -> tuple[Draft, Draft] | None:
    present = _present_things(view)
    if not present or len(ctx.things_vocab) < 2:
        return None
    a = _pick(rng, present)
    present_others = [c for c in present if c != a]
    others = [c for c in ctx.things_vocab if c != a and c not in _crowd_classes(view)]
    if not others:
        return None
    b = _pick(rng, present_others) if present_others and rng.random() < 2 / 3 else _pick(rng, others)
    na, nb = int((view.labels == a).sum()), int((view.labels == b).sum())
    idx = np.flatnonzero((view.labels == a) | (view.labels == b)).tolist()
    if rng.random() < (0.5 if na == nb else 0.2):
        q1, q2 = _pair(rng, "comparison_equal", a=a, b=b)
        return _make("comparison_equal", q1, q2, na == nb, idx, idx,
                     one={"targets": (a, b), "relation": "equal"}, two={"targets": (b, a), "relation": "equal"})
    q1, q2 = _pair(rng, "comparison_more_fewer", a=a, b=b)
    return _make("comparison_more_fewer", q1, q2, na > nb, idx, idx,
                 one={"targets": (a, b), "relation": "more"}, two={"targets": (b, a), "relation": "fewer"})


def _spatial_pair(view: SceneView, rng, ctx) -> tuple[Draft, Draft] | None:
    things = np.flatnonzero(view.things)
    refs = {int(i): refer(view, int(i), exclude=("position",)) for i in things}
    named = [i for i, r in refs.items() if r is not None]
    lo = left_of(view.boxes)
    cand = [(i, j) for i in named for j in named if i != j and (lo[i, j] or lo[j, i])]
    if not cand:
        return None
    i, j = _pick(rng, cand)
    q1, q2 = _pair(rng, "spatial_left_right", x=refs[i], y=refs[j])
    li, lj = view.labels[i], view.labels[j]
    return _make("spatial_left_right", q1, q2, bool(lo[i, j]), (i, j), (j, i),
                 one={"targets": (li, lj)}, two={"targets": (lj, li)})


def _existence_pair(view: SceneView, rng, ctx) -> tuple[Draft, Draft] | None:
    present = _present_things(view)
    absent = [c for c in ctx.things_vocab if c not in set(view.labels.tolist())]
    pool = present if (present and (not absent or rng.random() < 0.5)) else absent
    if not pool:
        return None
    a = _pick(rng, pool)
    idx = np.flatnonzero(view.labels == a).tolist()
    q1, q2 = _pair(rng, "existence_free", a=a)
    return _make("existence_free", q1, q2, bool(idx), idx, idx, one={"targets": (a,)}, two={"targets": (a,)})


def _color_pair(view: SceneView, rng, ctx) -> tuple[Draft, Draft] | None:
    colors = view.attr("color")
    cand = [int(i) for i in np.flatnonzero(view.things) if colors[i] is not None]
    rng.shuffle(cand)
    for i in cand:
        x = refer(view, i, exclude=("color",))
        if x is None:
            continue
        palette = sorted(set(COLORS) | set(ctx.colors))
        value = colors[i] if rng.random() < 0.5 else _pick(rng, [c for c in palette if c != colors[i]] or [colors[i]])
        kind = _pick(rng, ("attribute_color_same", "attribute_color_negated"))
        q1, q2 = _pair(rng, kind, x=x, value=value)
        lab = view.labels[i]
        return _make(kind, q1, q2, value == colors[i], (i,), (i,), one={"targets": (lab,)}, two={"targets": (lab,)})
    return None


_STATES = {"state_motion": ("motion", "moving", "waiting"), "state_direction": ("direction", "approaching", "receding")}


def _state_pair(view: SceneView, rng, ctx) -> tuple[Draft, Draft] | None:
    kinds = list(_STATES)
    rng.shuffle(kinds)
    for kind in kinds:
        key, first, second = _STATES[kind]
        vals = view.attr(key)
        cand = [int(i) for i in np.flatnonzero(view.things) if vals[i] in (first, second)]
        rng.shuffle(cand)
        for i in cand:
            x = refer(view, i, exclude=(key,))
            if x is None:
                continue
            q1, q2 = _pair(rng, kind, x=x)
            lab = view.labels[i]
            return _make(kind, q1, q2, vals[i] == first, (i,), (i,), one={"targets": (lab,)}, two={"targets": (lab,)})
    return None


_BUILDERS = {
    "enumeration": _comparison_pair,
    "spatial_reasoning": _spatial_pair,
    "existence": _existence_pair,
    "attribute_recognition": _color_pair,
    "behavioral_reasoning": _state_pair,
}


def _parse_categories(categories: str | Iterable[str] | None) -> list[str]:
    if categories is None:
        return list(PAIR_CATEGORIES)
    if isinstance(categories, str):
        categories = categories.split(",")
    out = [c.strip() for c in categories if c and c.strip()]
    if not out:
        raise InputError(f"Expected at least one pair category from {list(PAIR_CATEGORIES)}, got none. Name the categories.")
    for c in out:
        if c not in _BUILDERS:
            raise UnknownNameError("pair category", c, list(PAIR_CATEGORIES))
    return out


def draft_pairs(
    scenes: pa.Table,
    *,
    seed: int = 0,
    categories: str | Iterable[str] | None = None,
    progress: Callable[[int], None] | None = None,
) -> pa.Table:
    """Draft logically equivalent question pairs by rule; return an items table (ITEM_SCHEMA).

    Per image, at most one pair per category in ``categories`` (default :data:`PAIR_CATEGORIES`),
    where the annotations allow one. Both items of pair ``k`` share ``pair_id =
    <image_id>:pair:<k>``; their ids are ``<pair_id>:1`` and ``<pair_id>:2`` with ``pair_role`` 1
    and 2. Evidence: comparison — every instance of both classes; spatial — both objects, in the
    order the question names them; existence — every instance (empty when absent) for both;
    attribute / state — the object. Deterministic for a seed. ``progress`` is called with the
    number of scenes just drafted.

    >>> from witness.schema import scene_record, scenes_table
    >>> scenes = scenes_table([scene_record("img1", 640, 480, [
    ...     {"label": "car", "box": [10, 10, 60, 40]}, {"label": "truck", "box": [300, 10, 400, 90]}])])
    >>> t = draft_pairs(scenes, categories="spatial_reasoning")
    >>> t.column("pair_role").to_pylist(), [len(b) for b in t.column("boxes").to_pylist()]
    ([1, 2], [2, 2])
    """
    cats = _parse_categories(categories)
    views = scene_views(scenes)
    ctx = _context(views)
    rows: list[dict] = []
    for view in views:
        rng = scene_rng(seed, view.image_id)
        drafts: list[Draft] = []
        for cat in cats:
            got = _BUILDERS[cat](view, rng, ctx)
            if got is not None:
                drafts.extend(got)
        rows.extend(
            drafts_to_items(
                view, drafts, drafted_by="pairs",
                id_fn=lambda d, n, v=view: f"{v.image_id}:pair:{n // 2}:{n % 2 + 1}",
                pair=lambda n, v=view: (f"{v.image_id}:pair:{n // 2}", n % 2 + 1),
            )
        )
        if progress is not None:
            progress(1)
    return validate_items(items_table(rows))[0]
