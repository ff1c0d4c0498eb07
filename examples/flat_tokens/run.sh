#!/usr/bin/env bash
# nanoGPT / OLMo-style flat token file in ClusterClip order, read by a resumable training loop.
source "$(dirname "$0")/../common.sh"

demo_workdir "$OUT/work"
clusterclip export --workdir "$OUT/work" --format flat-tokens --out "$OUT/flat" \
  --tokenizer "$(minilm_tokenizer)" --eos-token "[SEP]"
"$PYTHON" "$ROOT/examples/flat_tokens/train.py" --data "$OUT/flat" --checkpoint "$OUT/ckpt.pt"
