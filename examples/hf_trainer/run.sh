#!/usr/bin/env bash
# Hugging Face Trainer in ClusterClip order: train a tiny GPT-2, interrupt it, resume it.
source "$(dirname "$0")/../common.sh"

demo_workdir "$OUT/work"
"$PYTHON" "$ROOT/examples/hf_trainer/train.py" \
  --workdir "$OUT/work" --tokenizer "$(minilm_tokenizer)" --output-dir "$OUT/trainer"
