"""Scoring model outputs: output parsers, answer matching and the evaluation suites.

Suites (each ``evaluate_<suite>(samples) -> SuiteReport``; :data:`SUITES` maps names to them):
AGC (RoadSceneVQA-G), AESP, pairs (ConVBench), GREC (gRefCOCO) and counting (CARPK). Samples come
from :func:`load_samples` (files) or :func:`samples_from_records` (memory). Submodules import
lazily so ``import witness.eval`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "SUITES",
    "get_suite",
    "load_samples",
    "samples_from_records",
    "evaluate_agc",
    "evaluate_aesp",
    "evaluate_pairs",
    "evaluate_grec",
    "evaluate_count",
    "AGC",
    "coco_ap",
    "SuiteReport",
    "write_report",
    "read_report",
    "render_markdown",
]

#: Suite name -> "module:function".
SUITES: dict[str, str] = {
    "agc": "witness.eval.agc:evaluate_agc",
    "aesp": "witness.eval.aesp:evaluate_aesp",
    "pairs": "witness.eval.pairs:evaluate_pairs",
    "grec": "witness.eval.grec:evaluate_grec",
    "count": "witness.eval.count:evaluate_count",
}

_LAZY = {
    "load_samples": "witness.eval.data",
    "samples_from_records": "witness.eval.data",
    "evaluate_agc": "witness.eval.agc",
    "AGC": "witness.eval.agc",
    "evaluate_aesp": "witness.eval.aesp",
    "evaluate_pairs": "witness.eval.pairs",
    "evaluate_grec": "witness.eval.grec",
    "evaluate_count": "witness.eval.count",
    "coco_ap": "witness.eval.ap",
    "SuiteReport": "witness.eval.report",
    "write_report": "witness.eval.report",
    "read_report": "witness.eval.report",
    "render_markdown": "witness.eval.report",
}


def get_suite(name: str):
    """The scoring function of a suite name (or ``'module:attr'``).

    >>> get_suite("agc").__name__
    'evaluate_agc'
    >>> get_suite("nope")
    Traceback (most recent call last):
    ...
    witness.errors.UnknownNameError: Unknown suite 'nope'. Expected one of ['aesp', 'agc', 'count', 'grec', 'pairs'] or 'module:attr'.
    """
    from ..errors import UnknownNameError

    target = SUITES.get(name, name if ":" in name else None)
    if target is None:
        raise UnknownNameError("suite", name, list(SUITES))
    mod, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(mod), attr)
    except (ImportError, AttributeError) as exc:
        raise UnknownNameError("suite", name, list(SUITES)) from exc


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'witness.eval' has no attribute {name!r}")
