"""A SMOKE RUN of the training stage for ``witness demo``: tiny random model, a few SFT steps, a few
predictions. It proves the pipeline runs end to end on a CPU; its numbers mean nothing.

:func:`run_smoke` builds a tiny Qwen2.5-VL offline (:mod:`witness.train.tiny`), trains an EtA LoRA
adapter for ``steps`` steps on the release's train split, and predicts ``n_predict`` test items
into ``OUT/predictions.jsonl`` — about 20–30 s on two cores.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

__all__ = ["run_smoke"]


def run_smoke(release_dir: str | os.PathLike, out_dir: str | os.PathLike, steps: int = 2, *,
              n_predict: int = 4, split: str = "test") -> dict:
    """Smoke-run SFT and prediction on ``release_dir``; return a summary dict labelled ``smoke``.

    Keys: ``smoke`` (True), ``model``, ``adapter``, ``predictions``, ``sft_steps``, ``sft_loss``,
    ``predicted``, ``parse_rate``, ``seconds``. Uses one torch thread (faster on small CPUs).
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    t0 = time.time()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    # the trainer's progress lines go to stderr, so a caller's stdout (e.g. `witness demo --json`) stays clean
    with contextlib.redirect_stdout(sys.stderr):
        summary, sft, model, adapter, preds = _run(release_dir, out_dir, steps, n_predict, split, threads, torch)
    return {
        "smoke": True,
        "note": "SMOKE RUN: tiny random model, a few steps; the numbers mean nothing",
        "model": str(model),
        "adapter": str(adapter),
        "predictions": str(preds),
        "sft_steps": sft.steps,
        "sft_loss": sft.train_loss,
        "predicted": summary.written,
        "parse_rate": summary.parse_rate,
        "seconds": round(time.time() - t0, 2),
    }


def _run(release_dir, out_dir, steps, n_predict, split, threads, torch):
    from .predict import run_predict
    from .sft import SFTRecipe, run_sft
    from .tiny import build_tiny_model

    try:
        out = Path(out_dir)
        model = build_tiny_model("qwen2.5-vl", out / "tiny-model")
        adapter = out / "adapter"
        sft = run_sft(release_dir, model, adapter,
                      SFTRecipe(max_steps=steps, lora_r=8, lora_alpha=16, limit=max(4, steps), bf16=False,
                                max_length=512))
        preds = out / "predictions.jsonl"
        if preds.exists():
            preds.unlink()
        summary = run_predict(release_dir, model, preds, split=split, adapter=adapter, limit=n_predict,
                              batch_size=n_predict, max_new_tokens=24, engine="transformers")
    finally:
        torch.set_num_threads(threads)
    return summary, sft, model, adapter, preds
