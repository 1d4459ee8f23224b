"""Chance-corrected agreement: Cohen's and Fleiss' kappa with bootstrap intervals.

The RoadSceneVQA-G paper reports Cohen's κ between two blind adjudicators (0.980); curators gate a
release on it (``audit kappa --min``). Both statistics are pure numpy and equal scikit-learn's
``cohen_kappa_score`` and statsmodels' ``fleiss_kappa`` (tested).

* Cohen (1960), weighted (Cohen 1968): with the observed joint distribution ``O`` of the two raters'
  labels, the expected ``E = outer(row marginals, column marginals)`` and disagreement weights ``w``
  (0 on the diagonal; 1 elsewhere, ``|i-j|/(k-1)`` linear or ``((i-j)/(k-1))^2`` quadratic):
  ``p_o = 1 - Σ w O``, ``p_e = 1 - Σ w E``, ``κ = (p_o - p_e) / (1 - p_e)``.
* Fleiss (1971), ``n`` ratings per item (raters may differ between items): with ``n_ij`` the number of
  ratings of item ``i`` in category ``j``, ``P_i = (Σ_j n_ij² - n) / (n (n - 1))``, ``p_o = mean P_i``,
  ``p_j = Σ_i n_ij / (N n)``, ``p_e = Σ_j p_j²``, ``κ = (p_o - p_e) / (1 - p_e)``.

Intervals are percentile bootstraps over items (B resamples, vectorized: one ``bincount`` per
resample batch, no Python loop per item).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = [
    "KappaResult",
    "cohen_kappa",
    "fleiss_kappa",
    "ratings_to_counts",
]


@dataclass(frozen=True)
class KappaResult:
    """A kappa with its parts: ``κ = (observed - expected) / (1 - expected)``."""

    kappa: float
    method: str
    n_items: int
    observed: float
    expected: float
    ci95: tuple[float, float] | None = None

    def to_dict(self) -> dict:
        return {
            "kappa": self.kappa,
            "method": self.method,
            "n_items": self.n_items,
            "observed": self.observed,
            "expected": self.expected,
            "ci95": None if self.ci95 is None else list(self.ci95),
        }


def _weights(k: int, weights: str | None) -> np.ndarray:
    i = np.arange(k)
    d = np.abs(i[:, None] - i[None, :]).astype(np.float64)
    if weights is None:
        return (d > 0).astype(np.float64)
    scale = max(k - 1, 1)
    if weights == "linear":
        return d / scale
    if weights == "quadratic":
        return (d / scale) ** 2
    raise ValueError(f"Expected weights None, 'linear' or 'quadratic', got {weights!r}.")


def _kappa_from(po: np.ndarray, pe: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(pe < 1.0, (po - pe) / (1.0 - pe), np.nan)


def _encode(a: Sequence, b: Sequence, labels: Sequence | None) -> tuple[np.ndarray, np.ndarray, list]:
    if labels is None:
        labels = sorted(set(a) | set(b), key=lambda v: (str(type(v)), v))
    index = {v: i for i, v in enumerate(labels)}
    try:
        ai = np.fromiter((index[v] for v in a), dtype=np.int64, count=len(a))
        bi = np.fromiter((index[v] for v in b), dtype=np.int64, count=len(b))
    except KeyError as exc:
        raise ValueError(f"Expected every rating in labels {list(labels)}, got {exc.args[0]!r}.") from None
    return ai, bi, list(labels)


def _cohen_parts(ai: np.ndarray, bi: np.ndarray, k: int, w: np.ndarray, sel: np.ndarray | None = None):
    """Observed and expected agreement for one (sel is None) or many (sel: (B, N) indices) samples."""
    if sel is None:
        sel = np.arange(len(ai))[None, :]
    n_boot, n = sel.shape
    codes = ai[sel] * k + bi[sel] + (np.arange(n_boot) * k * k)[:, None]
    joint = np.bincount(codes.ravel(), minlength=n_boot * k * k).reshape(n_boot, k, k) / n
    rows, cols = joint.sum(axis=2), joint.sum(axis=1)
    expected = rows[:, :, None] * cols[:, None, :]
    po = 1.0 - (joint * w).sum(axis=(1, 2))
    pe = 1.0 - (expected * w).sum(axis=(1, 2))
    return po, pe


def _ci(samples: np.ndarray) -> tuple[float, float] | None:
    samples = samples[np.isfinite(samples)]
    if len(samples) == 0:
        return None
    lo, hi = np.percentile(samples, [2.5, 97.5])
    return float(lo), float(hi)


def _bootstrap_ci(n_items: int, n_boot: int, seed: int, parts) -> tuple[float, float] | None:
    """Percentile 95% interval of kappa over ``n_boot`` resamples of the items (None for 0).

    ``parts(sel)`` maps a ``(B, n_items)`` index array to observed and expected agreements; batches of
    256 resamples bound memory at 256 x N indices.
    """
    if not n_boot:
        return None
    rng = np.random.default_rng(seed)
    kb = []
    for start in range(0, n_boot, 256):
        sel = rng.integers(0, n_items, size=(min(256, n_boot - start), n_items))
        kb.append(_kappa_from(*parts(sel)))
    return _ci(np.concatenate(kb))


def cohen_kappa(
    a: Sequence,
    b: Sequence,
    *,
    weights: str | None = None,
    labels: Sequence | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> KappaResult:
    """Cohen's kappa between two raters' labels of the same items (optionally weighted).

    ``labels`` fixes the category order (needed for weighted kappa on ordinal labels; by default the
    sorted union). The 95% interval is a percentile bootstrap over items (``n_boot`` resamples,
    ``n_boot=0`` for none). Undefined κ (both raters constant on one label) warns and is NaN.

    >>> r = cohen_kappa(["y", "y", "n", "n"], ["y", "n", "n", "n"], n_boot=0)
    >>> round(r.kappa, 4), r.observed, r.expected
    (0.5, 0.75, 0.5)
    """
    if len(a) != len(b):
        raise ValueError(f"Expected two rating lists of the same length, got {len(a)} and {len(b)}.")
    if len(a) == 0:
        raise ValueError("Expected at least one item rated by both raters, got none.")
    ai, bi, labels = _encode(a, b, labels)
    k = len(labels)
    w = _weights(k, weights)
    po, pe = _cohen_parts(ai, bi, k, w)
    kappa = float(_kappa_from(po, pe)[0])
    if math.isnan(kappa):
        warnings.warn("Cohen's kappa is undefined: expected agreement is 1 (one label only).", RuntimeWarning, stacklevel=2)
    ci = _bootstrap_ci(len(ai), n_boot, seed, lambda sel: _cohen_parts(ai, bi, k, w, sel))
    method = "cohen" if weights is None else f"cohen-{weights}"
    return KappaResult(kappa, method, len(ai), float(po[0]), float(pe[0]), ci)


def ratings_to_counts(ratings: Sequence[Sequence], labels: Sequence | None = None) -> tuple[np.ndarray, list]:
    """Turn per-item rating lists into the ``(N, k)`` count table of Fleiss' kappa.

    >>> counts, labels = ratings_to_counts([["a", "a", "b"], ["b", "b", "b"]])
    >>> counts.tolist(), labels
    ([[2, 1], [0, 3]], ['a', 'b'])
    """
    if labels is None:
        labels = sorted({v for r in ratings for v in r}, key=lambda v: (str(type(v)), v))
    index = {v: i for i, v in enumerate(labels)}
    counts = np.zeros((len(ratings), len(labels)), dtype=np.int64)
    for i, r in enumerate(ratings):
        for v in r:
            counts[i, index[v]] += 1
    return counts, list(labels)


def _fleiss_parts(counts: np.ndarray, sel: np.ndarray | None = None):
    c = counts[None, :, :] if sel is None else counts[sel]
    n = c[0, 0].sum()
    n_items = c.shape[1]
    p_i = ((c * c).sum(axis=2) - n) / (n * (n - 1))
    po = p_i.mean(axis=1)
    p_j = c.sum(axis=1) / (n_items * n)
    pe = (p_j * p_j).sum(axis=1)
    return po, pe


def fleiss_kappa(counts, *, n_boot: int = 1000, seed: int = 0) -> KappaResult:
    """Fleiss' kappa from an ``(N items, k categories)`` table of rating counts.

    Every item must carry the same number ``n >= 2`` of ratings (the raters may differ between items).

    >>> r = fleiss_kappa([[3, 0], [0, 3], [2, 1]], n_boot=0)
    >>> round(r.kappa, 4)
    0.55
    """
    counts = np.asarray(counts, dtype=np.int64)
    if counts.ndim != 2 or counts.shape[0] == 0:
        raise ValueError(f"Expected a (N items, k categories) count table with N >= 1, got shape {counts.shape}.")
    per_item = counts.sum(axis=1)
    if (per_item != per_item[0]).any() or per_item[0] < 2:
        raise ValueError(
            f"Expected the same number (>= 2) of ratings for every item, got {sorted(set(per_item.tolist()))[:5]}. "
            "Keep only items rated by all raters."
        )
    po, pe = _fleiss_parts(counts)
    kappa = float(_kappa_from(po, pe)[0])
    if math.isnan(kappa):
        warnings.warn("Fleiss' kappa is undefined: every rating falls in one category.", RuntimeWarning, stacklevel=2)
    ci = _bootstrap_ci(len(counts), n_boot, seed, lambda sel: _fleiss_parts(counts, sel))
    return KappaResult(kappa, "fleiss", int(len(counts)), float(po[0]), float(pe[0]), ci)
