"""EtA-SFT and the answer-then-ground baseline: TRL's ``SFTTrainer`` with a LoRA adapter.

Recipe of RoadSceneVQA-G (Sec. V): LoRA rank 64, α 16 on the language model and the projector,
vision encoder frozen, learning rate 2e-4, cosine decay, 3 % warm-up, 3 epochs, bf16, images capped
at 602,112 pixels, sequences at 2,048 tokens; the standard baseline differs only in the order
(``order="standard"``). Every value is a field of :class:`SFTRecipe` and a flag of
``witness train sft``. The loss is on assistant tokens only.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from ..errors import InputError, require
from .common import TrainResult, fit_and_save, load_policy, recipe_lora, trainer_flags
from .data import SFT_MAX_PIXELS, load_split, to_sft
from .serialize import ORDERS

__all__ = ["SFTRecipe", "run_sft", "sft_args"]


@dataclass
class SFTRecipe:
    """EtA-SFT hyper-parameters (defaults: the paper's recipe)."""

    order: str = field(default="eta", metadata={"help": "Serialization: eta (boxes first) or standard (answer first)."})
    max_pixels: int = field(default=SFT_MAX_PIXELS, metadata={"help": "Pixel cap per image."})
    lora_r: int = field(default=64, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=16, metadata={"help": "LoRA alpha."})
    lora_dropout: float = field(default=0.05, metadata={"help": "LoRA dropout."})
    learning_rate: float = field(default=2e-4, metadata={"help": "Peak learning rate."})
    lr_scheduler: str = field(default="cosine", metadata={"help": "Learning-rate schedule."})
    warmup_ratio: float = field(default=0.03, metadata={"help": "Share of steps spent warming up."})
    epochs: float = field(default=3.0, metadata={"help": "Epochs over the train split."})
    max_steps: int = field(default=-1, metadata={"help": "Stop after this many steps (-1: epochs decide)."})
    max_length: int = field(default=2048, metadata={"help": "Token cap per sequence."})
    batch_size: int = field(default=1, metadata={"help": "Per-device batch size."})
    grad_accum: int = field(default=1, metadata={"help": "Gradient accumulation steps."})
    bf16: bool | None = field(default=None, metadata={"help": "bf16 (default: where the GPU supports it)."})
    gradient_checkpointing: bool = field(default=True, metadata={"help": "Trade compute for memory (TRL's default)."})
    assistant_only_loss: bool = field(default=True, metadata={"help": "Loss on assistant tokens only."})
    seed: int = field(default=0, metadata={"help": "Random seed."})
    split: str = field(default="train", metadata={"help": "Release split to train on."})
    limit: int | None = field(default=None, metadata={"help": "Use only the first N items (smoke runs)."})
    logging_steps: int = field(default=1, metadata={"help": "Log every N steps."})
    save_steps: int | None = field(default=None, metadata={"help": "Checkpoint every N steps (None: only at the end)."})


def run_sft(data_dir: str | os.PathLike, model_path: str | os.PathLike, out_dir: str | os.PathLike,
            recipe: SFTRecipe | None = None) -> TrainResult:
    """Train a LoRA adapter with TRL's ``SFTTrainer`` on a release split; save it (with the processor
    and a ``witness_train.json`` run card) to ``out_dir``.
    """
    recipe = recipe or SFTRecipe()
    trl = require("trl", "train")
    if recipe.order not in ORDERS:
        raise InputError(f"Expected an order in {list(ORDERS)}, got {recipe.order!r} (--order). Use eta or standard.")
    t0 = time.time()
    args = sft_args(recipe, out_dir)
    model, processor = load_policy(model_path, max_pixels=recipe.max_pixels, bf16=args.bf16)
    ds = to_sft(load_split(data_dir, recipe.split, limit=recipe.limit), order=recipe.order, max_pixels=recipe.max_pixels)
    trainer = trl.SFTTrainer(
        model=model,
        args=args,
        train_dataset=ds,
        processing_class=processor,
        peft_config=recipe_lora(recipe),
    )
    return fit_and_save(trainer, processor, "sft", model_path, data_dir, out_dir, recipe, t0)


def sft_args(recipe: SFTRecipe, out_dir: str | os.PathLike):
    """The ``trl.SFTConfig`` of a recipe (CPU-safe flags; every recipe field reaches TRL explicitly,
    so a flag set to TRL's non-default value, e.g. ``--no-gradient-checkpointing``, takes effect)."""
    trl = require("trl", "train")
    if not 0.0 <= recipe.warmup_ratio < 1.0:
        raise InputError(f"Expected --warmup-ratio in [0, 1), got {recipe.warmup_ratio}. It is a share of the steps.")
    return trl.SFTConfig(
        lr_scheduler_type=recipe.lr_scheduler,
        warmup_steps=recipe.warmup_ratio,  # a float in [0, 1) is a share of the steps
        max_length=recipe.max_length,
        per_device_train_batch_size=recipe.batch_size,
        activation_checkpointing=recipe.gradient_checkpointing,  # transformers 5 name of gradient_checkpointing
        assistant_only_loss=recipe.assistant_only_loss,
        **trainer_flags(recipe, out_dir),
    )
