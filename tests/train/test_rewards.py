"""Rewards against hand-worked cases, the contract's corner cases and a box-by-box reference."""

from __future__ import annotations

import contextlib
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import witness.train.rewards as rewards_mod
from witness.boxes import as_boxes, iou_matrix
from witness.errors import InputError
from witness.train.rewards import (
    AccuracyReward,
    AnswerF1Reward,
    BoxRecallReward,
    ConsensusCoverageReward,
    ConsistencyReward,
    FormatReward,
    _iou,
    answer_correct,
    consensus_set,
    consistency_reward,
    coverage,
    default_k,
    ecpo_group,
    token_f1,
)
from witness.train.serialize import serialize

from ._reference import consensus_reference, coverage_reference

A = [0, 0, 10, 10]
B = [100, 100, 120, 120]
C = [200, 0, 230, 30]


def test_k_is_max_2_and_a_quarter_of_g():
    assert [default_k(g) for g in (2, 6, 8, 12, 16)] == [2, 2, 2, 3, 4]


def test_consensus_keeps_clusters_supported_by_k_rollouts():
    s = consensus_set([[A, B], [A], [A, C], []], k=2)
    assert s == [[0.0, 0.0, 10.0, 10.0]]


def test_representative_is_the_elementwise_mean():
    s = consensus_set([[[0, 0, 10, 10]], [[0, 0, 10, 12]], [[0, 0, 12, 10]]], k=3)
    np.testing.assert_allclose(s, [[0, 0, 32 / 3, 32 / 3]])


def test_a_box_joins_the_cluster_with_the_highest_iou():
    # two clusters founded by rollout 0; the third box overlaps both, more the second one
    left, right = [0, 0, 10, 10], [4, 0, 14, 10]
    s = consensus_set([[left, right], [[4, 0, 13, 10]]], k=2)
    np.testing.assert_allclose(s, [[4, 0, 13.5, 10]])


def test_support_counts_distinct_rollouts_not_boxes():
    # one rollout repeating a box does not make a consensus
    assert consensus_set([[A, A], [], [], []], k=2) == []


def test_empty_consensus_rewards_only_empty_rollouts():
    g = ecpo_group([[A], [B], [], [C]])
    assert g.consensus == []
    assert g.r_grp == [0.0, 0.0, 1.0, 0.0]


def test_a_rollout_recovering_an_object_only_one_other_found_is_rewarded():
    # C is found by rollouts 1 and 3 only (k = 2): it enters S, and both are paid for it
    g = ecpo_group([[A, B], [A, C], [A], [A, C]])
    assert len(g.consensus) == 2
    assert g.r_grp == [0.5, 1.0, 0.5, 1.0]


def test_unparsed_rollout_cannot_be_scored():
    assert ecpo_group([[A], [A], None, []]).r_grp == [1.0, 1.0, None, 0.0]


def test_coverage_hand_worked():
    assert coverage([A, B], [A, B, C]) == pytest.approx(2 / 3)
    assert coverage([], []) == 1.0
    assert coverage([A], []) == 0.0
    assert coverage([], [A]) == 0.0


def test_coverage_uses_the_total_iou_assignment():
    # the assignment maximizing total IoU pairs (0, 1) and (1, 0); only pairs >= 0.5 count
    ov = np.array([[0.5, 0.45], [0.45, 0.0]])
    from witness.train.rewards import _matched

    assert _matched(ov, 0.5) == 0


def test_k_below_one_raises():
    with pytest.raises(InputError, match="support threshold k >= 1"):
        consensus_set([[A]], k=0)


def test_consistency_sample_and_group():
    assert consistency_reward([True, True, False], [True, False, False]) == [1.0, 0.0, 1.0]
    assert consistency_reward([True, False], [True, True, False, False], mode="group") == [0.5, 0.5]


def test_consistency_errors():
    with pytest.raises(InputError, match="as many rollouts"):
        consistency_reward([True], [True, False])
    with pytest.raises(InputError, match="mode 'sample' or 'group'"):
        consistency_reward([True], [True], mode="pair")
    with pytest.raises(InputError, match="rollouts for question 2"):
        consistency_reward([True], [], mode="group")


def test_token_f1_and_answer_correct():
    assert token_f1("two cars", "Two cars.") == 1.0
    assert token_f1("", "") == 1.0
    assert token_f1("a", "") == 0.0
    assert token_f1("three trucks", "two cars") == 0.0
    assert answer_correct("Yes, there are two.", "yes")
    assert not answer_correct("yesterday", "yes")
    assert not answer_correct(None, "yes")


def _eta(boxes, answer="1 car", w=1000, h=1000):
    return [{"role": "assistant", "content": serialize(answer, boxes, w, h)}]


def test_trl_rewards_score_a_batch_of_groups():
    comps = [_eta([A]), _eta([A, C]), "garbage", _eta([]), _eta([B]), _eta([B]), _eta([B]), _eta([B])]
    cols = {"id": ["q1"] * 4 + ["q2"] * 4, "width": [1000] * 8, "height": [1000] * 8,
            "answer": ["1 car"] * 8, "boxes": [[A]] * 4 + [[B, C]] * 4}
    logged = {}
    r = ConsensusCoverageReward(4)(prompts=None, completions=comps, log_metric=logged.__setitem__, **cols)
    assert r[:4] == [1.0, 1.0, None, 0.0]
    assert r[4:] == [1.0] * 4
    assert logged["ecpo/rollouts_per_group"] == 4.0
    assert logged["ecpo/consensus_size"] == 1.0
    assert logged["ecpo/union_recall"] == pytest.approx((1.0 + 0.5) / 2)
    assert FormatReward()(completions=comps, **cols) == [1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert AnswerF1Reward()(completions=comps, **cols)[0] == 1.0
    assert BoxRecallReward()(completions=comps, **cols)[:2] == [1.0, 1.0]


def test_group_reward_rejects_split_or_mixed_groups():
    with pytest.raises(InputError, match="whole groups of 4"):
        ConsensusCoverageReward(4)(completions=["x"] * 6, id=["a"] * 6)
    with pytest.raises(InputError, match="consecutive rollouts of one item"):
        ConsensusCoverageReward(2)(completions=["x"] * 2, id=["a", "b"])
    with pytest.raises(InputError, match="num_generations >= 2"):
        ConsensusCoverageReward(1)
    for bad in (0, 7, 2.5):  # k = 0 would keep every cluster; k > G keeps none
        with pytest.raises(InputError, match=r"consensus support k in \[1, 6\]"):
            ConsensusCoverageReward(6, k=bad)
    assert ConsensusCoverageReward(6, k=3).k == 3


def test_convlm_rewards_score_both_questions_of_a_pair_together():
    comps = ["<answer>yes</answer><boxes>[]</boxes>", "no", "no", "no", "plain text"]
    cols = {"answer": ["yes", "yes", "no", "no", "x"], "pair_id": ["p", "p", "p", "p", None],
            "pair_role": [1, 1, 2, 2, None]}
    acc = AccuracyReward()(completions=comps, **cols)
    assert acc == [1.0, 0.0, 1.0, 1.0, 0.0]
    con = ConsistencyReward("sample")(completions=comps, **cols)
    assert con == [1.0, 0.0, 1.0, 0.0, None]
    grp = ConsistencyReward("group")(completions=comps, **cols)
    assert grp == [1.0, 0.0, 0.5, 0.5, None]
    with pytest.raises(InputError, match="mode 'sample' or 'group'"):
        ConsistencyReward("pairs")


def test_rewards_import_without_torch_or_trl():
    code = (
        "import sys; import witness.train.rewards as r; "
        "r.ecpo_group([[[0,0,1,1]],[[0,0,1,1]]]); "
        "bad = [m for m in ('torch', 'trl', 'transformers', 'datasets') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_fast_iou_matches_boxes_iou_matrix():
    rng = np.random.default_rng(0)
    a = np.sort(rng.uniform(0, 50, (30, 2, 2)), axis=1).transpose(0, 2, 1).reshape(-1, 4)
    b = np.sort(rng.uniform(0, 50, (20, 2, 2)), axis=1).transpose(0, 2, 1).reshape(-1, 4)
    np.testing.assert_allclose(_iou(a, b), iou_matrix(a, b))


_boxes = st.lists(
    st.tuples(st.integers(0, 40), st.integers(0, 40), st.integers(1, 25), st.integers(1, 25)).map(
        lambda t: [t[0], t[1], t[0] + t[2], t[1] + t[3]]
    ),
    max_size=6,
)


@settings(max_examples=150, deadline=None)
@given(rollouts=st.lists(_boxes, min_size=2, max_size=8))
def test_consensus_and_coverage_match_the_box_by_box_reference(rollouts):
    k = default_k(len(rollouts))
    fast = consensus_set(rollouts)
    ref = consensus_reference(rollouts, k)
    np.testing.assert_allclose(np.asarray(fast).reshape(-1, 4), np.asarray(ref).reshape(-1, 4))
    g = ecpo_group(rollouts)
    for r, got in zip(rollouts, g.r_grp, strict=True):
        assert got == pytest.approx(coverage_reference(np.asarray(r, float).reshape(-1, 4), np.asarray(ref).reshape(-1, 4)))


def test_a_huge_box_among_small_ones_is_clustered_exactly():
    small = [[float(i), float(i), i + 2.0, i + 2.0] for i in range(0, 400, 5)]
    rollouts = [small + [[0, 0, 5000, 5000]], small, [[0, 0, 5000, 4900]]]
    ref = consensus_reference(rollouts, 2)
    np.testing.assert_allclose(np.asarray(consensus_set(rollouts)).reshape(-1, 4), np.asarray(ref).reshape(-1, 4))


# --------------------------------------------------------------------------------------------
# The compiled fast path (numba) against the pure-Python path (bit for bit) and the reference
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _jit(enabled: bool):
    old = rewards_mod._USE_JIT
    rewards_mod._USE_JIT = enabled
    try:
        yield
    finally:
        rewards_mod._USE_JIT = old


def _needs_numba():
    pytest.importorskip("numba")
    with _jit(True):  # also under WITNESS_REWARDS_JIT=0
        assert rewards_mod.warmup(), "numba is installed but the reward kernel did not build"


def _both_paths(rollouts, **kw):
    """ecpo_group and consensus_set on both paths; asserts they are exactly equal."""
    plain = [r if r is not None else [] for r in rollouts]
    with_set = kw.get("k") is None or kw["k"] >= 1  # consensus_set rejects k < 1, ecpo_group does not
    with _jit(True):
        assert rewards_mod._jit_kernel() is not None
        fast = ecpo_group(rollouts, **kw)
        fast_cons = consensus_set(plain, **kw) if with_set else fast.consensus
    with _jit(False):
        slow = ecpo_group(rollouts, **kw)
        slow_cons = consensus_set(plain, **kw) if with_set else slow.consensus
    assert fast.r_grp == slow.r_grp
    assert fast.consensus == slow.consensus
    assert fast_cons == slow_cons == fast.consensus
    assert np.array_equal(fast.union, slow.union)
    return fast


# coordinates on a coarse grid: duplicates, nested boxes and exact IoU ties are frequent
_tied_boxes = st.lists(
    st.tuples(st.integers(0, 8), st.integers(0, 8), st.integers(1, 5), st.integers(1, 5)).map(
        lambda t: [5 * t[0], 5 * t[1], 5 * (t[0] + t[2]), 5 * (t[1] + t[3])]
    ),
    max_size=8,
)
_rollout = st.one_of(_boxes, _tied_boxes, st.just([]), st.none())


@settings(max_examples=300, deadline=None)
@given(rollouts=st.lists(_rollout, min_size=1, max_size=16), k=st.one_of(st.none(), st.integers(1, 6)),
       iou=st.sampled_from([0.5, 0.5, 0.3, 0.75]))
def test_fast_path_equals_the_python_path_exactly(rollouts, k, iou):
    _needs_numba()
    _both_paths(rollouts, k=k, iou=iou)


@settings(max_examples=150, deadline=None)
@given(rollouts=st.lists(st.one_of(_boxes, _tied_boxes, st.just([])), min_size=2, max_size=10))
def test_both_paths_match_the_box_by_box_reference(rollouts):
    k = default_k(len(rollouts))
    ref = np.asarray(consensus_reference(rollouts, k)).reshape(-1, 4)
    for enabled in (True, False):
        with _jit(enabled):
            np.testing.assert_allclose(np.asarray(consensus_set(rollouts)).reshape(-1, 4), ref)
            g = ecpo_group(rollouts)
        for r, got in zip(rollouts, g.r_grp, strict=True):
            assert got == pytest.approx(coverage_reference(np.asarray(r, float).reshape(-1, 4), ref))


def _dense_group(rng, g, n, size=1920.0):
    """A dense traffic scene like benchmarks/rewards.py: jittered detections plus false positives."""
    xy = rng.uniform(0, size - 120, (n, 2))
    gt = np.concatenate([xy, xy + rng.uniform(20, 120, (n, 2))], axis=1)
    out = []
    for _ in range(g):
        keep = rng.random(n) < 0.85
        fp = rng.uniform(0, size - 100, (int(rng.integers(0, 3)), 2))
        out.append(np.concatenate([gt[keep] + rng.normal(0, 3, (int(keep.sum()), 4)), np.concatenate([fp, fp + 50], 1)]))
    return out


def test_fast_path_equals_the_python_path_on_dense_groups():
    _needs_numba()
    rng = np.random.default_rng(7)
    lsa_blocks = 0
    for g, n in ((6, 20), (16, 55), (16, 8)):
        for _ in range(40):
            rollouts = _dense_group(rng, g, n)
            _both_paths(rollouts)
            with _jit(True):
                fast = rewards_mod._ecpo_fast([np.asarray(r, float) for r in rollouts], default_k(g), 0.5, True)
            union, _, cons, _, needs, ov = fast
            lsa_blocks += int(needs.sum())
            if len(cons):  # the kernel's IoU matrix is _iou's, bit for bit
                assert np.array_equal(ov, _iou(union, cons))
    assert lsa_blocks > 0  # the Hungarian fallback was exercised too


def test_fast_path_hand_worked_cases_and_corners():
    _needs_numba()
    assert _both_paths([[A], [A], None, []]).r_grp == [1.0, 1.0, None, 0.0]
    assert _both_paths([[A, B], [A, C], [A], [A, C]]).r_grp == [0.5, 1.0, 0.5, 1.0]
    _both_paths([[A, A], [], [], []])
    _both_paths([[], [], None])
    _both_paths([None])
    _both_paths([[[5, 5, 0, 0], [0, 0, 10, 10]], [[5, 5, 0, 0], [0, 0, 10, 10]]])  # inverted boxes
    _both_paths([[[0, 0, 0, 10]], [[0, 0, 0, 10]]])  # zero-area boxes
    _both_paths([[A, C]] * 70, k=65)  # more rollouts than the bits of an int64
    for k in (0, -3, 10**30, np.int64(2)):  # clamped or passed through, as the Python path
        _both_paths([[A], [A, B], [B]], k=k)
    big = [[[0, 0, 1e200, 1e200]], [[0, 0, 1e200, 1e200]]]  # out of the kernel's exact range
    with _jit(True):
        assert rewards_mod._ecpo_fast([as_boxes(b) for b in big], 2, 0.5, True) is None
        assert rewards_mod._ecpo_fast([as_boxes([[0, 0, 1, 1]])] * 2, 2, 0.5, True) is not None
    _both_paths(big)
    small = [[float(i), float(i), i + 2.0, i + 2.0] for i in range(0, 400, 5)]
    _both_paths([small + [[0, 0, 5000, 5000]], small, [[0, 0, 5000, 4900]]])


def test_rewards_work_without_numba():
    code = (
        "import sys; sys.modules['numba'] = None; import witness.train.rewards as r; "
        "assert r.warmup() is False; "
        "g = r.ecpo_group([[[0, 0, 10, 10]], [[0, 0, 10, 10], [50, 50, 60, 60]], [[50, 50, 60, 61]], []]); "
        "assert g.r_grp == [0.5, 1.0, 0.5, 0.0], g.r_grp; "
        "assert r.consensus_set([[[0, 0, 10, 10]], [[0, 0, 10, 12]]]) == [[0.0, 0.0, 10.0, 11.0]]"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_kernel_builds_without_a_cache_directory(monkeypatch):
    numba = pytest.importorskip("numba")
    real = numba.njit

    def no_cache(*args, **kwargs):
        if kwargs.get("cache"):
            raise RuntimeError("cannot cache function: no locator available")
        return real(*args, **kwargs)

    monkeypatch.setattr(numba, "njit", no_cache)
    monkeypatch.setattr(rewards_mod, "_JIT", None)
    monkeypatch.setattr(rewards_mod, "_USE_JIT", True)
    assert rewards_mod.warmup()
    _both_paths([[A, B], [A, C], [A], [A, C]])


def test_convlm_accuracy_cannot_be_gamed_by_stating_both_answers():
    from witness.train.rewards import answer_correct

    assert answer_correct("Yes.", "yes") and answer_correct("No, there is none.", "no")
    assert not answer_correct("yes no", "no")
    assert not answer_correct("I cannot tell", "no")
    assert answer_correct("There are three cars.", "3") and not answer_correct("2 or 3", "3")
    assert answer_correct("The red car", "red car") and not answer_correct(None, "red car")
