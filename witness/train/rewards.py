"""Rewards of ECPO (RoadSceneVQA-G) and ConVLM (ConVBench): pure numpy, importable without torch/trl.

Exact definitions (``shared/ARCHITECTURE.md``, "Training contracts"):

* **Consensus set** (RoadSceneVQA-G Eq. 9): pool the boxes of the G rollouts of one prompt, in
  rollout order then box order; greedy clustering — a box joins the cluster whose representative
  (the element-wise mean of its members) has the highest IoU ≥ 0.5 (ties: the older cluster), else
  founds a new cluster; keep the representatives of clusters supported by ≥ k distinct rollouts,
  ``k = max(2, ⌈G/4⌉)``.
* **ECPO reward** (Eq. 10–11): ``r_grp = |M_0.5(B̂, S̃)| / |S̃|`` (Hungarian matching maximizing
  total IoU; an empty S̃ gives 1 for an empty B̂, else 0); ``r_fmt`` = 1 if the output parses;
  ``r_ans`` = token F1 with the reference answer; ``r = 0.6 r_grp + 0.1 r_fmt + 0.3 r_ans``.
  No term reads reference boxes (the union recall against them is *logged* for diagnosis only).
* **ConVLM reward**: ``r = r_acc + γ r_con`` (γ = 0.5); sample-wise ``r_con(o¹ᵢ) = c(o¹ᵢ, o²ᵢ)``,
  group-wise ``r_con(o¹ᵢ) = mean_j c(o¹ᵢ, o²ⱼ)``; ``c`` = 1 when both answers are right or both wrong.

The TRL reward callables (small picklable classes with TRL's signature
``f(prompts, completions, completion_ids, **columns) -> list[float | None]``) are built on the pure
functions. ``None`` means "cannot score", never 0. TRL calls a reward once per process with that
process's slice of the generation batch, and a slice may split a group of G rollouts (or the two
questions of a pair) across ranks; the group rewards therefore gather the whole batch from every
rank, score complete groups, and return this rank's slice (``shared/notes/trl-cpu.md``).

Speed: :func:`ecpo_group` and :func:`consensus_set` run one compiled numba kernel (clustering, IoU
against S̃, and the per-rollout match counts wherever a shortcut settles them exactly; the other
rollouts run the same :func:`scipy.optimize.linear_sum_assignment`) when numba is installed (the
``train`` extra). Its float operations are those of the pure-Python path, in the same order, so the
results are bit-for-bit equal (tested); without numba, with ``WITNESS_REWARDS_JIT=0``, or for input
outside the kernel's exact range (non-finite or huge coordinates), the pure-Python path runs. numba
is imported, and the kernel compiled or loaded from its on-disk cache, once per process, on first
use or by :func:`warmup` (:class:`ConsensusCoverageReward` calls it).

Answer matching comes from :mod:`witness.eval.answers` (the evaluator's helpers): ``r_ans`` is its
token F1 over leniently normalized answers, ``r_acc`` its strict GCA-s rule.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any, Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

from ..boxes import as_boxes, match_max_iou
from ..errors import InputError
from ..eval.answers import match_strict, normalize_lenient, read_yes_no, stated_count
from ..eval.answers import token_f1 as _eval_token_f1

__all__ = [
    "ECPO_WEIGHTS",
    "CONVLM_GAMMA",
    "default_k",
    "token_f1",
    "answer_correct",
    "consensus_set",
    "coverage",
    "consistency_reward",
    "ecpo_group",
    "EcpoGroup",
    "warmup",
    "completion_text",
    "ConsensusCoverageReward",
    "FormatReward",
    "AnswerF1Reward",
    "BoxRecallReward",
    "AccuracyReward",
    "ConsistencyReward",
    "REWARDS",
]

#: ECPO reward weights λ_grp, λ_fmt, λ_ans (RoadSceneVQA-G, Sec. V).
ECPO_WEIGHTS: tuple[float, float, float] = (0.6, 0.1, 0.3)
#: ConVLM's consistency weight γ.
CONVLM_GAMMA = 0.5

def default_k(g: int) -> int:
    """Consensus support threshold ``k = max(2, ⌈G/4⌉)`` (RoadSceneVQA-G Eq. 9).

    >>> [default_k(g) for g in (4, 6, 8, 9, 16)]
    [2, 2, 2, 3, 4]
    """
    return max(2, math.ceil(g / 4))


def token_f1(prediction: str | None, reference: str | None) -> float:
    """ECPO's ``r_ans``: token-overlap F1 (:func:`witness.eval.answers.token_f1`, SQuAD style) of the
    two answers after :func:`witness.eval.answers.normalize_lenient` (lowercase, punctuation
    removed, number words as digits). Two empty answers give 1.0, one empty answer 0.0.

    >>> token_f1("Two cars.", "2 cars")
    1.0
    >>> round(token_f1("two red cars", "two cars"), 4)
    0.8
    >>> token_f1("", "yes")
    0.0
    """
    return _eval_token_f1(normalize_lenient(prediction or ""), normalize_lenient(reference or ""))


def answer_correct(prediction: str | None, reference: str | None) -> bool:
    """ConVLM's ``r_acc``: is the predicted answer right?

    * a yes/no reference: the prediction must *read* as the same yes/no
      (:func:`witness.eval.answers.read_yes_no`; an abstention or a contradiction is wrong);
    * a reference that states a count: the prediction's stated count ν must equal it;
    * otherwise the contract's strict rule (:func:`witness.eval.answers.match_strict`, GCA-s).

    The first two close a loophole of plain containment under a consistency reward: "yes no" would
    contain both answers and so be "right" for both questions of a pair. A missing answer is wrong.

    >>> answer_correct("Yes, there is.", "yes"), answer_correct("yesterday", "yes"), answer_correct("yes no", "no")
    (True, False, False)
    >>> answer_correct("2 or 3", "3"), answer_correct("Three cars.", "3"), answer_correct("A red car", "red car")
    (False, True, True)
    """
    if prediction is None or reference is None:
        return False
    ref = reference.strip().lower().rstrip(".!")
    if ref in ("yes", "no"):
        return read_yes_no(prediction) == ref
    ref_count = stated_count(reference)
    if ref_count is not None:
        return stated_count(prediction) == ref_count
    return bool(match_strict(prediction, reference))


# --------------------------------------------------------------------------------------------
# Consensus and coverage (pure functions)
# --------------------------------------------------------------------------------------------


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU matrix ``(N, M)`` of pixel boxes with 2-D column arithmetic (the reward hot path).

    Same values as :func:`witness.boxes.iou_matrix` (tested against it), several times faster on
    the pooled rollouts of a group because it avoids ``(N, M, 2)`` temporaries.
    """
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)))
    iw = np.minimum(a[:, 2:3], b[:, 2])
    iw -= np.maximum(a[:, 0:1], b[:, 0])
    np.maximum(iw, 0.0, out=iw)
    ih = np.minimum(a[:, 3:4], b[:, 3])
    ih -= np.maximum(a[:, 1:2], b[:, 1])
    np.maximum(ih, 0.0, out=ih)
    iw *= ih  # intersection, in place
    area_a = np.maximum(a[:, 2] - a[:, 0], 0.0) * np.maximum(a[:, 3] - a[:, 1], 0.0)
    area_b = np.maximum(b[:, 2] - b[:, 0], 0.0) * np.maximum(b[:, 3] - b[:, 1], 0.0)
    union = area_a[:, None] + area_b
    union -= iw
    np.divide(iw, union, out=iw, where=union > 0)
    return iw


def _cluster_arrays(rollouts: Sequence[np.ndarray], iou: float) -> tuple[np.ndarray, list[int]]:
    """Greedy clustering of the pooled rollouts; returns the representatives and their support.

    Box by box in rollout order: a box joins the cluster whose representative (mean of members)
    has the highest IoU ≥ ``iou`` (ties: the older cluster), else founds one. Support is a bit set
    of rollout indices. For ``iou >= 0.5`` only clusters whose representative's centre lies inside
    the box are candidates — exact, because IoU ≥ 0.5 implies that on each axis the intersection
    covers at least half of each box and so contains each box's centre. Candidates come from a grid
    of cells over the representatives' centres (cell side: the median box side), so a box looks at
    a few clusters instead of all of them. Pure Python floats: the groups are small.
    """
    pooled = [b.tolist() for b in rollouts]
    n_all = sum(len(b) for b in pooled)
    if n_all == 0:
        return np.zeros((0, 4)), []
    use_grid = iou >= 0.5
    if use_grid:
        flat = np.concatenate([r for r in rollouts if len(r)])
        side = float(np.median(np.maximum(flat[:, 2] - flat[:, 0], flat[:, 3] - flat[:, 1])))
        inv = 1.0 / side if side > 0 else 1.0
        cells: dict[tuple[int, int], list[int]] = {}
    # cluster k: rep = reps[k], sums[k], n[k], area[k], support[k], cell[k]
    reps: list[list[float]] = []
    sums: list[list[float]] = []
    count: list[int] = []
    area: list[float] = []
    support: list[int] = []
    cell_of: list[tuple[int, int]] = []
    for g, boxes in enumerate(pooled):
        bit = 1 << g
        if use_grid and boxes:
            span = np.floor(rollouts[g] * inv).astype(np.int64).tolist()
        for i, (x1, y1, x2, y2) in enumerate(boxes):
            a = (x2 - x1) * (y2 - y1)
            if use_grid:
                cand = []
                c1, c2, c3, c4 = span[i]
                if (c3 - c1 + 1) * (c4 - c2 + 1) > len(reps):  # a big box: scanning is cheaper
                    cand = range(len(reps))
                elif reps:
                    for cx in range(c1, c3 + 1):
                        for cy in range(c2, c4 + 1):
                            lst = cells.get((cx, cy))
                            if lst:
                                cand.extend(lst)
                    if len(cand) > 1:
                        cand.sort()
            else:
                cand = range(len(reps))
            best, best_v = -1, -1.0
            for k in cand:
                r = reps[k]
                iw = (x2 if x2 < r[2] else r[2]) - (x1 if x1 > r[0] else r[0])
                if iw <= 0:
                    continue
                ih = (y2 if y2 < r[3] else r[3]) - (y1 if y1 > r[1] else r[1])
                if ih <= 0:
                    continue
                inter = iw * ih
                union = a + area[k] - inter
                v = inter / union if union > 0 else 0.0
                if v >= iou and v > best_v:
                    best, best_v = k, v
            if best < 0:
                k = len(reps)
                reps.append([x1, y1, x2, y2])
                sums.append([x1, y1, x2, y2])
                count.append(1)
                area.append(a)
                support.append(bit)
                if use_grid:
                    c = (int(math.floor((x1 + x2) * 0.5 * inv)), int(math.floor((y1 + y2) * 0.5 * inv)))
                    cell_of.append(c)
                    cells.setdefault(c, []).append(k)
            else:
                k = best
                s = sums[k]
                s[0] += x1
                s[1] += y1
                s[2] += x2
                s[3] += y2
                n = count[k] + 1
                count[k] = n
                r = [s[0] / n, s[1] / n, s[2] / n, s[3] / n]
                reps[k] = r
                area[k] = (r[2] - r[0]) * (r[3] - r[1])
                support[k] |= bit
                if use_grid:
                    c = (int(math.floor((r[0] + r[2]) * 0.5 * inv)), int(math.floor((r[1] + r[3]) * 0.5 * inv)))
                    if c != cell_of[k]:
                        cells[cell_of[k]].remove(k)
                        cells.setdefault(c, []).append(k)
                        cell_of[k] = c
    return np.asarray(reps, dtype=np.float64).reshape(-1, 4), support


def _consensus(rollouts: Sequence[np.ndarray], k: int, iou: float) -> np.ndarray:
    reps, support = _cluster_arrays(rollouts, iou)
    keep = [i for i, s in enumerate(support) if s.bit_count() >= k]
    return reps[keep]


def consensus_set(rollouts: Sequence[Any], k: int | None = None, iou: float = 0.5) -> list[list[float]]:
    """ECPO's consensus set S̃ of the G rollouts of one prompt (RoadSceneVQA-G Eq. 9).

    ``rollouts`` is one box array ``(N_g, 4)`` (any common frame: pixels or the 0–1000 grid) per
    rollout. Returns the representatives (element-wise means of the members) of the clusters
    supported by at least ``k`` distinct rollouts (``k = max(2, ⌈G/4⌉)`` by default), in the order
    the clusters were founded.

    >>> a, b = [[0, 0, 10, 10]], [[0, 0, 10, 12]]
    >>> consensus_set([a, b, [], []])  # one object, two rollouts agree: k = 2
    [[0.0, 0.0, 10.0, 11.0]]
    >>> consensus_set([a, [[50, 50, 60, 60]], [], []])  # no object has support 2
    []
    """
    if k is None:
        k = default_k(len(rollouts))
    if k < 1:
        raise InputError(f"Expected a support threshold k >= 1, got {k} (consensus_set). Use k = max(2, ceil(G/4)).")
    arrays = [as_boxes(r, name="rollout boxes") for r in rollouts]
    fast = _ecpo_fast(arrays, k, iou, False)
    if fast is not None:
        return fast[2].tolist()
    return _consensus(arrays, k, iou).tolist()


def _matched(ov: np.ndarray, iou: float) -> int:
    """``|M_iou|`` of an overlap matrix: Hungarian unless the overlaps form a partial permutation."""
    if ov.size == 0:
        return 0
    nz = ov > 0
    if (nz.sum(axis=0) <= 1).all() and (nz.sum(axis=1) <= 1).all():
        return int((ov >= iou).sum())
    rows, cols = linear_sum_assignment(ov, maximize=True)
    return int((ov[rows, cols] >= iou).sum())


def coverage(boxes, consensus, iou: float = 0.5) -> float:
    """ECPO's ``r_grp = |M_0.5(B̂, S̃)| / |S̃|`` (RoadSceneVQA-G Eq. 10); an empty S̃ gives 1.0 for
    an empty B̂ and 0.0 otherwise. ``M`` maximizes total IoU (Hungarian) and counts pairs ≥ ``iou``.

    >>> coverage([[0, 0, 10, 10]], [[0, 0, 10, 10], [20, 20, 30, 30]])
    0.5
    >>> coverage([], []), coverage([[0, 0, 1, 1]], [])
    (1.0, 0.0)
    """
    b, s = as_boxes(boxes), as_boxes(consensus, name="consensus")
    if len(s) == 0:
        return 1.0 if len(b) == 0 else 0.0
    return _matched(_iou(b, s), iou) / len(s)


def consistency_reward(correct_1: Sequence[bool], correct_2: Sequence[bool], mode: str = "sample") -> list[float]:
    """ConVLM's ``r_con`` for the rollouts of question 1 of a pair (swap the arguments for question 2).

    ``c(o¹ᵢ, o²ⱼ) = 1`` when both answers are right or both wrong. Sample-wise:
    ``r_con(o¹ᵢ) = c(o¹ᵢ, o²ᵢ)`` (equal group sizes); group-wise: ``mean_j c(o¹ᵢ, o²ⱼ)``.

    >>> consistency_reward([True, False], [True, True])
    [1.0, 0.0]
    >>> consistency_reward([True, False], [True, True], mode="group")
    [1.0, 0.0]
    >>> consistency_reward([True, False], [True, False], mode="group")
    [0.5, 0.5]
    """
    a = np.asarray(correct_1, dtype=bool)
    b = np.asarray(correct_2, dtype=bool)
    if mode == "sample":
        if a.shape != b.shape:
            raise InputError(
                f"Expected as many rollouts for both questions of a pair, got {len(a)} and {len(b)} "
                "(consistency_reward, mode='sample'). Use mode='group' or equal group sizes."
            )
        return (a == b).astype(float).tolist()
    if mode == "group":
        if len(b) == 0:
            raise InputError("Expected rollouts for question 2, got none (consistency_reward). Score complete pairs.")
        return (a[:, None] == b[None, :]).mean(axis=1).tolist()
    raise InputError(f"Expected mode 'sample' or 'group', got {mode!r} (consistency_reward). Use one of them.")


class EcpoGroup:
    """The ECPO scores of one group: ``r_grp`` per rollout, the consensus and its size."""

    __slots__ = ("r_grp", "consensus", "union")

    def __init__(self, r_grp: list[float | None], consensus: list[list[float]], union: np.ndarray):
        self.r_grp, self.consensus, self.union = r_grp, consensus, union

    def __repr__(self) -> str:
        return f"EcpoGroup(r_grp={self.r_grp}, consensus={len(self.consensus)} boxes)"


def ecpo_group(rollouts: Sequence[Any], k: int | None = None, iou: float = 0.5) -> EcpoGroup:
    """Consensus set and ``r_grp`` of every rollout of one group in one pass (the hot path).

    ``rollouts`` may contain ``None`` (an output that did not parse): it contributes no box and its
    ``r_grp`` is ``None`` — it cannot be scored (TRL counts it as 0 in the weighted sum, and its
    ``r_fmt`` is 0); an unparsed output must not earn the "empty consensus, empty answer" credit.
    One IoU matrix of the pooled boxes against S̃ serves every rollout.

    >>> g = ecpo_group([[[0, 0, 10, 10]], [[0, 0, 10, 10], [50, 50, 60, 60]], [[50, 50, 60, 61]], []])
    >>> g.r_grp, len(g.consensus)
    ([0.5, 1.0, 0.5, 0.0], 2)
    >>> ecpo_group([[], None]).r_grp
    [1.0, None]
    """
    G = len(rollouts)
    if k is None:
        k = default_k(G)
    arrays = [as_boxes(r if r is not None else [], name="rollout boxes") for r in rollouts]
    fast = _ecpo_fast(arrays, k, iou, True)
    if fast is not None:
        return _ecpo_group_from_kernel(rollouts, fast, iou)
    consensus = _consensus(arrays, k, iou)
    union = np.concatenate(arrays) if arrays else np.zeros((0, 4))
    if not len(consensus):
        out = [None if r is None else (1.0 if len(a) == 0 else 0.0) for r, a in zip(rollouts, arrays, strict=True)]
        return EcpoGroup(out, consensus.tolist(), union)
    ov = _iou(union, consensus)
    sizes = np.fromiter((len(a) for a in arrays), dtype=np.int64, count=G)
    matched = _matched_blocks(ov, sizes, iou)
    n_s = len(consensus)
    out = [None if r is None else m / n_s for r, m in zip(rollouts, matched, strict=True)]
    return EcpoGroup(out, consensus.tolist(), union)


def _ecpo_group_from_kernel(rollouts: Sequence[Any], fast: tuple, iou: float) -> EcpoGroup:
    """:func:`ecpo_group`'s result from :func:`_ecpo_fast`'s: the blocks the kernel could not
    settle by a shortcut run the same :func:`scipy.optimize.linear_sum_assignment` as the Python path."""
    union, offsets, consensus, matched, needs, ov = fast
    n_s = len(consensus)
    if n_s == 0:
        sizes = np.diff(offsets).tolist()
        out = [None if r is None else (1.0 if n == 0 else 0.0) for r, n in zip(rollouts, sizes, strict=True)]
        return EcpoGroup(out, [], union)
    counts = matched.tolist()
    if needs.any():
        for g in np.flatnonzero(needs).tolist():
            block = ov[offsets[g] : offsets[g + 1]]
            rows, cols = linear_sum_assignment(block, maximize=True)
            counts[g] = int((block[rows, cols] >= iou).sum())
    out = [None if r is None else m / n_s for r, m in zip(rollouts, counts, strict=True)]
    return EcpoGroup(out, consensus.tolist(), union)


def _matched_blocks(ov: np.ndarray, sizes: np.ndarray, iou: float) -> list[int]:
    """``|M_iou|`` of each row block of ``ov`` (one block per rollout), vectorized where exact.

    A block needs no Hungarian when each of its admissible pairs (IoU ≥ ``iou``) is alone in its row
    and column and strictly dominant: ``IoU_ij > max_other_row_i + max_other_col_j`` (others within
    the block). Then every maximum-total-IoU assignment contains all admissible pairs (exchanging
    one away strictly lowers the total), so the count is the number of admissible entries. Other
    blocks run :func:`scipy.optimize.linear_sum_assignment`.
    """
    G = len(sizes)
    out = [0] * G
    nonempty = np.flatnonzero(sizes)
    if ov.size == 0 or len(nonempty) == 0:
        return out
    adm = ov >= iou
    other = np.where(adm, 0.0, ov)
    row_adm = adm.sum(axis=1)
    row_other = other.max(axis=1)
    starts = (np.cumsum(sizes) - sizes)[nonempty]
    col_adm = np.add.reduceat(adm.astype(np.int64), starts, axis=0)
    col_other = np.maximum.reduceat(other, starts, axis=0)
    block = np.repeat(np.arange(len(nonempty)), sizes[nonempty])
    dominant = ~adm | (ov > row_other[:, None] + col_other[block])
    row_ok = (row_adm <= 1) & dominant.all(axis=1)
    block_ok = (np.bincount(block, weights=~row_ok, minlength=len(nonempty)) == 0) & (col_adm <= 1).all(axis=1)
    counts = np.bincount(block, weights=row_adm, minlength=len(nonempty))
    for b, g in enumerate(nonempty.tolist()):
        if block_ok[b]:
            out[g] = int(counts[b])
        else:
            s0 = int(starts[b])
            out[g] = _matched(ov[s0 : s0 + int(sizes[g])], iou)
    return out


# --------------------------------------------------------------------------------------------
# Compiled fast path (optional numba): the same arithmetic as the pure-Python path, op for op
# --------------------------------------------------------------------------------------------

#: Whether :func:`ecpo_group` and :func:`consensus_set` may use the compiled kernel (when numba is
#: installed). ``WITNESS_REWARDS_JIT=0`` in the environment turns it off; tests and benchmarks flip it.
_USE_JIT = os.environ.get("WITNESS_REWARDS_JIT", "1") != "0"
#: The compiled kernel: ``None`` until first needed, ``False`` when numba is missing or failed.
_JIT: Any = None
_JIT_SIGNATURE = "(float64[:, ::1], int64[::1], int64, float64, boolean, boolean)"
#: Coordinates beyond this magnitude (or not finite) take the pure-Python path: below it no area,
#: sum or grid cell of the kernel can overflow or lose integer exactness.
_JIT_MAX_COORD = 1e150


def _ecpo_kernel(boxes, offsets, k, iou, use_grid, cover):  # pragma: no cover - compiled by numba
    """Consensus (and, with ``cover``, the per-rollout match counts) of the pooled ``boxes``.

    ``offsets[g]:offsets[g + 1]`` are the rows of rollout ``g``. Mirrors :func:`_cluster_arrays`
    (same grid of candidate cells, same candidate order, same float operations in the same order),
    :func:`_iou` and :func:`_matched_blocks` + :func:`_matched`'s shortcuts, so the results are
    bit-for-bit those of the pure-Python path. Returns ``(status, consensus, matched, needs_lsa,
    ov)``: ``status`` 1 means "input outside the kernel's exact range, use the Python path";
    ``needs_lsa[g]`` marks the blocks of ``ov`` (the IoU matrix of the pooled boxes against the
    consensus) whose count needs :func:`scipy.optimize.linear_sum_assignment`.
    """
    n = boxes.shape[0]
    n_g = offsets.shape[0] - 1
    matched = np.zeros(n_g, np.int64)
    needs = np.zeros(n_g, np.bool_)
    no_ov = np.zeros((0, 0))
    lim = _JIT_MAX_COORD
    for i in range(n):
        for j in range(4):
            if not abs(boxes[i, j]) <= lim:
                return 1, np.zeros((0, 4)), matched, needs, no_ov
    inv = 1.0
    if use_grid and n > 0:
        sides = np.empty(n)
        for i in range(n):
            w = boxes[i, 2] - boxes[i, 0]
            h = boxes[i, 3] - boxes[i, 1]
            sides[i] = w if w > h else h
        side = np.median(sides)
        inv = 1.0 / side if side > 0 else 1.0
        # grid cells are compared as floats: exact while |x / side| < 2**52
        for i in range(n):
            for j in range(4):
                if not abs(boxes[i, j] * inv) < 4503599627370496.0:
                    return 1, np.zeros((0, 4)), matched, needs, no_ov
    # greedy clustering (see _cluster_arrays); support counts distinct rollouts (boxes come in
    # rollout order, so a cluster's support grows when its last rollout differs)
    reps = np.empty((n, 4))
    sums = np.empty((n, 4))
    count = np.empty(n, np.int64)
    area = np.empty(n)
    support = np.empty(n, np.int64)
    last = np.empty(n, np.int64)
    cell_x = np.empty(n)
    cell_y = np.empty(n)
    nc = 0
    c1 = c2 = c3 = c4 = 0.0
    for g in range(n_g):
        for i in range(offsets[g], offsets[g + 1]):
            x1 = boxes[i, 0]
            y1 = boxes[i, 1]
            x2 = boxes[i, 2]
            y2 = boxes[i, 3]
            a = (x2 - x1) * (y2 - y1)
            scan_all = True
            if use_grid:
                c1 = np.floor(x1 * inv)
                c2 = np.floor(y1 * inv)
                c3 = np.floor(x2 * inv)
                c4 = np.floor(y2 * inv)
                scan_all = (c3 - c1 + 1.0) * (c4 - c2 + 1.0) > nc
            best = -1
            best_v = -1.0
            for c in range(nc):
                if not scan_all:
                    cx = cell_x[c]
                    cy = cell_y[c]
                    if cx < c1 or cx > c3 or cy < c2 or cy > c4:
                        continue
                r0 = reps[c, 0]
                r1 = reps[c, 1]
                r2 = reps[c, 2]
                r3 = reps[c, 3]
                iw = (x2 if x2 < r2 else r2) - (x1 if x1 > r0 else r0)
                if iw <= 0:
                    continue
                ih = (y2 if y2 < r3 else r3) - (y1 if y1 > r1 else r1)
                if ih <= 0:
                    continue
                inter = iw * ih
                union = a + area[c] - inter
                v = inter / union if union > 0 else 0.0
                if v >= iou and v > best_v:
                    best = c
                    best_v = v
            if best < 0:
                c = nc
                nc += 1
                reps[c, 0] = sums[c, 0] = x1
                reps[c, 1] = sums[c, 1] = y1
                reps[c, 2] = sums[c, 2] = x2
                reps[c, 3] = sums[c, 3] = y2
                count[c] = 1
                area[c] = a
                support[c] = 1
                last[c] = g
                if use_grid:
                    cell_x[c] = np.floor((x1 + x2) * 0.5 * inv)
                    cell_y[c] = np.floor((y1 + y2) * 0.5 * inv)
            else:
                c = best
                sums[c, 0] += x1
                sums[c, 1] += y1
                sums[c, 2] += x2
                sums[c, 3] += y2
                m = count[c] + 1
                count[c] = m
                fm = float(m)
                r0 = sums[c, 0] / fm
                r1 = sums[c, 1] / fm
                r2 = sums[c, 2] / fm
                r3 = sums[c, 3] / fm
                reps[c, 0] = r0
                reps[c, 1] = r1
                reps[c, 2] = r2
                reps[c, 3] = r3
                area[c] = (r2 - r0) * (r3 - r1)
                if last[c] != g:
                    support[c] += 1
                    last[c] = g
                if use_grid:
                    cell_x[c] = np.floor((r0 + r2) * 0.5 * inv)
                    cell_y[c] = np.floor((r1 + r3) * 0.5 * inv)
    n_s = 0
    for c in range(nc):
        if support[c] >= k:
            n_s += 1
    cons = np.empty((n_s, 4))
    j = 0
    for c in range(nc):
        if support[c] >= k:
            cons[j, 0] = reps[c, 0]
            cons[j, 1] = reps[c, 1]
            cons[j, 2] = reps[c, 2]
            cons[j, 3] = reps[c, 3]
            j += 1
    if not cover or n_s == 0:
        return 0, cons, matched, needs, no_ov
    # IoU of every pooled box against the consensus (see _iou)
    ov = np.empty((n, n_s))
    area_s = np.empty(n_s)
    for j in range(n_s):
        w = cons[j, 2] - cons[j, 0]
        h = cons[j, 3] - cons[j, 1]
        area_s[j] = (w if w > 0.0 else 0.0) * (h if h > 0.0 else 0.0)
    for i in range(n):
        a0 = boxes[i, 0]
        a1 = boxes[i, 1]
        a2 = boxes[i, 2]
        a3 = boxes[i, 3]
        w = a2 - a0
        h = a3 - a1
        area_i = (w if w > 0.0 else 0.0) * (h if h > 0.0 else 0.0)
        for j in range(n_s):
            b0 = cons[j, 0]
            b1 = cons[j, 1]
            b2 = cons[j, 2]
            b3 = cons[j, 3]
            iw = (a2 if a2 < b2 else b2) - (a0 if a0 > b0 else b0)
            if not iw > 0.0:
                iw = 0.0
            ih = (a3 if a3 < b3 else b3) - (a1 if a1 > b1 else b1)
            if not ih > 0.0:
                ih = 0.0
            inter = iw * ih
            union = area_i + area_s[j]
            union -= inter
            ov[i, j] = inter / union if union > 0 else inter
    # |M| of every rollout's block of rows (see _matched_blocks and _matched)
    row_adm = np.empty(n, np.int64)
    row_other = np.empty(n)
    col_adm = np.empty(n_s, np.int64)
    col_other = np.empty(n_s)
    col_nz = np.empty(n_s, np.int64)
    for g in range(n_g):
        s0 = offsets[g]
        s1 = offsets[g + 1]
        if s1 == s0:
            continue
        for j in range(n_s):
            col_adm[j] = 0
            col_other[j] = -np.inf
        total = 0
        for i in range(s0, s1):
            na = 0
            ro = -np.inf
            for j in range(n_s):
                v = ov[i, j]
                if v >= iou:
                    na += 1
                    col_adm[j] += 1
                    v = 0.0
                if v > ro:
                    ro = v
                if v > col_other[j]:
                    col_other[j] = v
            row_adm[i] = na
            row_other[i] = ro
            total += na
        ok = True
        for j in range(n_s):
            if col_adm[j] > 1:
                ok = False
                break
        if ok:
            for i in range(s0, s1):
                if row_adm[i] > 1:
                    ok = False
                    break
                for j in range(n_s):
                    v = ov[i, j]
                    if v >= iou and not v > row_other[i] + col_other[j]:
                        ok = False
                        break
                if not ok:
                    break
        if ok:
            matched[g] = total
            continue
        # partial permutation of the positive overlaps: every optimum takes them all
        for j in range(n_s):
            col_nz[j] = 0
        ok = True
        for i in range(s0, s1):
            nz = 0
            for j in range(n_s):
                if ov[i, j] > 0:
                    nz += 1
                    col_nz[j] += 1
            if nz > 1:
                ok = False
                break
        if ok:
            for j in range(n_s):
                if col_nz[j] > 1:
                    ok = False
                    break
        if ok:
            matched[g] = total
        else:
            needs[g] = True
    return 0, cons, matched, needs, ov


def _jit_kernel():
    """The compiled :func:`_ecpo_kernel` (built, or loaded from numba's cache, once per process),
    or ``None`` when it is switched off or numba is not installed."""
    global _JIT
    if not _USE_JIT:
        return None
    if _JIT is None:
        try:
            import numba
        except ImportError:
            _JIT = False
            return None
        opts = {"nogil": True, "error_model": "numpy"}
        try:
            _JIT = numba.njit(_JIT_SIGNATURE, cache=True, **opts)(_ecpo_kernel)
        except Exception:  # e.g. no writable cache directory: compile without a cache
            try:
                _JIT = numba.njit(_JIT_SIGNATURE, **opts)(_ecpo_kernel)
            except Exception:  # pragma: no cover - an unsupported numba: the Python path is exact too
                _JIT = False
    return _JIT or None


def warmup() -> bool:
    """Build (or load from cache) the compiled reward kernel now instead of on the first group.
    Returns whether the compiled path is in use (numba installed and not switched off)."""
    return _jit_kernel() is not None


def _ecpo_fast(arrays: list[np.ndarray], k: Any, iou: float, cover: bool):
    """Run the kernel on the rollouts' box arrays: ``(pooled, offsets, consensus, matched, needs,
    ov)``, or ``None`` when the pure-Python path must run (no numba, exotic ``k`` or input)."""
    kernel = _jit_kernel()
    if kernel is None or isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        return None
    if isinstance(iou, bool) or not isinstance(iou, (float, int)):  # np.float32 compares in float32
        return None
    n_g = len(arrays)
    offsets = np.empty(n_g + 1, np.int64)
    offsets[0] = 0
    total = 0
    for g, a in enumerate(arrays):
        total += len(a)
        offsets[g + 1] = total
    if total == 0:
        return None
    pooled = np.concatenate(arrays)
    # support never exceeds G: clamping k keeps every comparison and fits int64
    k_eff = max(0, min(int(k), n_g + 1))
    status, cons, matched, needs, ov = kernel(pooled, offsets, k_eff, float(iou), bool(iou >= 0.5), cover)
    if status:
        return None
    return pooled, offsets, cons, matched, needs, ov


# --------------------------------------------------------------------------------------------
# TRL reward callables
# --------------------------------------------------------------------------------------------


def completion_text(completion: Any) -> str:
    """The text of one TRL completion: a string, or a conversational list of messages.

    >>> completion_text([{"role": "assistant", "content": "hi"}])
    'hi'
    >>> completion_text([{"role": "assistant", "content": [{"type": "text", "text": "a"}]}])
    'a'
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        parts = []
        for msg in completion:
            content = msg.get("content", "") if isinstance(msg, dict) else msg
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts.extend(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
        return "".join(parts)
    return str(completion)


def _dist():
    """``(rank, world)`` when torch.distributed is up (never imports torch itself)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return 0, 1
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _gather(payload: dict) -> tuple[list[dict], int]:
    """Gather every rank's payload (rank order); return them and this rank's index."""
    rank, world = _dist()
    if world == 1:
        return [payload], 0
    from accelerate.utils import gather_object

    return gather_object([payload]), rank


def _col(kwargs: dict, name: str, n: int, default: Any = None) -> list:
    v = kwargs.get(name)
    if v is None:
        return [default] * n
    return list(v)


def _gather_columns(local: dict[str, list]) -> tuple[dict[str, list], int]:
    """Gather every rank's columns (each one value a local completion, ``texts`` among them) and
    join them in rank order; return them and the offset of this rank's slice."""
    payloads, rank = _gather(local)
    columns = {name: [v for p in payloads for v in p[name]] for name in local}
    return columns, sum(len(p["texts"]) for p in payloads[:rank])


def _answer_of(completion: Any, parsed: Any) -> str:
    """The answer of a completion: its parsed answer, or its whole text when it did not parse."""
    return parsed.answer if parsed.ok else completion_text(completion)


class _Parsing:
    """Parse completions with a named :mod:`witness.eval.parse` format (pixels of the item image)."""

    def __init__(self, fmt: str = "eta"):
        self.fmt = fmt

    def _parse(self, completions: Sequence[Any], widths: list, heights: list) -> list:
        from ..eval.parse import parse

        out = []
        for c, w, h in zip(completions, widths, heights, strict=True):
            p = parse(completion_text(c), self.fmt, width=float(w or 1000), height=float(h or 1000))
            out.append(p)
        return out

    def _parse_batch(self, completions: Sequence[Any], kwargs: dict) -> list:
        """:meth:`_parse` with the ``width`` and ``height`` columns (1000 where missing)."""
        n = len(completions)
        return self._parse(completions, _col(kwargs, "width", n, 1000), _col(kwargs, "height", n, 1000))

    def _score_answers(self, completions: Sequence[Any], kwargs: dict, score: Any) -> list[float | None]:
        """``score(answer, reference)`` of each completion's answer (:func:`_answer_of`) against
        the ``answer`` column; ``None`` where the row has no reference answer."""
        refs = _col(kwargs, "answer", len(completions))
        parsed = self._parse_batch(completions, kwargs)
        return [None if ref is None else score(_answer_of(c, p), ref)
                for c, p, ref in zip(completions, parsed, refs, strict=True)]


class FormatReward(_Parsing):
    """ECPO's ``r_fmt``: 1.0 when the completion parses in the format (default ``eta``), else 0.0."""

    __name__ = "r_fmt"

    def __call__(self, prompts=None, completions=(), completion_ids=None, **kwargs) -> list[float | None]:
        return [1.0 if p.ok else 0.0 for p in self._parse_batch(completions, kwargs)]


class AnswerF1Reward(_Parsing):
    """ECPO's ``r_ans``: token F1 of the parsed answer with the reference ``answer`` column; an
    unparsed completion scores its whole text. ``None`` where the row has no reference answer."""

    __name__ = "r_ans"

    def __call__(self, prompts=None, completions=(), completion_ids=None, **kwargs) -> list[float | None]:
        return self._score_answers(completions, kwargs, token_f1)


class BoxRecallReward(_Parsing):
    """Supervised baseline (RoadSceneVQA-G Table IX, last row): per-box recall against the reference
    ``boxes`` column, ``|M_0.5(B̂, B*)| / |B*|`` (empty B*: 1.0 for an empty B̂, else 0.0). Not ECPO."""

    __name__ = "r_box_recall"

    def __init__(self, fmt: str = "eta", iou: float = 0.5):
        super().__init__(fmt)
        self.iou = iou

    def __call__(self, prompts=None, completions=(), completion_ids=None, **kwargs) -> list[float | None]:
        parsed = self._parse_batch(completions, kwargs)
        refs = _col(kwargs, "boxes", len(completions))
        out: list[float | None] = []
        for p, ref in zip(parsed, refs, strict=True):
            if ref is None:
                out.append(None)
            else:
                out.append(coverage(p.boxes if p.ok else [], ref, self.iou))
        return out


class ConsensusCoverageReward(_Parsing):
    """ECPO's ``r_grp`` for every completion, with whole groups gathered across ranks.

    The generation batch holds consecutive groups of ``num_generations`` rollouts of one prompt
    (TRL's ``RepeatSampler``); this reward gathers the completions, image sizes and item ids of all
    ranks, checks each group of G shares one item ``id``, computes the consensus of each group
    (:func:`ecpo_group`) and returns this rank's slice. It logs ``ecpo/consensus_size``,
    ``ecpo/rollouts_per_group`` (always G: proof that no group was split) and
    ``ecpo/union_recall`` (recall of the pooled boxes against the reference ``boxes`` — for
    diagnosis only, never rewarded). An unparsed rollout contributes no box and gets ``None``.
    """

    __name__ = "r_grp"

    def __init__(self, num_generations: int, *, k: int | None = None, iou: float = 0.5, fmt: str = "eta"):
        super().__init__(fmt)
        if num_generations < 2:
            raise InputError(f"Expected num_generations >= 2, got {num_generations} (ECPO). A consensus needs several rollouts.")
        if k is not None and not (isinstance(k, (int, np.integer)) and not isinstance(k, bool) and 1 <= k <= num_generations):
            raise InputError(
                f"Expected a consensus support k in [1, {num_generations}] (G), got {k!r} (--k). "
                "Leave it unset for k = max(2, ceil(G/4))."
            )
        self.num_generations = num_generations
        self.k = default_k(num_generations) if k is None else int(k)
        self.iou = iou
        self.last_groups: list[EcpoGroup] = []
        warmup()  # compile (or load) the reward kernel now, not inside the first training step

    def __call__(self, prompts=None, completions=(), completion_ids=None, **kwargs) -> list[float | None]:
        n = len(completions)
        local = {
            "texts": [completion_text(c) for c in completions],
            "width": _col(kwargs, "width", n, 1000),
            "height": _col(kwargs, "height", n, 1000),
            "id": _col(kwargs, "id", n),
            "boxes": _col(kwargs, "boxes", n),
        }
        cols, offset = _gather_columns(local)
        texts, widths, heights, ids, refs = (cols[c] for c in ("texts", "width", "height", "id", "boxes"))
        G = self.num_generations
        if len(texts) % G:
            raise InputError(
                f"Expected the gathered generation batch to hold whole groups of {G}, got {len(texts)} completions "
                "(ECPO reward). Make generation_batch_size a multiple of num_generations."
            )
        parsed = self._parse(texts, widths, heights)
        scores: list[float | None] = []
        groups, sizes, recalls = [], [], []
        for start in range(0, len(texts), G):
            gid = ids[start : start + G]
            if any(i != gid[0] for i in gid):
                raise InputError(
                    f"Expected {G} consecutive rollouts of one item, got ids {gid} (ECPO reward). "
                    "Keep TRL's RepeatSampler (num_generations) and do not reorder completions."
                )
            rollouts = [p.boxes if p.ok else None for p in parsed[start : start + G]]
            grp = ecpo_group(rollouts, self.k, self.iou)
            groups.append(grp)
            scores.extend(grp.r_grp)
            sizes.append(len(grp.consensus))
            ref = refs[start]
            if ref is not None and len(ref):
                m = match_max_iou(grp.union, ref, iou=self.iou)
                recalls.append(m.tp / len(ref))
        self.last_groups = groups
        log_metric = kwargs.get("log_metric")
        if log_metric is not None:
            log_metric("ecpo/consensus_size", float(np.mean(sizes)) if sizes else 0.0)
            log_metric("ecpo/rollouts_per_group", float(G) if groups else 0.0)
            log_metric("ecpo/groups_scored", float(len(groups)))
            if recalls:
                log_metric("ecpo/union_recall", float(np.mean(recalls)))
        return scores[offset : offset + n]


class AccuracyReward(_Parsing):
    """ConVLM's ``r_acc``: 1.0 when the answer is right by :func:`answer_correct`, else 0.0.

    The answer is the parsed ``<answer>`` part when the completion parses in ``fmt``, else the
    whole completion text (ConVLM answers may be plain text). ``None`` without a reference.
    """

    __name__ = "r_acc"

    def __call__(self, prompts=None, completions=(), completion_ids=None, **kwargs) -> list[float | None]:
        return self._score_answers(completions, kwargs, lambda answer, ref: float(answer_correct(answer, ref)))


class ConsistencyReward(_Parsing):
    """ConVLM's ``r_con``, scoring the rollouts of both questions of a pair together.

    Gathers the completions with their ``pair_id``, ``pair_role`` and ``answer`` columns from every
    rank, groups rollouts by (pair, role), and gives each rollout :func:`consistency_reward`
    against the rollouts of the other question (``mode`` ``sample`` or ``group``). ``None`` for a
    rollout whose partner question is not in the generation batch (or that has no pair): it cannot
    be scored. Logs ``convlm/pairs_scored`` and ``convlm/consistency``.
    """

    __name__ = "r_con"

    def __init__(self, mode: str = "sample", fmt: str = "eta"):
        super().__init__(fmt)
        if mode not in ("sample", "group"):
            raise InputError(f"Expected mode 'sample' or 'group', got {mode!r} (--consistency). Use one of them.")
        self.mode = mode

    def __call__(self, prompts=None, completions=(), completion_ids=None, **kwargs) -> list[float | None]:
        n = len(completions)
        local = {
            "texts": [completion_text(c) for c in completions],
            "answer": _col(kwargs, "answer", n),
            "pair_id": _col(kwargs, "pair_id", n),
            "pair_role": _col(kwargs, "pair_role", n),
            "width": _col(kwargs, "width", n, 1000),
            "height": _col(kwargs, "height", n, 1000),
        }
        cols, offset = _gather_columns(local)
        texts, answers, pair_ids, roles, widths, heights = (
            cols[c] for c in ("texts", "answer", "pair_id", "pair_role", "width", "height"))
        parsed = self._parse(texts, widths, heights)
        correct = [answer_correct(_answer_of(t, p), a) for p, t, a in zip(parsed, texts, answers, strict=True)]
        members: dict[tuple, list[int]] = {}
        for i, (pid, role) in enumerate(zip(pair_ids, roles, strict=True)):
            if pid is not None and role in (1, 2):
                members.setdefault((pid, int(role)), []).append(i)
        scores: list[float | None] = [None] * len(texts)
        agree = []
        for (pid, role), idx in members.items():
            if role != 1 or (pid, 2) not in members:
                continue
            other = members[(pid, 2)]
            c1, c2 = [correct[i] for i in idx], [correct[i] for i in other]
            mode = self.mode if len(c1) == len(c2) else "group"
            for i, v in zip(idx, consistency_reward(c1, c2, mode), strict=True):
                scores[i] = v
            for i, v in zip(other, consistency_reward(c2, c1, mode), strict=True):
                scores[i] = v
            agree.extend(consistency_reward(c1, c2, mode))
        log_metric = kwargs.get("log_metric")
        if log_metric is not None:
            log_metric("convlm/pairs_scored", float(sum(1 for (p, r) in members if r == 1 and (p, 2) in members)))
            if agree:
                log_metric("convlm/consistency", float(np.mean(agree)))
        return scores[offset : offset + n]


#: Reward plug-ins by name (``module:attr`` paths also work where a name is asked for).
REWARDS: dict[str, type] = {
    "r_grp": ConsensusCoverageReward,
    "r_fmt": FormatReward,
    "r_ans": AnswerF1Reward,
    "r_box_recall": BoxRecallReward,
    "r_acc": AccuracyReward,
    "r_con": ConsistencyReward,
}
