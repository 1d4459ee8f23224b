"""GPU benchmark of the training stage (run by benchmarks/train_gpu.sh; needs no hub, no data).

Builds a real-shaped Qwen2.5-VL from a config (hidden 1536, 12 layers, 152k vocabulary, 256 visual
tokens per image; random weights — only speed is measured), a synthetic release of 640x480 images,
then times:

* SFT (EtA, the paper's LoRA r 64 / alpha 16): steps per second over ``--steps`` steps;
* ECPO (G 6, LoRA r 32 / alpha 64, KL on, ``--completion`` new tokens): steps per second, and the
  share of the step time spent in the three reward functions (timed around each call).

Prints one JSON object and writes it to OUT/train_gpu.json.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


class Timed:
    """Wrap a reward callable; accumulate its wall time (keeps TRL's name)."""

    total = 0.0

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = fn.__name__

    def __call__(self, *args, **kwargs):
        t = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            Timed.total += time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="train-gpu-bench")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--completion", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=1536)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--vision-depth", type=int, default=8)
    ap.add_argument("--vision-width", type=int, default=512)
    ap.add_argument("--image-tokens", type=int, default=256)
    args = ap.parse_args()

    import torch

    from witness.train import ecpo as ecpo_mod
    from witness.train.ecpo import ECPORecipe, run_ecpo
    from witness.train.fixtures import write_tiny_release
    from witness.train.sft import SFTRecipe, run_sft
    from witness.train.tiny import build_tiny_model

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    info = {"device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
            "torch": torch.__version__}
    t = time.time()
    release = write_tiny_release(out / "release", n_train=max(16, 8 * args.steps), n_test=8, width=640, height=480)
    model = build_tiny_model("qwen2.5-vl", out / "model", hidden=args.hidden, layers=args.layers, heads=args.heads,
                             kv_heads=2, vision_depth=args.vision_depth, vision_width=args.vision_width,
                             vision_heads=8, max_image_tokens=args.image_tokens, vocab_size=151_936)
    info["build_s"] = round(time.time() - t, 1)
    info["params_m"] = round(sum(f.stat().st_size for f in model.glob("*.safetensors")) / 4e6, 1)

    sft = run_sft(release, model, out / "sft", SFTRecipe(max_steps=args.steps, logging_steps=args.steps))
    sft_rt = [h for h in sft.log_history if "train_runtime" in h][0]["train_runtime"]
    info["sft_steps_per_s"] = round(args.steps / sft_rt, 3)

    orig = ecpo_mod.ecpo_rewards

    def timed_rewards(recipe):
        funcs, weights = orig(recipe)
        return [Timed(f) for f in funcs], weights

    ecpo_mod.ecpo_rewards = timed_rewards
    ecpo = run_ecpo(release, model, out / "ecpo",
                    ECPORecipe(max_steps=args.steps, max_completion_length=args.completion, logging_steps=1))
    ecpo_rt = [h for h in ecpo.log_history if "train_runtime" in h][0]["train_runtime"]
    info["ecpo_steps_per_s"] = round(args.steps / ecpo_rt, 3)
    info["ecpo_reward_share"] = round(Timed.total / ecpo_rt, 5)
    info["ecpo_reward_ms_per_step"] = round(1e3 * Timed.total / args.steps, 3)
    # random weights: outputs rarely parse, so the reward time is mostly parsing, not the consensus
    # (benchmarks/rewards.py times the consensus on realistic groups); report how much parsed
    fmt = [h["rewards/r_fmt/mean"] for h in ecpo.log_history if h.get("rewards/r_fmt/mean") is not None]
    info["ecpo_format_rate"] = round(sum(fmt) / len(fmt), 4) if fmt else None
    info["ecpo_G"] = 6
    info["ecpo_completion_tokens"] = args.completion
    (out / "train_gpu.json").write_text(json.dumps(info, indent=2))
    print(json.dumps(info, indent=2))


if __name__ == "__main__":
    main()
