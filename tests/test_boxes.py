"""Geometry properties (hypothesis) and reference checks: conversions round-trip, IoU/GIoU bounds,
matchings against brute force over all permutations, IoU against a naive loop."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from witness import boxes as B

SIZE = st.integers(min_value=1, max_value=4000)
COORD = st.floats(min_value=0, max_value=1, allow_nan=False, allow_infinity=False)


@st.composite
def image_and_boxes(draw, min_n: int = 1, max_n: int = 6):
    """An image size and boxes with positive size inside it (pixel xyxy)."""
    w, h = draw(SIZE), draw(SIZE)
    n = draw(st.integers(min_n, max_n))
    out = []
    for _ in range(n):
        xs = sorted(draw(st.lists(COORD, min_size=2, max_size=2, unique=True)))
        ys = sorted(draw(st.lists(COORD, min_size=2, max_size=2, unique=True)))
        out.append([xs[0] * w, ys[0] * h, xs[1] * w, ys[1] * h])
    return w, h, np.asarray(out, dtype=np.float64)


@st.composite
def box_sets(draw, max_n: int = 5, grid: int = 20):
    """Two small sets of boxes on a coarse integer grid (many overlaps and ties)."""

    def one():
        x1 = draw(st.integers(0, grid - 1))
        y1 = draw(st.integers(0, grid - 1))
        return [x1, y1, draw(st.integers(x1 + 1, grid)), draw(st.integers(y1 + 1, grid))]

    a = [one() for _ in range(draw(st.integers(0, max_n)))]
    b = [one() for _ in range(draw(st.integers(0, max_n)))]
    return np.asarray(a, dtype=np.float64).reshape(-1, 4), np.asarray(b, dtype=np.float64).reshape(-1, 4)


# ------------------------------------------------------------------------------ conversions


@given(image_and_boxes())
def test_xywh_round_trip(case) -> None:
    _, _, b = case
    np.testing.assert_allclose(B.xywh_to_xyxy(B.xyxy_to_xywh(b)), b, rtol=1e-12, atol=1e-9)


@given(image_and_boxes())
def test_percent_round_trip(case) -> None:
    w, h, b = case
    p = B.xyxy_to_percent(b, w, h)
    assert (p >= -1e-9).all() and (p <= 100 + 1e-9).all()
    np.testing.assert_allclose(B.percent_to_xyxy(p, w, h), b, rtol=1e-9, atol=1e-7)


@given(image_and_boxes())
def test_normalized_round_trip(case) -> None:
    w, h, b = case
    n = B.xyxy_to_normalized(b, w, h)
    assert (n >= 0).all() and (n <= 1 + 1e-12).all()
    np.testing.assert_allclose(B.normalized_to_xyxy(n, w, h), b, rtol=1e-9, atol=1e-7)


@given(image_and_boxes())
def test_grid_round_trip_within_half_a_step(case) -> None:
    w, h, b = case
    g = B.xyxy_to_grid(b, w, h)
    assert g.dtype == np.int64 and (g >= 0).all() and (g <= 1000).all()
    back = B.grid_to_xyxy(g, w, h)
    half = np.array([w, h, w, h]) / 2000.0
    assert (np.abs(back - b) <= half + 1e-9).all()
    np.testing.assert_array_equal(B.xyxy_to_grid(back, w, h), g)  # grid -> pixels -> grid is exact


@given(image_and_boxes())
def test_swap_xy_is_an_involution(case) -> None:
    _, _, b = case
    np.testing.assert_array_equal(B.swap_xy(B.swap_xy(b)), b)
    np.testing.assert_array_equal(B.swap_xy(b)[:, 0], b[:, 1])


def test_grid_rounds_half_up_and_clips() -> None:
    assert B.xyxy_to_grid([[0.5, 1.5, 2.5, 3.5]], 1000, 1000).tolist() == [[1, 2, 3, 4]]
    assert B.xyxy_to_grid([[-5, -5, 1200, 1100]], 1000, 1000).tolist() == [[0, 0, 1000, 1000]]


def test_as_boxes_shapes_and_error() -> None:
    assert B.as_boxes([1, 2, 3, 4]).shape == (1, 4)
    assert B.as_boxes(np.zeros((0,))).shape == (0, 4)
    with pytest.raises(ValueError, match=r"Expected boxes of shape \(N, 4\), got \(2, 3\)"):
        B.as_boxes([[1, 2, 3], [4, 5, 6]])
    with pytest.raises(ValueError, match=r"Expected a of shape \(N, 4\)"):
        B.iou_matrix([[1, 2]], [[0, 0, 1, 1]])


@given(image_and_boxes())
def test_clip_keeps_inside_boxes_and_bounds_others(case) -> None:
    w, h, b = case
    np.testing.assert_allclose(B.clip_boxes(b, w, h), b)
    big = b + np.array([-w, -h, w, h])
    c = B.clip_boxes(big, w, h)
    assert (c[:, [0, 1]] >= 0).all() and (c[:, 2] <= w).all() and (c[:, 3] <= h).all()


# ------------------------------------------------------------------------------ IoU / GIoU


def _naive_iou(a, b) -> np.ndarray:
    out = np.zeros((len(a), len(b)))
    for i, p in enumerate(a):
        for j, q in enumerate(b):
            iw = max(0.0, min(p[2], q[2]) - max(p[0], q[0]))
            ih = max(0.0, min(p[3], q[3]) - max(p[1], q[1]))
            inter = iw * ih
            union = (p[2] - p[0]) * (p[3] - p[1]) + (q[2] - q[0]) * (q[3] - q[1]) - inter
            out[i, j] = inter / union if union > 0 else 0.0
    return out


@given(box_sets(max_n=6))
def test_iou_matrix_matches_naive_loop(sets) -> None:
    a, b = sets
    np.testing.assert_allclose(B.iou_matrix(a, b), _naive_iou(a, b), atol=1e-12)


@given(box_sets(max_n=6))
def test_iou_symmetric_bounded_and_one_on_identical(sets) -> None:
    a, b = sets
    m = B.iou_matrix(a, b)
    assert m.shape == (len(a), len(b))
    np.testing.assert_allclose(m, B.iou_matrix(b, a).T)
    assert (m >= 0).all() and (m <= 1 + 1e-12).all()
    if len(a):
        np.testing.assert_allclose(np.diag(B.iou_matrix(a, a)), 1.0)


@given(box_sets(max_n=6))
def test_giou_bounded_symmetric_below_iou(sets) -> None:
    a, b = sets
    g = B.giou_matrix(a, b)
    assert (g >= -1 - 1e-12).all() and (g <= 1 + 1e-12).all()
    np.testing.assert_allclose(g, B.giou_matrix(b, a).T)
    assert (g <= B.iou_matrix(a, b) + 1e-12).all()
    if len(a):
        np.testing.assert_allclose(np.diag(B.giou_matrix(a, a)), 1.0)


def test_iou_of_degenerate_boxes_is_zero() -> None:
    assert B.iou_matrix([[0, 0, 0, 0]], [[0, 0, 0, 0]]).tolist() == [[0.0]]


@given(box_sets(max_n=4))
def test_centers_inside_matches_definition(sets) -> None:
    a, b = sets
    m = B.centers_inside(a, b)
    c = B.box_centers(a)
    for i in range(len(a)):
        for j in range(len(b)):
            inside = b[j, 0] <= c[i, 0] <= b[j, 2] and b[j, 1] <= c[i, 1] <= b[j, 3]
            assert m[i, j] == inside


# ------------------------------------------------------------------------------ matchings


def _assignments(n: int, m: int):
    """Every maximal one-to-one assignment of rows to columns as a list of (row, col) pairs."""
    if n <= m:
        for cols in itertools.permutations(range(m), n):
            yield list(zip(range(n), cols, strict=True))
    else:
        for rows in itertools.permutations(range(n), m):
            yield list(zip(rows, range(m), strict=True))


def _brute_max_total(ov: np.ndarray) -> float:
    n, m = ov.shape
    if n == 0 or m == 0:
        return 0.0
    return max(sum(ov[i, j] for i, j in pairs) for pairs in _assignments(n, m))


def _brute_max_count(ov: np.ndarray, thr: float) -> int:
    n, m = ov.shape
    if n == 0 or m == 0:
        return 0
    return max(sum(ov[i, j] >= thr for i, j in pairs) for pairs in _assignments(n, m))


def _check_one_to_one(match: B.Match) -> None:
    assert len(set(match.pred_idx.tolist())) == len(match.pred_idx)
    assert len(set(match.ref_idx.tolist())) == len(match.ref_idx)


@settings(max_examples=150)
@given(box_sets(max_n=5))
def test_match_max_iou_against_brute_force(sets) -> None:
    a, b = sets
    ov = B.iou_matrix(a, b)
    every = B.match_max_iou(a, b, iou=0.0)  # keeps every assigned pair: the total is the optimum
    _check_one_to_one(every)
    assert every.tp == min(len(a), len(b))
    assert every.ious.sum() == pytest.approx(_brute_max_total(ov), abs=1e-9)
    m = B.match_max_iou(a, b, iou=0.5)
    _check_one_to_one(m)
    assert (m.ious >= 0.5).all()
    np.testing.assert_allclose(m.ious, ov[m.pred_idx, m.ref_idx])
    assert m.tp <= _brute_max_count(ov, 0.5)
    assert m.tp + m.fp == len(a) and m.tp + m.fn == len(b)


@settings(max_examples=150)
@given(box_sets(max_n=5))
def test_match_max_cardinality_against_brute_force(sets) -> None:
    a, b = sets
    ov = B.iou_matrix(a, b)
    m = B.match_max_cardinality(a, b, iou=0.5)
    _check_one_to_one(m)
    assert (m.ious >= 0.5).all()
    assert m.tp == _brute_max_count(ov, 0.5)
    assert m.tp >= B.match_max_iou(a, b, iou=0.5).tp


@given(box_sets(max_n=5))
def test_match_greedy_giou_against_naive_greedy(sets) -> None:
    a, b = sets
    g = B.giou_matrix(a, b)
    m = B.match_greedy_giou(a, b, iou=0.5)
    _check_one_to_one(m)
    # naive: repeatedly take the best remaining pair (first in row-major order on ties)
    used_r, used_c, want = set(), set(), []
    while True:
        best = None
        for i in range(len(a)):
            for j in range(len(b)):
                if i in used_r or j in used_c:
                    continue
                if best is None or g[i, j] > g[best]:
                    best = (i, j)
        if best is None or g[best] < 0.5:
            break
        want.append(best)
        used_r.add(best[0])
        used_c.add(best[1])
    assert list(zip(m.pred_idx.tolist(), m.ref_idx.tolist(), strict=True)) == want


def test_match_counts_and_f1() -> None:
    m = B.match_max_iou([[0, 0, 10, 10], [20, 20, 30, 30]], [[0, 0, 10, 10]])
    assert (m.tp, m.fp, m.fn) == (1, 1, 0)
    assert m.f1 == pytest.approx(2 / 3)
    assert B.f1_at_iou([], []) == 1.0
    assert B.f1_at_iou([], [[0, 0, 1, 1]]) == 0.0
    assert B.match_max_cardinality([], [[0, 0, 1, 1]]).fn == 1
    assert B.match_max_cardinality([[0, 0, 1, 1]], [[5, 5, 6, 6]]).tp == 0
    assert B.match_greedy_giou([], []).f1 == 1.0


def test_cardinality_beats_total_iou_on_the_documented_case() -> None:
    ov = np.array([[0.99, 0.5], [0.5, 0.3]])
    assert B.match_max_iou(None, None, overlaps=ov).tp == 1
    assert B.match_max_cardinality(None, None, overlaps=ov).tp == 2


@given(box_sets(max_n=6))
def test_reading_order_sorts_by_y_then_x(sets) -> None:
    a, _ = sets
    order = B.sort_boxes_reading_order(a)
    keys = [(a[i, 1], a[i, 0]) for i in order]
    assert keys == sorted(keys)


@given(image_and_boxes())
def test_area_and_centers(case) -> None:
    _, _, b = case
    np.testing.assert_allclose(B.box_area(b), (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]))
    c = B.box_centers(b)
    assert ((c[:, 0] >= b[:, 0]) & (c[:, 0] <= b[:, 2])).all()


@given(image_and_boxes(), st.floats(-500, 500), st.floats(-500, 500))
def test_shift_round_trip_keeps_size(case, dx: float, dy: float) -> None:
    _, _, b = case
    s = B.shift_boxes(b, dx, dy)
    np.testing.assert_allclose(B.shift_boxes(s, -dx, -dy), b, atol=1e-9)
    np.testing.assert_allclose(B.box_area(s), B.box_area(b), rtol=1e-6, atol=1e-6)
