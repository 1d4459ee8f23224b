"""The AGC suite of RoadSceneVQA-G ("Answer with Evidence", Section III-C), columnar.

Per sample ``i``: prediction ``(â, B̂)``, reference ``(a*, B*)``; ``ν`` is
:func:`witness.eval.answers.stated_count`; ``M_0.5`` the assignment maximizing total IoU, a pair
counting at IoU ≥ 0.5 (:func:`witness.boxes.match_max_iou`). Keys (``shared/ARCHITECTURE.md``):

* ``gda`` = mean 1[(|B̂|>0) = (|B*|>0)]; ``cnt_acc`` = mean 1[|B̂| = |B*|]; ``cnt_mae`` = mean ||B̂|−|B*||;
* ``spc`` = mean over C = {i: ν(âᵢ) defined} of 1[ν(âᵢ) = |B̂ᵢ|], ``spc_support`` = |C| (spc null if C = ∅);
* ``precision``, ``recall``, ``f1``: micro over all samples from ``M_0.5`` true positives;
* ``ap``, ``ap50``: COCO AP (:mod:`witness.eval.ap`, equal to pycocotools);
* ``recall_4_6``, ``recall_7plus``: micro recall over samples with 4–6 and ≥ 7 reference boxes;
* ``gca_s``, ``gca_l`` = mean 1[ans_ok(â, a*) ∧ F1_0.5(B̂, B*) ≥ 0.5] with the strict / lenient
  predicate of :mod:`witness.eval.answers`.

Fractions are in [0, 1]; an undefined value (no support) is NaN in Python and null in JSON.

The hot path: every (prediction, reference) box pair of every sample as flat arrays; a sample whose
positive-IoU pairs already form a one-to-one matching needs no assignment solver (every optimal
assignment keeps all of them); the others go through ``scipy.optimize.linear_sum_assignment``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from ..boxes import match_greedy_giou, match_max_cardinality, match_max_iou
from .answers import match_answers, stated_counts
from .ap import ap_by_group, ap_from_matches, match_coco
from .data import Samples, concat_samples, samples_from_records
from .report import SuiteReport, group_metrics, sample_table

__all__ = ["AGC_KEYS", "BoxMatches", "overlapping_pairs", "box_pairs", "match_boxes_flat", "agc_per_sample", "agc_metrics", "agc_group_metrics", "evaluate_agc", "AGC"]

AGC_KEYS = (
    "gda", "cnt_acc", "cnt_mae", "spc", "spc_support", "precision", "recall", "f1", "ap", "ap50",
    "recall_4_6", "recall_7plus", "gca_s", "gca_l",
)


class BoxMatches:
    """Per-sample true positives and per-box matched flags of one matching over all samples."""

    __slots__ = ("tp", "pred_matched", "ref_matched")

    def __init__(self, tp: np.ndarray, pred_matched: np.ndarray, ref_matched: np.ndarray):
        self.tp, self.pred_matched, self.ref_matched = tp, pred_matched, ref_matched


def _flat_iou(a: np.ndarray, b: np.ndarray, giou: bool = False) -> np.ndarray:
    """IoU (or GIoU) of paired rows, the same float operations as :func:`witness.boxes.iou_matrix`."""
    lt = np.maximum(a[:, :2], b[:, :2])
    rb = np.minimum(a[:, 2:], b[:, 2:])
    wh = np.maximum(rb - lt, 0.0)
    inter = wh[:, 0] * wh[:, 1]
    area_a = np.maximum(a[:, 2] - a[:, 0], 0.0) * np.maximum(a[:, 3] - a[:, 1], 0.0)
    area_b = np.maximum(b[:, 2] - b[:, 0], 0.0) * np.maximum(b[:, 3] - b[:, 1], 0.0)
    union = area_a + area_b - inter
    iou = np.zeros(len(a))
    np.divide(inter, union, out=iou, where=union > 0)
    if not giou:
        return iou
    hwh = np.maximum(np.maximum(a[:, 2:], b[:, 2:]) - np.minimum(a[:, :2], b[:, :2]), 0.0)
    hull = hwh[:, 0] * hwh[:, 1]
    out = iou.copy()
    np.subtract(iou, (hull - union) / np.where(hull > 0, hull, 1.0), out=out, where=hull > 0)
    return out


def match_boxes_flat(
    pred_boxes: np.ndarray,
    pred_offsets: np.ndarray,
    ref_boxes: np.ndarray,
    ref_offsets: np.ndarray,
    *,
    method: str = "max_iou",
    iou: float = 0.5,
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> BoxMatches:
    """One matching per sample over flat box arrays, equal to the per-sample matchers of
    :mod:`witness.boxes`: ``max_iou`` (``M_τ``, Hungarian on total IoU), ``max_cardinality``
    (AESP) or ``greedy_giou`` (gRefCOCO).

    A sample whose relevant edges (IoU > 0 for ``max_iou``; IoU or GIoU ≥ τ otherwise) already form
    a one-to-one matching is solved without a solver; the rest call the matcher of
    :mod:`witness.boxes` on that sample. ``pairs`` (optional) passes precomputed
    ``(sample, pred, ref, iou)`` arrays of :func:`overlapping_pairs`.

    >>> m = match_boxes_flat(np.array([[0, 0, 10, 10.], [20, 20, 30, 30]]), np.array([0, 2]),
    ...                      np.array([[0, 0, 10, 11.]]), np.array([0, 1]))
    >>> m.tp.tolist(), m.pred_matched.tolist()
    ([1], [True, False])
    """
    p_off = np.asarray(pred_offsets, dtype=np.int64)
    r_off = np.asarray(ref_offsets, dtype=np.int64)
    n = len(p_off) - 1
    tp = np.zeros(n, dtype=np.int64)
    pm = np.zeros(len(pred_boxes), dtype=bool)
    rm = np.zeros(len(ref_boxes), dtype=bool)
    img, pi, ri, v = pairs if pairs is not None else overlapping_pairs(pred_boxes, p_off, ref_boxes, r_off)
    if len(img) == 0:
        return BoxMatches(tp, pm, rm)
    if method == "greedy_giou":
        v = _flat_iou(pred_boxes[pi], ref_boxes[ri], giou=True)
    edge = np.ones(len(v), dtype=bool) if method == "max_iou" else v >= iou
    e_img, e_pi, e_ri = img[edge], pi[edge], ri[edge]
    deg_p = np.bincount(e_pi, minlength=len(pred_boxes))
    deg_r = np.bincount(e_ri, minlength=len(ref_boxes))
    bad_img = np.zeros(n, dtype=bool)
    bad_img[e_img[(deg_p[e_pi] > 1) | (deg_r[e_ri] > 1)]] = True
    good = ~bad_img[e_img]
    if method == "max_iou" and bad_img.any():
        bad_img = _solve_small_components(bad_img, e_img, e_pi, e_ri, v[edge], len(pred_boxes), iou, tp, pm, rm)
    if method == "max_iou":
        good &= v[edge] >= iou
    tp += np.bincount(e_img[good], minlength=n)
    pm[e_pi[good]] = True
    rm[e_ri[good]] = True
    if bad_img.any():
        bounds = np.searchsorted(img, np.arange(n + 1))
        for i in np.flatnonzero(bad_img).tolist():
            a0, a1, b0, b1 = p_off[i], p_off[i + 1], r_off[i], r_off[i + 1]
            if method == "greedy_giou":
                m = match_greedy_giou(pred_boxes[a0:a1], ref_boxes[b0:b1], iou=iou)
            else:
                ov = np.zeros((a1 - a0, b1 - b0))  # pairs not stored do not overlap: IoU 0
                k0, k1 = bounds[i], bounds[i + 1]
                ov[pi[k0:k1] - a0, ri[k0:k1] - b0] = v[k0:k1]
                fn = match_max_iou if method == "max_iou" else match_max_cardinality
                m = fn(None, None, iou=iou, overlaps=ov)
            tp[i] = m.tp
            pm[a0 + m.pred_idx] = True
            rm[b0 + m.ref_idx] = True
    return BoxMatches(tp, pm, rm)


def overlapping_pairs(pred_boxes: np.ndarray, pred_offsets: np.ndarray, ref_boxes: np.ndarray,
                      ref_offsets: np.ndarray, *, chunk_pairs: int = 1 << 20):
    """Every (prediction, reference) box pair of a sample with IoU > 0, over all samples:
    ``(sample, pred, ref, iou)`` flat arrays in (sample, pred, ref) order, IoU computed as
    :func:`witness.boxes.iou_matrix` does. Pairs are generated ``chunk_pairs`` at a time, so
    memory stays bounded whatever the number of boxes per sample.

    >>> img, pi, ri, v = overlapping_pairs(np.array([[0, 0, 2, 2.], [1, 1, 3, 3], [5, 5, 6, 6]]), np.array([0, 3]),
    ...                                    np.array([[0, 0, 2, 2.]]), np.array([0, 1]))
    >>> pi.tolist(), v.tolist()
    ([0, 1], [1.0, 0.14285714285714285])
    """
    p_off = np.asarray(pred_offsets, dtype=np.int64)
    r_off = np.asarray(ref_offsets, dtype=np.int64)
    n = len(p_off) - 1
    c = np.diff(p_off) * np.diff(r_off)
    cum = np.cumsum(c)
    total = int(cum[-1]) if n else 0
    cuts = np.unique(np.r_[0, np.searchsorted(cum, np.arange(chunk_pairs, total, chunk_pairs), side="right"), n])
    px1, py1, px2, py2 = (np.ascontiguousarray(pred_boxes[:, k]) for k in range(4))
    rx1, ry1, rx2, ry2 = (np.ascontiguousarray(ref_boxes[:, k]) for k in range(4))
    parea = np.maximum(px2 - px1, 0.0) * np.maximum(py2 - py1, 0.0)
    rarea = np.maximum(rx2 - rx1, 0.0) * np.maximum(ry2 - ry1, 0.0)
    p0 = int(p_off[0]) if n else 0
    pred_img = np.repeat(np.arange(n, dtype=np.int64), np.diff(p_off))  # sample of prediction p0 + k
    parts = []
    for a, b in zip(cuts[:-1], cuts[1:], strict=False):
        # every (pred, ref) pair of samples a..b-1, as witness.eval.ap._pairs builds them
        pa0, pa1 = int(p_off[a]), int(p_off[b])
        n_r = np.diff(r_off[a : b + 1])
        img_p = pred_img[pa0 - p0 : pa1 - p0] - a  # window-local sample of each prediction
        per_pred = n_r[img_p]
        total = int(per_pred.sum())
        if total == 0:
            continue
        start = np.zeros(len(per_pred), dtype=np.int64)
        np.cumsum(per_pred[:-1], out=start[1:])
        ri = np.repeat(r_off[a:b][img_p] - start, per_pred)
        ri += np.arange(total, dtype=np.int64)
        # the same float operations as boxes.iou_matrix, skipping pairs apart along x (IoU 0); a
        # prediction's coordinates repeat along its pairs (np.repeat, no gather)
        w = np.minimum(np.repeat(px2[pa0:pa1], per_pred), rx2[ri])
        w -= np.maximum(np.repeat(px1[pa0:pa1], per_pred), rx1[ri])
        k = np.flatnonzero(w > 0)
        pi = np.repeat(np.arange(pa0, pa1, dtype=np.int64), per_pred)[k]
        ri, w = ri[k], w[k]
        h = np.minimum(py2[pi], ry2[ri]) - np.maximum(py1[pi], ry1[ri])
        k = np.flatnonzero(h > 0)
        pi, ri, w, h = pi[k], ri[k], w[k], h[k]
        inter = w * h
        union = parea[pi] + rarea[ri] - inter
        v = np.zeros(len(inter))
        np.divide(inter, union, out=v, where=union > 0)
        keep = v > 0
        pi = pi[keep]
        parts.append((pred_img[pi - p0], pi, ri[keep], v[keep]))
    if not parts:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z, np.zeros(0)
    return tuple(np.concatenate([p[k] for p in parts]) for k in range(4))


def box_pairs(s: Samples) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`overlapping_pairs` of aligned samples.

    >>> from witness.eval.data import samples_from_records
    >>> from witness.schema import item_record
    >>> s = samples_from_records([item_record("q", "i", 9, 9, "Q?", "", [[0, 0, 2, 2]], ["x"])],
    ...                          [{"id": "q", "boxes": [[0, 0, 2, 2], [1, 1, 3, 3]]}])
    >>> box_pairs(s)[3].tolist()
    [1.0, 0.14285714285714285]
    """
    return overlapping_pairs(s.pred_boxes, s.pred_offsets, s.ref_boxes, s.ref_offsets)


def _solve_small_components(bad_img, e_img, e_pi, e_ri, ev, n_pred_boxes, iou, tp, pm, rm):
    """Solve ``M_τ`` without a solver in samples whose overlap graph splits into components that are
    single pairs, stars (one box overlapping several) or 2×2 blocks, with a unique optimum each.

    The maximum-total-IoU assignment restricted to overlapping pairs is the union of the optima
    of the connected components of the overlap graph: a star keeps its largest IoU, a 2×2 block
    the larger of its two diagonals. Where an optimum is not unique (equal values), or a component
    is bigger, the sample stays "bad" and the caller runs the assignment solver on it, exactly as
    :func:`witness.boxes.match_max_iou` does. Updates ``tp``, ``pm``, ``rm`` in place; returns
    the samples still to solve.
    """
    sel = bad_img[e_img]
    img, pi, ri, v = e_img[sel], e_pi[sel], e_ri[sel], ev[sel]
    # nodes: predictions 0..P-1, references P..; only the boxes of these edges matter
    nodes, inv = np.unique(np.r_[pi, ri + n_pred_boxes], return_inverse=True)
    a, b = inv[: len(pi)], inv[len(pi) :]
    graph = coo_matrix((np.ones(len(a)), (a, b)), shape=(len(nodes), len(nodes)))
    n_comp, label = connected_components(graph, directed=False)
    comp = label[a]
    is_pred_node = nodes < n_pred_boxes
    n_p = np.bincount(label[is_pred_node], minlength=n_comp)
    n_r = np.bincount(label[~is_pred_node], minlength=n_comp)
    star = (n_p == 1) | (n_r == 1)
    square = (n_p == 2) & (n_r == 2)
    order = np.lexsort((ri, pi, comp))  # edges grouped by component, then (pred, ref)
    comp_s, v_s = comp[order], v[order]
    vmax = np.full(n_comp, -np.inf)
    np.maximum.at(vmax, comp_s, v_s)
    n_at_max = np.bincount(comp_s[v_s == vmax[comp_s]], minlength=n_comp)
    chosen = np.zeros(len(v_s), dtype=bool)
    ok = np.zeros(n_comp, dtype=bool)
    # stars (and single pairs): the largest IoU, when unique
    st = star & (n_at_max == 1)
    chosen |= st[comp_s] & (v_s == vmax[comp_s])
    ok |= st
    # 2x2 blocks: pick the larger diagonal, when the two differ
    sq = np.flatnonzero(square)
    if len(sq):
        p_s, r_s = pi[order], ri[order]
        p_lo = np.full(n_comp, np.iinfo(np.int64).max)
        r_lo = np.full(n_comp, np.iinfo(np.int64).max)
        np.minimum.at(p_lo, comp_s, p_s)
        np.minimum.at(r_lo, comp_s, r_s)
        diag = (p_s == p_lo[comp_s]) == (r_s == r_lo[comp_s])  # (p0, r0) or (p1, r1)
        s_diag = np.bincount(comp_s, weights=np.where(diag, v_s, 0.0), minlength=n_comp)
        s_anti = np.bincount(comp_s, weights=np.where(diag, 0.0, v_s), minlength=n_comp)
        sq_ok = square & (s_diag != s_anti)
        take_diag = s_diag > s_anti
        chosen |= sq_ok[comp_s] & (diag == take_diag[comp_s])
        ok |= sq_ok
    # a sample is solved when every one of its components is
    comp_img = np.zeros(n_comp, dtype=np.int64)
    comp_img[comp_s] = img[order]
    unsolved = np.zeros(len(bad_img), dtype=bool)
    unsolved[comp_img[~ok]] = True
    still_bad = bad_img & unsolved
    done = chosen & ~still_bad[img[order]] & (v_s >= iou)
    np.add.at(tp, img[order][done], 1)
    pm[pi[order][done]] = True
    rm[ri[order][done]] = True
    return still_bad


def agc_per_sample(s: Samples, *, iou: float = 0.5, pairs=None) -> dict[str, np.ndarray]:
    """The per-sample quantities every AGC metric aggregates (one array each, length ``len(s)``):
    ``n_pred``, ``n_ref``, ``tp`` (``M_0.5``), ``f1``, ``nu`` (−1: no count stated), ``ok_s``,
    ``ok_l``, the per-box ``pred_matched`` / ``ref_matched`` flags and the summands ``stats``.

    >>> from witness.eval.data import samples_from_records
    >>> from witness.schema import item_record
    >>> s = samples_from_records([item_record("q", "i", 9, 9, "How many?", "2", [[0, 0, 4, 4], [5, 5, 9, 9]], ["x", "x"])],
    ...                          [{"id": "q", "answer": "1", "boxes": [[0, 0, 4, 4]]}])
    >>> per = agc_per_sample(s)
    >>> per["tp"].tolist(), per["nu"].tolist(), per["ref_matched"].tolist()
    ([1], [1], [True, False])
    """
    n_pred, n_ref = s.n_pred, s.n_ref
    m = match_boxes_flat(s.pred_boxes, s.pred_offsets, s.ref_boxes, s.ref_offsets, method="max_iou", iou=iou,
                         pairs=pairs)
    denom = n_pred + n_ref
    f1 = np.ones(len(s))
    np.divide(2.0 * m.tp, denom, out=f1, where=denom > 0)
    pred_answers = _encode(s.arrow("pred_answers"))
    # ν is elementwise: read each distinct answer once (a null answer states no count: −1)
    nu = np.append(stated_counts(pred_answers[0]), np.int64(-1))[pred_answers[1]]
    ok_s, ok_l = _answer_verdicts(pred_answers, _encode(s.arrow("answer")))
    per = {
        "n_pred": n_pred,
        "n_ref": n_ref,
        "tp": m.tp,
        "f1": f1,
        "nu": nu,
        "ok_s": ok_s,
        "ok_l": ok_l,
        "pred_matched": m.pred_matched,
        "ref_matched": m.ref_matched,
    }
    per["stats"] = _stats(per)
    return per


def _encode(arr: Any) -> tuple[Any, np.ndarray]:
    """A string column as ``(dictionary, codes)``: ``codes[i]`` indexes the distinct values, a null
    is ``len(dictionary)``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    enc = (arr if isinstance(arr, (pa.Array, pa.ChunkedArray)) else pa.array(list(arr), pa.string())).dictionary_encode()
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks()
    idx = pc.fill_null(enc.indices, len(enc.dictionary)) if enc.indices.null_count else enc.indices
    return enc.dictionary, np.asarray(idx.to_numpy(zero_copy_only=False), dtype=np.int64)


def _answer_verdicts(preds: tuple[Any, np.ndarray], refs: tuple[Any, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``match_answers(preds, refs, lenient=False)`` and ``(..., lenient=True)`` of two :func:`_encode`
    columns, judging each distinct (prediction, reference) pair once for both
    (:func:`~witness.eval.answers.match_answers` is elementwise)."""
    (p_dict, pcode), (r_dict, rcode) = preds, refs
    np_, nr = len(p_dict), len(r_dict)
    key = pcode * (nr + 1) + rcode
    size = (np_ + 1) * (nr + 1)
    if size <= 4 * len(key) + 1024:  # dense key space: a table lookup instead of a sort
        seen = np.zeros(size, dtype=bool)
        seen[key] = True
        uniq = np.flatnonzero(seen)
        slot = np.zeros(size, dtype=np.int64)
        slot[uniq] = np.arange(len(uniq))
        inverse = slot[key]
    else:
        uniq, inverse = np.unique(key, return_inverse=True)
        inverse = inverse.reshape(-1)
    pv = np.asarray(p_dict.to_pylist() + [None], dtype=object)
    rv = np.asarray(r_dict.to_pylist() + [None], dtype=object)
    up, ur = pv[uniq // (nr + 1)].tolist(), rv[uniq % (nr + 1)].tolist()
    with np.errstate(invalid="ignore"):  # a null answer: match_answers casts its NaN code, then replaces it
        ok_s = match_answers(up, ur, lenient=False)[inverse]
        ok_l = match_answers(up, ur, lenient=True)[inverse]
    return ok_s, ok_l


def _mean(x: np.ndarray) -> float:
    return float(np.mean(x)) if len(x) else float("nan")


def _ratio(a: float, b: float) -> float:
    return float(a / b) if b else float("nan")


_STATS = ("n", "gda_ok", "cnt_ok", "abs_diff", "c", "spc_ok", "n_pred", "n_ref", "tp", "n_ref_46", "tp_46",
          "n_ref_7", "tp_7", "gca_s", "gca_l")


def _stats(per: Mapping[str, np.ndarray]) -> np.ndarray:
    """Per-sample summands of every AGC metric, one column each (:data:`_STATS`), float64."""
    n_pred, n_ref, tp, nu = per["n_pred"], per["n_ref"], per["tp"], per["nu"]
    c = nu >= 0
    b46 = (n_ref >= 4) & (n_ref <= 6)
    b7 = n_ref >= 7
    grounded = per["f1"] >= 0.5
    cols = [np.ones(len(n_pred)), (n_pred > 0) == (n_ref > 0), n_pred == n_ref, np.abs(n_pred - n_ref), c,
            c & (nu == n_pred), n_pred, n_ref, tp, n_ref * b46, tp * b46, n_ref * b7, tp * b7,
            per["ok_s"] & grounded, per["ok_l"] & grounded]
    return np.stack([np.asarray(x, dtype=np.float64) for x in cols], axis=1)


def _from_sums(t: np.ndarray, ap: float, ap50: float) -> dict[str, float | int | None]:
    v = dict(zip(_STATS, t.tolist(), strict=True))
    n = v["n"]
    sp, sr, st = v["n_pred"], v["n_ref"], v["tp"]
    return {
        "gda": _ratio(v["gda_ok"], n),
        "cnt_acc": _ratio(v["cnt_ok"], n),
        "cnt_mae": _ratio(v["abs_diff"], n),
        "spc": _ratio(v["spc_ok"], v["c"]),
        "spc_support": int(v["c"]),
        "precision": _ratio(st, sp),
        "recall": _ratio(st, sr),
        "f1": 1.0 if sp + sr == 0 else 2.0 * st / (sp + sr),
        "ap": ap,
        "ap50": ap50,
        "recall_4_6": _ratio(v["tp_46"], v["n_ref_46"]),
        "recall_7plus": _ratio(v["tp_7"], v["n_ref_7"]),
        "gca_s": _ratio(v["gca_s"], n),
        "gca_l": _ratio(v["gca_l"], n),
    }


def agc_metrics(per: Mapping[str, np.ndarray], ap_matches: Any, mask: np.ndarray | None = None) -> dict[str, float | int | None]:
    """Aggregate :func:`agc_per_sample` arrays (over ``mask`` if given) into the contract's keys.

    Means are sums over the selected samples divided by their number; micro ratios are ratios of
    sums; an empty support gives NaN. Example: :func:`evaluate_agc`.
    """
    st = per["stats"] if "stats" in per else _stats(per)
    sums = st.sum(axis=0) if mask is None else st[np.asarray(mask, dtype=bool)].sum(axis=0)
    ap, ap50 = ap_from_matches(ap_matches, None if mask is None else np.asarray(mask, dtype=bool))
    return _from_sums(sums, ap, ap50)


def agc_group_metrics(per: Mapping[str, np.ndarray], ap_matches: Any, codes: np.ndarray, n_groups: int) -> list[dict]:
    """:func:`agc_metrics` of every group ``codes == g`` at once (one ``bincount`` per summand)."""
    st = per["stats"] if "stats" in per else _stats(per)
    k = st.shape[1]  # one bincount for every (group, summand) bin, each summed in sample order
    bins = (np.asarray(codes, dtype=np.int64)[:, None] * k + np.arange(k)).reshape(-1)
    sums = np.bincount(bins, weights=st.reshape(-1), minlength=n_groups * k).reshape(n_groups, k)
    aps = ap_by_group(ap_matches, codes, n_groups)
    return [_from_sums(sums[g], *aps[g]) for g in range(n_groups)]


def evaluate_agc(s: Samples, *, iou: float = 0.5, details: bool = True, text_metrics: bool = False) -> SuiteReport:
    """Score ``s`` with the AGC suite: overall, per ``qtype`` and per ``category``.

    >>> from witness.schema import item_record
    >>> s = samples_from_records(
    ...     [item_record("q1", "i", 100, 100, "How many cars?", "2 cars", [[0, 0, 10, 10], [50, 50, 60, 60]],
    ...                  ["car", "car"], qtype="counting", category="enumeration")],
    ...     [{"id": "q1", "answer": "two cars", "boxes": [[0, 0, 10, 10], [50, 50, 60, 61]]}])
    >>> r = evaluate_agc(s)
    >>> r.metrics["f1"], r.metrics["spc"], r.metrics["gca_s"], r.metrics["gca_l"]
    (1.0, 1.0, 0.0, 1.0)
    """
    pairs = box_pairs(s)
    per = agc_per_sample(s, iou=iou, pairs=pairs)
    near = pairs[3] >= 0.5 - 1e-9  # COCO's IoU differs from this one in the last bits at most
    apm = match_coco(s.pred_boxes, s.pred_scores, s.pred_offsets, s.ref_boxes, s.ref_offsets,
                     candidates=(pairs[1][near], pairs[2][near]))
    metrics = agc_metrics(per, apm)
    if text_metrics:
        metrics.update(_text_metrics(s.pred_answers, s.column("answer")))
    by = group_metrics(s, lambda mask: agc_metrics(per, apm, mask),
                       grouped=lambda codes, k: agc_group_metrics(per, apm, codes, k))
    table = None
    if details:
        nu = per["nu"]
        table = sample_table(
            s,
            {
                "n_pred": per["n_pred"],
                "n_ref": per["n_ref"],
                "tp": per["tp"],
                "f1": per["f1"],
                "stated_count": np.where(nu >= 0, nu, -1),
                "say_point_mismatch": (nu >= 0) & (nu != per["n_pred"]),
                "answer_ok_strict": per["ok_s"],
                "answer_ok_lenient": per["ok_l"],
                "gca_l": per["ok_l"] & (per["f1"] >= 0.5),
            },
            pred_matched=per["pred_matched"],
            ref_matched=per["ref_matched"],
        )
    return SuiteReport("agc", len(s), s.parse_rate, int(s.missing.sum()), metrics, by, table)


def _text_metrics(preds: Sequence[str], refs: Sequence[str]) -> dict[str, float]:
    """Optional answer-span text metrics from :mod:`witness.eval.text` (another module)."""
    from ..errors import MissingDependencyError

    try:
        from . import text  # type: ignore[attr-defined]
    except ImportError as exc:  # pragma: no cover - depends on the text module being present
        raise MissingDependencyError(f"Expected witness.eval.text for --text-metrics, got {exc}.") from exc
    out = text.text_metrics(list(preds), list(refs))
    out = out if isinstance(out, Mapping) else getattr(out, "__dict__", {})
    return {f"text_{k}": v for k, v in dict(out).items() if isinstance(v, (int, float))}


class AGC:
    """Accumulating AGC for training loops (torchmetrics style) over the same pure functions.

    >>> from witness.schema import item_record
    >>> agc = AGC()
    >>> agc.update([item_record("q1", "i", 100, 100, "Any car?", "yes", [[0, 0, 10, 10]], ["car"])],
    ...            [{"id": "q1", "answer": "yes", "boxes": [[0, 0, 10, 10]]}])
    >>> agc.compute()["f1"]
    1.0
    """

    def __init__(self, *, iou: float = 0.5):
        self.iou = iou
        self._parts: list[Samples] = []

    def update(self, items: Any, predictions: Any, *, fmt: str | None = None) -> None:
        """Add a batch: items (a table or item dicts) and their predictions (dicts or Predictions)."""
        self._parts.append(samples_from_records(items, predictions, fmt=fmt))

    def reset(self) -> None:
        self._parts = []

    def compute_report(self) -> SuiteReport:
        from ..errors import InputError

        if not self._parts:
            raise InputError("Expected at least one update() before compute(), got none (AGC). Call update first.")
        return evaluate_agc(concat_samples(self._parts), iou=self.iou, details=False)

    def compute(self) -> dict[str, float | int | None]:
        """The contract's metrics over everything added since the last :meth:`reset`."""
        return dict(self.compute_report().metrics)
