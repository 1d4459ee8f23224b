"""The three labelling configs (``configs/*.xml``) and how a project's labels are filled in.

* ``qa``: the image; the drafted question and answer in editable text areas; every candidate
  object as a pre-annotated box with its class; a per-box choice "evidence / not evidence" pre-set
  from the draft; a "no evidence needed" decision.
* ``review``: the annotated item with its evidence boxes, the four checks of the RoadSceneVQA-G
  review (box_tight, category_correct, question_natural, answer_evidence_agree) and accept / reject.
* ``pairs``: two logically equivalent questions with their answers; accept / correct (editable
  texts) / discard, as in ConVBench's human verification.

Box classes differ per dataset, so ``qa`` and ``review`` carry a ``<!-- witness:labels -->``
marker that :func:`render_config` replaces with one ``<Label>`` per class.
"""

from __future__ import annotations

import re
from html import escape
from importlib import resources
from pathlib import Path
from typing import Iterable

from ...errors import InputError, UnknownNameError

__all__ = ["KINDS", "LABELS_MARKER", "config_text", "render_config", "config_labels", "validate_config"]

#: Project kinds, one labelling config each.
KINDS: tuple[str, ...] = ("qa", "review", "pairs")
#: Where the box classes go.
LABELS_MARKER = "<!-- witness:labels -->"
_PALETTE = ("#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4", "#f032e6", "#9a6324")


def config_text(kind: str) -> str:
    """The raw XML of a built-in config (``qa``, ``review`` or ``pairs``).

    >>> "perRegion" in config_text("qa")
    True
    """
    if kind not in KINDS:
        raise UnknownNameError("studio config", kind, KINDS)
    return resources.files("witness.annotate.studio").joinpath("configs", f"{kind}.xml").read_text()


def render_config(kind_or_xml: str, labels: Iterable[str] = ()) -> str:
    """Fill the labels marker of a config with one ``<Label>`` per class (sorted, unique).

    ``kind_or_xml`` is a built-in kind or the XML text of a custom config. A config with a marker
    needs at least one label.

    >>> xml = render_config("qa", ["truck", "car", "car"])
    >>> config_labels(xml)
    ['car', 'truck']
    """
    xml = config_text(kind_or_xml) if kind_or_xml in KINDS else kind_or_xml
    if LABELS_MARKER not in xml:
        return xml
    labels = sorted(set(labels))
    if not labels:
        raise InputError(
            "Expected at least one box class for the labelling config, got none. "
            "Push items with labelled boxes, or pass scenes with labelled objects."
        )
    tags = "\n    ".join(
        f'<Label value="{escape(lab, quote=True)}" background="{_PALETTE[i % len(_PALETTE)]}"/>'
        for i, lab in enumerate(labels)
    )
    return xml.replace(LABELS_MARKER, tags)


def config_labels(xml: str) -> list[str]:
    """The ``<Label value=...>`` classes of a config, sorted.

    >>> config_labels('<View><Label value="b"/><Label value="a"/></View>')
    ['a', 'b']
    """
    from html import unescape

    return sorted({unescape(v) for v in re.findall(r'<Label\s+value="([^"]*)"', xml)})


def validate_config(xml: str) -> None:
    """Validate a config offline with the SDK's ``LabelInterface``; raise :class:`InputError`.

    >>> validate_config(render_config("pairs"))
    """
    from ...errors import require

    require("label_studio_sdk", "annotate")
    from label_studio_sdk.label_interface import LabelInterface

    try:
        LabelInterface(xml).validate()
    except Exception as exc:  # the SDK raises several unrelated types
        raise InputError(f"Expected a valid Label Studio config, got: {exc}. Fix the XML.") from None


def load_config_file(path: str | Path) -> str:
    """Read a custom config file (used by ``witness studio push --config``)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"Expected a labelling config file, got a path that does not exist ({p}). Check the path.")
    return p.read_text()
