"""Geometry: the one place where box conventions are converted, compared and matched.

Inside witness every box is absolute pixel ``xyxy`` (``[x1, y1, x2, y2]``, float). Conversions to
and from other conventions live here and nowhere else:

========================  ==========================================================================
convention                meaning
========================  ==========================================================================
pixel ``xyxy``            corners in pixels of the original image (witness's own)
COCO ``xywh``             top-left corner, width, height, pixels
Label Studio percent      ``x, y, width, height`` as percent (0–100) of the *original* image size
0–1000 grid               integers, ``round_half_up(v / size * 1000)``, clipped to ``[0, 1000]``
0–1 normalized            ``v / size``
y-before-x                ``[y1, x1, y2, x2]`` (Gemini, PaliGemma)
========================  ==========================================================================

All functions take array-likes of shape ``(N, 4)`` (or ``(4,)``) and return float64 numpy arrays.
The IoU/GIoU matrices are vectorized over both sets; the matchers implement the three matchings of
the metric contract:

* :func:`match_max_iou` — the assignment maximizing total IoU (Hungarian, scipy), a pair counting
  when its IoU reaches the threshold (AGC, ECPO).
* :func:`match_max_cardinality` — the one-to-one matching maximizing the *number* of pairs with
  IoU ≥ threshold (AESP precision / recall).
* :func:`match_greedy_giou` — the official gRefCOCO evaluator's greedy matching, highest
  generalized IoU first while it is ≥ threshold (GREC).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

__all__ = [
    "as_boxes",
    "xyxy_to_xywh",
    "xywh_to_xyxy",
    "xyxy_to_percent",
    "percent_to_xyxy",
    "xyxy_to_grid",
    "grid_to_xyxy",
    "xyxy_to_normalized",
    "normalized_to_xyxy",
    "swap_xy",
    "shift_boxes",
    "box_area",
    "box_centers",
    "clip_boxes",
    "iou_matrix",
    "giou_matrix",
    "centers_inside",
    "Match",
    "match_max_iou",
    "match_max_cardinality",
    "match_greedy_giou",
    "f1_at_iou",
    "sort_boxes_reading_order",
]

GRID = 1000


def as_boxes(boxes, *, name: str = "boxes") -> np.ndarray:
    """Return ``boxes`` as a float64 ``(N, 4)`` array; an empty input gives shape ``(0, 4)``.

    >>> as_boxes([[0, 0, 1, 1]]).shape
    (1, 4)
    >>> as_boxes([]).shape
    (0, 4)
    >>> as_boxes([[1, 2, 3]])
    Traceback (most recent call last):
    ...
    ValueError: Expected boxes of shape (N, 4), got (1, 3).
    """
    arr = np.asarray(boxes, dtype=np.float64)
    if arr.size == 0:
        return np.zeros((0, 4), dtype=np.float64)
    if arr.ndim == 1 and arr.shape[0] == 4:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != 4:
        raise ValueError(f"Expected {name} of shape (N, 4), got {arr.shape}.")
    return arr


def xyxy_to_xywh(boxes) -> np.ndarray:
    """Pixel corners to COCO ``[x, y, w, h]``.

    >>> xyxy_to_xywh([[10, 20, 30, 60]]).tolist()
    [[10.0, 20.0, 20.0, 40.0]]
    """
    b = as_boxes(boxes).copy()
    b[:, 2:] -= b[:, :2]
    return b


def xywh_to_xyxy(boxes) -> np.ndarray:
    """COCO ``[x, y, w, h]`` to pixel corners.

    >>> xywh_to_xyxy([[10, 20, 20, 40]]).tolist()
    [[10.0, 20.0, 30.0, 60.0]]
    """
    b = as_boxes(boxes).copy()
    b[:, 2:] += b[:, :2]
    return b


def xyxy_to_percent(boxes, width: float, height: float) -> np.ndarray:
    """Pixel corners to Label Studio ``[x, y, width, height]`` in percent of the original size.

    >>> xyxy_to_percent([[80, 60, 280, 180]], 800, 600).tolist()
    [[10.0, 10.0, 25.0, 20.0]]
    """
    b = xyxy_to_xywh(boxes)
    return b * (100.0 / np.array([width, height, width, height], dtype=np.float64))


def percent_to_xyxy(boxes, width: float, height: float) -> np.ndarray:
    """Label Studio percent ``[x, y, width, height]`` to pixel corners.

    >>> percent_to_xyxy([[10, 10, 25, 20]], 800, 600).tolist()
    [[80.0, 60.0, 280.0, 180.0]]
    """
    b = as_boxes(boxes) * (np.array([width, height, width, height], dtype=np.float64) / 100.0)
    return xywh_to_xyxy(b)


def xyxy_to_grid(boxes, width: float, height: float, *, grid: int = GRID) -> np.ndarray:
    """Pixel corners to integers on the 0–``grid`` grid (Qwen-VL style, EtA serialization).

    Rounding rule: ``floor(v / size * grid + 0.5)`` (round half up, never banker's rounding),
    clipped to ``[0, grid]``. The round trip through :func:`grid_to_xyxy` is exact to half a grid
    step (``size / (2 * grid)`` pixels).

    >>> xyxy_to_grid([[0, 0, 640, 480]], 640, 480).tolist()
    [[0, 0, 1000, 1000]]
    >>> xyxy_to_grid([[1, 1, 3, 3]], 2000, 2000).tolist()  # 0.5 and 1.5 round up
    [[1, 1, 2, 2]]
    """
    b = as_boxes(boxes) / np.array([width, height, width, height], dtype=np.float64) * grid
    return np.clip(np.floor(b + 0.5), 0, grid).astype(np.int64)


def grid_to_xyxy(boxes, width: float, height: float, *, grid: int = GRID) -> np.ndarray:
    """Integers on the 0–``grid`` grid to pixel corners: ``v / grid * size``.

    >>> grid_to_xyxy([[0, 0, 1000, 500]], 640, 480).tolist()
    [[0.0, 0.0, 640.0, 240.0]]
    """
    return as_boxes(boxes) / grid * np.array([width, height, width, height], dtype=np.float64)


def xyxy_to_normalized(boxes, width: float, height: float) -> np.ndarray:
    """Pixel corners to 0–1 normalized corners.

    >>> xyxy_to_normalized([[64, 48, 320, 240]], 640, 480).tolist()
    [[0.1, 0.1, 0.5, 0.5]]
    """
    return as_boxes(boxes) / np.array([width, height, width, height], dtype=np.float64)


def normalized_to_xyxy(boxes, width: float, height: float) -> np.ndarray:
    """0–1 normalized corners to pixel corners.

    >>> normalized_to_xyxy([[0.1, 0.1, 0.5, 0.5]], 640, 480).tolist()
    [[64.0, 48.0, 320.0, 240.0]]
    """
    return as_boxes(boxes) * np.array([width, height, width, height], dtype=np.float64)


def swap_xy(boxes) -> np.ndarray:
    """``[x1, y1, x2, y2]`` ↔ ``[y1, x1, y2, x2]`` (its own inverse; Gemini, PaliGemma order).

    >>> swap_xy([[1, 2, 3, 4]]).tolist()
    [[2.0, 1.0, 4.0, 3.0]]
    """
    return as_boxes(boxes)[:, [1, 0, 3, 2]]


def shift_boxes(boxes, dx: float, dy: float) -> np.ndarray:
    """Translate boxes by ``(dx, dy)`` pixels (e.g. remove the padding of a square-padded image).

    >>> shift_boxes([[10, 90, 20, 100]], 0, -80).tolist()
    [[10.0, 10.0, 20.0, 20.0]]
    """
    return as_boxes(boxes) + np.array([dx, dy, dx, dy], dtype=np.float64)


def box_area(boxes) -> np.ndarray:
    """Areas of pixel ``xyxy`` boxes (zero for degenerate boxes).

    >>> box_area([[0, 0, 2, 3]]).tolist()
    [6.0]
    """
    b = as_boxes(boxes)
    return np.clip(b[:, 2] - b[:, 0], 0, None) * np.clip(b[:, 3] - b[:, 1], 0, None)


def box_centers(boxes) -> np.ndarray:
    """Centres ``(N, 2)`` of ``xyxy`` boxes.

    >>> box_centers([[0, 0, 2, 4]]).tolist()
    [[1.0, 2.0]]
    """
    b = as_boxes(boxes)
    return np.stack([(b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2], axis=1)


def clip_boxes(boxes, width: float, height: float) -> np.ndarray:
    """Clip ``xyxy`` boxes to the image.

    >>> clip_boxes([[-1, 5, 11, 8]], 10, 10).tolist()
    [[0.0, 5.0, 10.0, 8.0]]
    """
    b = as_boxes(boxes).copy()
    b[:, [0, 2]] = np.clip(b[:, [0, 2]], 0, width)
    b[:, [1, 3]] = np.clip(b[:, [1, 3]], 0, height)
    return b


def iou_matrix(a, b) -> np.ndarray:
    """Intersection over union of every box of ``a`` (N) with every box of ``b`` (M): ``(N, M)``.

    ``IoU = |A ∩ B| / |A ∪ B|``; a pair whose union is empty has IoU 0.

    >>> iou_matrix([[0, 0, 2, 2]], [[1, 1, 3, 3], [0, 0, 2, 2]]).round(4).tolist()
    [[0.1429, 1.0]]
    """
    a, b = as_boxes(a, name="a"), as_boxes(b, name="b")
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)), dtype=np.float64)
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = np.clip(rb - lt, 0, None)
    inter = wh[..., 0] * wh[..., 1]
    union = box_area(a)[:, None] + box_area(b)[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, inter / union, 0.0)


def giou_matrix(a, b) -> np.ndarray:
    """Generalized IoU (Rezatofighi et al., 2019): ``IoU - |C \\ (A ∪ B)| / |C|``, C the hull box.

    Values lie in ``[-1, 1]``.

    >>> giou_matrix([[0, 0, 1, 1]], [[2, 0, 3, 1]]).round(4).tolist()
    [[-0.3333]]
    """
    a, b = as_boxes(a, name="a"), as_boxes(b, name="b")
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)), dtype=np.float64)
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = np.clip(rb - lt, 0, None)
    inter = wh[..., 0] * wh[..., 1]
    union = box_area(a)[:, None] + box_area(b)[None, :] - inter
    hull_wh = np.clip(np.maximum(a[:, None, 2:], b[None, :, 2:]) - np.minimum(a[:, None, :2], b[None, :, :2]), 0, None)
    hull = hull_wh[..., 0] * hull_wh[..., 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = np.where(union > 0, inter / union, 0.0)
        return np.where(hull > 0, iou - (hull - union) / hull, iou)


def centers_inside(boxes, regions) -> np.ndarray:
    """``(N, M)`` booleans: is the centre of ``boxes[i]`` inside ``regions[j]`` (borders included)?

    AESP's coverage test: a reference instance is covered when its centre lies in a predicted box.

    >>> centers_inside([[0, 0, 2, 2], [8, 8, 10, 10]], [[0, 0, 5, 5]]).tolist()
    [[True], [False]]
    """
    c = box_centers(boxes)
    r = as_boxes(regions, name="regions")
    if len(c) == 0 or len(r) == 0:
        return np.zeros((len(c), len(r)), dtype=bool)
    return (
        (c[:, None, 0] >= r[None, :, 0])
        & (c[:, None, 0] <= r[None, :, 2])
        & (c[:, None, 1] >= r[None, :, 1])
        & (c[:, None, 1] <= r[None, :, 3])
    )


@dataclass(frozen=True)
class Match:
    """A one-to-one matching of predictions (rows) to references (columns).

    ``pred_idx[k]`` is matched to ``ref_idx[k]`` with overlap ``ious[k]``; only pairs that reach the
    threshold are kept, so ``tp == len(pred_idx)``.
    """

    pred_idx: np.ndarray
    ref_idx: np.ndarray
    ious: np.ndarray
    n_pred: int
    n_ref: int

    @property
    def tp(self) -> int:
        return int(len(self.pred_idx))

    @property
    def fp(self) -> int:
        return self.n_pred - self.tp

    @property
    def fn(self) -> int:
        return self.n_ref - self.tp

    @property
    def f1(self) -> float:
        """``2 TP / (|B̂| + |B*|)``; 1.0 when both sets are empty."""
        denom = self.n_pred + self.n_ref
        return 1.0 if denom == 0 else 2.0 * self.tp / denom


def _empty_match(n_pred: int, n_ref: int) -> Match:
    z = np.zeros(0, dtype=np.int64)
    return Match(z, z, np.zeros(0), n_pred, n_ref)


def match_max_iou(pred, ref, *, iou: float = 0.5, overlaps: np.ndarray | None = None) -> Match:
    """``M_τ``: the assignment maximizing total IoU (Hungarian), keeping pairs with IoU ≥ ``iou``.

    This is the matching of the AGC suite and of the ECPO coverage reward (RoadSceneVQA-G).

    >>> m = match_max_iou([[0, 0, 10, 10], [20, 20, 30, 30]], [[0, 0, 10, 11]])
    >>> m.tp, m.fp, m.fn
    (1, 1, 0)
    """
    ov = iou_matrix(pred, ref) if overlaps is None else overlaps
    n_pred, n_ref = ov.shape
    if n_pred == 0 or n_ref == 0:
        return _empty_match(n_pred, n_ref)
    rows, cols = linear_sum_assignment(ov, maximize=True)
    vals = ov[rows, cols]
    keep = vals >= iou
    return Match(rows[keep], cols[keep], vals[keep], n_pred, n_ref)


def match_max_cardinality(pred, ref, *, iou: float = 0.5, overlaps: np.ndarray | None = None) -> Match:
    """The one-to-one matching maximizing the number of pairs with IoU ≥ ``iou`` (AESP).

    Among matchings of maximum size it prefers the one with the largest total IoU.

    >>> ov = np.array([[0.99, 0.5], [0.5, 0.3]])
    >>> match_max_iou(None, None, overlaps=ov).tp  # total IoU pairs (0, 0) and (1, 1): one counts
    1
    >>> match_max_cardinality(None, None, overlaps=ov).tp  # (0, 1) and (1, 0) both reach 0.5
    2
    """
    ov = iou_matrix(pred, ref) if overlaps is None else overlaps
    n_pred, n_ref = ov.shape
    if n_pred == 0 or n_ref == 0:
        return _empty_match(n_pred, n_ref)
    ok = ov >= iou
    if not ok.any():
        return _empty_match(n_pred, n_ref)
    # Each admissible edge is worth more than any sum of IoUs, so the cardinality wins first.
    weight = np.where(ok, (min(n_pred, n_ref) + 1.0) + ov, 0.0)
    rows, cols = linear_sum_assignment(weight, maximize=True)
    keep = ok[rows, cols]
    return Match(rows[keep], cols[keep], ov[rows, cols][keep], n_pred, n_ref)


def match_greedy_giou(pred, ref, *, iou: float = 0.5) -> Match:
    """The official gRefCOCO evaluator's matching: repeatedly take the highest remaining GIoU pair
    while it is ≥ ``iou``, removing its row and column (ties: first in row-major order, as
    ``torch.topk`` over the flattened matrix does for distinct values).

    >>> m = match_greedy_giou([[0, 0, 10, 10], [50, 50, 60, 60]], [[0, 0, 10, 10]])
    >>> m.tp, m.fp
    (1, 1)
    """
    g = giou_matrix(pred, ref)
    n_pred, n_ref = g.shape
    if n_pred == 0 or n_ref == 0:
        return _empty_match(n_pred, n_ref)
    g = g.copy()
    rows, cols, vals = [], [], []
    for _ in range(min(n_pred, n_ref)):
        k = int(np.argmax(g))
        r, c = divmod(k, n_ref)
        v = g[r, c]
        if v < iou:
            break
        rows.append(r)
        cols.append(c)
        vals.append(v)
        g[r, :] = -np.inf
        g[:, c] = -np.inf
    return Match(np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64), np.asarray(vals), n_pred, n_ref)


def f1_at_iou(pred, ref, *, iou: float = 0.5) -> float:
    """F1 of ``M_iou(pred, ref)``: ``2 TP / (|B̂| + |B*|)``; two empty sets give 1.0.

    >>> f1_at_iou([], [])
    1.0
    >>> f1_at_iou([[0, 0, 1, 1]], [])
    0.0
    """
    return match_max_iou(pred, ref, iou=iou).f1


def sort_boxes_reading_order(boxes) -> np.ndarray:
    """Indices that sort boxes by ``(y1, x1)`` — the EtA serialization order.

    >>> sort_boxes_reading_order([[5, 5, 6, 6], [0, 5, 1, 6], [9, 0, 10, 1]]).tolist()
    [2, 1, 0]
    """
    b = as_boxes(boxes)
    return np.lexsort((b[:, 0], b[:, 1]))
