"""COCO AP@[.50:.95] and AP50, vectorized, equal to pycocotools' ``COCOeval`` (bbox).

Every sample is one image with one class; ``maxDets = 100``; area range "all"; no crowd boxes; a
prediction without a score scores 1.0 (RoadSceneVQA-G AGC suite, ``shared/ARCHITECTURE.md``).

What pycocotools does, and what this module does in bulk over flat arrays:

1. *Per image* (``evaluateImg``): detections sorted by score descending with a stable sort
   (``np.argsort(-score, kind="mergesort")``), the first 100 kept. IoU is computed from COCO
   ``[x, y, w, h]`` exactly as ``maskUtils.iou`` does (``w = min(x+w) - max(x)``, zero when
   ``w <= 0`` or ``h <= 0``, union ``da + ga - i``). At each IoU threshold ``t`` of
   ``np.linspace(.5, .95, 10)`` detections in score order take the unmatched reference with the
   highest IoU ``≥ t`` (equal IoUs: the *last* reference wins, pycocotools' ``<`` test).
   Here: all (detection, reference) pairs of all images with IoU ≥ 0.5 at once, then one vectorized
   step per detection rank (≤ 100 steps), all images and thresholds together.
2. *Accumulate*: detections of all images concatenated in image order (GT-file order), stably
   sorted by descending score; cumulative TP/FP per threshold; recall ``tp / n_gt``, precision
   ``tp / (tp + fp + eps)`` made monotone from the right; precision sampled at the 101 recall
   thresholds ``np.linspace(0, 1, 101)`` with ``searchsorted(..., side="left")`` (0 past the last
   detection). ``ap`` = mean over the 10 × 101 values, ``ap50`` = mean of the 101 at t = 0.5.
   With no reference box at all pycocotools reports −1; here NaN (undefined).

A subset of images (a category, a question type) reuses the per-image matches and the one global
sort: a stable sort restricted to a subset is the subset's stable sort. The true-positive flags are
kept once in global score order, threshold-major, so each subset is one column selection.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["IOU_THRESHOLDS", "RECALL_THRESHOLDS", "MAX_DETS", "APMatches", "match_coco", "ap_from_matches",
           "ap_by_group", "coco_ap"]

IOU_THRESHOLDS = np.linspace(0.5, 0.95, int(np.round((0.95 - 0.5) / 0.05)) + 1, endpoint=True)
RECALL_THRESHOLDS = np.linspace(0.0, 1.00, int(np.round((1.00 - 0.0) / 0.01)) + 1, endpoint=True)
MAX_DETS = 100


@dataclass(frozen=True)
class APMatches:
    """Per-detection COCO matches, ready to accumulate over any subset of images.

    ``det_image[k]``, ``det_score[k]``, ``det_match[k, t]`` (matched at threshold ``t``) for the kept
    detections (≤ ``max_dets`` per image) in image order, score-descending within an image;
    ``order`` is the global stable descending-score order; ``n_gt[i]`` reference boxes per image.
    """

    det_image: np.ndarray
    det_score: np.ndarray
    det_match: np.ndarray
    order: np.ndarray
    n_gt: np.ndarray
    order_image: np.ndarray | None = None  # det_image[order], cached for subsets
    order_match: np.ndarray | None = None  # det_match[order].T, (T, nd) C-contiguous, cached for accumulate


def _pairs(p_off: np.ndarray, r_off: np.ndarray):
    """All (pred, ref) index pairs within each image: flat ``(image, pred, ref)`` arrays, row-major.

    ``p_off`` and ``r_off`` may be a window of larger offsets (indices stay global).
    """
    n_p = np.diff(p_off)
    n_r = np.diff(r_off)
    img_p = np.repeat(np.arange(len(n_p)), n_p)  # image of each prediction (window-local)
    per_pred = n_r[img_p]
    total = int(per_pred.sum())
    start = np.zeros(len(per_pred), dtype=np.int64)
    np.cumsum(per_pred[:-1], out=start[1:])
    pi = np.repeat(np.arange(p_off[0], p_off[-1], dtype=np.int64), per_pred)
    ri = np.repeat(r_off[:-1][img_p] - start, per_pred) + np.arange(total, dtype=np.int64)
    img = np.repeat(img_p, per_pred)
    return img, pi, ri


def _coco_iou(d: np.ndarray, g: np.ndarray) -> np.ndarray:
    """pycocotools' ``bbIou`` on paired xyxy rows (computed via xywh, same float operations)."""
    dx, dy, dw, dh = d[:, 0], d[:, 1], d[:, 2] - d[:, 0], d[:, 3] - d[:, 1]
    gx, gy, gw, gh = g[:, 0], g[:, 1], g[:, 2] - g[:, 0], g[:, 3] - g[:, 1]
    w = np.minimum(dw + dx, gw + gx) - np.maximum(dx, gx)
    h = np.minimum(dh + dy, gh + gy) - np.maximum(dy, gy)
    i = w * h
    u = dw * dh + gw * gh - i
    ok = (w > 0) & (h > 0)
    out = np.zeros(len(d))
    np.divide(i, u, out=out, where=ok)
    return out


def match_coco(pred_boxes, pred_scores, pred_offsets, ref_boxes, ref_offsets, *, max_dets: int = MAX_DETS,
               candidates: tuple[np.ndarray, np.ndarray] | None = None) -> APMatches:
    """COCO ``evaluateImg`` for every image at once (see the module docstring).

    ``pred_boxes`` ``(P, 4)`` and ``ref_boxes`` ``(R, 4)`` are pixel xyxy, ``*_offsets`` of length
    ``n_images + 1``. ``candidates`` (optional): ``(pred_index, ref_index)`` arrays, in
    (image, pred, ref) order, of every pair that may reach IoU 0.5 (a caller that already has the
    pair IoUs passes those above 0.5 minus a margin); the exact COCO IoU is computed only on them.

    >>> m = match_coco(np.array([[0, 0, 10, 10.]]), np.array([1.0]), np.array([0, 1]),
    ...                np.array([[0, 0, 10, 9.]]), np.array([0, 1]))
    >>> m.det_match.sum(axis=1).tolist()  # IoU 0.9: matched at .50 … .90, not at .95
    [9]
    """
    pred_boxes = np.asarray(pred_boxes, dtype=np.float64).reshape(-1, 4)
    ref_boxes = np.asarray(ref_boxes, dtype=np.float64).reshape(-1, 4)
    scores = np.asarray(pred_scores, dtype=np.float64)
    p_off = np.asarray(pred_offsets, dtype=np.int64)
    r_off = np.asarray(ref_offsets, dtype=np.int64)
    n_img = len(p_off) - 1
    n_gt = np.diff(r_off)
    n_p = np.diff(p_off)
    det_img_all = np.repeat(np.arange(n_img), n_p)
    # One stable sort by descending score (ties in index order, which is image order) serves both
    # the per-image order and accumulate's global order (that sort restricted to the kept detections).
    by_score = np.argsort(-scores, kind="stable")
    score_rank = np.empty(len(scores), dtype=np.int64)
    score_rank[by_score] = np.arange(len(scores))
    # per image: stable sort by descending score, i.e. by (image, score rank), unique keys that are
    # already sorted by image (runs of one image's detections: timsort is near-linear), then keep
    # the first max_dets
    order = np.argsort(det_img_all * max(len(scores), 1) + score_rank, kind="stable")
    rank = np.arange(len(order)) - p_off[det_img_all[order]]
    keep = order[rank < max_dets]
    rank = rank[rank < max_dets]
    det_img = det_img_all[keep]
    det_score = scores[keep]
    dboxes = pred_boxes[keep]
    kept_n = np.minimum(n_p, max_dets)
    d_off = np.zeros(n_img + 1, dtype=np.int64)
    np.cumsum(kept_n, out=d_off[1:])
    det_pos = np.full(len(pred_boxes), -1, dtype=np.int64)  # position of a detection among the kept
    det_pos[keep] = np.arange(len(keep))
    n_t = len(IOU_THRESHOLDS)
    match = np.zeros((len(keep), n_t), dtype=bool)
    # candidate pairs: only IoU >= 0.5 can ever match
    if candidates is None:
        _, di, gi = _pairs(d_off, r_off)
    else:
        di = det_pos[np.asarray(candidates[0], dtype=np.int64)]
        gi = np.asarray(candidates[1], dtype=np.int64)
        gi = gi[di >= 0]
        di = di[di >= 0]
    if len(di):
        iou = _coco_iou(dboxes[di], ref_boxes[gi])
        ok = iou >= IOU_THRESHOLDS[0]
        di, gi, iou = di[ok], gi[ok], iou[ok]
    if len(di):
        # An isolated candidate pair (its detection has no other candidate reference and its
        # reference no other candidate detection) matches exactly at the thresholds its IoU reaches:
        # nothing competes for it. Only the rest needs the rank-by-rank greedy pass.
        iso = (np.bincount(di, minlength=len(keep))[di] == 1) & (np.bincount(gi, minlength=len(ref_boxes))[gi] == 1)
        match[di[iso]] = iou[iso, None] >= IOU_THRESHOLDS[None, :]
        di, gi, iou = di[~iso], gi[~iso], iou[~iso]
    if len(di):
        gt_taken = np.zeros((len(ref_boxes), n_t), dtype=bool)
        prank = rank[di]
        by_rank = np.argsort(prank, kind="stable")  # keeps (det, ref) order inside a rank
        di, gi, iou, prank = di[by_rank], gi[by_rank], iou[by_rank], prank[by_rank]
        bounds = np.searchsorted(prank, np.arange(prank[-1] + 2))
        thr = IOU_THRESHOLDS[None, :]
        for r in range(len(bounds) - 1):
            a, b = bounds[r], bounds[r + 1]
            if a == b:
                continue
            d, g, v = di[a:b], gi[a:b], iou[a:b]
            cand = (v[:, None] >= thr) & ~gt_taken[g]
            val = np.where(cand, v[:, None], -1.0)
            seg = np.flatnonzero(np.r_[True, d[1:] != d[:-1]])
            seg_max = np.maximum.reduceat(val, seg, axis=0)
            seg_id = np.cumsum(np.r_[True, d[1:] != d[:-1]]) - 1
            is_best = cand & (val == seg_max[seg_id])
            pos = np.where(is_best, np.arange(len(d))[:, None], -1)
            last = np.maximum.reduceat(pos, seg, axis=0)  # (segments, T): last best ref, or -1
            hit = last >= 0
            if not hit.any():
                continue
            s_idx, t_idx = np.nonzero(hit)
            p = last[s_idx, t_idx]
            match[d[p], t_idx] = True
            gt_taken[g[p], t_idx] = True
    # == np.argsort(-det_score, kind="mergesort"): equal scores keep index order in both (the kept
    # order is image-major and, inside an image, index order among equal scores)
    gorder = det_pos[by_score]
    gorder = gorder[gorder >= 0]
    return APMatches(det_img, det_score, match, gorder, n_gt, det_img[gorder], np.ascontiguousarray(match[gorder].T))


def ap_from_matches(m: APMatches, images: np.ndarray | None = None) -> tuple[float, float]:
    """COCO ``accumulate`` + ``summarize`` over all images, or those where ``images`` (bool per
    image) is True: ``(ap, ap50)``, NaN when the subset has no reference box.

    >>> m = match_coco(np.array([[0, 0, 10, 10.]]), np.array([1.0]), np.array([0, 1]),
    ...                np.array([[0, 0, 10, 9.]]), np.array([0, 1]))
    >>> [round(v, 6) for v in ap_from_matches(m)]  # precision is tp / (tp + fp + eps), as pycocotools
    [0.9, 1.0]
    """
    tt = _order_match(m)
    if images is None:
        n_gt = int(m.n_gt.sum())
    else:
        images = np.asarray(images, dtype=bool)
        n_gt = int(m.n_gt[images].sum())
        order_image = m.order_image if m.order_image is not None else m.det_image[m.order]
        tt = tt[:, images[order_image]]
    if n_gt == 0:
        return float("nan"), float("nan")
    return _accumulate_positions([np.flatnonzero(row) for row in tt], n_gt)


def _order_match(m: APMatches) -> np.ndarray:
    """``det_match[order].T``: (T, nd) C-contiguous true-positive flags in global score order."""
    return m.order_match if m.order_match is not None else np.ascontiguousarray(m.det_match[m.order].T)


def _accumulate(tps: np.ndarray, n_gt: int) -> tuple[float, float]:
    """pycocotools' accumulate + summarize for one class: ``tps`` (nd, T) in score order."""
    return _accumulate_positions([np.flatnonzero(tps[:, t]) for t in range(len(IOU_THRESHOLDS))], n_gt)


def _accumulate_positions(tp_positions: list[np.ndarray], n_gt: int) -> tuple[float, float]:
    """:func:`_accumulate` from the true-positive positions (in score order) of each IoU threshold."""
    precision = np.zeros((len(IOU_THRESHOLDS), len(RECALL_THRESHOLDS)))
    # Only true-positive positions matter: recall rises only there, and after a false positive the
    # precision is below its value one step earlier, so the right-to-left maximum at any
    # true-positive position is reached at a true-positive position. The float operations are
    # pycocotools' own: tp / (fp + tp + eps) with fp + tp = position + 1, and tp / n_gt.
    for t, pos in enumerate(tp_positions):
        if len(pos) == 0:
            continue
        tp = np.arange(1, len(pos) + 1, dtype=float)
        rc = tp / n_gt
        pr = tp / ((pos + 1).astype(float) + np.spacing(1))
        inds = np.searchsorted(rc, RECALL_THRESHOLDS, side="left")
        inds = inds[inds < len(pos)]  # a prefix: inds is non-decreasing
        if len(inds):
            # pycocotools makes pr monotone from the right, then reads it at inds: the maximum of
            # pr[inds[j]:], i.e. of the run [inds[j], inds[j+1]) and every run after it (a repeated
            # index gives its run's first value, which the runs after it already cover)
            seg = np.maximum.reduceat(pr, inds)
            precision[t, : len(inds)] = np.maximum.accumulate(seg[::-1])[::-1]
    return float(np.mean(precision)), float(np.mean(precision[0]))


def ap_by_group(m: APMatches, codes: np.ndarray, n_groups: int) -> list[tuple[float, float]]:
    """:func:`ap_from_matches` of every group of images at once: ``codes[i]`` is image ``i``'s group
    (``0 … n_groups-1``). One stable sort by group keeps each group's detections in global score
    order, so each group is a contiguous slice of the score-ordered true-positive flags.

    >>> m = match_coco(np.array([[0, 0, 10, 10.], [0, 0, 4, 4]]), np.array([1.0, 0.5]), np.array([0, 1, 2]),
    ...                np.array([[0, 0, 10, 9.], [0, 0, 4, 4]]), np.array([0, 1, 2]))
    >>> [tuple(round(v, 6) for v in g) for g in ap_by_group(m, np.array([0, 1]), 2)]
    [(0.9, 1.0), (1.0, 1.0)]
    """
    codes = np.asarray(codes, dtype=np.int64)
    order_image = m.order_image if m.order_image is not None else m.det_image[m.order]
    g_of_det = codes[order_image]
    # a stable sort by group (radix sort on small codes) keeps each group's detections in global
    # score order, one contiguous run per group
    small = np.uint8 if n_groups <= 1 << 8 else np.uint16 if n_groups <= 1 << 16 else np.int64
    perm = np.argsort(g_of_det.astype(small), kind="stable")
    tt = _order_match(m)[:, perm]
    bounds = np.searchsorted(g_of_det[perm], np.arange(n_groups + 1))
    n_gt = np.bincount(codes, weights=m.n_gt, minlength=n_groups).astype(np.int64)
    out = []
    for g in range(n_groups):
        if n_gt[g] == 0:
            out.append((float("nan"), float("nan")))
        else:
            out.append(_accumulate_positions([np.flatnonzero(row[bounds[g] : bounds[g + 1]]) for row in tt], int(n_gt[g])))
    return out


def coco_ap(pred_boxes, pred_scores, pred_offsets, ref_boxes, ref_offsets, *, max_dets: int = MAX_DETS) -> tuple[float, float]:
    """``(AP@[.50:.95], AP50)`` of pycocotools' COCOeval with each sample one image, one class.

    >>> ap, ap50 = coco_ap(np.array([[0, 0, 10, 10.], [20, 20, 30, 30]]), np.array([0.9, 0.8]),
    ...                    np.array([0, 1, 2]), np.array([[0, 0, 10, 10.]]), np.array([0, 1, 1]))
    >>> round(ap, 6), round(ap50, 6)
    (1.0, 1.0)
    """
    return ap_from_matches(match_coco(pred_boxes, pred_scores, pred_offsets, ref_boxes, ref_offsets, max_dets=max_dets))
