"""Qwen2-VL / Qwen2.5-VL input resizing (``smart_resize``), needed to read Qwen2.5-VL boxes back.

Qwen2.5-VL answers grounding prompts with ``bbox_2d`` in **pixels of the resized input** that its
image processor fed to the vision tower, not of the original image. To bring such a box back to the
original image, recompute the processor's resize and scale by ``original / resized`` per axis.

The rule (transformers ``models/qwen2_vl/image_processing_qwen2_vl.py::smart_resize``, used by the
Qwen2.5-VL processor too) for an image of ``height x width`` pixels:

1. refuse an aspect ratio ``max(h, w) / min(h, w) > 200``;
2. ``h_bar = round(h / factor) * factor`` and ``w_bar = round(w / factor) * factor`` with Python's
   ``round`` (round half to **even**: ``round(2.5) == 2``);
3. if ``h_bar * w_bar > max_pixels``: ``beta = sqrt(h * w / max_pixels)``,
   ``h_bar = max(factor, floor(h / beta / factor) * factor)``, same for ``w_bar``;
4. elif ``h_bar * w_bar < min_pixels``: ``beta = sqrt(min_pixels / (h * w))``,
   ``h_bar = ceil(h * beta / factor) * factor``, same for ``w_bar``.

``factor = patch_size * merge_size = 14 * 2 = 28``. Defaults of ``min_pixels`` / ``max_pixels`` are
those of the processor the Qwen2.5-VL checkpoints load (their ``preprocessor_config.json``:
``min_pixels = 3136 = 56 * 56``, ``max_pixels = 12845056 = 16384 * 28 * 28``; ``qwen_vl_utils`` uses
the same ``MAX_PIXELS``). transformers' ``Qwen2VLImageProcessor`` *class* default is
``max_pixels = 1003520 = 28 * 28 * 1280``; pass whatever your run used — the parser cannot guess it.
"""

from __future__ import annotations

import math

from ..errors import InputError

__all__ = [
    "QWEN_FACTOR",
    "QWEN25_MIN_PIXELS",
    "QWEN25_MAX_PIXELS",
    "TRANSFORMERS_MAX_PIXELS",
    "smart_resize",
]

QWEN_FACTOR = 28
QWEN25_MIN_PIXELS = 56 * 56
QWEN25_MAX_PIXELS = 16384 * 28 * 28
TRANSFORMERS_MAX_PIXELS = 28 * 28 * 1280


def smart_resize(
    height: int,
    width: int,
    *,
    factor: int = QWEN_FACTOR,
    min_pixels: int = QWEN25_MIN_PIXELS,
    max_pixels: int = QWEN25_MAX_PIXELS,
) -> tuple[int, int]:
    """The ``(height, width)`` in pixels that the Qwen2-VL / Qwen2.5-VL image processor resizes to.

    Same argument order and result as transformers' ``smart_resize(height, width, ...)``; both
    sides are multiples of ``factor`` and the area lies in ``[min_pixels, max_pixels]`` (rules in the
    module docstring).

    >>> smart_resize(480, 640)
    (476, 644)
    >>> smart_resize(1080, 1920, max_pixels=28 * 28 * 1280)
    (728, 1316)
    >>> smart_resize(10, 10)  # below min_pixels: scaled up
    (56, 56)
    >>> smart_resize(1, 500)
    Traceback (most recent call last):
    ...
    witness.errors.InputError: Expected an aspect ratio of at most 200, got 500.0 (image 500x1). Qwen's processor refuses such images.
    """
    if not (height > 0 and width > 0 and factor > 0 and 0 < min_pixels <= max_pixels):
        raise InputError(
            f"Expected positive height, width, factor and 0 < min_pixels <= max_pixels, got "
            f"height={height}, width={width}, factor={factor}, min_pixels={min_pixels}, "
            f"max_pixels={max_pixels} (smart_resize). Pass the sizes your processor used."
        )
    ratio = max(height, width) / min(height, width)
    if ratio > 200:
        raise InputError(
            f"Expected an aspect ratio of at most 200, got {ratio} (image {width}x{height}). "
            "Qwen's processor refuses such images."
        )
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return int(h_bar), int(w_bar)
