"""Real TRL/PEFT runs on a tiny Qwen2.5-VL built offline (CPU, one torch thread)."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from witness.errors import InputError

pytestmark = pytest.mark.train


@pytest.mark.parametrize("order", ["eta", "standard"])
def test_sft_two_steps_changes_the_adapter(tiny_release, tiny_model, tmp_path, order):
    from witness.train.common import read_run_card
    from witness.train.sft import SFTRecipe, run_sft

    out = tmp_path / order
    r = run_sft(tiny_release, tiny_model, out, SFTRecipe(order=order, max_steps=2, lora_r=8, limit=4, bf16=False))
    assert r.steps == 2
    assert r.train_loss is not None and math.isfinite(r.train_loss)
    assert r.adapter_norm > 0  # LoRA B starts at zero: any mass means the weights moved
    assert (out / "adapter_model.safetensors").exists()
    assert read_run_card(out)["recipe"]["order"] == order


def test_ecpo_two_steps_logs_every_term(tiny_release, tiny_model, tmp_path):
    from witness.train.ecpo import ECPORecipe, run_ecpo

    r = run_ecpo(tiny_release, tiny_model, tmp_path / "ecpo",
                 ECPORecipe(num_generations=4, max_steps=2, max_completion_length=16, lora_r=8, limit=4, bf16=False))
    assert r.steps == 2
    steps = [h for h in r.log_history if "reward" in h]
    assert len(steps) == 2
    for h in steps:
        for key in ("rewards/r_grp/mean", "rewards/r_fmt/mean", "rewards/r_ans/mean", "ecpo/consensus_size",
                    "ecpo/rollouts_per_group", "kl"):
            assert key in h, key
        assert h["ecpo/rollouts_per_group"] == 4


def test_ecpo_rejects_unknown_reward(tiny_release, tiny_model, tmp_path):
    from witness.train.ecpo import ECPORecipe, ecpo_rewards

    with pytest.raises(InputError, match="--reward"):
        ecpo_rewards(ECPORecipe(reward="magic"))


def test_convlm_one_step_scores_pairs(tiny_release, tiny_model, tmp_path):
    from witness.train.convlm import ConVLMRecipe, run_convlm

    r = run_convlm(tiny_release, tiny_model, tmp_path / "convlm",
                   ConVLMRecipe(num_generations=2, max_steps=1, max_completion_length=8, lora_r=8, limit=1, bf16=False))
    h = [h for h in r.log_history if "reward" in h][0]
    assert h["convlm/pairs_scored"] == 1.0
    assert "rewards/r_acc/mean" in h and "rewards/r_con/mean" in h


def test_convlm_batch_must_hold_whole_pairs(tiny_release, tiny_model, tmp_path):
    from witness.train.convlm import ConVLMRecipe, run_convlm

    with pytest.raises(InputError, match="whole pairs"):
        run_convlm(tiny_release, tiny_model, tmp_path / "x", ConVLMRecipe(num_generations=2, batch_size=2))


def test_predict_writes_parseable_jsonl_and_resumes(tiny_release, tiny_model, tmp_path):
    from witness.io import read_predictions
    from witness.train.predict import run_predict

    out = tmp_path / "preds.jsonl"
    s1 = run_predict(tiny_release, tiny_model, out, limit=2, batch_size=2, max_new_tokens=8, engine="transformers")
    s2 = run_predict(tiny_release, tiny_model, out, limit=3, batch_size=2, max_new_tokens=8, engine="transformers")
    assert (s1.written, s2.written, s2.skipped) == (2, 1, 2)
    preds = read_predictions(out)
    assert len(preds) == 3 and all(r is not None for r in preds.raw)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert all(line["format"] == "eta" and ("answer" in line or "parse_error" in line) for line in lines)


def test_predict_unknown_format_fails_before_loading(tiny_release, tiny_model, tmp_path):
    from witness.errors import UnknownNameError
    from witness.train.predict import run_predict

    with pytest.raises(UnknownNameError, match="Unknown format"):
        run_predict(tiny_release, tiny_model, tmp_path / "p.jsonl", fmt="nope")


def test_cli_tiny_model_and_predict(tiny_release, tmp_path):
    from typer.testing import CliRunner

    from witness.cli.main import app

    runner = CliRunner()
    res = runner.invoke(app, ["train", "tiny-model", "--family", "qwen3-vl", "--out", str(tmp_path / "m"), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["family"] == "qwen3-vl"
    res = runner.invoke(app, ["eval", "predict", "--data", str(tiny_release), "--model", str(tmp_path / "m"),
                              "--out", str(tmp_path / "p.jsonl"), "--limit", "1", "--max-new-tokens", "4",
                              "--engine", "transformers", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["written"] == 1
    res = runner.invoke(app, ["train", "tiny-model", "--family", "llama", "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "Expected a model family" in res.output


def test_smoke_run_finishes_quickly(tiny_release, tmp_path, capsys):
    from witness.train.smoke import run_smoke

    t0 = time.time()
    out = run_smoke(tiny_release, tmp_path / "smoke", steps=2)
    assert out["smoke"] is True and out["sft_steps"] == 2 and out["predicted"] == 4
    assert time.time() - t0 < 40
    assert capsys.readouterr().out == ""  # trainer logs went to stderr: a caller's stdout stays clean


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_consensus_sees_whole_groups(tiny_release, tiny_model, tmp_path):
    """torchrun, 2 CPU processes (gloo): 6 completions per rank with G = 4 split group 1 across ranks."""
    script = Path(__file__).with_name("_dist_ecpo.py")
    out = tmp_path / "dist"
    out.mkdir()
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", PYTHONPATH=str(Path(__file__).parents[2]))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(_free_port()),
           str(script), str(tiny_release), str(tiny_model), str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=170)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r0 = json.loads((out / "rank0.json").read_text())[0]
    r1 = json.loads((out / "rank1.json").read_text())[0]
    assert r0["local_n"] == r1["local_n"] == 6
    # group 1 is split: the last two rollouts of rank 0 and the first two of rank 1 share an item
    assert r0["local_ids"][4] == r0["local_ids"][5] == r1["local_ids"][0] == r1["local_ids"][1]
    assert r0["local_ids"][3] != r0["local_ids"][4]
    # yet every rank scored three whole groups of four, the same on both ranks
    assert r0["group_sizes"] == r1["group_sizes"] == [4, 4, 4]
    assert r0["group_rewards"] == r1["group_rewards"]
    flat = [x for g in r0["group_rewards"] for x in g]
    assert r0["returned"] == flat[:6] and r1["returned"] == flat[6:]


def test_ecpo_recall_baseline_runs_and_keeps_consensus_diagnostics(tiny_release, tiny_model, tmp_path):
    from witness.train.ecpo import ECPORecipe, run_ecpo

    r = run_ecpo(tiny_release, tiny_model, tmp_path / "recall",
                 ECPORecipe(reward="recall", num_generations=2, max_steps=1, max_completion_length=8, lora_r=4,
                            limit=2, bf16=False))
    h = [h for h in r.log_history if "reward" in h][0]
    assert "rewards/r_box_recall/mean" in h and "ecpo/consensus_size" in h


def test_ecpo_needs_two_generations(tiny_release, tiny_model, tmp_path):
    from witness.train.ecpo import ECPORecipe, run_ecpo

    with pytest.raises(InputError, match="num-generations >= 2"):
        run_ecpo(tiny_release, tiny_model, tmp_path / "x", ECPORecipe(num_generations=1))


def test_cli_merge_and_errors(tiny_release, tiny_model, tmp_path):
    from typer.testing import CliRunner

    from witness.cli.main import app
    from witness.train.sft import SFTRecipe, run_sft

    adapter = tmp_path / "adapter"
    run_sft(tiny_release, tiny_model, adapter, SFTRecipe(max_steps=1, lora_r=4, limit=2, bf16=False))
    runner = CliRunner()
    res = runner.invoke(app, ["train", "merge", "--model", str(tiny_model), "--adapter", str(adapter),
                              "--out", str(tmp_path / "merged"), "--json"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "merged" / "config.json").exists()
    res = runner.invoke(app, ["train", "merge", "--model", str(tiny_model), "--adapter", str(tmp_path),
                              "--out", str(tmp_path / "m2")])
    assert res.exit_code == 2 and "adapter_config.json" in res.output
    res = runner.invoke(app, ["train", "sft", "--data", str(tmp_path), "--model", str(tiny_model),
                              "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "data/train-*.parquet" in res.output


def test_model_dir_without_config_raises(tmp_path):
    from witness.train.tiny import load_model_and_processor

    with pytest.raises(InputError, match="config.json"):
        load_model_and_processor(tmp_path)


def test_bf16_on_cpu_raises():
    import torch

    from witness.train.common import precision_flags

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(InputError, match="CUDA device for --bf16"):
        precision_flags(True)
    assert precision_flags(None) == {"bf16": False, "use_cpu": True}


def test_predict_argument_errors(tiny_release, tiny_model, tmp_path):
    from witness.train.predict import existing_ids, run_predict

    with pytest.raises(InputError, match="--batch-size >= 1"):
        run_predict(tiny_release, tiny_model, tmp_path / "p.jsonl", batch_size=0)
    with pytest.raises(InputError, match="--engine"):
        run_predict(tiny_release, tiny_model, tmp_path / "p.jsonl", engine="onnx", limit=1)
    with pytest.raises(InputError, match="an order in"):
        run_predict(tiny_release, tiny_model, tmp_path / "p.jsonl", order="up")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a"}\nnot json\n{"id": "b"}\n')
    with pytest.raises(InputError, match="malformed line"):
        existing_ids(bad)


def test_trainers_reject_bad_order_before_loading(tiny_release, tmp_path):
    from witness.train.convlm import ConVLMRecipe, run_convlm
    from witness.train.ecpo import ECPORecipe, run_ecpo
    from witness.train.sft import SFTRecipe, run_sft

    missing = tmp_path / "no-model"  # never read: the order is checked first
    with pytest.raises(InputError, match="order"):
        run_sft(tiny_release, missing, tmp_path / "a", SFTRecipe(order="zigzag"))
    with pytest.raises(InputError, match="--order eta or standard"):
        run_ecpo(tiny_release, missing, tmp_path / "b", ECPORecipe(order="zigzag"))
    with pytest.raises(InputError, match="--consistency sample or group"):
        run_convlm(tiny_release, missing, tmp_path / "c", ConVLMRecipe(consistency="pairwise"))


def test_predict_shards_are_disjoint_and_cover_the_split(tiny_release, tiny_model, tmp_path):
    from typer.testing import CliRunner

    from witness.cli.main import app
    from witness.train.predict import run_predict

    ids = []
    for k in range(2):
        out = tmp_path / f"p{k}.jsonl"
        run_predict(tiny_release, tiny_model, out, limit=3, max_new_tokens=4, engine="transformers", shard=(k, 2))
        ids.append([json.loads(x)["id"] for x in out.read_text().splitlines()])
    assert len(ids[0]) == 2 and len(ids[1]) == 1 and not set(ids[0]) & set(ids[1])
    with pytest.raises(InputError, match="--shard K/N with 0 <= K < N"):
        run_predict(tiny_release, tiny_model, tmp_path / "x.jsonl", shard=(2, 2))
    res = CliRunner().invoke(app, ["eval", "predict", "--data", str(tiny_release), "--model", str(tiny_model),
                                   "--out", str(tmp_path / "y.jsonl"), "--shard", "one/two"])
    assert res.exit_code == 2 and "--shard K/N" in res.output


def test_tokenizer_only_directory_is_not_a_processor(tiny_model, tmp_path):
    from transformers import AutoTokenizer

    from witness.train.tiny import load_processor

    AutoTokenizer.from_pretrained(tiny_model).save_pretrained(tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "gpt2"}')
    with pytest.raises(InputError, match="multimodal processor"):
        load_processor(tmp_path)
