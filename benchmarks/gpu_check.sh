#!/usr/bin/env bash
# The GPU paths against the CPU path in one call on a machine with one GPU (issue 28 item 6):
# embed documents/s and cosine to the CPU float32 rows (>= 0.995), k-means on the GPU against
# the CPU (time, ARI), and the whole `clusterclip run` on 10^6 documents. benchmarks/gpu_check.py
# does the work; this wrapper installs what a machine without a registry lacks and keeps OUT small.
#
#   bash benchmarks/gpu_check.sh OUT                                # on the GPU machine
#   DOCS=600 DEVICE=cpu ENCODER=static bash benchmarks/gpu_check.sh OUT   # the script, on a CPU
#
# A GPU machine of this project reaches no registry: carry the wheels it lacks as for the
# LM check (`bash experiments/gpu_check.sh --pack` here, then one `--stage` call per part
# there); this script installs them from $STAGE like that one. OUT receives gpu_check.json and
# gpu_check.log; the corpus and work directories go to $STAGE/gpu-check (default /tmp/...).
# Settings: DOCS (default 1000000), DEVICE (cuda), ENCODER (sentence-transformers), PY, STAGE.
# Time: an estimate of 5-8 min on one H200 (not yet run there: no GPU was lent).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 1 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2; }
out=$1
STAGE=${STAGE:-/tmp/clusterclip-gpu}
if [ -z "${PY:-}" ]; then
  PY=python3
  if ! python3 -c "import torch" 2>/dev/null && [ -x .venv/bin/python ]; then PY=.venv/bin/python; fi
fi
if [ -f "$STAGE/parts/SHA256SUMS" ]; then  # wheels carried for the LM check: install them once
  PY=$PY STAGE=$STAGE bash experiments/gpu_check.sh --install
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}${STAGE:+:$STAGE/site}" HF_HUB_OFFLINE=1
mkdir -p "$out"
"$PY" benchmarks/gpu_check.py "$STAGE/gpu-check" --docs "${DOCS:-1000000}" \
  --device "${DEVICE:-cuda}" --encoder "${ENCODER:-sentence-transformers}" 2>&1 \
  | tee "$out/gpu_check.log" | grep -v "^progress:"
status=${PIPESTATUS[0]}
cp "$STAGE/gpu-check/gpu_check.json" "$out/" 2>/dev/null || true
exit "$status"
