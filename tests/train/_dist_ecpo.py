"""Run by torchrun in test_trainers: two CPU processes, gloo, a chunk of 6 completions per rank with
G = 4, so rank 0 holds group 0 and half of group 1. Each rank dumps what its reward saw."""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

torch.set_num_threads(1)

from witness.train import ecpo as ecpo_mod  # noqa: E402
from witness.train.rewards import ConsensusCoverageReward  # noqa: E402


class Spy(ConsensusCoverageReward):
    calls: list = []

    def __call__(self, prompts=None, completions=(), completion_ids=None, **kw):
        out = super().__call__(prompts, completions, completion_ids, **kw)
        Spy.calls.append({"local_ids": list(kw["id"]), "local_n": len(completions),
                          "group_sizes": [len(g.r_grp) for g in self.last_groups],
                          "group_rewards": [g.r_grp for g in self.last_groups], "returned": out})
        return out


def main(release, model, out):
    orig = ecpo_mod.ecpo_rewards

    def patched(recipe):
        funcs, weights = orig(recipe)
        funcs[0] = Spy(recipe.num_generations, k=recipe.k, iou=recipe.iou)
        return funcs, weights

    ecpo_mod.ecpo_rewards = patched
    recipe = ecpo_mod.ECPORecipe(num_generations=4, batch_size=6, max_steps=1, max_completion_length=8,
                                 lora_r=4, lora_alpha=8, limit=6, bf16=False)
    ecpo_mod.run_ecpo(release, model, out, recipe)
    rank = int(os.environ.get("RANK", "0"))
    with open(os.path.join(out, f"rank{rank}.json"), "w") as fh:
        json.dump(Spy.calls, fh)


if __name__ == "__main__":
    main(*sys.argv[1:4])
