"""Training targets: Enumerate-then-Answer (EtA) and answer-then-ground serializations.

RoadSceneVQA-G (Section IV-A): EtA writes the evidence boxes first and the answer after them, so a
stated count is a read-out of the enumerated boxes; the standard baseline ("answer-then-ground")
writes the answer first. Both use witness's text format, read back by the ``eta`` parser of
:mod:`witness.eval.parse` (one parser reads both orders)::

    <boxes>[[x1, y1, x2, y2], ...]</boxes>
    <answer>TEXT</answer>

Boxes are integers on the 0–1000 grid (:func:`witness.boxes.xyxy_to_grid`, round half up) sorted
by ``(y1, x1)`` (:func:`witness.boxes.sort_boxes_reading_order`); ``<boxes>[]</boxes>`` is the
explicit decision that there is nothing to ground.
"""

from __future__ import annotations

import numpy as np

from ..boxes import as_boxes, sort_boxes_reading_order, xyxy_to_grid
from ..errors import InputError

__all__ = ["ORDERS", "grid_boxes", "format_boxes", "serialize", "serialize_eta", "serialize_answer_first",
           "ORDER_FORMAT"]

#: Serialization orders: ``eta`` (boxes, then answer) and ``standard`` (answer, then boxes).
ORDERS: tuple[str, ...] = ("eta", "standard")

#: The :mod:`witness.eval.parse` format that reads each order back.
ORDER_FORMAT: dict[str, str] = {"eta": "eta", "standard": "answer-then-ground"}


def grid_boxes(boxes, width: float, height: float) -> np.ndarray:
    """Pixel ``xyxy`` boxes to 0–1000 grid integers sorted by ``(y1, x1)``; shape ``(N, 4)``.

    The order is that of the written grid integers (what the model reads and emits); boxes whose
    grid ``(y1, x1)`` tie keep their pixel ``(y1, x1)`` order. Sorting the pixel boxes alone is not
    enough: two pixel rows that round to the same grid ``y1`` could come out with ``x1`` descending.

    >>> grid_boxes([[320, 240, 640, 480], [0, 0, 64, 48]], 640, 480).tolist()
    [[0, 0, 100, 100], [500, 500, 1000, 1000]]
    >>> grid_boxes([[500, 10.0, 600, 20], [100, 10.4, 200, 20]], 1000, 1000).tolist()  # same grid y1
    [[100, 10, 200, 20], [500, 10, 600, 20]]
    """
    b = as_boxes(boxes)
    if len(b) == 0:
        return np.zeros((0, 4), dtype=np.int64)
    if not (width > 0 and height > 0):
        raise InputError(f"Expected a positive image size, got {width}x{height}. Read the size from the item.")
    grid = xyxy_to_grid(b[sort_boxes_reading_order(b)], width, height)
    return grid[np.lexsort((grid[:, 0], grid[:, 1]))]  # lexsort is stable: grid ties keep the pixel order


def format_boxes(grid: np.ndarray) -> str:
    """``[[x1, y1, x2, y2], ...]`` text of integer grid boxes (``[]`` when empty).

    >>> format_boxes(np.array([[1, 2, 3, 4], [5, 6, 7, 8]]))
    '[[1, 2, 3, 4], [5, 6, 7, 8]]'
    >>> format_boxes(np.zeros((0, 4), dtype=int))
    '[]'
    """
    return "[" + ", ".join("[" + ", ".join(str(int(v)) for v in row) + "]" for row in grid) + "]"


def serialize_eta(answer: str, boxes, width: float, height: float) -> str:
    """EtA target: ``<boxes>[...]</boxes>\\n<answer>TEXT</answer>`` (RoadSceneVQA-G, Sec. IV-A).

    >>> serialize_eta("2 cars", [[64, 48, 128, 96], [0, 0, 64, 48]], 640, 480)
    '<boxes>[[0, 0, 100, 100], [100, 100, 200, 200]]</boxes>\\n<answer>2 cars</answer>'
    >>> serialize_eta("No.", [], 640, 480)
    '<boxes>[]</boxes>\\n<answer>No.</answer>'
    """
    return f"<boxes>{format_boxes(grid_boxes(boxes, width, height))}</boxes>\n<answer>{answer.strip()}</answer>"


def serialize_answer_first(answer: str, boxes, width: float, height: float) -> str:
    """Answer-then-ground target (the paper's standard SFT baseline): the answer, then the boxes.

    >>> serialize_answer_first("1 car", [[0, 0, 64, 48]], 640, 480)
    '<answer>1 car</answer>\\n<boxes>[[0, 0, 100, 100]]</boxes>'
    """
    return f"<answer>{answer.strip()}</answer>\n<boxes>{format_boxes(grid_boxes(boxes, width, height))}</boxes>"


def serialize(answer: str, boxes, width: float, height: float, *, order: str = "eta") -> str:
    """Serialize in ``order`` (``eta`` or ``standard``).

    >>> serialize("yes", [], 10, 10, order="standard")
    '<answer>yes</answer>\\n<boxes>[]</boxes>'
    >>> serialize("yes", [], 10, 10, order="reverse")
    Traceback (most recent call last):
    ...
    witness.errors.InputError: Expected an order in ['eta', 'standard'], got 'reverse' (--order). Use eta or standard.
    """
    if order == "eta":
        return serialize_eta(answer, boxes, width, height)
    if order == "standard":
        return serialize_answer_first(answer, boxes, width, height)
    raise InputError(f"Expected an order in {list(ORDERS)}, got {order!r} (--order). Use eta or standard.")
