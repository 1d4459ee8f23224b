"""Tiny Qwen-VL models built offline from a config: for tests, smoke runs and GPU benchmarks.

No model hub is touched. :func:`build_tiny_model` trains a small byte-level BPE tokenizer on text
it writes itself (EtA tags, digits, traffic words), wraps it in ``Qwen2Tokenizer`` with Qwen's
special tokens and TRL's Qwen chat template, builds a PIL-only image processor
(``Qwen2VLImageProcessorPil``, no torchvision) and a randomly initialised
``Qwen2VL`` / ``Qwen2_5_VL`` / ``Qwen3VL`` model, and saves all three with ``save_pretrained``.

Pitfall (``shared/notes/trl-cpu.md``): every Qwen-VL processor of transformers 5 declares a video
processor whose type check fails without torchvision, and ``AutoProcessor`` then silently returns a
bare tokenizer. :func:`load_processor` therefore loads the processor through a subclass without a
video processor and checks that it got one; :func:`load_model_and_processor` is what every trainer
and the inference runner call.

Sizes: hidden 64, 2 layers, 4 heads / 2 KV heads, vision depth 2 width 32 — under 1.1 MB — unless
``hidden`` / ``layers`` say otherwise (``benchmarks/train_gpu.sh`` builds a larger one).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..errors import InputError, require

__all__ = [
    "FAMILIES",
    "build_tiny_model",
    "load_processor",
    "load_model_and_processor",
    "tokenizer_corpus",
]

#: Model families :func:`build_tiny_model` can build.
FAMILIES: tuple[str, ...] = ("qwen2-vl", "qwen2.5-vl", "qwen3-vl")

_MARKER = "witness_tiny_family"

_SPECIAL = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]


def tokenizer_corpus() -> list[str]:
    """The text the tiny tokenizer is trained on: EtA outputs, digits, questions, chat roles.

    >>> any("<boxes>" in line for line in tokenizer_corpus())
    True
    """
    words = (
        "car cars truck bus person people pedestrian bicycle cyclist traffic light sign lane road "
        "yes no none zero one two three four five six seven eight nine ten how many is there are any "
        "the a of in on left right of the image which what where vehicle vehicles count more fewer "
        "than equal same number system user assistant You are a helpful assistant. Answer with evidence."
    ).split()
    lines = [" ".join(words[i : i + 9]) for i in range(0, len(words), 3)]
    for n in range(0, 1001, 7):
        lines.append(f"<boxes>[[{n}, {n // 2}, {min(1000, n + 13)}, {min(1000, n // 2 + 29)}]]</boxes>\n<answer>{n % 9} cars</answer>")
    lines.append("<answer>No.</answer>\n<boxes>[]</boxes>")
    lines.extend(str(i) for i in range(1001))
    return lines * 3


def _family_classes(family: str):
    transformers = require("transformers", "train")
    if family == "qwen2-vl":
        return transformers.Qwen2VLConfig, transformers.Qwen2VLForConditionalGeneration, "qwen2_5_vl"
    if family == "qwen2.5-vl":
        return transformers.Qwen2_5_VLConfig, transformers.Qwen2_5_VLForConditionalGeneration, "qwen2_5_vl"
    if family == "qwen3-vl":
        return transformers.Qwen3VLConfig, transformers.Qwen3VLForConditionalGeneration, "qwen3_vl"
    raise InputError(f"Expected a model family in {list(FAMILIES)}, got {family!r} (--family). Pick one of them.")


def _processor_class(family: str):
    """A processor subclass of the family that takes no video processor (see the module note)."""
    if family == "qwen3-vl":
        from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor as base
    elif family == "qwen2-vl":
        from transformers.models.qwen2_vl.processing_qwen2_vl import Qwen2VLProcessor as base
    else:
        from transformers.models.qwen2_5_vl.processing_qwen2_5_vl import Qwen2_5_VLProcessor as base

    return _make_processor_class(base)


_PROC_CACHE: dict[Any, type] = {}


def _make_processor_class(base: type) -> type:
    if base in _PROC_CACHE:
        return _PROC_CACHE[base]
    from transformers import ProcessorMixin

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):  # noqa: N807
        self.image_token = getattr(tokenizer, "image_token", None) or "<|image_pad|>"
        self.video_token = getattr(tokenizer, "video_token", None) or "<|video_pad|>"
        self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)
        self.video_token_id = tokenizer.convert_tokens_to_ids(self.video_token)
        self.vision_start_token = "<|vision_start|>"
        self.vision_end_token = "<|vision_end|>"
        self.vision_start_token_id = tokenizer.convert_tokens_to_ids(self.vision_start_token)
        self.vision_end_token_id = tokenizer.convert_tokens_to_ids(self.vision_end_token)
        ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template)

    cls = type(f"Witness{base.__name__}", (base,), {"__init__": __init__, "__module__": __name__})
    _PROC_CACHE[base] = cls
    return cls


def _build_tokenizer(chat_template: str):
    tokenizers = require("tokenizers", "train")
    transformers = require("transformers", "train")
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=1024,
        special_tokens=_SPECIAL,
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(tokenizer_corpus(), trainer=trainer)
    model = json.loads(tok.to_str())["model"]
    vocab = {k: v for k, v in model["vocab"].items() if k not in _SPECIAL}
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    hf = transformers.Qwen2Tokenizer(
        vocab=vocab,
        merges=merges,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
    )
    hf.add_special_tokens({"additional_special_tokens": [t for t in _SPECIAL if t not in ("<|endoftext|>", "<|im_end|>")]})
    hf.chat_template = chat_template
    return hf


def _chat_template(name: str) -> str:
    trl_dir = Path(require("trl", "train").__file__).parent / "chat_templates"
    path = trl_dir / f"{name}.jinja"
    if not path.exists():
        raise InputError(f"Expected TRL's chat template {path}, got nothing there. Install trl>=1.16.")
    return path.read_text()


def build_tiny_model(
    family: str,
    out: str | os.PathLike,
    *,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    vision_depth: int = 2,
    vision_width: int = 32,
    max_image_tokens: int = 16,
    vocab_size: int | None = None,
    vision_heads: int = 2,
    seed: int = 0,
) -> Path:
    """Build and save a randomly initialised tiny Qwen-VL model, tokenizer and processor at ``out``.

    ``max_image_tokens`` caps the visual tokens per image through the processor's
    ``longest_edge`` = ``max_image_tokens * (patch * merge)^2`` pixels. ``vocab_size`` pads the
    embedding and LM head beyond the tokenizer (a real-shaped model for GPU benchmarks has ~152k).
    Returns ``out``.
    The saved ``config.json`` carries ``witness_tiny_family`` so :func:`load_processor` knows it.

    >>> build_tiny_model("llama", "/tmp/x")
    Traceback (most recent call last):
    ...
    witness.errors.InputError: Expected a model family in ['qwen2-vl', 'qwen2.5-vl', 'qwen3-vl'], got 'llama' (--family). Pick one of them.
    """
    if family not in FAMILIES:
        _family_classes(family)
    torch = require("torch", "train")
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    config_cls, model_cls, template = _family_classes(family)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _build_tokenizer(_chat_template(template))
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in _SPECIAL}
    head_dim = hidden // heads
    third = head_dim // 2
    mrope = [third - 2 * (third // 3), third // 3, third // 3]
    patch = 16 if family == "qwen3-vl" else 14
    text = dict(
        vocab_size=max(len(tokenizer), int(vocab_size or 0)),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 1e4, "mrope_section": mrope},
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        tie_word_embeddings=False,
    )
    vision = dict(
        depth=vision_depth,
        hidden_size=vision_width,
        intermediate_size=vision_width * 2,
        num_heads=vision_heads,
        out_hidden_size=hidden,
        patch_size=patch,
        spatial_merge_size=2,
        temporal_patch_size=2,
    )
    if family == "qwen2.5-vl":
        vision.update(fullatt_block_indexes=[vision_depth - 1], window_size=112)
    if family == "qwen2-vl":
        vision = dict(depth=vision_depth, embed_dim=vision_width, hidden_size=hidden, mlp_ratio=2, num_heads=vision_heads,
                      patch_size=patch, spatial_merge_size=2, temporal_patch_size=2)
    if family == "qwen3-vl":
        text.update(head_dim=head_dim)
        text["rope_parameters"] = dict(text["rope_parameters"], mrope_interleaved=True)
        vision.update(deepstack_visual_indexes=[], num_position_embeddings=144)
    config = config_cls(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )
    setattr(config, _MARKER, family)
    torch.manual_seed(seed)
    model = model_cls(config)
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    unit = (patch * 2) ** 2
    image_processor = Qwen2VLImageProcessorPil(
        size={"shortest_edge": unit, "longest_edge": unit * max_image_tokens},
        patch_size=patch,
        merge_size=2,
        temporal_patch_size=2,
    )
    processor = _processor_class(family)(image_processor=image_processor, tokenizer=tokenizer,
                                         chat_template=tokenizer.chat_template)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "witness_tiny.json").write_text(json.dumps({"family": family, "hidden": hidden, "layers": layers}))
    return out


def _tiny_family(path: Path) -> str | None:
    marker = path / "witness_tiny.json"
    if marker.exists():
        return json.loads(marker.read_text())["family"]
    cfg = path / "config.json"
    if cfg.exists():
        return json.loads(cfg.read_text()).get(_MARKER)
    return None


def _family_of(path: Path) -> str | None:
    cfg = path / "config.json"
    if not cfg.exists():
        return None
    model_type = json.loads(cfg.read_text()).get("model_type", "")
    return {"qwen2_vl": "qwen2-vl", "qwen2_5_vl": "qwen2.5-vl", "qwen3_vl": "qwen3-vl"}.get(model_type)


def load_processor(path: str | os.PathLike, *, max_pixels: int | None = None):
    """Load the processor saved at ``path`` and check it is a multimodal processor.

    Qwen-VL families load through a subclass without a video processor (works without
    torchvision); other models through ``AutoProcessor``. ``max_pixels`` lowers the image
    processor's ``longest_edge`` (pixels per image). Raises :class:`InputError` when only a tokenizer
    comes back (the model would silently train text-only).
    """
    transformers = require("transformers", "train")
    path = Path(path)
    family = _tiny_family(path) or _family_of(path)
    proc = None
    if family is not None:
        try:
            proc = _processor_class(family).from_pretrained(path)
        except Exception:  # fall back to the stock class (e.g. with torchvision installed)
            proc = None
    if proc is None:
        proc = transformers.AutoProcessor.from_pretrained(path)
    if getattr(proc, "image_processor", None) is None:
        raise InputError(
            f"Expected a multimodal processor with an image processor, got {type(proc).__name__} ({path}). "
            "Save the model's processor beside it (processor.save_pretrained)."
        )
    if max_pixels is not None:
        size = dict(proc.image_processor.size)
        size["longest_edge"] = min(int(size.get("longest_edge", max_pixels)), int(max_pixels))
        size["shortest_edge"] = min(int(size.get("shortest_edge", 0)), size["longest_edge"])
        proc.image_processor.size = size
    return proc


def load_model_and_processor(path: str | os.PathLike, *, dtype: Any = None, max_pixels: int | None = None,
                             device_map: Any = None):
    """Load an image-text-to-text model and its processor from a local directory (no hub)."""
    transformers = require("transformers", "train")
    path = Path(path)
    if not (path / "config.json").exists():
        raise InputError(f"Expected a model directory with config.json, got {str(path)!r} (--model). "
                         "Pass a local checkpoint or build one with `witness train tiny-model`.")
    kwargs: dict[str, Any] = {}
    if dtype is not None:
        kwargs["dtype"] = dtype
    if device_map is not None:
        kwargs["device_map"] = device_map
    model = transformers.AutoModelForImageTextToText.from_pretrained(path, **kwargs)
    processor = load_processor(path, max_pixels=max_pixels)
    return model, processor
