"""ECPO (RoadSceneVQA-G, Sec. IV-B): TRL's ``GRPOTrainer`` configured with the consensus reward.

Recipe (Sec. V): start from the merged EtA-SFT checkpoint (``--model`` plus an optional
``--sft-adapter`` merged in), a new LoRA adapter of rank 32 and α 64, learning rate 1e-6, one
epoch, G = 6 rollouts per prompt (k = max(2, ⌈G/4⌉) = 2), λ = 0.6 / 0.1 / 0.3, completions capped
at 640 tokens, images at 401,408 pixels; the KL reference is the policy with the adapter disabled
(TRL does this for a PEFT model when β > 0); "other settings follow GRPO": β = 0.04,
per-sequence length-normalised loss (``loss_type="grpo"``), group-normalised advantages.

The three reward terms are three TRL reward functions with ``reward_weights`` λ, so TRL logs each
term (``rewards/r_grp/mean`` ...) and sums ``r = Σ λ r``. The consensus term also logs
``ecpo/consensus_size``, ``ecpo/rollouts_per_group`` and ``ecpo/union_recall`` (diagnosis only).

Baselines (``reward=``): ``grpo`` — vanilla GRPO with format and answer terms only; ``recall`` —
a supervised per-box recall against the reference boxes in place of the consensus term. Both keep
the consensus term at weight 0, so its diagnostics are logged for comparison.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field

from ..errors import InputError, require
from .common import (
    TrainResult,
    load_policy,
    lora_config,
    precision_flags,
    result_from,
    write_run_card,
)
from .data import ECPO_MAX_PIXELS, load_split, to_grpo
from .rewards import (
    ECPO_WEIGHTS,
    AnswerF1Reward,
    BoxRecallReward,
    ConsensusCoverageReward,
    FormatReward,
)

__all__ = ["ECPORecipe", "REWARD_MODES", "ecpo_rewards", "grpo_args", "run_ecpo"]

#: ``--reward`` choices.
REWARD_MODES: tuple[str, ...] = ("ecpo", "grpo", "recall")


@dataclass
class ECPORecipe:
    """ECPO hyper-parameters (defaults: the paper's recipe)."""

    reward: str = field(default="ecpo", metadata={"help": "ecpo, or a baseline: grpo (format + answer), recall (supervised per-box recall)."})
    num_generations: int = field(default=6, metadata={"help": "G, rollouts per prompt."})
    k: int | None = field(default=None, metadata={"help": "Consensus support (default max(2, ceil(G/4)))."})
    iou: float = field(default=0.5, metadata={"help": "IoU threshold of clustering and matching."})
    lambda_grp: float = field(default=ECPO_WEIGHTS[0], metadata={"help": "Weight of the consensus coverage."})
    lambda_fmt: float = field(default=ECPO_WEIGHTS[1], metadata={"help": "Weight of the format check."})
    lambda_ans: float = field(default=ECPO_WEIGHTS[2], metadata={"help": "Weight of the answer token F1."})
    beta: float = field(default=0.04, metadata={"help": "KL weight to the adapter-disabled reference."})
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


def ecpo_rewards(recipe: ECPORecipe) -> tuple[list, list[float]]:
    """The reward callables and their weights for ``recipe.reward``.

    >>> funcs, weights = ecpo_rewards(ECPORecipe())
    >>> [f.__name__ for f in funcs], weights
    (['r_grp', 'r_fmt', 'r_ans'], [0.6, 0.1, 0.3])
    """
    fmt = "eta" if recipe.order == "eta" else "answer-then-ground"
    grp = ConsensusCoverageReward(recipe.num_generations, k=recipe.k, iou=recipe.iou, fmt=fmt)
    fmt_r, ans_r = FormatReward(fmt), AnswerF1Reward(fmt)
    if recipe.reward == "ecpo":
        return [grp, fmt_r, ans_r], [recipe.lambda_grp, recipe.lambda_fmt, recipe.lambda_ans]
    if recipe.reward == "grpo":
        return [grp, fmt_r, ans_r], [0.0, recipe.lambda_fmt, recipe.lambda_ans]
    if recipe.reward == "recall":
        return [grp, BoxRecallReward(fmt, recipe.iou), fmt_r, ans_r], [0.0, recipe.lambda_grp, recipe.lambda_fmt, recipe.lambda_ans]
    raise InputError(f"Expected --reward in {list(REWARD_MODES)}, got {recipe.reward!r}. Use one of them.")


def grpo_args(recipe, out_dir, *, num_generations: int, weights: list[float], shuffle: bool = True, beta: float):
    """A ``trl.GRPOConfig`` for a witness GRPO run (CPU-safe flags, vLLM pass-through)."""
    trl = require("trl", "train")
    prec = precision_flags(recipe.bf16)
    batch = recipe.batch_size or num_generations
    vllm = {}
    if recipe.use_vllm:
        vllm = {"use_vllm": True, "vllm_mode": recipe.vllm_mode}
        if recipe.vllm_server_base_url:
            vllm["vllm_server_base_url"] = recipe.vllm_server_base_url
    return trl.GRPOConfig(
        output_dir=str(out_dir),
        num_generations=num_generations,
        max_completion_length=recipe.max_completion_length,
        temperature=recipe.temperature,
        beta=beta,
        loss_type="grpo",
        reward_weights=weights,
        learning_rate=recipe.learning_rate,
        num_train_epochs=recipe.epochs,
        max_steps=recipe.max_steps,
        per_device_train_batch_size=batch,
        gradient_accumulation_steps=recipe.grad_accum,
        shuffle_dataset=shuffle,
        seed=recipe.seed,
        logging_steps=recipe.logging_steps,
        save_strategy="steps" if recipe.save_steps else "no",
        save_steps=recipe.save_steps or 500,
        report_to="none",
        remove_unused_columns=False,
        dataloader_num_workers=0,
        **vllm,
        **prec,
    )


def run_ecpo(data_dir: str | os.PathLike, model_path: str | os.PathLike, out_dir: str | os.PathLike,
             recipe: ECPORecipe | None = None, *, callbacks: list | None = None) -> TrainResult:
    """Train an ECPO LoRA adapter on a release split; save it with the processor and a run card."""
    recipe = recipe or ECPORecipe()
    trl = require("trl", "train")
    if recipe.num_generations < 2:
        raise InputError(f"Expected --num-generations >= 2, got {recipe.num_generations}. A consensus needs several rollouts.")
    if recipe.order not in ("eta", "standard"):
        raise InputError(f"Expected --order eta or standard, got {recipe.order!r}.")
    funcs, weights = ecpo_rewards(recipe)  # validates --reward before any model loads
    t0 = time.time()
    prec = precision_flags(recipe.bf16)
    model, processor = load_policy(model_path, adapter=recipe.sft_adapter, max_pixels=recipe.max_pixels, bf16=prec["bf16"])
    ds = to_grpo(load_split(data_dir, recipe.split, limit=recipe.limit), order=recipe.order, max_pixels=recipe.max_pixels)
    args = grpo_args(recipe, out_dir, num_generations=recipe.num_generations, weights=weights, beta=recipe.beta)
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=funcs,
        args=args,
        train_dataset=ds,
        processing_class=processor,
        peft_config=lora_config(recipe.lora_r, recipe.lora_alpha, recipe.lora_dropout),
        callbacks=callbacks,
    )
    trainer.train()
    trainer.save_model(str(out_dir))
    result = result_from(trainer, "ecpo", out_dir, t0)
    if trainer.accelerator.is_main_process:
        processor.save_pretrained(str(out_dir))
        write_run_card(out_dir, "ecpo", str(model_path), str(data_dir), asdict(recipe), result.to_dict())
    return result
