"""Model-output parsers: one registry of named formats, each with a declared box convention.

A parser turns a model's raw text into an answer and **pixel** ``xyxy`` boxes of the original image,
or says it could not (:attr:`Parsed.ok` is False with a reason). A parser never guesses a frame by
trying several and keeping the best, and never invents a box: a failure is "unparsed", counted in
every report's ``parse_rate``.

witness's own serializations (see :mod:`witness.train.serialize`), boxes on the 0–1000 grid:

* ``eta`` (Enumerate-then-Answer): ``<boxes>[[x1, y1, x2, y2], ...]</boxes>\\n<answer>TEXT</answer>``
* ``answer-then-ground``: ``<answer>TEXT</answer>\\n<boxes>[[...], ...]</boxes>``

One parser reads both orders; ``<boxes>[]</boxes>`` is the explicit decision not to ground. A
closing ``</answer>`` may be missing at the end of the output (generation stopped).
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np
import orjson

from ..boxes import grid_to_xyxy
from ..errors import UnknownNameError

__all__ = [
    "Parsed",
    "OutputFormat",
    "FORMATS",
    "register_format",
    "get_format",
    "parse",
    "parse_witness",
]


@dataclass(frozen=True)
class Parsed:
    """A parsed model output: answer text and pixel ``xyxy`` boxes, or a failure with a reason."""

    ok: bool
    answer: str | None = None
    boxes: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))
    reason: str | None = None

    @staticmethod
    def fail(reason: str) -> "Parsed":
        return Parsed(False, None, np.zeros((0, 4)), reason)


class ParseFn(Protocol):
    def __call__(self, text: str, *, width: float, height: float, **options: Any) -> Parsed: ...


@dataclass(frozen=True)
class OutputFormat:
    """A named output format: its parser and the box convention it declares."""

    name: str
    convention: str
    parse: Callable[..., Parsed]
    description: str = ""


FORMATS: dict[str, OutputFormat] = {}


def register_format(fmt: OutputFormat) -> OutputFormat:
    """Add ``fmt`` to :data:`FORMATS` (a later registration of the same name replaces it)."""
    FORMATS[fmt.name] = fmt
    return fmt


def get_format(name: str) -> OutputFormat:
    """Look a format up by name, or import it from ``'module:attr'``.

    >>> get_format("eta").convention
    '0-1000 grid, xyxy'
    >>> get_format("nope")
    Traceback (most recent call last):
    ...
    witness.errors.UnknownNameError: Unknown format 'nope'. Expected one of [...] or 'module:attr'.
    """
    if name in FORMATS:
        return FORMATS[name]
    if ":" in name:
        mod, _, attr = name.partition(":")
        try:
            obj = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError) as exc:
            raise UnknownNameError("format", name, list(FORMATS)) from exc
        return obj if isinstance(obj, OutputFormat) else OutputFormat(name, "custom", obj)
    raise UnknownNameError("format", name, list(FORMATS))


def parse(text: str | None, fmt: str, *, width: float, height: float, **options: Any) -> Parsed:
    """Parse ``text`` with the named format; never raises on any text.

    >>> p = parse("<boxes>[[0, 0, 500, 500]]</boxes>\\n<answer>1 car</answer>", "eta", width=640, height=480)
    >>> p.ok, p.answer, p.boxes.tolist()
    (True, '1 car', [[0.0, 0.0, 320.0, 240.0]])
    """
    if text is None:
        return Parsed.fail("no output")
    f = get_format(fmt)
    try:
        return f.parse(text, width=width, height=height, **options)
    except Exception as exc:  # a parser bug must not crash an evaluation: count it as unparsed
        return Parsed.fail(f"parser error: {type(exc).__name__}: {exc}")


# --------------------------------------------------------------------------------------------
# witness's own serializations
# --------------------------------------------------------------------------------------------

_BOXES_RE = re.compile(r"<boxes>(.*?)</boxes>", re.S)
_ANSWER_RE = re.compile(r"<answer>(.*?)(?:</answer>|\Z)", re.S)


def _grid_boxes(payload: str) -> np.ndarray | None:
    try:
        value = orjson.loads(payload.strip() or "[]")
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, list):
        return None
    out = []
    for b in value:
        if not isinstance(b, list) or len(b) != 4 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in b):
            return None
        if not all(0 <= v <= 1000 for v in b) or b[0] > b[2] or b[1] > b[3]:
            return None
        out.append(b)
    return np.asarray(out, dtype=np.float64).reshape(-1, 4)


def parse_witness(text: str, *, width: float, height: float, **_: Any) -> Parsed:
    """Parse witness's EtA or answer-then-ground serialization (either order), 0–1000 grid.

    Unparsed when the ``<boxes>`` or ``<answer>`` part is missing, appears twice, or the boxes are
    not a JSON list of ``[x1, y1, x2, y2]`` integers in ``[0, 1000]`` with ``x1 <= x2, y1 <= y2``.

    >>> parse_witness("<answer>No.</answer><boxes>[]</boxes>", width=10, height=10).boxes.shape
    (0, 4)
    >>> parse_witness("2 cars", width=10, height=10).reason
    'no <boxes> part'
    """
    boxes_m = _BOXES_RE.findall(text)
    if not boxes_m:
        return Parsed.fail("no <boxes> part")
    if len(boxes_m) > 1:
        return Parsed.fail("more than one <boxes> part")
    answers = _ANSWER_RE.findall(text)
    if not answers:
        return Parsed.fail("no <answer> part")
    if len(answers) > 1:
        return Parsed.fail("more than one <answer> part")
    grid = _grid_boxes(boxes_m[0])
    if grid is None:
        return Parsed.fail("boxes are not a list of [x1, y1, x2, y2] on the 0-1000 grid")
    return Parsed(True, answers[0].strip(), grid_to_xyxy(grid, width, height), None)


register_format(OutputFormat("eta", "0-1000 grid, xyxy", parse_witness, "witness Enumerate-then-Answer"))
register_format(OutputFormat("answer-then-ground", "0-1000 grid, xyxy", parse_witness, "witness answer first, boxes after"))
