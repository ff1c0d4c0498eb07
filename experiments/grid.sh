#!/usr/bin/env bash
# The policy grid of issue 16 at one of three sizes, on corpora with natural cluster sizes.
#
#   SIZE=cpu  bash experiments/grid.sh   # >= 1M parameters, 500 steps per run (2-core CPU: hours)
#   SIZE=gpu  bash experiments/grid.sh   # the same grid, ~12M parameters, one GPU
#   SIZE=tiny bash experiments/grid.sh   # seconds per run on a CPU: checks the script (tests)
#   VIEW=tail SEEDS=0,1,2,3,4 SIZE=cpu bash experiments/grid.sh   # the secondary view:
#                                                 # a constructed long tail (~40 s per run)
#   SEEDS=3,4 ONE=random,clusterclip-r4 FOUR=random,clusterclip-r8 bash experiments/grid.sh
#                                                 # the extra seeds of the main comparison
#
# Every run trains through ClusterClipSampler (clusterclip.experiments.lm) and appends one
# line to $RESULTS/<corpus>/results.jsonl as soon as it finishes; rerunning skips finished
# runs, so a grid that does not fit in one sitting is finished by running it again.
# Runs go seed-major (every policy of seed 0 first), so a partial grid stays paired.
# VIEW=natural (default) trains on the corpora's natural cluster sizes; VIEW=tail on a
# constructed long tail (cluster sizes decaying log-uniformly over 150x, KJV only, the
# smaller batch that makes ~1 epoch of that subset 500 steps, and fewer policies).
# Settings: CORPORA (default "kjv fortunes"; "kjv" for the tail view), SEEDS (default
# 0,1,2), PY (default .venv/bin/python), WORK (default runs/grid-$SIZE[-tail]), RESULTS
# (default experiments/results/grid-$SIZE[-tail]), DEVICE (default auto), ONE and FOUR
# (the policies of each regime), REGIMES (default "1:$ONE 4:$FOUR": passes:policies pairs),
# DATA_SEED (default 0: subset, clustering and split), THREADS (torch threads per run,
# default 2, or 1 with PARALLEL=1), PARALLEL (below). The CPU size embeds in float32, so
# every CPU gets the same clusters and held-out split (seed 0's random run repeated on a
# second CPU family matched to 1e-5 nats), and clusters with faiss, what `auto` picked on
# both machines then (auto now measures, and may pick bfloat16 k-means): bfloat16 would
# shift a few documents.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${SIZE:-cpu}
VIEW=${VIEW:-natural}
case "$VIEW" in
  natural) SUFFIX= ;;
  tail)    SUFFIX=-tail ;;
  *) echo "grid.sh: VIEW must be natural or tail; got $VIEW" >&2; exit 2 ;;
esac
PY=${PY:-.venv/bin/python}
WORK=${WORK:-runs/grid-$SIZE$SUFFIX}
RESULTS=${RESULTS:-experiments/results/grid-$SIZE$SUFFIX}
if [ "$VIEW" = tail ]; then CORPORA=${CORPORA:-kjv}; else CORPORA=${CORPORA:-kjv fortunes}; fi
SEEDS=${SEEDS:-0,1,2}
DEVICE=${DEVICE:-auto}
DATA_SEED=${DATA_SEED:-0}
# PARALLEL=1 trains the corpora side by side (default on the GPU size, whose small model
# leaves most of one GPU idle); 0 runs everything in sequence (the CPU sizes).
if [ "$SIZE" = gpu ]; then PARALLEL=${PARALLEL:-1}; else PARALLEL=${PARALLEL:-0}; fi
if [ "$PARALLEL" = 1 ]; then THREADS=${THREADS:-1}; else THREADS=${THREADS:-2}; fi
export HF_HUB_OFFLINE=1

case "$SIZE" in
  tiny)  # a check of the script, not an experiment
    MODEL=(--n-layer=1 --n-head=2 --n-embd=32 --context=32 --batch-size=4 --lr=1e-2
           --vocab-size=300 --max-doc-tokens=48 --tokens=2048 --eval-points=2)
    DATA=(--encoder=tfidf --n-clusters=6 --max-docs=240)
    ONE=random,clusterclip-r2; FOUR=random,clusterclip-r4 ;;
  cpu)   # 1.08M parameters, 500 steps of 16 x 128 tokens
    MODEL=(--n-layer=4 --n-head=4 --n-embd=128 --context=128 --batch-size=16 --lr=2e-3
           --vocab-size=2048 --max-doc-tokens=256 --tokens=1024000 --eval-points=5)
    DATA=(--encoder=sentence-transformers --precision=float32 --kmeans-backend=faiss
          --n-clusters=50) ;;
  gpu)   # ~12M parameters (>= 10x cpu), 500 steps of 8 x 256 tokens: the same token budget
    MODEL=(--n-layer=6 --n-head=6 --n-embd=384 --context=256 --batch-size=8 --lr=1e-3
           --vocab-size=4096 --max-doc-tokens=256 --tokens=1024000 --eval-points=5)
    DATA=(--encoder=sentence-transformers --n-clusters=50) ;;
  *) echo "grid.sh: SIZE must be tiny, cpu or gpu; got $SIZE" >&2; exit 2 ;;
esac
if [ "$VIEW" = tail ]; then
  # The tail subset holds ~1/3 of KJV's tokens: a smaller batch keeps 500 steps at ~1 epoch
  # (same model, same learning-rate schedule); the quarter pool of the 4-epoch regime as usual.
  case "$SIZE" in
    tiny) DATA+=(--tail-docs=120 --heldout-per-cluster=4) ;;
    cpu)  DATA+=(--tail-docs=8000 --heldout-per-cluster=12); MODEL+=(--batch-size=5 --tokens=320000) ;;
    gpu)  DATA+=(--tail-docs=8000 --heldout-per-cluster=12); MODEL+=(--batch-size=2 --tokens=256000) ;;
  esac
  DATA+=(--tail-span=150)
  ONE=${ONE:-random,uniform,clusterclip-r4,planned-r4}
  FOUR=${FOUR:-random,uniform,clusterclip-r8,planned-r8}
fi
# ~1 epoch: random, uniform, the online clip at two R, temperature with and without a clip,
# the planned order. >= 3 epochs: the same with R = 4 and 8 (R = 4 is the whole capacity).
ONE=${ONE:-random,uniform,clusterclip-r2,clusterclip-r4,temperature-a0.5,temperature-a0.5-r4,planned-r4}
FOUR=${FOUR:-random,uniform,clusterclip-r4,clusterclip-r8,temperature-a0.5,temperature-a0.5-r8,planned-r8}
REGIMES=${REGIMES:-1:$ONE 4:$FOUR}

cell() {  # one seed of one corpus: every regime
  local seed=$1 corpus=$2 regime
  for regime in $REGIMES; do
    "$PY" -m clusterclip.experiments.lm "${MODEL[@]}" "${DATA[@]}" --corpus="$corpus" \
      --workdir="$WORK/$corpus" --out="$RESULTS/$corpus" --epochs="${regime%%:*}" \
      --seeds="$seed" --policies="${regime#*:}" --device="$DEVICE" \
      --data-seed="$DATA_SEED" --threads="$THREADS"
  done
}

if [ "$PARALLEL" = 1 ]; then
  # One process per corpus, side by side (separate work and results directories, so
  # nothing is shared); each corpus's log goes to $WORK/<corpus>.log.
  mkdir -p "$WORK"
  pids=()
  for corpus in $CORPORA; do
    ( for seed in ${SEEDS//,/ }; do cell "$seed" "$corpus"; done ) > "$WORK/$corpus.log" 2>&1 &
    pids+=($!)
  done
  status=0
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  if [ "$status" != 0 ]; then echo "grid.sh: a corpus failed; see $WORK/*.log" >&2; fi
  exit "$status"
fi
for seed in ${SEEDS//,/ }; do
  for corpus in $CORPORA; do cell "$seed" "$corpus"; done
done
