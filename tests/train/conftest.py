"""Fixtures of the training tests: one tiny Qwen2.5-VL and one tiny release per session."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def tiny_release(tmp_path_factory):
    from witness.train.fixtures import write_tiny_release

    return write_tiny_release(tmp_path_factory.mktemp("release"), n_train=8, n_test=4)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    import torch

    from witness.train.tiny import build_tiny_model

    torch.set_num_threads(1)
    return build_tiny_model("qwen2.5-vl", tmp_path_factory.mktemp("tiny") / "qwen2.5-vl")


@pytest.fixture(autouse=True)
def _one_thread():
    import sys

    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
    yield
