#!/usr/bin/env bash
# Megatron-Core indexed dataset in ClusterClip order, read by ScheduledGPTDataset and resumed.
source "$(dirname "$0")/../common.sh"

demo_workdir "$OUT/work"
clusterclip export --workdir "$OUT/work" --format megatron --out "$OUT/megatron" \
  --tokenizer "$(minilm_tokenizer)" --eos-token "[SEP]"
"$PYTHON" -W "ignore:Transformer Engine and Apex" "$ROOT/examples/megatron/read.py" \
  --workdir "$OUT/work" --data-path "$OUT/megatron/text_document"
