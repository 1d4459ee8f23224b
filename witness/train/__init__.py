"""Training on released splits: serializers, rewards, SFT / ECPO / ConVLM with TRL + PEFT, inference.

Light to import: the trainers import torch, transformers, trl and peft inside their functions;
:mod:`witness.train.rewards` and :mod:`witness.train.serialize` never import them.

* :mod:`~witness.train.serialize` — EtA and answer-then-ground targets (0–1000 grid, (y1, x1) order).
* :mod:`~witness.train.rewards` — consensus set, coverage, consistency; TRL reward callables.
* :mod:`~witness.train.data` — release Parquet to TRL conversational rows, pixel caps, pairs.
* :mod:`~witness.train.sft`, :mod:`~witness.train.ecpo`, :mod:`~witness.train.convlm` — configured
  TRL trainers (``run_sft``, ``run_ecpo``, ``run_convlm``).
* :mod:`~witness.train.predict` — checkpoint to predictions JSONL (``run_predict``).
* :mod:`~witness.train.tiny` — tiny Qwen-VL models built offline; :mod:`~witness.train.smoke` — the
  demo's smoke run.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import UnknownNameError

__all__ = ["ACCELERATE_CONFIGS", "accelerate_config"]

#: accelerate configurations shipped with witness.
ACCELERATE_CONFIGS: tuple[str, ...] = ("single_gpu", "multi_gpu", "zero2")


def accelerate_config(name: str) -> Path:
    """Path of a shipped accelerate config (``single_gpu``, ``multi_gpu`` = DDP, ``zero2`` = DeepSpeed).

    >>> accelerate_config("zero2").name
    'zero2.yaml'
    >>> accelerate_config("zero9")
    Traceback (most recent call last):
    ...
    witness.errors.UnknownNameError: Unknown accelerate config 'zero9'. Expected one of ['multi_gpu', 'single_gpu', 'zero2'] or 'module:attr'.
    """
    if name not in ACCELERATE_CONFIGS:
        raise UnknownNameError("accelerate config", name, list(ACCELERATE_CONFIGS))
    return Path(__file__).with_name("configs") / f"{name}.yaml"
