"""Demo scenes: rendered high-angle roadside-camera images with exact, tight boxes.

The embedded default data of witness: :func:`generate_demo_scenes` renders ``n`` road scenes with
PIL, writes them as PNG files and returns a scenes table (:data:`witness.schema.SCENE_SCHEMA`,
``source = "demo"``). A pinhole camera on a pole beside the road looks down the road (far = top =
small): asphalt lanes with dashed lane lines and a double yellow centre line, zebra crossings with
stop lines, sidewalks with curbs, grass, trees, buildings and a sky band. Cars, trucks and buses
(3D boxes with windows, wheels, lights and a shadow), pedestrians (head, torso, arms, legs) and
cyclists (a rider on a two-wheeled bike) stand in the lanes, on the crossings and on the
sidewalks; scenes range from an empty road to 30+ road users.

Each object is drawn into its own transparent layer, and its box is that layer's alpha bounding
box: tight around the drawn pixels, in continuous pixel xyxy. Objects are drawn far to near and
placed so that the projected 3D extents of two objects overlap by at most 30 % of the
smaller one (the drawn boxes, slightly smaller, by at most ~35 %).

Object attributes (the rule drafter relies on these keys and values):

==============  ==================================================================================
key             values, and who has it
==============  ==================================================================================
``color``       red, white, black, blue, silver, yellow, green — vehicles and cyclists
``lane``        ``"1"`` .. ``"N"`` counted from the left of the image — vehicles and cyclists
``direction``   ``approaching`` (towards the camera) or ``receding`` — vehicles, cyclists and
                pedestrians walking along a sidewalk (not those crossing or waiting)
``motion``      ``moving`` or ``waiting`` — every road user
``area``        ``road``, ``crosswalk`` or ``sidewalk`` — every object
==============  ==================================================================================

Each zebra crossing is an object too: label ``crosswalk``, attributes ``{"area": "crosswalk"}``.
Rendering is deterministic: the same ``(seed, index)`` gives the same PNG bytes.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
from PIL import Image, ImageDraw

from ..io import atomic_path
from ..schema import scene_record, scenes_table, validate_scenes
from ._render import Camera, Layer, prism_faces, shade, signed_area

__all__ = [
    "DEMO_LABELS",
    "DEMO_COLORS",
    "LANE_WIDTH_M",
    "render_demo_scene",
    "iter_demo_scenes",
    "generate_demo_scenes",
    "demo_image_dir",
]

#: Labels of the road users the demo draws (plus ``crosswalk`` for the crossings).
DEMO_LABELS: tuple[str, ...] = ("car", "truck", "bus", "pedestrian", "cyclist")
#: Vehicle and cyclist colours: attribute value -> RGB.
DEMO_COLORS: dict[str, tuple[int, int, int]] = {
    "red": (196, 32, 36),
    "white": (236, 236, 232),
    "black": (28, 28, 32),
    "blue": (32, 76, 186),
    "silver": (168, 172, 178),
    "yellow": (236, 196, 28),
    "green": (34, 138, 62),
}
#: Width of one lane in metres.
LANE_WIDTH_M = 3.5

_SIDEWALK_M = 3.2
_ASPHALT = (78, 80, 84)
_GLASS = (52, 70, 92)
_GLASS_LIGHT = (96, 122, 146)
_TIRE = (22, 22, 24)
_SHADOW = (46, 47, 50)
_SKIN = ((236, 196, 160), (198, 150, 110), (150, 104, 70), (96, 64, 44))
_SHIRTS = ((200, 40, 40), (40, 90, 200), (240, 240, 240), (30, 30, 30), (230, 170, 30), (60, 150, 80), (150, 60, 160), (250, 120, 60))
_PANTS = ((30, 36, 60), (20, 20, 22), (120, 100, 70), (70, 70, 76))
_HAIR = ((20, 16, 12), (80, 50, 24), (200, 170, 100), (120, 120, 120))
_VEHICLE_DIMS = {"car": (4.5, 1.82, 1.5), "truck": (8.0, 2.45, 3.5), "bus": (11.5, 2.55, 3.15)}
_KIND_WEIGHTS = (("car", 0.52), ("truck", 0.1), ("bus", 0.07), ("pedestrian", 0.2), ("cyclist", 0.11))


@dataclass
class _Layout:
    cam: Camera
    width: int
    height: int
    n_lanes: int
    n_approach: int
    u_left: float
    crossings: list[float]
    d_far: float = 600.0

    @property
    def u_right(self) -> float:
        return self.u_left + self.n_lanes * LANE_WIDTH_M

    def lane_span(self, lane: int) -> tuple[float, float]:
        a = self.u_left + (lane - 1) * LANE_WIDTH_M
        return a, a + LANE_WIDTH_M

    def on_crossing(self, d0: float, d1: float, margin: float = 0.8) -> bool:
        return any(d1 > c - margin and d0 < c + 4.0 + margin for c in self.crossings)


@dataclass
class _Obj:
    kind: str
    u0: float
    u1: float
    d0: float
    d1: float
    z1: float
    attrs: dict = field(default_factory=dict)
    color: str | None = None
    front_near: bool = True
    walking: bool = True
    est: np.ndarray | None = None


# ------------------------------------------------------------------------------------------------
# Background
# ------------------------------------------------------------------------------------------------


def _ground_quad(cam: Camera, u0: float, u1: float, d0: float, d1: float, z: float = 0.0) -> np.ndarray:
    return np.round(cam.project([[u0, d0, z], [u1, d0, z], [u1, d1, z], [u0, d1, z]]))


def _poly(dr: ImageDraw.ImageDraw, xy: np.ndarray, fill) -> None:
    dr.polygon([tuple(p) for p in np.round(xy).astype(int).tolist()], fill=fill)


def _draw_background(img: Image.Image, lay: _Layout, rng: np.random.Generator) -> list[dict]:
    dr = ImageDraw.Draw(img)
    cam, w, h = lay.cam, lay.width, lay.height
    hz = int(round(cam.horizon_y))
    top, bottom = np.array([118, 164, 214]), np.array([206, 222, 236])
    n_bands = 12
    for k in range(n_bands):
        y0 = int(hz * k / n_bands)
        y1 = int(hz * (k + 1) / n_bands)
        c = tuple(int(v) for v in top + (bottom - top) * (k / (n_bands - 1)))
        dr.rectangle([0, y0, w, y1], fill=c)
    dr.rectangle([0, hz, w, h], fill=(112, 132, 96))
    ul, ur = lay.u_left, lay.u_right
    # far hills / haze strip at the horizon
    dr.rectangle([0, hz - 3, w, hz + 2], fill=(150, 162, 150))
    # grass verges and pavements
    _poly(dr, _ground_quad(cam, ur + _SIDEWALK_M, ur + 60, 2, lay.d_far), (104, 138, 84))
    _poly(dr, _ground_quad(cam, ul - 60, ul - _SIDEWALK_M, 2, lay.d_far), (104, 138, 84))
    _poly(dr, _ground_quad(cam, ur, ur + _SIDEWALK_M, 2, lay.d_far), (176, 172, 164))
    _poly(dr, _ground_quad(cam, ul - _SIDEWALK_M, ul, 2, lay.d_far), (176, 172, 164))
    # paving joints on the sidewalks
    for side in ((ur, ur + _SIDEWALK_M), (ul - _SIDEWALK_M, ul)):
        for d in np.arange(4.0, 90.0, 2.5):
            _poly(dr, _ground_quad(cam, side[0], side[1], d, d + 0.06), (150, 146, 140))
    # buildings and trees (background: road users are always drawn in front of them)
    items = []
    for side in (-1, 1):
        d = float(rng.uniform(28, 45)) if side > 0 else float(rng.uniform(40, 60))
        while d < 260:
            length = float(rng.uniform(10, 28))
            depth = float(rng.uniform(10, 18))
            height = float(rng.uniform(6, 26))
            u_near = ur + _SIDEWALK_M + float(rng.uniform(4, 9)) if side > 0 else ul - _SIDEWALK_M - float(rng.uniform(4, 9))
            u0, u1 = (u_near, u_near + depth) if side > 0 else (u_near - depth, u_near)
            items.append(("building", d, (u0, u1, d, d + length, height, side)))
            d += length + float(rng.uniform(2, 10))
        d = float(rng.uniform(12, 20))
        while d < 140:
            u = ur + _SIDEWALK_M + float(rng.uniform(1.0, 2.5)) if side > 0 else ul - _SIDEWALK_M - float(rng.uniform(1.0, 2.5))
            items.append(("tree", d, (u, d)))
            d += float(rng.uniform(9, 18))
    items.sort(key=lambda t: -t[1])
    for kind, _, p in items:
        if kind == "building":
            _draw_building(img, cam, *p, rng=rng)
        else:
            _draw_tree(img, cam, *p, rng=rng)
    # road surface, curbs, markings
    _poly(dr, _ground_quad(cam, ul, ur, 2, lay.d_far), _ASPHALT)
    _poly(dr, _ground_quad(cam, ul - 0.18, ul, 2, lay.d_far), (206, 204, 198))
    _poly(dr, _ground_quad(cam, ur, ur + 0.18, 2, lay.d_far), (206, 204, 198))
    white, yellow = (232, 232, 226), (226, 190, 40)
    for u in (ul + 0.25, ur - 0.4):
        _poly(dr, _ground_quad(cam, u, u + 0.15, 2, lay.d_far), white)
    divider = ul + lay.n_approach * LANE_WIDTH_M
    for lane in range(1, lay.n_lanes):
        u = ul + lane * LANE_WIDTH_M
        if abs(u - divider) < 1e-6:
            for off in (-0.2, 0.08):
                _poly(dr, _ground_quad(cam, u + off, u + off + 0.12, 2, lay.d_far), yellow)
            continue
        for d in np.arange(2.0, 220.0, 9.0):
            if not lay.on_crossing(d, d + 3.0, margin=1.6):
                _poly(dr, _ground_quad(cam, u - 0.075, u + 0.075, d, d + 3.0), white)
    crossings = []
    for c in lay.crossings:
        for lane in range(1, lay.n_lanes + 1):  # stop lines
            a, b = lay.lane_span(lane)
            d = c + 5.2 if lane <= lay.n_approach else c - 1.6
            _poly(dr, _ground_quad(cam, a + 0.1, b - 0.1, d, d + 0.4), white)
        zebra = Layer(cam)
        u = ul + 0.35
        while u + 0.5 <= ur - 0.3:
            zebra.poly(_ground_quad(cam, u, u + 0.5, c, c + 4.0), (238, 238, 232))
            u += 1.0
        box = zebra.paste(img)
        if box is not None:
            crossings.append({"label": "crosswalk", "box": box, "attributes": {"area": "crosswalk"}})
    return crossings


def _draw_building(img, cam: Camera, u0, u1, d0, d1, height, side, *, rng) -> None:
    """A block with windows on the faces that look at the road and at the camera (no box)."""
    dr = ImageDraw.Draw(img)
    base = [(186, 170, 150), (160, 150, 140), (196, 186, 170), (140, 120, 110), (170, 176, 186), (200, 160, 120)][int(rng.integers(6))]
    faces = prism_faces(u0, u1, d0, d1, 0.0, height)
    colors = {"far": None, "right": shade(base, 0.78), "left": shade(base, 0.78), "near": shade(base, 0.92), "top": shade(base, 1.08)}
    names = [k for k, c in colors.items() if c is not None]
    xy = cam.project(np.concatenate([faces[k] for k in names])).reshape(len(names), 4, 2)
    for k, q in zip(names, xy, strict=True):
        if signed_area(q) < 0:
            _poly(dr, q, colors[k])
    u_face = u0 if side > 0 else u1
    zs = np.arange(1.4, height - 1.5, 3.2)
    quads = []
    for z in zs:
        for d in np.arange(d0 + 1.5, d1 - 1.5, 3.0):
            quads.append([[u_face, d, z], [u_face, d + 1.4, z], [u_face, d + 1.4, z + 1.5], [u_face, d, z + 1.5]])
        for u in np.arange(min(u0, u1) + 1.5, max(u0, u1) - 1.5, 3.0):
            quads.append([[u, d0, z], [u + 1.4, d0, z], [u + 1.4, d0, z + 1.5], [u, d0, z + 1.5]])
    if quads:
        for q in cam.project(np.asarray(quads).reshape(-1, 3)).reshape(-1, 4, 2):
            _poly(dr, q, (70, 86, 104))


def _draw_tree(img, cam: Camera, u, d, *, rng) -> None:
    """A trunk and a two-tone crown (no box: trees are background)."""
    dr = ImageDraw.Draw(img)
    s = cam.scale(u, d, 3.0)
    base = cam.project([[u, d, 0.0], [u, d, 3.6]])
    _poly(dr, np.array([base[0] + [-0.16 * s, 0], base[0] + [0.16 * s, 0], base[1] + [0.12 * s, 0], base[1] + [-0.12 * s, 0]]), (96, 70, 46))
    r = float(rng.uniform(1.5, 2.3)) * s
    green = [(52, 110, 52), (70, 128, 58), (44, 96, 60)][int(rng.integers(3))]
    cx, cy = base[1]
    dr.ellipse([cx - r, cy - 1.3 * r, cx + r, cy + 0.5 * r], fill=green)
    dr.ellipse([cx - 0.9 * r, cy - 1.05 * r, cx + 0.2 * r, cy - 0.05 * r], fill=shade(green, 1.2))


# ------------------------------------------------------------------------------------------------
# Road users
# ------------------------------------------------------------------------------------------------


def _along(o: _Obj, t: float) -> float:
    """``d`` of a point ``t`` metres behind the vehicle's front."""
    return o.d0 + t if o.front_near else o.d1 - t


def _span(o: _Obj, t0: float, t1: float) -> tuple[float, float]:
    a, b = _along(o, t0), _along(o, t1)
    return (a, b) if a <= b else (b, a)


def _wheel(lay: Layer, cam: Camera, u: float, d: float, r: float) -> None:
    t = np.linspace(0, 2 * math.pi, 14, endpoint=False)
    pts = np.stack([np.full_like(t, u), d + r * np.cos(t), r + r * np.sin(t)], axis=1)
    lay.face(pts, _TIRE, cull=False)
    hub = np.stack([np.full_like(t, u - 0.01), d + 0.45 * r * np.cos(t), r + 0.45 * r * np.sin(t)], axis=1)
    lay.face(hub, (150, 150, 156), cull=False)


def _draw_vehicle(img: Image.Image, cam: Camera, o: _Obj) -> list[float] | None:
    color = DEMO_COLORS[o.color or "silver"]
    L = o.d1 - o.d0
    u0, u1 = o.u0, o.u1
    dr = ImageDraw.Draw(img)
    _poly(dr, _ground_quad(cam, u0 - 0.05, u1 + 0.3, o.d0 - 0.08, o.d1 + 0.45), _SHADOW)
    lay = Layer(cam)
    side = "left" if u0 > 0 else ("right" if u1 < 0 else None)
    u_side = u0 - 0.02 if side == "left" else u1 + 0.02
    cols = lambda c: {"near": shade(c, 0.84), "left": shade(c, 0.7), "right": shade(c, 0.7), "top": shade(c, 1.06), "far": shade(c, 0.84)}  # noqa: E731
    d_near = o.d0
    # tyres under the near bumper
    for a, b in ((u0 + 0.12, u0 + 0.45), (u1 - 0.45, u1 - 0.12)):
        lay.face(np.array([[a, d_near + 0.5, 0], [b, d_near + 0.5, 0], [b, d_near + 0.5, 0.45], [a, d_near + 0.5, 0.45]]), _TIRE, cull=False)
    light = (250, 246, 206) if o.front_near else (210, 24, 24)
    if o.kind == "car":
        lay.prism(prism_faces(u0, u1, o.d0, o.d1, 0.28, 0.92, (0.02, 0.02, 0.05, 0.05)), cols(color))
        a, b = _span(o, 0.3 * L, 0.86 * L)
        ta, tb = (0.55, 0.3) if o.front_near else (0.3, 0.55)
        cab = prism_faces(u0 + 0.1, u1 - 0.1, a, b, 0.92, o.z1, (0.18, 0.18, ta, tb))
        lay.prism(cab, {"near": _GLASS_LIGHT if o.front_near else _GLASS, "left": _GLASS, "right": _GLASS, "top": shade(color, 1.1)})
        wheels = (0.78, L - 0.85)
        r = 0.34
    elif o.kind == "truck":
        cab_len = 2.2
        a, b = _span(o, 0.0, cab_len)
        ca, cb = _span(o, cab_len + 0.2, L)
        cargo = prism_faces(u0 + 0.02, u1 - 0.02, ca, cb, 1.0, o.z1)
        cabf = prism_faces(u0 + 0.08, u1 - 0.08, a, b, 0.5, 2.9, (0.05, 0.05, 0.25 if o.front_near else 0, 0 if o.front_near else 0.25))
        lay.face(np.array([[u0 + 0.3, o.d0 + 0.6, 0.5], [u1 - 0.3, o.d0 + 0.6, 0.5], [u1 - 0.3, o.d0 + 0.6, 1.0], [u0 + 0.3, o.d0 + 0.6, 1.0]]), (40, 40, 44), cull=False)
        cargo_col = {"near": shade(color, 0.8), "left": shade(color, 0.66), "right": shade(color, 0.66), "top": shade(color, 1.02)}
        parts = [(cb if o.front_near else -ca, lambda: lay.prism(cargo, cargo_col)), (b if o.front_near else -a, lambda: lay.prism(cabf, cols(color)))]
        for _, fn in sorted(parts, key=lambda p: -p[0]):
            fn()
        if o.front_near:
            lay.face(np.array([[u0 + 0.25, o.d0 + 0.02, 1.75], [u1 - 0.25, o.d0 + 0.02, 1.75], [u1 - 0.3, o.d0 + 0.2, 2.65], [u0 + 0.3, o.d0 + 0.2, 2.65]]), _GLASS_LIGHT, cull=False)
        if side:
            ws = 2.9 if o.front_near else 2.9
            sa, sb = _span(o, 0.5, 1.7)
            lay.face(np.array([[u_side, sb, 1.75], [u_side, sa, 1.75], [u_side, sa, ws - 0.3], [u_side, sb, ws - 0.3]]), _GLASS, cull=False)
        wheels = (1.2, L - 2.4, L - 1.2)
        r = 0.5
    else:  # bus
        lay.prism(prism_faces(u0, u1, o.d0, o.d1, 0.32, o.z1, (0.06, 0.06, 0.06, 0.06)), cols(color))
        if side:
            a, b = _span(o, 1.6, L - 0.5)
            lay.face(np.array([[u_side, b, 1.55], [u_side, a, 1.55], [u_side, a, 2.6], [u_side, b, 2.6]]), _GLASS, cull=False)
            for t in np.arange(2.8, L - 0.8, 1.6):  # window pillars
                pa_, pb_ = _span(o, t, t + 0.12)
                lay.face(np.array([[u_side - 0.01, pb_, 1.55], [u_side - 0.01, pa_, 1.55], [u_side - 0.01, pa_, 2.6], [u_side - 0.01, pb_, 2.6]]), shade(color, 0.7), cull=False)
        zlo, zhi = (1.2, 2.65) if o.front_near else (1.9, 2.65)
        lay.face(np.array([[u0 + 0.2, o.d0 - 0.01, zlo], [u1 - 0.2, o.d0 - 0.01, zlo], [u1 - 0.2, o.d0 - 0.01, zhi], [u0 + 0.2, o.d0 - 0.01, zhi]]), _GLASS_LIGHT if o.front_near else _GLASS, cull=False)
        if o.front_near:
            lay.face(np.array([[u0 + 0.4, o.d0 - 0.01, 2.75], [u1 - 0.4, o.d0 - 0.01, 2.75], [u1 - 0.4, o.d0 - 0.01, 2.98], [u0 + 0.4, o.d0 - 0.01, 2.98]]), (250, 180, 40), cull=False)
        wheels = (2.4, L - 2.8)
        r = 0.5
    for a, b in ((u0 + 0.15, u0 + 0.5), (u1 - 0.5, u1 - 0.15)):  # lights on the near face
        z_lo = 0.55 if o.kind == "car" else 0.7
        lay.face(np.array([[a, o.d0 - 0.02, z_lo], [b, o.d0 - 0.02, z_lo], [b, o.d0 - 0.02, z_lo + 0.16], [a, o.d0 - 0.02, z_lo + 0.16]]), light, cull=False)
    if side:
        for t in wheels:
            _wheel(lay, cam, u_side - 0.01, _along(o, t), r)
    return lay.paste(img)


def _draw_pedestrian(img: Image.Image, cam: Camera, o: _Obj, rng: np.random.Generator) -> list[float] | None:
    u, d = (o.u0 + o.u1) / 2, (o.d0 + o.d1) / 2
    height = o.z1
    foot, head = cam.project([[u, d, 0.0], [u, d, height]])
    s = cam.scale(u, d, 1.0)
    dr = ImageDraw.Draw(img)
    sh = cam.project([[u, d, 0.0]])[0]
    dr.ellipse([sh[0] - 0.35 * s, sh[1] - 0.12 * s, sh[0] + 0.45 * s, sh[1] + 0.14 * s], fill=_SHADOW)
    lay = Layer(cam)
    axis = head - foot

    def at(a: float, t: float) -> np.ndarray:  # a metres across, t fraction of the height
        return foot + t * axis + np.array([a * s, 0.0])

    shirt = _SHIRTS[int(rng.integers(len(_SHIRTS)))]
    pants = _PANTS[int(rng.integers(len(_PANTS)))]
    skin = _SKIN[int(rng.integers(len(_SKIN)))]
    hair = _HAIR[int(rng.integers(len(_HAIR)))]
    stride = 0.16 if o.walking else 0.02
    for sgn in (-1, 1):  # legs
        lay.poly(np.array([at(sgn * 0.02, 0.5), at(sgn * 0.14, 0.5), at(sgn * (0.08 + stride), 0.0), at(sgn * (stride - 0.03), 0.0)]), pants)
    lay.poly(np.array([at(-0.2, 0.8), at(0.2, 0.8), at(0.17, 0.48), at(-0.17, 0.48)]), shirt)  # torso
    swing = 0.1 if o.walking else 0.0
    for sgn in (-1, 1):  # arms
        lay.poly(np.array([at(sgn * 0.17, 0.8), at(sgn * 0.25, 0.79), at(sgn * (0.24 + swing), 0.5), at(sgn * (0.17 + swing), 0.5)]), shade(shirt, 0.85))
        hand = at(sgn * (0.21 + swing), 0.48)
        lay.ellipse(hand[0], hand[1], max(0.6, 0.045 * s), max(0.6, 0.045 * s), skin)
    hc = at(0.0, 0.9)
    hr = max(1.0, 0.12 * s)
    lay.ellipse(hc[0], hc[1], hr, hr * 1.1, skin)
    lay.ellipse(hc[0], hc[1] - 0.45 * hr, hr, hr * 0.65, hair)
    return lay.paste(img)


def _draw_cyclist(img: Image.Image, cam: Camera, o: _Obj, rng: np.random.Generator) -> list[float] | None:
    """A rider on a bike whose frame is turned ~40 degrees towards the camera, so both wheels show."""
    color = DEMO_COLORS[o.color or "red"]
    u, dc = (o.u0 + o.u1) / 2, (o.d0 + o.d1) / 2
    sgn = -1.0 if o.front_near else 1.0  # the front wheel points to -d when approaching
    phi = math.radians(40.0)
    hx, hy = -math.sin(phi), sgn * math.cos(phi)
    dr = ImageDraw.Draw(img)
    lay = Layer(cam)
    s = cam.scale(u, dc, 1.0)

    def W(t: float, z: float, a: float = 0.0) -> list[float]:  # t metres along the bike, a across
        return [u + t * hx + a * hy, dc + t * hy - a * hx, z]

    P = lambda t, z, a=0.0: cam.project([W(t, z, a)])[0]  # noqa: E731
    _poly(dr, np.round(cam.project([W(-0.95, 0, -0.15), W(0.95, 0, -0.15), W(0.95, 0, 0.35), W(-0.95, 0, 0.35)])), _SHADOW)
    wl = max(1, int(round(0.06 * s)))
    r = 0.34
    t = np.linspace(0, 2 * math.pi, 18)
    for lw in (-0.55, 0.55):
        ring = cam.project(np.array([W(lw + r * math.cos(a), r + r * math.sin(a)) for a in t]))
        lay.line(ring, _TIRE, width=max(1, int(round(0.07 * s))))
    bb, seat, bar, hub_r, hub_f = P(0.0, 0.32), P(-0.25, 0.92), P(0.43, 1.02), P(-0.55, r), P(0.55, r)
    for a, b in ((hub_r, bb), (bb, seat), (seat, hub_r), (bb, bar), (bar, hub_f), (seat, bar)):
        lay.line(np.array([a, b]), color, width=wl)
    skin = _SKIN[int(rng.integers(len(_SKIN)))]
    pants = _PANTS[int(rng.integers(len(_PANTS)))]
    hip, shoulder, knee = P(-0.23, 1.0), P(0.12, 1.5), P(0.12, 0.64)
    lay.line(np.array([hip, knee, bb]), pants, width=max(1, int(round(0.13 * s))))
    tw = 0.17 * s
    lay.poly(np.array([hip + [-tw, 0], hip + [tw, 0], shoulder + [tw, 0], shoulder + [-tw, 0]]), shade(color, 0.95))
    lay.line(np.array([shoulder, bar]), shade(color, 0.8), width=max(1, int(round(0.08 * s))))
    head = P(0.2, 1.7)
    hr = max(1.0, 0.12 * s)
    lay.ellipse(head[0], head[1], hr, hr * 1.1, skin)
    lay.ellipse(head[0], head[1] - 0.35 * hr, hr * 1.05, hr * 0.75, (235, 235, 235))  # helmet
    return lay.paste(img)


# ------------------------------------------------------------------------------------------------
# Layout and placement
# ------------------------------------------------------------------------------------------------


def _layout(rng: np.random.Generator, width: int, height: int) -> _Layout:
    n_lanes = int(rng.choice([2, 3, 4, 4]))
    n_approach = n_lanes // 2 if n_lanes % 2 == 0 else int(rng.integers(1, n_lanes))
    u_left = float(rng.uniform(1.2, 2.6))
    road_c = u_left + n_lanes * LANE_WIDTH_M / 2
    focal = width * float(rng.uniform(0.7, 0.8))
    cam = Camera(
        height=float(rng.uniform(7.0, 10.0)),
        pitch=math.radians(float(rng.uniform(13.5, 17.0))),
        yaw=math.atan2(road_c, float(rng.uniform(34, 44))),
        focal=focal,
        cx=width / 2,
        cy=height / 2,
    )
    crossings = [float(rng.uniform(20, 34))]
    if rng.random() < 0.35:
        crossings.append(crossings[0] + float(rng.uniform(26, 42)))
    return _Layout(cam, width, height, n_lanes, n_approach, u_left, crossings)


def _estimate_box(cam: Camera, o: _Obj) -> np.ndarray:
    pts = np.array([[u, d, z] for u in (o.u0 - 0.05, o.u1 + 0.05) for d in (o.d0 - 0.05, o.d1 + 0.05) for z in (0.0, o.z1 + 0.05)])
    xy = cam.project(pts)
    return np.array([xy[:, 0].min(), xy[:, 1].min(), xy[:, 0].max(), xy[:, 1].max()])


def _fits(lay: _Layout, o: _Obj, placed: list[_Obj]) -> bool:
    for p in placed:  # footprints in the world must not touch
        if o.u0 < p.u1 + 0.2 and p.u0 < o.u1 + 0.2 and o.d0 < p.d1 + 0.6 and p.d0 < o.d1 + 0.6:
            return False
    b = _estimate_box(lay.cam, o)
    if b[0] < 2 or b[1] < lay.cam.horizon_y or b[2] > lay.width - 2 or b[3] > lay.height - 2:
        return False
    if b[2] - b[0] < 4 or b[3] - b[1] < 6:
        return False
    area = (b[2] - b[0]) * (b[3] - b[1])
    for p in placed:
        q = p.est
        iw = min(b[2], q[2]) - max(b[0], q[0])
        ih = min(b[3], q[3]) - max(b[1], q[1])
        if iw > 0 and ih > 0:
            qa = (q[2] - q[0]) * (q[3] - q[1])
            if iw * ih > 0.3 * min(area, qa):
                return False
    o.est = b
    return True


def _vehicle(lay: _Layout, rng, kind: str, lane: int, d0: float, moving: bool) -> _Obj:
    L, Wd, Ht = _VEHICLE_DIMS[kind]
    L *= float(rng.uniform(0.92, 1.08))
    a, b = lay.lane_span(lane)
    c = (a + b) / 2 + float(rng.uniform(-0.35, 0.35))
    approaching = lane <= lay.n_approach
    color = str(rng.choice(list(DEMO_COLORS))) if kind == "car" else str(rng.choice(["white", "white", "silver", "red", "blue", "yellow", "green", "black"]))
    return _Obj(
        kind, c - Wd / 2, c + Wd / 2, d0, d0 + L, Ht * float(rng.uniform(0.95, 1.05)),
        {"color": color, "lane": str(lane), "direction": "approaching" if approaching else "receding",
         "motion": "moving" if moving else "waiting", "area": "road"},
        color=color, front_near=approaching,
    )


def _propose(lay: _Layout, rng: np.random.Generator, kind: str) -> _Obj | None:
    ul, ur = lay.u_left, lay.u_right
    if kind in _VEHICLE_DIMS:
        lane = int(rng.integers(1, lay.n_lanes + 1))
        d0 = float(rng.uniform(8, 115) if rng.random() < 0.7 else rng.uniform(60, 160))
        o = _vehicle(lay, rng, kind, lane, d0, True)
        return None if lay.on_crossing(o.d0, o.d1, 1.8) else o
    if kind == "cyclist":
        approaching = rng.random() < lay.n_approach / lay.n_lanes
        lane = 1 if approaching else lay.n_lanes
        a, b = lay.lane_span(lane)
        u = a + 1.0 if approaching else b - 1.0
        d0 = float(rng.uniform(8, 90))
        if lay.on_crossing(d0, d0 + 1.8, 1.0):
            return None
        color = str(rng.choice(list(DEMO_COLORS)))
        return _Obj("cyclist", u - 0.7, u + 0.7, d0, d0 + 1.8, 1.9,
                    {"color": color, "lane": str(lane), "direction": "approaching" if approaching else "receding",
                     "motion": "moving", "area": "road"}, color=color, front_near=approaching)
    # pedestrian
    r = rng.random()
    h = float(rng.uniform(1.6, 1.85))
    if r < 0.35 and lay.crossings:  # on a crossing
        c = lay.crossings[int(rng.integers(len(lay.crossings)))]
        u = float(rng.uniform(ul + 0.4, ur - 0.4))
        d = float(rng.uniform(c + 0.7, c + 3.3))
        return _Obj("pedestrian", u - 0.3, u + 0.3, d - 0.3, d + 0.3, h, {"motion": "moving", "area": "crosswalk"})
    right = rng.random() < 0.5
    u = float(rng.uniform(ur + 0.5, ur + _SIDEWALK_M - 0.4)) if right else float(rng.uniform(ul - _SIDEWALK_M + 0.4, ul - 0.5))
    if r < 0.55 and lay.crossings:  # waiting at the kerb beside a crossing
        c = lay.crossings[int(rng.integers(len(lay.crossings)))]
        d = float(rng.uniform(c + 0.6, c + 3.4))
        return _Obj("pedestrian", u - 0.3, u + 0.3, d - 0.3, d + 0.3, h, {"motion": "waiting", "area": "sidewalk"}, walking=False)
    d = float(rng.uniform(7, 75))
    return _Obj("pedestrian", u - 0.3, u + 0.3, d - 0.3, d + 0.3, h,
                {"direction": str(rng.choice(["approaching", "receding"])), "motion": "moving", "area": "sidewalk"})


def _queues(lay: _Layout, rng: np.random.Generator, placed: list[_Obj], budget: int) -> None:
    """Vehicles waiting in line at the stop lines of the crossings."""
    for c in lay.crossings:
        for lane in range(1, lay.n_lanes + 1):
            if budget <= 0 or rng.random() > 0.45:
                continue
            approaching = lane <= lay.n_approach
            edge = c + 5.8 if approaching else c - 1.9  # the stop line, on the vehicle's side
            for _ in range(int(rng.integers(1, 4))):
                kind = "car" if rng.random() < 0.8 else str(rng.choice(["truck", "bus"]))
                L = _VEHICLE_DIMS[kind][0]
                d0 = edge if approaching else edge - L
                o = _vehicle(lay, rng, kind, lane, d0, False)
                if not _fits(lay, o, placed):
                    break
                placed.append(o)
                budget -= 1
                edge = (o.d1 + float(rng.uniform(1.2, 2.5))) if approaching else (o.d0 - float(rng.uniform(1.2, 2.5)))


def _target_count(rng: np.random.Generator, index: int) -> int:
    band = index % 10  # every ten scenes: one empty road, two light, three medium, three busy, one crowded
    if band == 0:
        return 0
    if band <= 2:
        return int(rng.integers(1, 6))
    if band <= 5:
        return int(rng.integers(6, 16))
    if band <= 8:
        return int(rng.integers(16, 31))
    return int(rng.integers(31, 42))


def render_demo_scene(seed: int, index: int, *, width: int = 960, height: int = 540) -> tuple[Image.Image, list[dict]]:
    """Render demo scene ``index`` of ``seed``: the RGB image and its objects (``label``, ``box``
    in continuous pixel xyxy, ``attributes``), crossings first, then road users far to near.

    Deterministic: the generator is ``numpy.random.default_rng([seed, index])``.

    >>> img, objs = render_demo_scene(0, 3)
    >>> img.size, objs[0]["label"], objs[0]["attributes"]
    ((960, 540), 'crosswalk', {'area': 'crosswalk'})
    """
    rng = np.random.default_rng([int(seed), int(index)])
    lay = _layout(rng, width, height)
    img = Image.new("RGB", (width, height))
    objects = _draw_background(img, lay, rng)
    target = _target_count(rng, index)
    placed: list[_Obj] = []
    if target >= 4:
        _queues(lay, rng, placed, target // 3)
    kinds, weights = zip(*_KIND_WEIGHTS, strict=True)
    p = np.array(weights) / sum(weights)
    tries = 0
    while len(placed) < target and tries < 12 * target + 20:
        tries += 1
        o = _propose(lay, rng, str(rng.choice(kinds, p=p)))
        if o is not None and _fits(lay, o, placed):
            placed.append(o)
    for o in sorted(placed, key=lambda o: -o.d0):
        if o.kind in _VEHICLE_DIMS:
            box = _draw_vehicle(img, lay.cam, o)
        elif o.kind == "cyclist":
            box = _draw_cyclist(img, lay.cam, o, rng)
        else:
            box = _draw_pedestrian(img, lay.cam, o, rng)
        if box is not None and box[2] - box[0] >= 2 and box[3] - box[1] >= 2:
            objects.append({"label": o.kind, "box": box, "attributes": dict(o.attrs)})
    return img, objects


def demo_image_dir(scenes_path: str | os.PathLike) -> Path:
    """Where the images of a demo scenes file go: ``<stem>-images/`` beside it.

    >>> demo_image_dir("out/scenes.parquet").as_posix()
    'out/scenes-images'
    """
    p = Path(scenes_path)
    return p.parent / f"{p.stem}-images"


def iter_demo_scenes(
    n: int, seed: int, out_dir: str | os.PathLike, *, width: int = 960, height: int = 540, start: int = 0
) -> Iterator[dict]:
    """Render scenes ``start .. start + n - 1``, write each PNG to ``out_dir/<image_id>.png``
    (atomically, ``compress_level=1``) and yield its scene record (:func:`witness.schema.scene_record`).

    ``image_id`` is ``demo-<seed>-<index:05d>``; object ids are ``<image_id>:<k>``.
    """
    if n < 0:
        from ..errors import InputError

        raise InputError(f"Expected a number of scenes >= 0, got {n} (n). Pass --n 1 or more.")
    if width < 960 or height < 540:
        from ..errors import InputError

        raise InputError(f"Expected an image size of at least 960x540, got {width}x{height} (width, height). Use a larger size.")
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for index in range(start, start + n):
        image_id = f"demo-{seed}-{index:05d}"
        img, objs = render_demo_scene(seed, index, width=width, height=height)
        path = out / f"{image_id}.png"
        with atomic_path(path, suffix=".png") as tmp:
            img.save(tmp, format="PNG", compress_level=1)
        for k, o in enumerate(objs):
            o["id"] = f"{image_id}:{k}"
        yield scene_record(image_id, width, height, objs, image={"bytes": None, "path": str(path)}, source="demo")


def generate_demo_scenes(
    n: int, seed: int, out_dir: str | os.PathLike, *, width: int = 960, height: int = 540
) -> pa.Table:
    """Render ``n`` demo scenes into ``out_dir`` and return them as a validated scenes table.

    >>> import tempfile
    >>> t = generate_demo_scenes(2, 7, tempfile.mkdtemp())
    >>> t.num_rows, t.column("source")[0].as_py(), t.column("image_id")[1].as_py()
    (2, 'demo', 'demo-7-00001')
    """
    rows = list(iter_demo_scenes(n, seed, out_dir, width=width, height=height))
    table, _ = validate_scenes(scenes_table(rows), source=Path(out_dir))
    return table
