"""A small synthetic release for tests, smoke runs and benchmarks (no dataset download).

:func:`write_tiny_release` draws coloured rectangles ("cars") on PNG images, writes counting and
existence items with their evidence boxes (plus logically equivalent pairs) through
:func:`witness.schema.item_record`, and stores ``DIR/data/{train,test}-00000-of-00001.parquet`` with
:data:`witness.schema.ITEM_SCHEMA` — the layout of a witness release.
"""

from __future__ import annotations

import io
import os
import random
from pathlib import Path

import pyarrow.parquet as pq

from ..schema import item_record, items_table

__all__ = ["write_tiny_release"]


def _png(width: int, height: int, boxes: list[list[float]], seed: int) -> bytes:
    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    img = Image.new("RGB", (width, height), (rng.randrange(40, 90),) * 3)
    draw = ImageDraw.Draw(img)
    for b in boxes:
        draw.rectangle(b, fill=(200, rng.randrange(0, 60), 40))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def write_tiny_release(out: str | os.PathLike, *, n_train: int = 8, n_test: int = 4, seed: int = 0,
                       width: int = 96, height: int = 64) -> Path:
    """Write a tiny release (PNG bytes embedded) under ``out``; return ``out``.

    Train items alternate counting questions and pairs of equivalent existence questions
    ("Is there a car?" / "Is the image free of cars?" with opposite answers, same evidence).

    >>> import tempfile, pyarrow.parquet as pq
    >>> d = write_tiny_release(tempfile.mkdtemp(), n_train=4, n_test=2)
    >>> pq.read_table(d / "data" / "train-00000-of-00001.parquet").num_rows
    4
    """
    out = Path(out)
    (out / "data").mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    for split, n in (("train", n_train), ("test", n_test)):
        rows = []
        k = 0
        while len(rows) < n:
            n_obj = rng.randrange(0, 4)
            boxes = []
            for _ in range(n_obj):
                x, y = rng.randrange(0, width - 20), rng.randrange(0, height - 16)
                boxes.append([float(x), float(y), float(x + rng.randrange(8, 20)), float(y + rng.randrange(6, 16))])
            image_id = f"{split}-img{k}"
            png = _png(width, height, boxes, seed * 1000 + k)
            if len(rows) % 4 == 0 and len(rows) + 2 <= n:
                pid = f"{split}-pair{k}"
                yes = "yes" if boxes else "no"
                no = "no" if boxes else "yes"
                rows.append(item_record(f"{split}-q{k}a", image_id, width, height, "Is there a car?", yes, boxes,
                                        ["car"] * len(boxes), image=png, qtype="existence", category="existence",
                                        targets=["car"], pair_id=pid, pair_role=1, split=split, source="tiny"))
                rows.append(item_record(f"{split}-q{k}b", image_id, width, height, "Is the image free of cars?", no,
                                        boxes, ["car"] * len(boxes), image=png, qtype="existence",
                                        category="existence", targets=["car"], pair_id=pid, pair_role=2,
                                        split=split, source="tiny"))
            else:
                word = ["zero", "one", "two", "three"][n_obj]
                rows.append(item_record(f"{split}-q{k}", image_id, width, height, "How many cars are there?",
                                        f"{word} cars" if n_obj != 1 else "one car", boxes, ["car"] * len(boxes),
                                        image=png, count=n_obj, qtype="counting", category="enumeration",
                                        targets=["car"], split=split, source="tiny"))
            k += 1
        pq.write_table(items_table(rows[:n]), out / "data" / f"{split}-00000-of-00001.parquet")
    return out
