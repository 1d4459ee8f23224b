"""Pure helpers behind the Streamlit app: load an item's image, draw boxes, pick rows to show.

Kept free of Streamlit so that they are tested like any other function.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pyarrow as pa

from ..boxes import as_boxes

__all__ = ["COLORS", "load_image", "draw_boxes", "failing_rows"]

#: Box colours by role: reference evidence, prediction, missed reference, extra prediction.
COLORS = {"reference": (46, 204, 113), "prediction": (52, 152, 219), "missed": (243, 156, 18), "extra": (231, 76, 60)}


def load_image(image: Any):
    """A PIL image from an HF ``Image`` struct (``{bytes, path}``), bytes or a path; None if absent.

    >>> load_image(None) is None
    True
    """
    from PIL import Image

    if image is None:
        return None
    if isinstance(image, dict):
        if image.get("bytes"):
            return Image.open(io.BytesIO(image["bytes"])).convert("RGB")
        image = image.get("path")
        if not image:
            return None
    if isinstance(image, (bytes, bytearray)):
        return Image.open(io.BytesIO(image)).convert("RGB")
    path = Path(image)
    return Image.open(path).convert("RGB") if path.exists() else None


def draw_boxes(image, layers: Iterable[tuple[str, Sequence, Sequence[str] | None]], *, width: int = 3):
    """Draw pixel ``xyxy`` boxes on a copy of ``image``; each layer is ``(role, boxes, labels)``.

    >>> from PIL import Image
    >>> out = draw_boxes(Image.new("RGB", (20, 20)), [("reference", [[2, 2, 10, 10]], ["car"])], width=1)
    >>> out.getpixel((2, 5)), out.getpixel((15, 15))
    ((46, 204, 113), (0, 0, 0))
    """
    from PIL import ImageDraw

    out = image.copy()
    draw = ImageDraw.Draw(out)
    for role, boxes, labels in layers:
        color = COLORS.get(role, (255, 255, 255))
        b = as_boxes(boxes if boxes is not None else [])
        for k, (x1, y1, x2, y2) in enumerate(b):
            draw.rectangle([x1, y1, x2, y2], outline=color, width=width)
            if labels is not None and k < len(labels) and labels[k]:
                draw.text((x1 + 2, max(0, y1 - 11)), str(labels[k]), fill=color)
    return out


def failing_rows(samples: pa.Table) -> np.ndarray:
    """Indices of per-sample rows that show an error: a missing or unparsed prediction, a boolean
    metric column that is false, or missed / extra boxes.

    >>> t = pa.table({"id": ["a", "b", "c"], "parsed": [True, True, False], "gca_l": [True, False, True]})
    >>> failing_rows(t).tolist()
    [1, 2]
    """
    bad = np.zeros(samples.num_rows, dtype=bool)
    for name in samples.column_names:
        col = samples.column(name)
        if pa.types.is_boolean(col.type):
            v = col.to_numpy(zero_copy_only=False)
            v = np.where(np.equal(v, None), True, v).astype(bool) if v.dtype == object else v
            bad |= v if name == "missing" else ~v
        elif name in ("missed_boxes", "extra_boxes"):
            bad |= np.asarray([len(x or []) > 0 for x in col.to_pylist()])
    return np.flatnonzero(bad)
