"""Release Parquet splits to TRL conversational rows, through ``datasets``.

A release keeps one Parquet file set per split under ``DIR/data/`` (``train-00000-of-00001.parquet``,
...) with :data:`witness.schema.ITEM_SCHEMA` and the image as the HF ``Image`` struct
``{bytes, path}``. This module reads them with ``datasets.load_dataset("parquet", ...)`` and builds:

* SFT rows: ``{"images": [PIL], "messages": [user, assistant], "id": ...}`` — the assistant turn is
  the EtA or answer-then-ground serialization of the reference (:mod:`witness.train.serialize`);
* GRPO rows: ``{"prompt": [user], "image": PIL, <reference columns>}`` — the reference columns
  (``id, answer, boxes, width, height, pair_id, pair_role``) reach the rewards as keyword lists.

Every image is capped at ``max_pixels`` (area-preserving resize, aspect kept; RoadSceneVQA-G caps
602,112 pixels for SFT and 401,408 for ECPO). Boxes are serialized on the 0–1000 grid of the image,
so the cap does not move them; rewards parse outputs back into pixels of the original size.

The prompt text is built by :func:`build_prompt` here and nowhere else, so training and
:mod:`witness.train.predict` ask the same question.
"""

from __future__ import annotations

import glob
import io
import math
import os
import random
from pathlib import Path
from typing import Any

from ..errors import InputError, require
from .serialize import ORDERS, serialize

__all__ = [
    "SFT_MAX_PIXELS",
    "ECPO_MAX_PIXELS",
    "REFERENCE_COLUMNS",
    "INSTRUCTIONS",
    "split_files",
    "load_split",
    "cap_image",
    "build_prompt",
    "user_message",
    "to_sft",
    "to_grpo",
    "pair_rows",
]

#: Image pixel caps of the paper (RoadSceneVQA-G, Sec. V): EtA-SFT and ECPO.
SFT_MAX_PIXELS = 602_112
ECPO_MAX_PIXELS = 401_408

#: Item columns handed to the rewards.
REFERENCE_COLUMNS: tuple[str, ...] = ("id", "answer", "boxes", "width", "height", "pair_id", "pair_role")

#: The instruction appended to each question, per serialization order.
INSTRUCTIONS: dict[str, str] = {
    "eta": "List the boxes of the evidence first as <boxes>[[x1, y1, x2, y2], ...]</boxes> on a 0-1000 grid, "
    "then the answer as <answer>...</answer>.",
    "standard": "Give the answer as <answer>...</answer>, then the boxes of the evidence as "
    "<boxes>[[x1, y1, x2, y2], ...]</boxes> on a 0-1000 grid.",
}


def split_files(data_dir: str | os.PathLike, split: str) -> list[str]:
    """The Parquet files of ``split`` in a release: ``DIR/data/{split}-*.parquet`` (sorted).

    >>> split_files("/nonexistent", "train")
    Traceback (most recent call last):
    ...
    witness.errors.InputError: Expected Parquet files /nonexistent/data/train-*.parquet, got none (--data). Point --data at a release directory (it holds data/).
    """
    pattern = str(Path(data_dir) / "data" / f"{split}-*.parquet")
    files = sorted(glob.glob(pattern))
    if not files:
        raise InputError(f"Expected Parquet files {pattern}, got none (--data). Point --data at a release directory (it holds data/).")
    return files


def load_split(data_dir: str | os.PathLike, split: str, *, limit: int | None = None):
    """Load one split as a ``datasets.Dataset`` with ``image`` cast to the HF ``Image`` feature."""
    datasets = require("datasets", "train")
    files = split_files(data_dir, split)
    ds = datasets.load_dataset("parquet", data_files={split: files}, split=split)
    missing = [c for c in ("id", "image", "question", "answer", "boxes", "width", "height") if c not in ds.column_names]
    if missing:
        raise InputError(f"Expected item columns {missing}, got {ds.column_names} ({files[0]}). Release with witness.schema.ITEM_SCHEMA.")
    if not isinstance(ds.features["image"], datasets.Image):
        ds = ds.cast_column("image", datasets.Image())
    if limit is not None:
        ds = ds.select(range(min(int(limit), len(ds))))
    return ds


def cap_image(image: Any, max_pixels: int | None):
    """Return an RGB PIL image with at most ``max_pixels`` pixels (area-preserving resize).

    Scale ``s = sqrt(max_pixels / (w h))`` when ``w h > max_pixels``; sides are floored, at least 1.

    >>> from PIL import Image
    >>> cap_image(Image.new("RGB", (2000, 1000)), 500_000).size
    (1000, 500)
    """
    from PIL import Image

    if isinstance(image, dict):
        if image.get("bytes") is not None:
            image = Image.open(io.BytesIO(image["bytes"]))
        elif image.get("path"):
            image = Image.open(image["path"])
        else:
            raise InputError("Expected an image with bytes or a path, got neither. Embed images in the release.")
    image = image.convert("RGB")
    w, h = image.size
    if max_pixels and w * h > max_pixels:
        s = math.sqrt(max_pixels / (w * h))
        image = image.resize((max(1, int(w * s)), max(1, int(h * s))), Image.Resampling.BICUBIC)
    return image


def build_prompt(question: str, order: str = "eta") -> str:
    """The user text of one item: the question, then the output instruction of ``order``.

    >>> build_prompt("How many cars?").splitlines()[0]
    'How many cars?'
    """
    if order not in INSTRUCTIONS:
        raise InputError(f"Expected an order in {list(ORDERS)}, got {order!r} (--order). Use eta or standard.")
    return f"{question.strip()}\n{INSTRUCTIONS[order]}"


def user_message(question: str, order: str = "eta") -> dict:
    """One user turn with an image placeholder and the prompt text (TRL / chat-template format)."""
    return {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": build_prompt(question, order)}]}


def to_sft(ds, *, order: str = "eta", max_pixels: int | None = SFT_MAX_PIXELS, num_proc: int | None = None):
    """SFT rows ``{"images": [PIL], "messages": [user, assistant], "id"}`` from an items dataset."""
    if order not in ORDERS:
        raise InputError(f"Expected an order in {list(ORDERS)}, got {order!r} (--order). Use eta or standard.")

    def row(ex: dict) -> dict:
        target = serialize(ex["answer"], ex["boxes"] or [], ex["width"], ex["height"], order=order)
        return {
            "images": [cap_image(ex["image"], max_pixels)],
            "messages": [
                user_message(ex["question"], order),
                {"role": "assistant", "content": [{"type": "text", "text": target}]},
            ],
        }

    keep = {"id"}
    return ds.map(row, remove_columns=[c for c in ds.column_names if c not in keep], num_proc=num_proc)


def to_grpo(ds, *, order: str = "eta", max_pixels: int | None = ECPO_MAX_PIXELS, num_proc: int | None = None):
    """GRPO rows ``{"prompt": [user], "image": PIL, <REFERENCE_COLUMNS>}`` from an items dataset."""

    def row(ex: dict) -> dict:
        return {"prompt": [user_message(ex["question"], order)], "image": cap_image(ex["image"], max_pixels)}

    keep = set(REFERENCE_COLUMNS) | {"image"}
    out = ds.map(row, remove_columns=[c for c in ds.column_names if c not in keep], num_proc=num_proc)
    return out


def pair_rows(ds, *, seed: int = 0):
    """Keep the items of complete logically equivalent pairs, each pair as two adjacent rows (role 1
    then role 2), pairs in a seeded random order (ConVBench pairs).

    Training then runs with the sampler's shuffle off, so both questions of a pair land in the same
    generation batch and their rollouts are scored together.
    """
    pair_ids = ds["pair_id"] if "pair_id" in ds.column_names else [None] * len(ds)
    roles = ds["pair_role"] if "pair_role" in ds.column_names else [None] * len(ds)
    members: dict[str, dict[int, int]] = {}
    for i, (p, r) in enumerate(zip(pair_ids, roles, strict=True)):
        if p is not None and r in (1, 2):
            members.setdefault(p, {})[int(r)] = i
    pairs = sorted(p for p, m in members.items() if 1 in m and 2 in m)
    if not pairs:
        raise InputError(
            "Expected items with pair_id and pair_role 1 and 2 (logically equivalent pairs), got none (--data). "
            "Draft pairs with `witness draft pairs` before ConVLM training."
        )
    random.Random(seed).shuffle(pairs)
    order = [members[p][r] for p in pairs for r in (1, 2)]
    return ds.select(order)
