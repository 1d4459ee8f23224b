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
from dataclasses import asdict, dataclass, field

from ..errors import InputError, require
from .common import GRPORecipe, TrainResult
from .data import load_split, pair_rows, to_grpo
from .ecpo import train_grpo
from .rewards import CONVLM_GAMMA, AccuracyReward, ConsistencyReward

__all__ = ["ConVLMRecipe", "convlm_rewards", "run_convlm"]


@dataclass
class _ConVLMFields:
    """ConVLM's own fields: consistency reward, rollouts, KL (the flags before the shared ones)."""

    consistency: str = field(default="sample", metadata={"help": "Consistency reward: sample (index by index) or group (mean over the other group)."})
    gamma: float = field(default=CONVLM_GAMMA, metadata={"help": "Weight γ of the consistency reward."})
    num_generations: int = field(default=8, metadata={"help": "G, rollouts per question."})
    beta: float = field(default=0.0, metadata={"help": "KL weight (0: no reference model)."})


@dataclass
class ConVLMRecipe(GRPORecipe, _ConVLMFields):
    """ConVLM hyper-parameters (defaults: the paper's): the fields of ``_ConVLMFields``, then those
    of :class:`witness.train.common.GRPORecipe`, six of them reworded for pairs (same places)."""

    epochs: float = field(default=1.0, metadata={"help": "Epochs over the pairs."})
    batch_size: int | None = field(default=None, metadata={"help": "Per-device batch of completions (default 2 G: one pair)."})
    vllm_mode: str = field(default="server", metadata={"help": "vLLM mode: server or colocate."})
    seed: int = field(default=0, metadata={"help": "Random seed (also the pair order)."})
    limit: int | None = field(default=None, metadata={"help": "Use only the first N pairs (smoke runs)."})
    sft_adapter: str | None = field(default=None, metadata={"help": "SFT adapter merged into --model first."})


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
    require("trl", "train")
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

    def rows():
        ds = pair_rows(load_split(data_dir, recipe.split), seed=recipe.seed)
        if recipe.limit is not None:
            ds = ds.select(range(min(2 * int(recipe.limit), len(ds))))
        return to_grpo(ds, order=recipe.order, max_pixels=recipe.max_pixels)

    funcs, weights = convlm_rewards(recipe)
    recipe_for_args = ConVLMRecipe(**{**asdict(recipe), "batch_size": batch})
    return train_grpo("convlm", data_dir, model_path, out_dir, recipe, rows, funcs, weights,
                      args_recipe=recipe_for_args, shuffle=False)
