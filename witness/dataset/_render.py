"""Drawing helpers of the demo scenes: a pinhole camera over a flat road and PIL primitives.

World frame (metres): ``u`` across the road (right positive), ``d`` along the road away from the
camera, ``z`` up. The camera stands at ``(0, 0, height)``, yawed right by ``yaw`` and pitched down by
``pitch`` (radians); image ``x`` grows right, ``y`` grows down.

Every drawn object is first drawn into its own transparent layer; the layer's alpha bounding box is
the object's box, so boxes are tight around the drawn pixels by construction.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from PIL import Image, ImageDraw

__all__ = ["Camera", "Layer", "shade", "prism_faces", "signed_area"]

RGB = tuple[int, int, int]


class Camera:
    """A pitched and yawed pinhole camera above the ground plane ``z = 0``.

    >>> cam = Camera(height=8.0, pitch=0.25, yaw=0.0, focal=700.0, cx=480.0, cy=270.0)
    >>> x, y = cam.project([[0.0, 1e6, 0.0]])[0]
    >>> round(float(x), 1), round(float(y), 1) == round(270 - 700 * math.tan(0.25), 1)
    (480.0, True)
    """

    def __init__(self, height: float, pitch: float, yaw: float, focal: float, cx: float, cy: float):
        self.height, self.pitch, self.yaw, self.focal, self.cx, self.cy = height, pitch, yaw, focal, cx, cy
        sp, cp, sy, cyw = math.sin(pitch), math.cos(pitch), math.sin(yaw), math.cos(yaw)
        # rows: right, up, forward
        self.rot = np.array([[cyw, -sy, 0.0], [sy * sp, cyw * sp, cp], [sy * cp, cyw * cp, -sp]])
        self.horizon_y = cy - focal * math.tan(pitch)

    def project(self, pts) -> np.ndarray:
        """``(N, 3)`` world points ``(u, d, z)`` to ``(N, 2)`` image pixels."""
        p = np.asarray(pts, dtype=np.float64).reshape(-1, 3) - np.array([0.0, 0.0, self.height])
        c = p @ self.rot.T
        zc = np.maximum(c[:, 2], 1e-3)
        return np.stack([self.cx + self.focal * c[:, 0] / zc, self.cy - self.focal * c[:, 1] / zc], axis=1)

    def scale(self, u: float, d: float, z: float = 0.0) -> float:
        """Pixels per metre across the road at ``(u, d, z)``."""
        a, b = self.project([[u, d, z], [u + 1.0, d, z]])
        return float(np.hypot(*(b - a)))


def shade(color: Sequence[int], k: float) -> RGB:
    """``color`` scaled by ``k`` and clipped to 0..255.

    >>> shade((100, 200, 250), 1.2)
    (120, 240, 255)
    """
    return tuple(int(min(255, max(0, round(c * k)))) for c in color)  # type: ignore[return-value]


def prism_faces(u0, u1, d0, d1, z0, z1, top_inset=(0.0, 0.0, 0.0, 0.0)) -> dict[str, np.ndarray]:
    """The six faces of a box (or frustum: ``top_inset`` = left, right, near, far metres moved in at
    the top), each as a ``(4, 3)`` array wound counter-clockwise seen from outside.

    >>> sorted(prism_faces(0, 1, 0, 1, 0, 1))
    ['bottom', 'far', 'left', 'near', 'right', 'top']
    """
    il, ir, inn, ifar = top_inset
    b = [(u0, d0, z0), (u1, d0, z0), (u1, d1, z0), (u0, d1, z0)]
    t = [(u0 + il, d0 + inn, z1), (u1 - ir, d0 + inn, z1), (u1 - ir, d1 - ifar, z1), (u0 + il, d1 - ifar, z1)]
    f = {
        "top": [t[0], t[1], t[2], t[3]],
        "bottom": [b[3], b[2], b[1], b[0]],
        "near": [b[0], b[1], t[1], t[0]],
        "far": [b[2], b[3], t[3], t[2]],
        "left": [b[3], b[0], t[0], t[3]],
        "right": [b[1], b[2], t[2], t[1]],
    }
    return {k: np.asarray(v, dtype=np.float64) for k, v in f.items()}


def signed_area(xy: np.ndarray) -> float:
    """Shoelace area of a polygon; negative for a face that faces the camera (image y points down).

    >>> signed_area(np.array([[0, 0], [2, 0], [2, 2], [0, 2]]))
    4.0
    """
    x, y = xy[:, 0], xy[:, 1]
    return 0.5 * float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))


class Layer:
    """Draw operations in image pixels, collected, then drawn into a transparent layer and pasted.

    :meth:`paste` returns the tight box ``[x1, y1, x2, y2]`` (continuous pixels) of what was
    drawn, clipped to the canvas, or ``None`` when nothing landed on it.
    """

    def __init__(self, cam: Camera):
        self.cam = cam
        self.ops: list[tuple] = []
        self.pts: list[np.ndarray] = []

    def poly(self, xy: np.ndarray, fill: RGB) -> None:
        xy = np.round(np.asarray(xy, dtype=np.float64)).reshape(-1, 2)
        self.ops.append(("poly", xy, fill))
        self.pts.append(xy)

    def face(self, pts3: np.ndarray, fill: RGB, *, cull: bool = True) -> None:
        """Project a 3D face; drawn only when it faces the camera (``cull``)."""
        xy = self.cam.project(pts3)
        if cull and signed_area(xy) >= 0:  # image y points down: outward CCW faces come out negative
            return
        self.poly(xy, fill)

    def prism(self, faces: dict[str, np.ndarray], colors: dict[str, RGB]) -> None:
        for name in ("far", "bottom", "right", "left", "near", "top"):
            if name in colors:
                self.face(faces[name], colors[name])

    def line(self, xy: np.ndarray, fill: RGB, width: int = 1) -> None:
        xy = np.round(np.asarray(xy, dtype=np.float64)).reshape(-1, 2)
        self.ops.append(("line", xy, fill, max(1, int(width))))
        self.pts.append(xy + width)
        self.pts.append(xy - width)

    def ellipse(self, cx: float, cy: float, rx: float, ry: float, fill: RGB) -> None:
        box = np.round([[cx - rx, cy - ry], [cx + rx, cy + ry]])
        if box[1, 0] <= box[0, 0]:
            box[1, 0] = box[0, 0] + 1
        if box[1, 1] <= box[0, 1]:
            box[1, 1] = box[0, 1] + 1
        self.ops.append(("ellipse", box, fill))
        self.pts.append(box)

    def paste(self, canvas: Image.Image) -> list[float] | None:
        if not self.ops:
            return None
        allp = np.concatenate(self.pts)
        x0, y0 = np.floor(allp.min(axis=0)).astype(int) - 2
        x1, y1 = np.ceil(allp.max(axis=0)).astype(int) + 3
        x0, y0 = max(x0, -4), max(y0, -4)
        x1, y1 = min(x1, canvas.width + 4), min(y1, canvas.height + 4)
        if x1 <= x0 or y1 <= y0:
            return None
        layer = Image.new("RGBA", (int(x1 - x0), int(y1 - y0)), (0, 0, 0, 0))
        dr = ImageDraw.Draw(layer)
        off = np.array([x0, y0])
        for op in self.ops:
            kind = op[0]
            if kind == "poly":
                xy = [tuple(p) for p in (op[1] - off).astype(int).tolist()]
                if len(xy) >= 3:
                    dr.polygon(xy, fill=op[2] + (255,))
                elif xy:
                    dr.line(xy, fill=op[2] + (255,))
            elif kind == "line":
                xy = [tuple(p) for p in (op[1] - off).astype(int).tolist()]
                dr.line(xy, fill=op[2] + (255,), width=op[3])
            else:
                (a, b), (c, e) = (op[1] - off).astype(int).tolist()
                dr.ellipse([a, b, c, e], fill=op[2] + (255,))
        bbox = layer.getchannel("A").getbbox()
        if bbox is None:
            return None
        canvas.paste(layer, (int(x0), int(y0)), layer)
        bx0, by0, bx1, by1 = bbox[0] + x0, bbox[1] + y0, bbox[2] + x0, bbox[3] + y0
        bx0, by0 = max(bx0, 0), max(by0, 0)
        bx1, by1 = min(bx1, canvas.width), min(by1, canvas.height)
        if bx1 <= bx0 or by1 <= by0:
            return None
        return [float(bx0), float(by0), float(bx1), float(by1)]
