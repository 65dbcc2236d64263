#!/usr/bin/env bash
# One GPU's calibration of the trainer (issue 42): examples/slurm/train.py on one accelerator, in bf16 eager, bf16
# with compiled blocks and fp8 (torchao Float8) with compiled blocks, each writing what --calibrate-output writes.
# Run on a machine with one NVIDIA GPU and PyTorch; torchao comes from .whl/ when the machine has none.
#   bash tools/gpu_calibration.sh OUTDIR
# The model has Llama 3 8B's layer shape (hidden 4096, 32 heads, 8 KV heads, SwiGLU 14336, vocabulary 128,256) and
# 8 of its 32 layers, so that one GPU holds it with AdamW's fp32 state; sequences of 4,096 tokens as the plan's.
set -euo pipefail
out=${1:?OUTDIR}
mkdir -p "$out"
if ls .whl/torchao-*.whl >/dev/null 2>&1 && ! python3 -c "import torchao" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/torchao-*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
python3 -c "import torch, torchao; print('torch', torch.__version__, 'torchao', torchao.__version__)" | tee -a "$out/gpu.txt"
peak=${PEAK_TFLOPS:-989}  # H100/H200 SXM dense bf16 (the catalog's figure for p5/p5e)
model=(--layers 8 --hidden 4096 --heads 32 --kv-heads 8 --intermediate 14336 --vocab 128256 --seq 4096)
run() {  # name, then train.py's flags
  local name=$1; shift
  echo "== $name: $*"
  PYTHONUNBUFFERED=1 timeout "${RUN_TIMEOUT:-170}" torchrun --standalone --nproc_per_node 1 examples/slurm/train.py \
    --device cuda "${model[@]}" --batch "${BATCH:-2}" --global-batch "${BATCH:-2}" --steps "${STEPS:-30}" \
    --warmup 5 --log-every 5 --eval-every 0 --checkpoint-dir "/tmp/ckpt-$name" --checkpoint-every 1000000 \
    --peak-tflops "$peak" --calibrate-output "$out/$name.json" "$@" 2>&1 | grep -v "^W[0-9]" | tail -n 12 || true
}
run bf16-eager --precision bf16 --no-compile
run bf16-compiled --precision bf16 --compile
run fp8-compiled --precision fp8 --compile
