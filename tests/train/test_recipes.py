"""Recipe defaults (the papers' recipes), the TRL configs built from them, and what predict reads
from an adapter's run card. No training runs here."""

from __future__ import annotations

import pytest

from witness.errors import InputError
from witness.train.common import write_run_card
from witness.train.convlm import ConVLMRecipe
from witness.train.data import ECPO_MAX_PIXELS, SFT_MAX_PIXELS
from witness.train.ecpo import ECPORecipe
from witness.train.rewards import default_k
from witness.train.sft import SFTRecipe


def test_sft_defaults_are_the_papers_recipe():
    r = SFTRecipe()
    assert (r.order, r.lora_r, r.lora_alpha, r.learning_rate, r.lr_scheduler, r.warmup_ratio, r.epochs,
            r.max_length, r.max_pixels, r.assistant_only_loss) == (
        "eta", 64, 16, 2e-4, "cosine", 0.03, 3.0, 2048, 602_112, True)
    assert SFT_MAX_PIXELS == 602_112


def test_ecpo_defaults_are_the_papers_recipe():
    r = ECPORecipe()
    assert (r.num_generations, r.lora_r, r.lora_alpha, r.learning_rate, r.max_completion_length, r.max_pixels,
            r.epochs) == (6, 32, 64, 1e-6, 640, 401_408, 1.0)
    assert (r.lambda_grp, r.lambda_fmt, r.lambda_ans) == (0.6, 0.1, 0.3)
    assert r.beta > 0  # KL to the adapter-disabled policy is on
    assert r.k is None and default_k(r.num_generations) == 2
    assert ECPO_MAX_PIXELS == 401_408


def test_convlm_defaults_are_the_papers_recipe():
    r = ConVLMRecipe()
    assert (r.gamma, r.num_generations, r.beta, r.consistency) == (0.5, 8, 0.0, "sample")


def test_sft_config_honours_every_flag():
    from witness.train.sft import sft_args

    on = sft_args(SFTRecipe(bf16=False), "/tmp/unused-out")
    assert on.gradient_checkpointing is True and on.assistant_only_loss is True
    assert on.warmup_steps == pytest.approx(0.03) and on.lr_scheduler_type == "cosine"
    # TRL defaults gradient checkpointing to True: turning it off must reach the config
    off = sft_args(SFTRecipe(bf16=False, gradient_checkpointing=False), "/tmp/unused-out")
    assert off.gradient_checkpointing is False


def test_sft_rejects_a_warmup_ratio_that_is_not_a_share():
    from witness.train.sft import sft_args

    with pytest.raises(InputError, match=r"--warmup-ratio in \[0, 1\)"):
        sft_args(SFTRecipe(bf16=False, warmup_ratio=1.0), "/tmp/unused-out")


def test_predict_takes_order_and_pixel_cap_from_the_run_card(tmp_path):
    from witness.train.predict import _max_pixels_of, _order_of

    assert _order_of(None) == "eta" and _max_pixels_of(None) is None
    assert _order_of(tmp_path) == "eta" and _max_pixels_of(tmp_path) is None  # no card
    write_run_card(tmp_path, "ecpo", str(tmp_path), "rel", {"order": "standard", "max_pixels": 401_408}, {})
    assert _order_of(tmp_path) == "standard"
    assert _max_pixels_of(tmp_path) == 401_408


def _fake_adapter(path):
    path.mkdir(parents=True, exist_ok=True)
    (path / "adapter_config.json").write_text("{}")
    return path


def test_predict_stacks_the_sft_adapter_an_rl_adapter_was_trained_on(tmp_path):
    from witness.train.predict import _adapters_for

    base, merged = tmp_path / "base", tmp_path / "merged"
    base.mkdir()
    merged.mkdir()
    sft = _fake_adapter(tmp_path / "sft")
    rl = _fake_adapter(tmp_path / "ecpo")
    assert _adapters_for(base, None) == []
    assert _adapters_for(base, rl) == [str(rl)]  # no run card: the adapter alone
    write_run_card(rl, "ecpo", str(base), "rel", {"order": "eta", "sft_adapter": str(sft)}, {})
    # predicting on the run's own base: the SFT adapter it was trained on top of is merged first
    assert _adapters_for(base, rl) == [str(sft), str(rl)]
    # a merged checkpoint as --model needs nothing more
    assert _adapters_for(merged, rl) == [str(rl)]
    write_run_card(rl, "ecpo", str(base), "rel", {"order": "eta", "sft_adapter": str(tmp_path / "gone")}, {})
    with pytest.raises(InputError, match="witness train merge"):
        _adapters_for(base, rl)
