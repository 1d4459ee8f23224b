"""What the three trainers share: LoRA targets, precision, loading, the result record.

LoRA goes on the language model's attention and MLP projections and on the multimodal projector
(the vision ``merger``); the vision encoder stays frozen (RoadSceneVQA-G, Sec. V).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ..errors import InputError, require

__all__ = [
    "LORA_TARGETS",
    "TrainResult",
    "lora_config",
    "precision_flags",
    "load_policy",
    "write_run_card",
    "read_run_card",
    "adapter_delta",
    "merge_adapter",
]

#: PEFT ``target_modules`` regex (full match): language-model projections and the projector.
LORA_TARGETS = (
    r".*(language_model\.layers\.\d+\.(self_attn\.(q|k|v|o)_proj|mlp\.(gate|up|down)_proj)"
    r"|visual\.merger\.(mlp\.[02]|linear_fc\d)|visual\.deepstack_merger_list\.\d+\.linear_fc\d)"
)

RUN_CARD = "witness_train.json"


@dataclass(frozen=True)
class TrainResult:
    """What a training run produced: where, how many steps, final loss, the logged history."""

    method: str
    out_dir: str
    steps: int
    train_loss: float | None
    seconds: float
    adapter_norm: float | None = None
    log_history: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def lora_config(r: int, alpha: int, dropout: float = 0.05):
    """A PEFT ``LoraConfig`` on :data:`LORA_TARGETS` (vision encoder frozen)."""
    peft = require("peft", "train")
    return peft.LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=LORA_TARGETS,
                           task_type="CAUSAL_LM", bias="none")


def precision_flags(bf16: bool | None) -> dict:
    """``bf16`` on where a CUDA device supports it (``None`` = auto); on a CPU: fp32, ``use_cpu``."""
    torch = require("torch", "train")
    cuda = torch.cuda.is_available()
    if bf16 is None:
        bf16 = bool(cuda and torch.cuda.is_bf16_supported())
    if bf16 and not cuda:
        raise InputError("Expected a CUDA device for --bf16, got none. Drop --bf16 on a CPU.")
    return {"bf16": bool(bf16), "use_cpu": not cuda}


def load_policy(model_path: str | os.PathLike, *, adapter: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
                max_pixels: int | None = None, bf16: bool = False):
    """Load the base model and processor, merging ``adapter`` into the model (e.g. EtA-SFT before
    ECPO); a sequence of adapters is merged in order (an ECPO adapter on top of its EtA-SFT one)."""
    from .tiny import load_model_and_processor

    torch = require("torch", "train")
    adapters = [] if adapter is None else [adapter] if isinstance(adapter, (str, os.PathLike)) else list(adapter)
    for a in adapters:
        if not (Path(a) / "adapter_config.json").exists():
            raise InputError(f"Expected a PEFT adapter directory with adapter_config.json, got {str(a)!r} (--adapter).")
    dtype = torch.bfloat16 if bf16 else torch.float32
    model, processor = load_model_and_processor(model_path, dtype=dtype, max_pixels=max_pixels)
    for a in adapters:
        peft = require("peft", "train")
        model = peft.PeftModel.from_pretrained(model, str(a)).merge_and_unload()
    return model, processor


def write_run_card(out_dir: str | os.PathLike, method: str, model: str, data: str, recipe: dict, result: dict) -> Path:
    """Write ``witness_train.json`` beside the adapter: method, base model, data, recipe, result."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    card = {"method": method, "base_model": str(Path(model).resolve()), "data": str(data), "recipe": recipe,
            "result": {k: v for k, v in result.items() if k != "log_history"}, "written_at": time.time()}
    path = out / RUN_CARD
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(card, indent=2, default=str))
    os.replace(tmp, path)
    return path


def read_run_card(adapter_dir: str | os.PathLike) -> dict | None:
    """The run card of an adapter directory, or ``None``."""
    path = Path(adapter_dir) / RUN_CARD
    return json.loads(path.read_text()) if path.exists() else None


def adapter_delta(model: Any) -> float:
    """Sum of |LoRA B| over the model's adapters: 0 right after init (B starts at zero), > 0 once trained."""
    total = 0.0
    for name, p in model.named_parameters():
        if "lora_B" in name:
            total += float(p.detach().abs().sum())
    return total


def result_from(trainer: Any, method: str, out_dir: str | os.PathLike, t0: float) -> TrainResult:
    hist = list(trainer.state.log_history)
    loss = None
    for h in reversed(hist):
        if "train_loss" in h:
            loss = float(h["train_loss"])
            break
        if "loss" in h:
            loss = float(h["loss"])
            break
    norm = adapter_delta(trainer.accelerator.unwrap_model(trainer.model))
    return TrainResult(method, str(out_dir), int(trainer.state.global_step), loss, time.time() - t0, norm, hist)


def merge_adapter(model_path: str | os.PathLike, adapter: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Merge a LoRA ``adapter`` into the base model at ``model_path``; save model and processor at ``out``.

    The paper starts ECPO "from the merged EtA-SFT checkpoint"; ``witness train merge`` does this
    step, and predictions of an ECPO adapter then use ``--model OUT --adapter ECPO``.
    """
    from ..io import atomic_dir

    model, processor = load_policy(model_path, adapter=adapter)
    with atomic_dir(out) as tmp:
        model.save_pretrained(tmp)
        processor.save_pretrained(tmp)
        tiny = Path(model_path) / "witness_tiny.json"
        if tiny.exists():
            (Path(tmp) / "witness_tiny.json").write_text(tiny.read_text())
    return Path(out)
