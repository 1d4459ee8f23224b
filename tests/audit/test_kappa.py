"""Kappa against scikit-learn and statsmodels on random data, and hand-worked cases."""

import warnings

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from witness.audit.kappa import cohen_kappa, fleiss_kappa, ratings_to_counts


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
@pytest.mark.parametrize("seed", range(8))
def test_cohen_equals_sklearn(weights, seed):
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(5, 200)), int(rng.integers(2, 6))
    a = rng.integers(0, k, n)
    b = np.where(rng.random(n) < 0.7, a, rng.integers(0, k, n))
    ours = cohen_kappa(a.tolist(), b.tolist(), weights=weights, labels=list(range(k)), n_boot=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = cohen_kappa_score(a, b, weights=weights, labels=list(range(k)))
    assert ours.kappa == pytest.approx(ref, abs=1e-12)


@pytest.mark.parametrize("seed", range(8))
def test_fleiss_equals_statsmodels(seed):
    rng = np.random.default_rng(seed)
    raters, k = int(rng.integers(3, 7)), int(rng.integers(2, 5))
    truth = rng.integers(0, k, int(rng.integers(5, 100)))
    ratings = [[t if rng.random() < 0.75 else int(rng.integers(0, k)) for _ in range(raters)] for t in truth]
    counts, _ = ratings_to_counts(ratings, labels=list(range(k)))
    assert fleiss_kappa(counts, n_boot=0).kappa == pytest.approx(sm_fleiss_kappa(counts), abs=1e-12)


def test_cohen_hand_worked():
    # 10 items: 4 yes/yes, 4 no/no, 1 yes/no, 1 no/yes -> po 0.8, pe 0.5, kappa 0.6
    a = ["y"] * 4 + ["n"] * 4 + ["y", "n"]
    b = ["y"] * 4 + ["n"] * 4 + ["n", "y"]
    r = cohen_kappa(a, b, n_boot=0)
    assert (r.observed, r.expected) == (pytest.approx(0.8), pytest.approx(0.5))
    assert r.kappa == pytest.approx(0.6)
    assert r.n_items == 10 and r.method == "cohen"


def test_bootstrap_interval_contains_kappa_and_is_deterministic():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 3, 300)
    b = np.where(rng.random(300) < 0.8, a, rng.integers(0, 3, 300))
    r1 = cohen_kappa(a.tolist(), b.tolist(), n_boot=500, seed=7)
    r2 = cohen_kappa(a.tolist(), b.tolist(), n_boot=500, seed=7)
    lo, hi = r1.ci95
    assert lo < r1.kappa < hi and hi - lo < 0.2
    assert r1.ci95 == r2.ci95


def test_undefined_kappa_warns_and_is_nan():
    with pytest.warns(RuntimeWarning, match="undefined"):
        r = cohen_kappa(["y", "y"], ["y", "y"], n_boot=0)
    assert np.isnan(r.kappa)


def test_errors():
    with pytest.raises(ValueError, match="same length"):
        cohen_kappa(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="same number"):
        fleiss_kappa([[2, 0], [1, 2]])
    with pytest.raises(ValueError, match="weights"):
        cohen_kappa(["a", "b"], ["a", "b"], weights="cubic")
