"""ConVLM (ConVBench paper): GRPO on logically equivalent question pairs, r = r_acc + γ r_con.

Recipe: G = 8 rollouts per question, γ = 0.5, β = 0 (no KL term, no reference model), learning
rate 1e-6 (the paper's "10e-7"), sample-wise consistency by default (the paper's final choice) or
group-wise. Each pair is two adjacent rows (role 1, role 2; :func:`witness.train.data.pair_rows`)
and the sampler's shuffle is off, so both questions of a pair are in one generation batch; the
consistency reward gathers the batch from every rank and scores the rollouts of both questions
together (:class:`witness.train.rewards.ConsistencyReward`). The generation batch must therefore
hold an even number of prompts: ``batch_size × processes × grad_accum / G`` even.
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
from .data import ECPO_MAX_PIXELS, load_split, pair_rows, to_grpo
from .ecpo import grpo_args
from .rewards import CONVLM_GAMMA, AccuracyReward, ConsistencyReward

__all__ = ["ConVLMRecipe", "convlm_rewards", "run_convlm"]


@dataclass
class ConVLMRecipe:
    """ConVLM hyper-parameters (defaults: the paper's)."""

    consistency: str = field(default="sample", metadata={"help": "Consistency reward: sample (index by index) or group (mean over the other group)."})
    gamma: float = field(default=CONVLM_GAMMA, metadata={"help": "Weight γ of the consistency reward."})
    num_generations: int = field(default=8, metadata={"help": "G, rollouts per question."})
    beta: float = field(default=0.0, metadata={"help": "KL weight (0: no reference model)."})
    max_pixels: int = field(default=ECPO_MAX_PIXELS, metadata={"help": "Pixel cap per image."})
    max_completion_length: int = field(default=640, metadata={"help": "Token cap per completion."})
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature of the rollouts."})
    lora_r: int = field(default=32, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=64, metadata={"help": "LoRA alpha."})
    lora_dropout: float = field(default=0.05, metadata={"help": "LoRA dropout."})
    learning_rate: float = field(default=1e-6, metadata={"help": "Learning rate."})
    epochs: float = field(default=1.0, metadata={"help": "Epochs over the pairs."})
    max_steps: int = field(default=-1, metadata={"help": "Stop after this many steps (-1: epochs decide)."})
    batch_size: int | None = field(default=None, metadata={"help": "Per-device batch of completions (default 2 G: one pair)."})
    grad_accum: int = field(default=1, metadata={"help": "Gradient accumulation steps."})
    bf16: bool | None = field(default=None, metadata={"help": "bf16 (default: where the GPU supports it)."})
    use_vllm: bool = field(default=False, metadata={"help": "Generate rollouts with vLLM."})
    vllm_mode: str = field(default="server", metadata={"help": "vLLM mode: server or colocate."})
    vllm_server_base_url: str | None = field(default=None, metadata={"help": "URL of a vLLM server (`vllm serve`, see docs/train.md)."})
    seed: int = field(default=0, metadata={"help": "Random seed (also the pair order)."})
    split: str = field(default="train", metadata={"help": "Release split to train on."})
    limit: int | None = field(default=None, metadata={"help": "Use only the first N pairs (smoke runs)."})
    order: str = field(default="eta", metadata={"help": "Output format asked for: eta or standard."})
    sft_adapter: str | None = field(default=None, metadata={"help": "SFT adapter merged into --model first."})
    logging_steps: int = field(default=1, metadata={"help": "Log every N steps."})
    save_steps: int | None = field(default=None, metadata={"help": "Checkpoint every N steps (None: only at the end)."})


def convlm_rewards(recipe: ConVLMRecipe) -> tuple[list, list[float]]:
    """``[r_acc, r_con]`` with weights ``[1, γ]``.

    >>> funcs, w = convlm_rewards(ConVLMRecipe())
    >>> [f.__name__ for f in funcs], w
    (['r_acc', 'r_con'], [1.0, 0.5])
    """
    fmt = "eta" if recipe.order == "eta" else "answer-then-ground"
    return [AccuracyReward(fmt), ConsistencyReward(recipe.consistency, fmt)], [1.0, recipe.gamma]


def run_convlm(data_dir: str | os.PathLike, model_path: str | os.PathLike, out_dir: str | os.PathLike,
               recipe: ConVLMRecipe | None = None) -> TrainResult:
    """Train a ConVLM LoRA adapter on the pairs of a release split; save adapter, processor, run card."""
    recipe = recipe or ConVLMRecipe()
    trl = require("trl", "train")
    G = recipe.num_generations
    batch = recipe.batch_size or 2 * G
    if batch % G or (batch // G) % 2:
        raise InputError(
            f"Expected --batch-size to hold whole pairs (a multiple of 2 G = {2 * G}), got {batch}. "
            "Both questions of a pair must be generated in one batch."
        )
    if recipe.consistency not in ("sample", "group"):
        raise InputError(f"Expected --consistency sample or group, got {recipe.consistency!r}.")
    if recipe.order not in ("eta", "standard"):
        raise InputError(f"Expected --order eta or standard, got {recipe.order!r}.")
    t0 = time.time()
    prec = precision_flags(recipe.bf16)
    model, processor = load_policy(model_path, adapter=recipe.sft_adapter, max_pixels=recipe.max_pixels, bf16=prec["bf16"])
    ds = pair_rows(load_split(data_dir, recipe.split), seed=recipe.seed)
    if recipe.limit is not None:
        ds = ds.select(range(min(2 * int(recipe.limit), len(ds))))
    ds = to_grpo(ds, order=recipe.order, max_pixels=recipe.max_pixels)
    funcs, weights = convlm_rewards(recipe)
    recipe_for_args = ConVLMRecipe(**{**asdict(recipe), "batch_size": batch})
    args = grpo_args(recipe_for_args, out_dir, num_generations=G, weights=weights, shuffle=False, beta=recipe.beta)
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=funcs,
        args=args,
        train_dataset=ds,
        processing_class=processor,
        peft_config=lora_config(recipe.lora_r, recipe.lora_alpha, recipe.lora_dropout),
    )
    trainer.train()
    trainer.save_model(str(out_dir))
    result = result_from(trainer, "convlm", out_dir, t0)
    if trainer.accelerator.is_main_process:
        processor.save_pretrained(str(out_dir))
        write_run_card(out_dir, "convlm", str(model_path), str(data_dir), asdict(recipe), result.to_dict())
    return result
