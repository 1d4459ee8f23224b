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
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import InputError, require
from .common import (
    GRPORecipe,
    TrainResult,
    fit_and_save,
    load_policy,
    precision_flags,
    recipe_lora,
    trainer_flags,
)
from .data import load_split, to_grpo
from .rewards import (
    ECPO_WEIGHTS,
    AnswerF1Reward,
    BoxRecallReward,
    ConsensusCoverageReward,
    FormatReward,
)

__all__ = ["ECPORecipe", "REWARD_MODES", "ecpo_rewards", "grpo_args", "run_ecpo", "train_grpo"]

#: ``--reward`` choices.
REWARD_MODES: tuple[str, ...] = ("ecpo", "grpo", "recall")


@dataclass
class _ECPOFields:
    """ECPO's own fields: reward, rollouts, consensus, weights, KL (the flags before the shared ones)."""

    reward: str = field(default="ecpo", metadata={"help": "ecpo, or a baseline: grpo (format + answer), recall (supervised per-box recall)."})
    num_generations: int = field(default=6, metadata={"help": "G, rollouts per prompt."})
    k: int | None = field(default=None, metadata={"help": "Consensus support (default max(2, ceil(G/4)))."})
    iou: float = field(default=0.5, metadata={"help": "IoU threshold of clustering and matching."})
    lambda_grp: float = field(default=ECPO_WEIGHTS[0], metadata={"help": "Weight of the consensus coverage."})
    lambda_fmt: float = field(default=ECPO_WEIGHTS[1], metadata={"help": "Weight of the format check."})
    lambda_ans: float = field(default=ECPO_WEIGHTS[2], metadata={"help": "Weight of the answer token F1."})
    beta: float = field(default=0.04, metadata={"help": "KL weight to the adapter-disabled reference."})


@dataclass
class ECPORecipe(GRPORecipe, _ECPOFields):
    """ECPO hyper-parameters (defaults: the paper's recipe): the fields of ``_ECPOFields``, then
    those of :class:`witness.train.common.GRPORecipe`."""


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
    batch = recipe.batch_size or num_generations
    vllm = {}
    if recipe.use_vllm:
        vllm = {"use_vllm": True, "vllm_mode": recipe.vllm_mode}
        if recipe.vllm_server_base_url:
            vllm["vllm_server_base_url"] = recipe.vllm_server_base_url
    return trl.GRPOConfig(
        num_generations=num_generations,
        max_completion_length=recipe.max_completion_length,
        temperature=recipe.temperature,
        beta=beta,
        loss_type="grpo",
        reward_weights=weights,
        per_device_train_batch_size=batch,
        shuffle_dataset=shuffle,
        **vllm,
        **trainer_flags(recipe, out_dir),
    )


def run_ecpo(data_dir: str | os.PathLike, model_path: str | os.PathLike, out_dir: str | os.PathLike,
             recipe: ECPORecipe | None = None, *, callbacks: list | None = None) -> TrainResult:
    """Train an ECPO LoRA adapter on a release split; save it with the processor and a run card."""
    recipe = recipe or ECPORecipe()
    require("trl", "train")
    if recipe.num_generations < 2:
        raise InputError(f"Expected --num-generations >= 2, got {recipe.num_generations}. A consensus needs several rollouts.")
    if recipe.order not in ("eta", "standard"):
        raise InputError(f"Expected --order eta or standard, got {recipe.order!r}.")
    funcs, weights = ecpo_rewards(recipe)  # validates --reward before any model loads

    def rows():
        return to_grpo(load_split(data_dir, recipe.split, limit=recipe.limit), order=recipe.order, max_pixels=recipe.max_pixels)

    return train_grpo("ecpo", data_dir, model_path, out_dir, recipe, rows, funcs, weights, callbacks=callbacks)


def train_grpo(method: str, data_dir: str | os.PathLike, model_path: str | os.PathLike, out_dir: str | os.PathLike,
               recipe: GRPORecipe, rows: Callable[[], Any], funcs: list, weights: list[float], *,
               args_recipe: GRPORecipe | None = None, shuffle: bool = True, callbacks: list | None = None) -> TrainResult:
    """The GRPO run of :func:`run_ecpo` and :func:`witness.train.convlm.run_convlm`: load the policy
    (``recipe.sft_adapter`` merged in), then the training rows (``rows()``), and train a new LoRA
    adapter with TRL's ``GRPOTrainer`` and the reward ``funcs`` / ``weights``; save it with the
    processor and a run card of ``recipe``. ``args_recipe`` (default ``recipe``) feeds
    :func:`grpo_args`."""
    trl = require("trl", "train")
    t0 = time.time()
    prec = precision_flags(recipe.bf16)
    model, processor = load_policy(model_path, adapter=recipe.sft_adapter, max_pixels=recipe.max_pixels, bf16=prec["bf16"])
    ds = rows()
    args = grpo_args(args_recipe or recipe, out_dir, num_generations=recipe.num_generations, weights=weights,
                     shuffle=shuffle, beta=recipe.beta)
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=funcs,
        args=args,
        train_dataset=ds,
        processing_class=processor,
        peft_config=recipe_lora(recipe),
        callbacks=callbacks,
    )
    return fit_and_save(trainer, processor, method, model_path, data_dir, out_dir, recipe, t0)
