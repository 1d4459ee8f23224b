"""Annotation in a real Label Studio server: configs, server, push, pull, round trip into items.

Label Studio Community has no review workflow, agreement statistics or task assignment; witness
supplies them around a real server. Heavy or networked pieces live in submodules:
:mod:`.server` (start/stop), :mod:`.client` (REST), :mod:`.push`, :mod:`.pull`; :mod:`.convert` and
:mod:`.configs` are pure.
"""

from .configs import KINDS, config_labels, config_text, render_config, validate_config
from .convert import (
    annotations_from_export,
    pairs_task,
    qa_task,
    rect_results,
    review_task,
    stated_count,
)

__all__ = [
    "KINDS",
    "config_text",
    "render_config",
    "config_labels",
    "validate_config",
    "rect_results",
    "qa_task",
    "review_task",
    "pairs_task",
    "annotations_from_export",
    "stated_count",
]
