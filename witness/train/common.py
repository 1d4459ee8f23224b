"""What the three trainers share: LoRA targets, precision, loading, the TRL config flags every
recipe sets alike, the GRPO recipe fields of ECPO and ConVLM, training and saving, the result record.

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
from .data import ECPO_MAX_PIXELS

__all__ = [
    "LORA_TARGETS",
    "TrainResult",
    "GRPORecipe",
    "lora_config",
    "recipe_lora",
    "precision_flags",
    "trainer_flags",
    "fit_and_save",
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


@dataclass
class GRPORecipe:
    """The hyper-parameters ECPO and ConVLM share (GRPO rollouts, LoRA, optimisation, data, run).

    A recipe lists its own fields first: ``class ECPORecipe(GRPORecipe, _ECPOFields)`` puts the
    fields of ``_ECPOFields`` (last in the MRO) before these, so every flag of ``witness train
    ecpo`` keeps its place. A field redeclared in a recipe (another help text) keeps its place here.
    The help texts are ECPO's wording; ConVLM rewords a few.
    """

    max_pixels: int = field(default=ECPO_MAX_PIXELS, metadata={"help": "Pixel cap per image."})
    max_completion_length: int = field(default=640, metadata={"help": "Token cap per completion."})
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature of the rollouts."})
    lora_r: int = field(default=32, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=64, metadata={"help": "LoRA alpha."})
    lora_dropout: float = field(default=0.05, metadata={"help": "LoRA dropout."})
    learning_rate: float = field(default=1e-6, metadata={"help": "Learning rate."})
    epochs: float = field(default=1.0, metadata={"help": "Epochs over the train split."})
    max_steps: int = field(default=-1, metadata={"help": "Stop after this many steps (-1: epochs decide)."})
    batch_size: int | None = field(default=None, metadata={"help": "Per-device batch of completions (default G)."})
    grad_accum: int = field(default=1, metadata={"help": "Gradient accumulation steps."})
    bf16: bool | None = field(default=None, metadata={"help": "bf16 (default: where the GPU supports it)."})
    use_vllm: bool = field(default=False, metadata={"help": "Generate rollouts with vLLM."})
    vllm_mode: str = field(default="server", metadata={"help": "vLLM mode: server (a separate `vllm serve`) or colocate."})
    vllm_server_base_url: str | None = field(default=None, metadata={"help": "URL of a vLLM server (`vllm serve`, see docs/train.md)."})
    seed: int = field(default=0, metadata={"help": "Random seed."})
    split: str = field(default="train", metadata={"help": "Release split to train on."})
    limit: int | None = field(default=None, metadata={"help": "Use only the first N items (smoke runs)."})
    order: str = field(default="eta", metadata={"help": "Output format asked for: eta or standard."})
    sft_adapter: str | None = field(default=None, metadata={"help": "EtA-SFT adapter merged into --model first."})
    logging_steps: int = field(default=1, metadata={"help": "Log every N steps."})
    save_steps: int | None = field(default=None, metadata={"help": "Checkpoint every N steps (None: only at the end)."})


def lora_config(r: int, alpha: int, dropout: float = 0.05):
    """A PEFT ``LoraConfig`` on :data:`LORA_TARGETS` (vision encoder frozen)."""
    peft = require("peft", "train")
    return peft.LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=LORA_TARGETS,
                           task_type="CAUSAL_LM", bias="none")


def recipe_lora(recipe: Any):
    """:func:`lora_config` of a recipe's ``lora_r``, ``lora_alpha`` and ``lora_dropout``."""
    return lora_config(recipe.lora_r, recipe.lora_alpha, recipe.lora_dropout)


def precision_flags(bf16: bool | None) -> dict:
    """``bf16`` on where a CUDA device supports it (``None`` = auto); on a CPU: fp32, ``use_cpu``."""
    torch = require("torch", "train")
    cuda = torch.cuda.is_available()
    if bf16 is None:
        bf16 = bool(cuda and torch.cuda.is_bf16_supported())
    if bf16 and not cuda:
        raise InputError("Expected a CUDA device for --bf16, got none. Drop --bf16 on a CPU.")
    return {"bf16": bool(bf16), "use_cpu": not cuda}


def trainer_flags(recipe: Any, out_dir: str | os.PathLike) -> dict:
    """The TRL config keywords every witness recipe sets alike: output, optimisation length,
    seed, logging, checkpoints (only at the end unless ``save_steps``), no reporting, dataset
    columns kept, no loader workers, and :func:`precision_flags` (CPU-safe)."""
    return dict(
        output_dir=str(out_dir),
        learning_rate=recipe.learning_rate,
        num_train_epochs=recipe.epochs,
        max_steps=recipe.max_steps,
        gradient_accumulation_steps=recipe.grad_accum,
        seed=recipe.seed,
        logging_steps=recipe.logging_steps,
        save_strategy="steps" if recipe.save_steps else "no",
        save_steps=recipe.save_steps or 500,
        report_to="none",
        remove_unused_columns=False,
        dataloader_num_workers=0,
        **precision_flags(recipe.bf16),
    )


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


def fit_and_save(trainer: Any, processor: Any, method: str, model_path: str | os.PathLike,
                 data_dir: str | os.PathLike, out_dir: str | os.PathLike, recipe: Any, t0: float) -> TrainResult:
    """Train, save the adapter to ``out_dir``, and on the main process the processor and the run
    card beside it; the result of the run (started at ``t0``)."""
    trainer.train()
    trainer.save_model(str(out_dir))
    result = result_from(trainer, method, out_dir, t0)
    if trainer.accelerator.is_main_process:
        processor.save_pretrained(str(out_dir))
        write_run_card(out_dir, method, str(model_path), str(data_dir), asdict(recipe), result.to_dict())
    return result


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
