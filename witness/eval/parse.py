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

Model families (each parser's docstring gives an example output and its source):

==================  ===========================================================================
format              box convention
==================  ===========================================================================
``json``            ``{"answer": ..., "boxes": [[x1, y1, x2, y2], ...]}``, pixels of the original
``qwen2-vl``        ``<|box_start|>(x1,y1),(x2,y2)<|box_end|>``, 0–1000 grid
``qwen2.5-vl``      JSON ``bbox_2d``, pixels of the ``smart_resize``'d input (options
                    ``min_pixels``, ``max_pixels``)
``qwen3-vl``        JSON ``bbox_2d``, 0–1000 grid
``internvl``        ``<ref>..</ref><box>[[x1, y1, x2, y2], ...]</box>``, 0–1000 grid
``shikra``          ``[x1,y1,x2,y2;...]`` floats in 0–1 (option ``expand2square``)
``florence2``       ``<loc_N>`` x4, 1000 bins, pixel ``(N + 0.5) * size / 1000``
``paligemma``       ``<locNNNN>`` x4, y first, 1024 bins, pixel ``N / 1024 * size``
``gemini``          JSON ``box_2d: [ymin, xmin, ymax, xmax]``, y first, 0–1000 grid
==================  ===========================================================================

Shared rules: the answer is the text with box markup removed; text with no markup at all is an
answer with no boxes (the witness formats excepted: both parts are required); markup that is
present but broken, and coordinates outside the convention's range or inverted, are unparsed with
a reason — never clipped. Options may ride in the name: ``"qwen2.5-vl,max_pixels=1003520"``.
See ``docs/parsers.md``.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np
import orjson

from ..boxes import GRID, grid_to_xyxy, normalized_to_xyxy, shift_boxes, swap_xy, xyxy_to_normalized
from ..errors import InputError, UnknownNameError
from .qwen_resize import QWEN25_MAX_PIXELS, QWEN25_MIN_PIXELS, QWEN_FACTOR, smart_resize

__all__ = [
    "Parsed",
    "OutputFormat",
    "FORMATS",
    "register_format",
    "get_format",
    "format_options",
    "check_options",
    "parse",
    "parse_all",
    "ParseSummary",
    "parse_witness",
    "parse_json",
    "parse_qwen2_vl",
    "parse_qwen25_vl",
    "parse_qwen3_vl",
    "parse_internvl",
    "parse_shikra",
    "parse_florence2",
    "parse_paligemma",
    "parse_gemini",
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
    """Look a format up by name, or import it from ``'module:attr'``; options may follow the name
    as ``name,key=value,...`` (values read as int, float, true/false, else text) and are bound to
    the parser, so a format string alone carries them (``--format`` flags, prediction files).

    >>> get_format("eta").convention
    '0-1000 grid, xyxy'
    >>> get_format("qwen2.5-vl,max_pixels=1003520").name
    'qwen2.5-vl,max_pixels=1003520'
    >>> get_format("nope")
    Traceback (most recent call last):
    ...
    witness.errors.UnknownNameError: Unknown format 'nope'. Expected one of [...] or 'module:attr'.
    >>> get_format("qwen2.5-vl,max_pixel=3")
    Traceback (most recent call last):
    ...
    witness.errors.InputError: Expected an option of format 'qwen2.5-vl' among ['factor', 'max_pixels', 'min_pixels'], got 'max_pixel' (format 'qwen2.5-vl,max_pixel=3'). Fix the option name.
    """
    if name in FORMATS:
        return FORMATS[name]
    if "," in name:
        base_name, *specs = name.split(",")
        base = get_format(base_name.strip())
        options = dict(_read_option(spec, name) for spec in specs)
        check_options(base, options, where=f"format {name!r}")
        return OutputFormat(name, base.convention, functools.partial(base.parse, **options), base.description)
    if ":" in name:
        mod, _, attr = name.partition(":")
        try:
            obj = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError) as exc:
            raise UnknownNameError("format", name, list(FORMATS)) from exc
        return obj if isinstance(obj, OutputFormat) else OutputFormat(name, "custom", obj)
    raise UnknownNameError("format", name, list(FORMATS))


def format_options(fmt: OutputFormat) -> list[str]:
    """The keyword options a format's parser takes besides ``width`` and ``height``.

    >>> format_options(get_format("shikra"))
    ['expand2square']
    """
    try:
        params = inspect.signature(fmt.parse).parameters.values()
    except (TypeError, ValueError):
        return []
    return sorted(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in ("width", "height"))


def check_options(fmt: OutputFormat, options: dict[str, Any], *, where: str = "parse") -> None:
    """Raise :class:`InputError` for an option the format's parser does not declare (parsers
    accept ``**kwargs``, so a misspelt option would otherwise be ignored silently)."""
    known = format_options(fmt)
    for key in options:
        if key not in known:
            raise InputError(
                f"Expected an option of format {fmt.name!r} among {known}, got {key!r} ({where}). "
                "Fix the option name."
            )


def _read_option(spec: str, name: str) -> tuple[str, Any]:
    key, sep, raw = spec.partition("=")
    key, raw = key.strip(), raw.strip()
    if not sep or not key.isidentifier():
        raise InputError(
            f"Expected format options as key=value, got {spec!r} (format {name!r}). "
            "Write e.g. 'qwen2.5-vl,max_pixels=1003520'."
        )
    if raw.lower() in ("true", "false"):
        return key, raw.lower() == "true"
    for cast in (int, float):
        try:
            return key, cast(raw)
        except ValueError:
            pass
    return key, raw


def parse(text: str | None, fmt: str, *, width: float, height: float, **options: Any) -> Parsed:
    """Parse ``text`` with the named format; never raises on any text (a misspelt option or an
    unknown format is a caller error and does raise).

    >>> p = parse("<boxes>[[0, 0, 500, 500]]</boxes>\\n<answer>1 car</answer>", "eta", width=640, height=480)
    >>> p.ok, p.answer, p.boxes.tolist()
    (True, '1 car', [[0.0, 0.0, 320.0, 240.0]])
    """
    if text is None:
        return Parsed.fail("no output")
    f = get_format(fmt)
    if options:
        check_options(f, options)
    try:
        return f.parse(text, width=width, height=height, **options)
    except Exception as exc:  # a parser bug must not crash an evaluation: count it as unparsed
        return Parsed.fail(f"parser error: {type(exc).__name__}: {exc}")


@dataclass(frozen=True)
class ParseSummary:
    """How a batch of outputs parsed: ``n`` outputs, ``n_parsed`` of them read, and the count of
    each failure reason (most frequent first)."""

    n: int
    n_parsed: int
    reasons: dict[str, int]

    @property
    def parse_rate(self) -> float:
        """``n_parsed / n``; NaN for an empty batch."""
        return self.n_parsed / self.n if self.n else float("nan")


def parse_all(
    texts: list[str | None], fmt: str, widths, heights, **options: Any
) -> tuple[list[Parsed], ParseSummary]:
    """Parse a batch of outputs (one image size each) with one format; never raises on any text.

    Failure reasons are counted with box values masked (``box [...]``) so that the same kind of
    failure groups together.

    >>> ps, summary = parse_all(["<boxes>[]</boxes><answer>no</answer>", "2 cars", None], "eta",
    ...                          [640, 640, 640], [480, 480, 480])
    >>> summary.n, summary.n_parsed, summary.reasons
    (3, 1, {'no <boxes> part': 1, 'no output': 1})
    """
    widths, heights = list(widths), list(heights)
    if not (len(texts) == len(widths) == len(heights)):
        raise InputError(
            f"Expected one width and height per output, got {len(texts)} outputs, {len(widths)} widths and "
            f"{len(heights)} heights (parse_all). Pass the item sizes in output order."
        )
    f = get_format(fmt)
    if options:
        check_options(f, options)
    out: list[Parsed] = []
    reasons: dict[str, int] = {}
    for text, w, h in zip(texts, widths, heights, strict=True):
        if text is None:
            p = Parsed.fail("no output")
        else:
            try:
                p = f.parse(text, width=w, height=h, **options)
            except Exception as exc:  # a parser bug must not crash an evaluation
                p = Parsed.fail(f"parser error: {type(exc).__name__}: {exc}")
        out.append(p)
        if not p.ok:
            key = re.sub(r"box \[[^\]]*\]", "box [...]", p.reason or "unknown")
            reasons[key] = reasons.get(key, 0) + 1
    ordered = dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
    return out, ParseSummary(len(out), sum(p.ok for p in out), ordered)


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
    if (bad := _bad_size(width, height)) is not None:
        return Parsed.fail(bad)
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


# --------------------------------------------------------------------------------------------
# shared helpers of the model-family parsers
# --------------------------------------------------------------------------------------------

#: A number as models write it: sign, digits, optional fraction and exponent.
_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_JSON_DECODER = json.JSONDecoder()
_FENCE_RE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n?(.*?)```", re.S)
_SPECIAL_RE = re.compile(r"<\|im_end\|>|<\|endoftext\|>|<\|im_start\|>|</s>|<s>|<pad>|<eos>|<bos>")
_MAX_JSON_TRIES = 64


def _bad_size(width: float, height: float) -> str | None:
    try:
        ok = math.isfinite(width) and math.isfinite(height) and width > 0 and height > 0
    except TypeError:
        ok = False
    return None if ok else f"image size must be positive, got {width!r}x{height!r}"


def _to_float(v: Any) -> float:
    """``float(v)``, with integers too large for a float mapped to ``inf`` (then unparsed)."""
    try:
        return float(v)
    except OverflowError:
        return math.inf


def _is_quad(value: Any) -> bool:
    """True for a list of exactly 4 finite JSON numbers (booleans are not numbers)."""
    return (
        isinstance(value, list)
        and len(value) == 4
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(_to_float(v)) for v in value)
    )


def _check_frame(boxes: np.ndarray, hi_x: float, hi_y: float, frame: str) -> str | None:
    """A failure reason when a box leaves ``[0, hi_x] x [0, hi_y]`` or is inverted, else None."""
    if len(boxes) == 0:
        return None
    if not np.isfinite(boxes).all():
        return f"a coordinate is not finite ({frame})"
    if (boxes < 0).any() or (boxes[:, [0, 2]] > hi_x).any() or (boxes[:, [1, 3]] > hi_y).any():
        bad = boxes[((boxes < 0).any(1)) | (boxes[:, [0, 2]] > hi_x).any(1) | (boxes[:, [1, 3]] > hi_y).any(1)][0]
        return f"box {_fmt(bad)} is outside {frame}"
    inv = (boxes[:, 0] > boxes[:, 2]) | (boxes[:, 1] > boxes[:, 3])
    if inv.any():
        return f"box {_fmt(boxes[inv][0])} is inverted (x1 > x2 or y1 > y2) in {frame}"
    return None


def _fmt(box: np.ndarray) -> str:
    return "[" + ", ".join(f"{v:g}" for v in box.tolist()) + "]"


def _clean(text: str) -> str:
    """Answer text after markup removal: special tokens dropped, whitespace collapsed, no space
    before punctuation."""
    text = _SPECIAL_RE.sub(" ", text)
    text = re.sub(r"\s+", " ", text).strip()
    return re.sub(r" ([.,!?])", r"\1", text)


def _quads(rows: list) -> np.ndarray:
    return np.asarray([[_to_float(v) for v in r] for r in rows], dtype=np.float64).reshape(-1, 4)


def _extract_json(text: str, accept: Callable[[Any], bool]) -> tuple[Any, str] | str | None:
    """Find the JSON value of an answer: one fenced ```json block, else the first bare ``[`` /
    ``{`` value that ``accept`` takes. Returns ``(value, text_without_it)``, a failure reason,
    or None when the text holds no JSON at all."""
    fences = list(_FENCE_RE.finditer(text))
    if len(fences) > 1:
        return "more than one ``` block"
    if fences:
        m = fences[0]
        rest = text[: m.start()] + " " + text[m.end():]
        if "```" in rest:
            return "unterminated ``` block"
        try:
            value = json.loads(m.group(1).strip())
        except (ValueError, RecursionError):
            return "the ``` block is not valid JSON"
        return value, rest
    if "```" in text:
        return "unterminated ``` block"
    for tries, m in enumerate(re.finditer(r"[\[{]", text)):
        if tries >= _MAX_JSON_TRIES:
            break
        try:
            value, end = _JSON_DECODER.raw_decode(text, m.start())
        except (ValueError, RecursionError):
            continue
        if accept(value):
            if isinstance(value, dict) and text[: m.start()].rstrip().endswith(("[", ",")):
                return "a JSON list is cut off or malformed"  # an element of a list that does not decode
            return value, text[: m.start()] + " " + text[end:]
    return None


def _boxes_from_objects(value: Any, key: str) -> np.ndarray | str:
    """``[{key: [a, b, c, d], ...}, ...]`` (or one such object) to an ``(N, 4)`` array."""
    items = [value] if isinstance(value, dict) else value
    if not isinstance(items, list):
        return f"the JSON is not a list of objects with {key!r}"
    rows = []
    for it in items:
        if not isinstance(it, dict) or key not in it:
            return f"a JSON element has no {key!r}"
        if not _is_quad(it[key]):
            return f"{key!r} is not a list of 4 numbers"
        rows.append(it[key])
    return _quads(rows)


def _has_key(value: Any, key: str) -> bool:
    if isinstance(value, dict):
        return key in value
    return isinstance(value, list) and (
        value == [] or (isinstance(value[0], dict) and key in value[0])
    )


def _parse_json_boxes(text: str, key: str) -> tuple[np.ndarray, str] | Parsed:
    """Shared body of the JSON-list families: raw model-frame boxes and the answer text.

    No JSON and no ``key`` in the text: the answer is the whole text, with no boxes. A ``key`` or a
    fence that does not decode is a failure (the model tried to ground and the syntax broke)."""
    found = _extract_json(text, lambda v: _has_key(v, key))
    if isinstance(found, str):
        return Parsed.fail(found)
    if found is None:
        if key in text:
            return Parsed.fail(f"{key!r} appears but no valid JSON holds it")
        return np.zeros((0, 4)), _clean(text)
    value, rest = found
    raw = _boxes_from_objects(value, key)
    if isinstance(raw, str):
        return Parsed.fail(raw)
    if key in rest:
        return Parsed.fail(f"more than one JSON value with {key!r}")
    return raw, _clean(rest)


def _parse_json_grid(text: str, width: float, height: float, key: str, *, y_first: bool = False) -> Parsed:
    """Shared body of the JSON-list families on the 0–1000 grid (Qwen3-VL ``bbox_2d``; Gemini
    ``box_2d``, y first): :func:`_parse_json_boxes`, the grid's range, then pixels."""
    if (bad := _bad_size(width, height)) is not None:
        return Parsed.fail(bad)
    got = _parse_json_boxes(text, key)
    if isinstance(got, Parsed):
        return got
    grid, answer = got
    frame = "the 0-1000 grid (y first)" if y_first else "the 0-1000 grid"
    if (bad := _check_frame(grid, GRID, GRID, frame)) is not None:
        return Parsed.fail(bad)
    return Parsed(True, answer, grid_to_xyxy(swap_xy(grid) if y_first else grid, width, height), None)


def _parse_grid_spans(text: str, width: float, height: float, span: re.Pattern, read: Callable[[str], list | str],
                      tags: tuple[str, str], ref: re.Pattern) -> Parsed:
    """Shared body of the box-span families on the 0–1000 grid (Qwen2-VL, InternVL): ``read``
    turns the inside of each ``span`` into box rows (or a failure reason); an opening or closing
    tag left outside a span is unterminated; the answer is the text without the spans and the
    ``ref`` (referring-phrase) tags."""
    if (bad := _bad_size(width, height)) is not None:
        return Parsed.fail(bad)
    rows: list = []
    for m in span.finditer(text):
        got = read(m.group(1))
        if isinstance(got, str):
            return Parsed.fail(got)
        rows.extend(got)
    rest = span.sub(" ", text)
    if tags[0] in rest or tags[1] in rest:
        return Parsed.fail(f"unterminated {tags[0]} ... {tags[1]} span")
    grid = _quads(rows)
    if (bad := _check_frame(grid, GRID, GRID, "the 0-1000 grid")) is not None:
        return Parsed.fail(bad)
    return Parsed(True, _clean(ref.sub("", rest)), grid_to_xyxy(grid, width, height), None)


def _loc_rows(text: str, run: re.Pattern, token: str) -> list | str:
    """The boxes of location-token families (Florence-2, PaliGemma): each ``run`` of tokens, its
    bins read by the ``token`` pattern, four a box; a failure reason for a run that is not."""
    rows: list = []
    for m in run.finditer(text):
        bins = [int(v) for v in re.findall(token, m.group(0))]
        if len(bins) % 4:
            return f"a run of {len(bins)} location tokens is not a multiple of 4"
        rows.extend(bins[i:i + 4] for i in range(0, len(bins), 4))
    return rows


# --------------------------------------------------------------------------------------------
# generic JSON
# --------------------------------------------------------------------------------------------


def parse_json(text: str, *, width: float, height: float, **_: Any) -> Parsed:
    """Generic JSON, boxes in **pixels of the original image**, ``xyxy``.

    Example output (a ```json fence around it is allowed)::

        {"answer": "2 cars", "boxes": [[64, 48, 320, 240], [330, 50, 400, 120]]}

    Unparsed when no object with a string ``answer`` and a ``boxes`` list of ``[x1, y1, x2, y2]``
    numbers is found, or a box leaves the image or is inverted.

    >>> p = parse_json('{"answer": "1 car", "boxes": [[64, 48, 320, 240]]}', width=640, height=480)
    >>> p.answer, p.boxes.tolist()
    ('1 car', [[64.0, 48.0, 320.0, 240.0]])
    >>> parse_json('{"answer": "1 car", "boxes": [[64, 48, 700, 240]]}', width=640, height=480).reason
    'box [64, 48, 700, 240] is outside the 640x480 image (pixels)'
    """
    if (bad := _bad_size(width, height)) is not None:
        return Parsed.fail(bad)
    found = _extract_json(text, lambda v: isinstance(v, dict) and "answer" in v and "boxes" in v)
    if isinstance(found, str):
        return Parsed.fail(found)
    if found is None:
        return Parsed.fail("no JSON object with 'answer' and 'boxes'")
    value, _rest = found
    if not isinstance(value, dict) or not isinstance(value.get("answer"), str):
        return Parsed.fail("the JSON has no string 'answer'")
    boxes = value.get("boxes")
    if not isinstance(boxes, list) or not all(_is_quad(b) for b in boxes):
        return Parsed.fail("'boxes' is not a list of [x1, y1, x2, y2] numbers")
    px = _quads(boxes)
    if (bad := _check_frame(px, width, height, f"the {width:g}x{height:g} image (pixels)")) is not None:
        return Parsed.fail(bad)
    return Parsed(True, value["answer"].strip(), px, None)


# --------------------------------------------------------------------------------------------
# Qwen family
# --------------------------------------------------------------------------------------------

_QWEN2_BOX_RE = re.compile(r"<\|box_start\|>(.*?)<\|box_end\|>", re.S)
_QWEN2_PAIR_RE = re.compile(
    rf"\s*\(\s*({_NUM})\s*,\s*({_NUM})\s*\)\s*,\s*\(\s*({_NUM})\s*,\s*({_NUM})\s*\)\s*"
)
_QWEN2_REF_RE = re.compile(r"<\|object_ref_start\|>|<\|object_ref_end\|>")


def parse_qwen2_vl(text: str, *, width: float, height: float, **_: Any) -> Parsed:
    """Qwen2-VL box tokens, **0–1000 grid**, ``xyxy`` (Qwen2-VL model card, grounding examples).

    Example output::

        <|object_ref_start|>the car<|object_ref_end|><|box_start|>(100,100),(500,500)<|box_end|>

    Each ``<|box_start|>...<|box_end|>`` holds one box ``(x1,y1),(x2,y2)``; pixels are
    ``v / 1000 * size``. The answer keeps the referring phrases and drops the box spans. No box
    tokens: the answer with no boxes. An unterminated or malformed box span, or a value outside
    ``[0, 1000]``, is unparsed.

    >>> t = "<|object_ref_start|>the car<|object_ref_end|><|box_start|>(100,100),(500,500)<|box_end|>"
    >>> p = parse_qwen2_vl(t, width=640, height=480)
    >>> p.answer, p.boxes.tolist()
    ('the car', [[64.0, 48.0, 320.0, 240.0]])
    """
    return _parse_grid_spans(text, width, height, _QWEN2_BOX_RE, _qwen2_span,
                             ("<|box_start|>", "<|box_end|>"), _QWEN2_REF_RE)


def _qwen2_span(inner: str) -> list | str:
    pm = _QWEN2_PAIR_RE.fullmatch(inner)
    if pm is None:
        return "a box span is not (x1,y1),(x2,y2)"
    return [[float(g) for g in pm.groups()]]


def parse_qwen25_vl(
    text: str,
    *,
    width: float,
    height: float,
    min_pixels: int = QWEN25_MIN_PIXELS,
    max_pixels: int = QWEN25_MAX_PIXELS,
    factor: int = QWEN_FACTOR,
    **_: Any,
) -> Parsed:
    """Qwen2.5-VL JSON ``bbox_2d``, **pixels of the resized input**, ``xyxy`` (Qwen2.5-VL
    cookbook "spatial understanding").

    Example output::

        ```json
        [{"bbox_2d": [64, 48, 322, 238], "label": "car"}]
        ```

    The resized size is :func:`witness.eval.qwen_resize.smart_resize` of the original
    ``height x width`` with the run's ``min_pixels`` / ``max_pixels`` (defaults: the Qwen2.5-VL
    checkpoints' processor, 3136 and 12845056); a box must lie inside the resized image and is
    scaled by ``original / resized`` per axis. The answer is the text around the JSON. No JSON and
    no ``bbox_2d`` in the text: the answer with no boxes.

    >>> t = '```json\\n[{"bbox_2d": [64, 48, 322, 238], "label": "car"}]\\n```'
    >>> parse_qwen25_vl(t, width=640, height=480).boxes.round(2).tolist()  # resized 644x476
    [[63.6, 48.4, 320.0, 240.0]]
    >>> parse_qwen25_vl(t, width=640, height=480, max_pixels=100 * 28 * 28).reason
    'box [64, 48, 322, 238] is outside the resized 308x224 input (pixels)'
    """
    if (bad := _bad_size(width, height)) is not None:
        return Parsed.fail(bad)
    try:
        rh, rw = smart_resize(int(round(height)), int(round(width)), factor=factor,
                              min_pixels=min_pixels, max_pixels=max_pixels)
    except InputError as exc:
        return Parsed.fail(f"cannot compute the resized input: {exc}")
    got = _parse_json_boxes(text, "bbox_2d")
    if isinstance(got, Parsed):
        return got
    raw, answer = got
    if (bad := _check_frame(raw, rw, rh, f"the resized {rw}x{rh} input (pixels)")) is not None:
        return Parsed.fail(bad)
    return Parsed(True, answer, normalized_to_xyxy(xyxy_to_normalized(raw, rw, rh), width, height), None)


def parse_qwen3_vl(text: str, *, width: float, height: float, **_: Any) -> Parsed:
    """Qwen3-VL JSON ``bbox_2d``, **0–1000 grid**, ``xyxy`` (Qwen3-VL cookbook: coordinates are
    relative, scaled to 1000).

    Example output::

        ```json
        [{"bbox_2d": [100, 100, 500, 500], "label": "car"}]
        ```

    >>> t = '[{"bbox_2d": [100, 100, 500, 500], "label": "car"}]'
    >>> parse_qwen3_vl(t, width=640, height=480).boxes.tolist()
    [[64.0, 48.0, 320.0, 240.0]]
    """
    return _parse_json_grid(text, width, height, "bbox_2d")


# --------------------------------------------------------------------------------------------
# InternVL
# --------------------------------------------------------------------------------------------

_INTERN_BOX_RE = re.compile(r"<box>(.*?)</box>", re.S)
_INTERN_REF_RE = re.compile(r"</?ref>")


def parse_internvl(text: str, *, width: float, height: float, **_: Any) -> Parsed:
    """InternVL ``<ref>..</ref><box>[[x1, y1, x2, y2], ...]</box>``, **0–1000 grid**, ``xyxy``
    (InternVL2 grounding format).

    Example output::

        <ref>the car</ref><box>[[100, 100, 500, 500]]</box>

    >>> p = parse_internvl("<ref>the car</ref><box>[[100, 100, 500, 500]]</box>", width=640, height=480)
    >>> p.answer, p.boxes.tolist()
    ('the car', [[64.0, 48.0, 320.0, 240.0]])
    """
    return _parse_grid_spans(text, width, height, _INTERN_BOX_RE, _internvl_span, ("<box>", "</box>"), _INTERN_REF_RE)


def _internvl_span(inner: str) -> list | str:
    try:
        value = orjson.loads(inner.strip())
    except orjson.JSONDecodeError:
        return "a <box> is not a JSON list of boxes"
    if _is_quad(value):
        value = [value]
    if not isinstance(value, list) or not all(_is_quad(b) for b in value):
        return "a <box> is not a list of [x1, y1, x2, y2] numbers"
    return value


# --------------------------------------------------------------------------------------------
# Shikra
# --------------------------------------------------------------------------------------------

_SHIKRA_QUAD = rf"\s*{_NUM}\s*,\s*{_NUM}\s*,\s*{_NUM}\s*,\s*{_NUM}\s*"
_SHIKRA_RE = re.compile(rf"\[{_SHIKRA_QUAD}(?:;{_SHIKRA_QUAD})*\]")


def parse_shikra(text: str, *, width: float, height: float, expand2square: bool = False, **_: Any) -> Parsed:
    """Shikra plain boxes ``[x1,y1,x2,y2]``, **0–1 normalized** floats, ``xyxy``; several boxes
    of one phrase are joined with ``;`` (Shikra ``PlainBoxFormatter``, 3 decimals).

    Example output::

        The car[0.100,0.100,0.500,0.500] is parked next to a bus[0.600,0.200,0.900,0.600;0.1,0.6,0.2,0.7].

    ``expand2square=True``: the coordinates are normalized to the white-padded square image that
    Shikra's REC datasets build (``Expand2square``: side ``max(w, h)``, the image pasted at offset
    ``(side - size) // 2``); a box must then lie inside the original image after removing the
    padding. Values outside ``[0, 1]`` or inverted boxes are unparsed.

    >>> p = parse_shikra("The car[0.100,0.100,0.500,0.500] is red.", width=640, height=480)
    >>> p.answer, p.boxes.tolist()
    ('The car is red.', [[64.0, 48.0, 320.0, 240.0]])
    >>> parse_shikra("[0.1,0.2,0.5,0.6]", width=640, height=480, expand2square=True).boxes.tolist()
    [[64.0, 48.0, 320.0, 304.0]]
    """
    if (bad := _bad_size(width, height)) is not None:
        return Parsed.fail(bad)
    rows = []
    for m in _SHIKRA_RE.finditer(text):
        for part in m.group(0)[1:-1].split(";"):
            rows.append([float(v) for v in part.split(",")])
    norm = _quads(rows)
    if (bad := _check_frame(norm, 1.0, 1.0, "[0, 1] (normalized)")) is not None:
        return Parsed.fail(bad)
    answer = _clean(_SHIKRA_RE.sub(" ", text))
    if not expand2square:
        return Parsed(True, answer, normalized_to_xyxy(norm, width, height), None)
    side = max(width, height)
    dx, dy = (side - width) // 2, (side - height) // 2
    px = shift_boxes(normalized_to_xyxy(norm, side, side), -dx, -dy)
    if (bad := _check_frame(px, width, height, f"the {width:g}x{height:g} image after removing the square padding")) is not None:
        return Parsed.fail(bad)
    return Parsed(True, answer, px, None)


# --------------------------------------------------------------------------------------------
# Florence-2
# --------------------------------------------------------------------------------------------

_FLORENCE_RUN_RE = re.compile(r"(?:<loc_\d+>)+")
_FLORENCE_BINS = 1000


def parse_florence2(text: str, *, width: float, height: float, **_: Any) -> Parsed:
    """Florence-2 location tokens ``<loc_N>``, **1000 bins per axis**, ``xyxy``, four tokens a box.

    Example output (``<OD>`` / phrase grounding)::

        car<loc_100><loc_100><loc_499><loc_499>

    Bin centre rule, as Florence-2's processor post-processing (``Florence2PostProcessor.
    dequantize``, mode ``floor``) computes it: pixel ``= (N + 0.5) * size / 1000``, ``N`` in
    ``[0, 999]``. A run of location tokens whose length is not a multiple of 4 (a polygon or a
    point) is unparsed, as is a bin above 999 or an inverted box. The answer is the text with the
    location tokens and ``<s>``, ``</s>``, ``<pad>`` removed.

    >>> p = parse_florence2("</s><s>car<loc_100><loc_100><loc_499><loc_499></s>", width=640, height=480)
    >>> p.answer, p.boxes.round(2).tolist()
    ('car', [[64.32, 48.24, 319.68, 239.76]])
    """
    if (bad := _bad_size(width, height)) is not None:
        return Parsed.fail(bad)
    rows = _loc_rows(text, _FLORENCE_RUN_RE, r"<loc_(\d+)>")
    if isinstance(rows, str):
        return Parsed.fail(rows)
    rest = _FLORENCE_RUN_RE.sub(" ", text)
    if "<loc_" in rest:
        return Parsed.fail("malformed <loc_N> token")
    bins_arr = _quads(rows)
    if (bad := _check_frame(bins_arr, _FLORENCE_BINS - 1, _FLORENCE_BINS - 1, "bins 0-999")) is not None:
        return Parsed.fail(bad)
    norm = (bins_arr + 0.5) / _FLORENCE_BINS
    return Parsed(True, _clean(rest), normalized_to_xyxy(norm, width, height), None)


# --------------------------------------------------------------------------------------------
# PaliGemma
# --------------------------------------------------------------------------------------------

_PALI_RUN_RE = re.compile(r"(?:<loc\d{4}>)+")
_PALI_SEG_RE = re.compile(r"<seg\d{3}>")
_PALI_BINS = 1024


def parse_paligemma(text: str, *, width: float, height: float, **_: Any) -> Parsed:
    """PaliGemma location tokens ``<locNNNN>``, **1024 bins, y first** (``ymin, xmin, ymax,
    xmax``), four tokens a box, then the label; detections separated by `` ; ``.

    Example output (``detect car``)::

        <loc0102><loc0064><loc0512><loc0320> car

    Pixel ``= N / 1024 * size`` (the official big_vision / PaliGemma parsing divides by 1024),
    ``N`` in ``[0, 1023]``. ``<segNNN>`` mask tokens are dropped. A run of location tokens whose
    length is not a multiple of 4, or an inverted box, is unparsed.

    >>> p = parse_paligemma("<loc0102><loc0064><loc0512><loc0320> car", width=640, height=480)
    >>> p.answer, p.boxes.tolist()
    ('car', [[40.0, 47.8125, 200.0, 240.0]])
    """
    if (bad := _bad_size(width, height)) is not None:
        return Parsed.fail(bad)
    rows = _loc_rows(text, _PALI_RUN_RE, r"<loc(\d{4})>")
    if isinstance(rows, str):
        return Parsed.fail(rows)
    rest = _PALI_SEG_RE.sub(" ", _PALI_RUN_RE.sub(" ", text))
    if "<loc" in rest:
        return Parsed.fail("malformed <locNNNN> token")
    yx = _quads(rows)
    if (bad := _check_frame(yx, _PALI_BINS - 1, _PALI_BINS - 1, "bins 0-1023 (y first)")) is not None:
        return Parsed.fail(bad)
    return Parsed(True, _clean(rest), grid_to_xyxy(swap_xy(yx), width, height, grid=_PALI_BINS), None)


# --------------------------------------------------------------------------------------------
# Gemini
# --------------------------------------------------------------------------------------------


def parse_gemini(text: str, *, width: float, height: float, **_: Any) -> Parsed:
    """Gemini JSON ``box_2d``: ``[ymin, xmin, ymax, xmax]``, **y first, 0–1000 grid** (Gemini API
    object-detection docs).

    Example output::

        ```json
        [{"box_2d": [100, 100, 500, 500], "label": "car"}]
        ```

    >>> t = '[{"box_2d": [100, 200, 500, 600], "label": "car"}]'
    >>> parse_gemini(t, width=640, height=480).boxes.tolist()
    [[128.0, 48.0, 384.0, 240.0]]
    """
    return _parse_json_grid(text, width, height, "box_2d", y_first=True)


register_format(OutputFormat("json", "pixels of the original image, xyxy", parse_json,
                             'generic {"answer": ..., "boxes": [[x1, y1, x2, y2], ...]}'))
register_format(OutputFormat("qwen2-vl", "0-1000 grid, xyxy", parse_qwen2_vl,
                             "<|box_start|>(x1,y1),(x2,y2)<|box_end|> tokens"))
register_format(OutputFormat("qwen2.5-vl", "pixels of the smart_resize'd input, xyxy", parse_qwen25_vl,
                             'JSON [{"bbox_2d": [x1, y1, x2, y2], "label": ...}]; options min_pixels, max_pixels'))
register_format(OutputFormat("qwen3-vl", "0-1000 grid, xyxy", parse_qwen3_vl,
                             'JSON [{"bbox_2d": [x1, y1, x2, y2], "label": ...}]'))
register_format(OutputFormat("internvl", "0-1000 grid, xyxy", parse_internvl,
                             "<ref>...</ref><box>[[x1, y1, x2, y2], ...]</box>"))
register_format(OutputFormat("shikra", "0-1 normalized, xyxy", parse_shikra,
                             "[x1,y1,x2,y2;...] floats; option expand2square"))
register_format(OutputFormat("florence2", "1000 bins, xyxy, bin centre (N + 0.5) / 1000", parse_florence2,
                             "<loc_N> x4 tokens"))
register_format(OutputFormat("paligemma", "1024 bins, y first (ymin, xmin, ymax, xmax), N / 1024", parse_paligemma,
                             "<locNNNN> x4 tokens, then the label"))
register_format(OutputFormat("gemini", "0-1000 grid, y first (ymin, xmin, ymax, xmax)", parse_gemini,
                             'JSON [{"box_2d": [ymin, xmin, ymax, xmax], "label": ...}]'))
