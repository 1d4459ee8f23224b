#!/usr/bin/env bash
# GPU benchmark of witness training: SFT and ECPO steps per second on a real-shaped Qwen2.5-VL built
# from a config (random weights, no hub, no data download), and the reward share of the ECPO step.
#
#   bash benchmarks/train_gpu.sh [OUT_DIR] [STEPS]
#
# Needs a CUDA GPU and `pip install -e '.[train]'` (a CUDA torch). Writes OUT_DIR/train_gpu.json.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-${OUT:-/tmp/witness-train-gpu}}"
STEPS="${2:-20}"
PY="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# import witness from this checkout even where it is not pip-installed (train_gpu.py runs from benchmarks/)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$PY" - <<'PYCHECK'
import torch, sys
if not torch.cuda.is_available():
    sys.exit("train_gpu.sh: no CUDA device visible; this benchmark needs a GPU")
print("GPU:", torch.cuda.get_device_name(0), "torch", torch.__version__)
PYCHECK
"$PY" benchmarks/train_gpu.py --out "$OUT" --steps "$STEPS"
