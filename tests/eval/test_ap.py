"""COCO AP against pycocotools' COCOeval (random data, several seeds, ties, maxDets, empty images)."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

from witness.eval.ap import ap_from_matches, coco_ap, match_coco

pytest.importorskip("pycocotools")


def _flat(list_of_arrays):
    off = np.r_[0, np.cumsum([len(a) for a in list_of_arrays])].astype(np.int64)
    flat = np.concatenate([np.asarray(a, dtype=np.float64).reshape(-1, 4) for a in list_of_arrays]) if list_of_arrays else np.zeros((0, 4))
    return flat, off


def pycoco_ap(pred, scores, ref):
    """AP, AP50 of pycocotools with sample i = image i+1, one class."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    anns, dets = [], []
    for i, r in enumerate(ref):
        for b in np.asarray(r).reshape(-1, 4).tolist():
            w, h = b[2] - b[0], b[3] - b[1]
            anns.append({"id": len(anns) + 1, "image_id": i + 1, "category_id": 1, "bbox": [b[0], b[1], w, h],
                         "area": w * h, "iscrowd": 0})
    for i, (p, s) in enumerate(zip(pred, scores, strict=False)):
        for b, sc in zip(np.asarray(p).reshape(-1, 4).tolist(), np.asarray(s).tolist(), strict=False):
            dets.append({"image_id": i + 1, "category_id": 1, "bbox": [b[0], b[1], b[2] - b[0], b[3] - b[1]], "score": sc})
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO()
        gt.dataset = {"images": [{"id": i + 1} for i in range(len(ref))], "annotations": anns,
                      "categories": [{"id": 1, "name": "x"}]}
        gt.createIndex()
        dt = gt.loadRes(dets)
        e = COCOeval(gt, dt, "bbox")
        e.evaluate()
        e.accumulate()
        e.summarize()
    return float(e.stats[0]), float(e.stats[1])


def _random(rng, n, *, dup=False, many=False):
    pred, scores, ref = [], [], []
    for _ in range(n):
        k = int(rng.choice([0, 1, 2, 4, 9]))
        xy = rng.uniform(0, 60, (k, 2))
        r = np.c_[xy, xy + rng.uniform(3, 25, (k, 2))]
        ref.append(r)
        keep = r[rng.random(k) < 0.8]
        p = keep + rng.normal(0, 1.5, keep.shape)
        m = int(rng.integers(0, 130 if many else 3))
        exy = rng.uniform(0, 60, (m, 2))
        p = np.r_[p, np.c_[exy, exy + rng.uniform(3, 25, (m, 2))]]
        p[:, 2:] = np.maximum(p[:, 2:], p[:, :2] + 0.25)
        if dup and len(p):
            p = np.r_[p, p[:1], p[:1]]  # identical boxes: equal IoUs, equal scores
        pred.append(p)
        scores.append(rng.choice([0.2, 0.5, 0.9], len(p)) if rng.random() < 0.6 else rng.random(len(p)))
    return pred, scores, ref


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_ap_equals_pycocotools_random(seed):
    rng = np.random.default_rng(seed)
    pred, scores, ref = _random(rng, 150, dup=seed % 2 == 1)
    pb, po = _flat(pred)
    rb, ro = _flat(ref)
    ours = coco_ap(pb, np.concatenate(scores), po, rb, ro)
    theirs = pycoco_ap(pred, scores, ref)
    assert ours[0] == pytest.approx(theirs[0], abs=1e-9)
    assert ours[1] == pytest.approx(theirs[1], abs=1e-9)


def test_ap_max_dets_truncates_per_image_like_pycocotools():
    rng = np.random.default_rng(7)
    pred, scores, ref = _random(rng, 12, many=True)
    assert max(len(p) for p in pred) > 100
    pb, po = _flat(pred)
    rb, ro = _flat(ref)
    ours = coco_ap(pb, np.concatenate(scores), po, rb, ro)
    assert ours == pytest.approx(pycoco_ap(pred, scores, ref), abs=1e-9)


def test_ap_equal_iou_tie_takes_last_reference():
    # two identical references, one detection: pycocotools matches the last one; a second
    # detection with a lower score then takes the first. Both match -> AP 1.
    ref = [np.array([[0, 0, 10, 10], [0, 0, 10, 10]], dtype=float)]
    pred = [np.array([[0, 0, 10, 10], [0, 0, 10, 10]], dtype=float)]
    scores = [np.array([0.9, 0.8])]
    pb, po = _flat(pred)
    rb, ro = _flat(ref)
    assert coco_ap(pb, scores[0], po, rb, ro) == pytest.approx(pycoco_ap(pred, scores, ref), abs=1e-12)


def test_ap_images_without_references_and_detections():
    ref = [np.zeros((0, 4)), np.array([[0, 0, 10, 10.]]), np.zeros((0, 4))]
    pred = [np.zeros((0, 4)), np.array([[0, 0, 10, 10.]]), np.array([[5, 5, 9, 9.]])]
    scores = [np.zeros(0), np.array([0.5]), np.array([0.9])]  # the false positive outranks the hit
    pb, po = _flat(pred)
    rb, ro = _flat(ref)
    ours = coco_ap(pb, np.concatenate(scores), po, rb, ro)
    assert ours == pytest.approx(pycoco_ap(pred, scores, ref), abs=1e-12)
    assert ours[0] < 1.0


def test_ap_no_reference_anywhere_is_nan():
    ap, ap50 = coco_ap(np.array([[0, 0, 1, 1.]]), np.array([1.0]), np.array([0, 1]), np.zeros((0, 4)), np.array([0, 0]))
    assert np.isnan(ap) and np.isnan(ap50)


def test_ap_no_detection_is_zero():
    assert coco_ap(np.zeros((0, 4)), np.zeros(0), np.array([0, 0]), np.array([[0, 0, 1, 1.]]), np.array([0, 1])) == (0.0, 0.0)


def test_ap_subset_equals_ap_of_subset_alone():
    rng = np.random.default_rng(11)
    pred, scores, ref = _random(rng, 60)
    pb, po = _flat(pred)
    rb, ro = _flat(ref)
    m = match_coco(pb, np.concatenate(scores), po, rb, ro)
    mask = np.arange(60) % 3 == 0
    sub = [i for i in range(60) if mask[i]]
    pb2, po2 = _flat([pred[i] for i in sub])
    rb2, ro2 = _flat([ref[i] for i in sub])
    alone = coco_ap(pb2, np.concatenate([scores[i] for i in sub]), po2, rb2, ro2)
    assert ap_from_matches(m, mask) == pytest.approx(alone, abs=1e-12)


def test_candidates_give_the_same_matches():
    from witness.eval.agc import overlapping_pairs

    rng = np.random.default_rng(5)
    pred, scores, ref = _random(rng, 80, dup=True)
    pb, po = _flat(pred)
    rb, ro = _flat(ref)
    sc = np.concatenate(scores)
    _, pi, ri, v = overlapping_pairs(pb, po, rb, ro)
    near = v >= 0.5 - 1e-9
    a = match_coco(pb, sc, po, rb, ro)
    b = match_coco(pb, sc, po, rb, ro, candidates=(pi[near], ri[near]))
    assert np.array_equal(a.det_match, b.det_match)


def test_ap_by_group_equals_each_subset():
    from witness.eval.ap import ap_by_group

    rng = np.random.default_rng(12)
    pred, scores, ref = _random(rng, 90, dup=True)
    pb, po = _flat(pred)
    rb, ro = _flat(ref)
    m = match_coco(pb, np.concatenate(scores), po, rb, ro)
    codes = rng.integers(0, 4, 90)
    codes[:5] = 3  # group 4 stays empty -> NaN
    got = ap_by_group(m, codes, 5)
    for g in range(4):
        assert got[g] == pytest.approx(ap_from_matches(m, codes == g), abs=0, nan_ok=True)
    assert np.isnan(got[4][0])


@pytest.mark.parametrize("max_dets", [100, 2])
def test_match_coco_orders_equal_lexsort_and_mergesort(max_dets):
    """The one shared score sort gives pycocotools' per-image order and accumulate's global order."""
    rng = np.random.default_rng(21)
    pred, scores, ref = _random(rng, 70, dup=True)
    pb, po = _flat(pred)
    rb, ro = _flat(ref)
    sc = np.concatenate(scores)
    m = match_coco(pb, sc, po, rb, ro, max_dets=max_dets)
    img = np.repeat(np.arange(70), np.diff(po))
    per_image = np.lexsort((-sc, img))
    rank = np.arange(len(per_image)) - po[img[per_image]]
    keep = per_image[rank < max_dets]
    assert np.array_equal(m.det_image, img[keep]) and np.array_equal(m.det_score, sc[keep])
    assert np.array_equal(m.order, np.argsort(-sc[keep], kind="mergesort"))
    assert np.array_equal(m.order_match, m.det_match[m.order].T)


def test_ap_by_group_many_groups():
    from witness.eval.ap import ap_by_group

    rng = np.random.default_rng(13)
    pred, scores, ref = _random(rng, 400)
    pb, po = _flat(pred)
    rb, ro = _flat(ref)
    m = match_coco(pb, np.concatenate(scores), po, rb, ro)
    codes = rng.integers(0, 300, 400)  # more than 256 groups
    got = ap_by_group(m, codes, 300)
    for g in range(300):
        assert got[g] == pytest.approx(ap_from_matches(m, codes == g), abs=0, nan_ok=True)
