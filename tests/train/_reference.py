"""Reference implementations for the reward tests: the contract's greedy clustering box by box."""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from witness.boxes import iou_matrix


def consensus_reference(rollouts, k, iou=0.5):
    """Greedy clustering in plain Python, one box at a time, exactly as ARCHITECTURE.md says."""
    clusters = []  # [members(list of boxes), support(set)]
    for g, boxes in enumerate(rollouts):
        for b in np.asarray(boxes, dtype=float).reshape(-1, 4):
            best, best_v = None, -1.0
            for c in clusters:
                rep = np.mean(c[0], axis=0)
                v = float(iou_matrix([b], [rep])[0, 0])
                if v >= iou and v > best_v:
                    best, best_v = c, v
            if best is None:
                clusters.append([[b], {g}])
            else:
                best[0].append(b)
                best[1].add(g)
    return [np.mean(c[0], axis=0).tolist() for c in clusters if len(c[1]) >= k]


def coverage_reference(boxes, consensus, iou=0.5):
    if len(consensus) == 0:
        return 1.0 if len(boxes) == 0 else 0.0
    if len(boxes) == 0:
        return 0.0
    ov = iou_matrix(boxes, consensus)
    r, c = linear_sum_assignment(ov, maximize=True)
    return float((ov[r, c] >= iou).sum()) / len(consensus)
