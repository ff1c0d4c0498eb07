#!/usr/bin/env bash
# The policy grid of issue 16 at one of four sizes, on corpora with natural cluster sizes.
#
#   SIZE=cpu  bash experiments/grid.sh   # >= 1M parameters, 500 steps per run (2-core CPU: hours)
#   SIZE=gpu  bash experiments/grid.sh   # linux-doc on one GPU, the main comparison, 3 seeds:
#                                        # 247,552 parameters, 6.0M tokens (24.3 per parameter)
#   SIZE=gpu-long bash experiments/grid.sh   # linux-doc on one GPU for hours: 1,088,256
#                                        # parameters, 24.1M tokens (22.2 per parameter),
#                                        # 4 and 16 passes, 10 seeds
#   SIZE=tiny bash experiments/grid.sh   # seconds per run on a CPU: checks the script (tests)
#   TINY=1 SIZE=gpu bash experiments/grid.sh   # a GPU size at a tiny scale on a CPU (tests):
#                                        # only the sizes change, every other flag stays
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
# Settings: CORPORA (default "kjv fortunes"; "kjv" for the tail view; "linux-doc" for the
# GPU sizes), SEEDS (default 0,1,2; 0-9 for gpu-long), PY (default .venv/bin/python), WORK
# (default runs/grid-$SIZE[-tail|-tiny]), RESULTS (default
# experiments/results/grid-$SIZE[-tail|-tiny]), DEVICE (default auto), ONE and FOUR (the
# policies of each regime), REGIMES (default "1:$ONE 4:$FOUR": passes:policies pairs),
# DATA_SEED (default 0: subset, clustering and split), THREADS (torch threads per run,
# default 2, or 1 with PARALLEL=1), PARALLEL (below), CORPUS_PIN (the GPU sizes: check,
# the default, or off; see clusterclip.experiments.pins), DRY_RUN=1 (print each command of
# the grid instead of running it). The CPU size embeds in float32, so
# every CPU gets the same clusters and held-out split (seed 0's random run repeated on a
# second CPU family matched to 1e-5 nats), and clusters with faiss, what `auto` picked on
# both machines then (auto now measures, and may pick bfloat16 k-means): bfloat16 would
# shift a few documents. The GPU sizes embed and cluster with the same flags.
#
# The GPU sizes train at least 20 tokens per parameter (--min-tokens-per-parameter=20: the
# harness prints parameters, tokens and their ratio at start and refuses a smaller budget
# before embedding anything). kjv and fortunes (~1M tokens each) cannot feed that at any
# useful size, so they run on linux-doc (the kernel's documentation, 19,309 sections in 77
# folders, ~7.2M tokens at the 2048-token vocabulary; pinned: clusterclip.experiments.pins).
# One pass over its training split (~6.5M tokens) buys a 248k-parameter model: that is the
# short size, at 1 and 4 passes as in the main comparison. A bigger model needs more passes:
# the long size trains the CPU size's 1.09M-parameter model on 4 passes of the training
# split (and on 16 passes of a quarter of it), which no 1-pass regime can feed.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${SIZE:-cpu}
VIEW=${VIEW:-natural}
TINY=${TINY:-0}
case "$VIEW" in
  natural) SUFFIX= ;;
  tail)    SUFFIX=-tail ;;
  *) echo "grid.sh: VIEW must be natural or tail; got $VIEW" >&2; exit 2 ;;
esac
case "$SIZE" in
  gpu|gpu-long) GPU=1 ;;
  *) GPU=0 ;;
esac
if [ "$GPU" = 1 ] && [ "$VIEW" = tail ]; then
  echo "grid.sh: VIEW=tail is defined for SIZE=tiny and SIZE=cpu only; got SIZE=$SIZE" >&2; exit 2
fi
if [ "$TINY" = 1 ]; then
  [ "$GPU" = 1 ] || { echo "grid.sh: TINY=1 shrinks a GPU size (gpu, gpu-long); got SIZE=$SIZE" >&2; exit 2; }
  SUFFIX=$SUFFIX-tiny
fi
PY=${PY:-.venv/bin/python}
WORK=${WORK:-runs/grid-$SIZE$SUFFIX}
RESULTS=${RESULTS:-experiments/results/grid-$SIZE$SUFFIX}
if [ "$GPU" = 1 ]; then CORPORA=${CORPORA:-linux-doc}
elif [ "$VIEW" = tail ]; then CORPORA=${CORPORA:-kjv}
else CORPORA=${CORPORA:-kjv fortunes}; fi
if [ "$SIZE" = gpu-long ]; then SEEDS=${SEEDS:-0,1,2,3,4,5,6,7,8,9}; else SEEDS=${SEEDS:-0,1,2}; fi
DEVICE=${DEVICE:-auto}
DATA_SEED=${DATA_SEED:-0}
CORPUS_PIN=${CORPUS_PIN:-check}
# PARALLEL=1 trains the corpora side by side (evidence.sh asks for it); 0 (default) runs
# everything in sequence.
PARALLEL=${PARALLEL:-0}
if [ "$PARALLEL" = 1 ]; then THREADS=${THREADS:-1}; else THREADS=${THREADS:-2}; fi
export HF_HUB_OFFLINE=1
# The GPU sizes' flags besides the model: the CPU size's embedding and k-means, the
# linux-doc clusters, the pinned corpus and the ratio check.
GPU_DATA=(--encoder=sentence-transformers --precision=float32 --kmeans-backend=faiss
          --n-clusters=100 --corpus-pin="$CORPUS_PIN" --min-tokens-per-parameter=20)

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
  gpu)   # 247,552 parameters, 367 steps of 64 x 256 = 6,012,928 tokens: 24.3 per parameter,
         # 0.93 of linux-doc's training split (~6.5M tokens): one pass; < 10 min on one H200
    MODEL=(--n-layer=2 --n-head=4 --n-embd=64 --context=256 --batch-size=64 --lr=3e-3
           --vocab-size=2048 --max-doc-tokens=4096 --tokens=6012928 --eval-points=5)
    DATA=("${GPU_DATA[@]}")
    REGIMES=${REGIMES:-1:random,clusterclip-r4,uniform 4:random,clusterclip-r8,uniform} ;;
  gpu-long)  # 1,088,256 parameters, 5,888 steps of 16 x 256 = 24,117,248 tokens: 22.2 per
             # parameter, 4 passes of the training split, or 16 of a quarter of it
    MODEL=(--n-layer=4 --n-head=4 --n-embd=128 --context=256 --batch-size=16 --lr=2e-3
           --vocab-size=2048 --max-doc-tokens=4096 --tokens=24117248 --eval-points=8)
    DATA=("${GPU_DATA[@]}")
    REGIMES=${REGIMES:-4:random,clusterclip-r8,uniform 16:random,clusterclip-r32,uniform} ;;
  *) echo "grid.sh: SIZE must be tiny, cpu, gpu or gpu-long; got $SIZE" >&2; exit 2 ;;
esac
if [ "$TINY" = 1 ]; then
  # Only the sizes shrink (later flags win): same corpus, encoder, precision, k-means, pin,
  # arms, passes and ratio check. 1,580 parameters (vocabulary 300), 128 steps of 8 x 32 =
  # 32,768 tokens: 20.7 per parameter; 200 sections hold ~120k training tokens.
  MODEL+=(--n-layer=1 --n-head=1 --n-embd=4 --context=32 --batch-size=8 --lr=1e-2
          --vocab-size=300 --tokens=32768)
  DATA+=(--n-clusters=6 --max-docs=200)
fi
if [ "$VIEW" = tail ]; then
  # The tail subset holds ~1/3 of KJV's tokens: a smaller batch keeps 500 steps at ~1 epoch
  # (same model, same learning-rate schedule); the quarter pool of the 4-epoch regime as usual.
  case "$SIZE" in
    tiny) DATA+=(--tail-docs=120 --heldout-per-cluster=4) ;;
    cpu)  DATA+=(--tail-docs=8000 --heldout-per-cluster=12); MODEL+=(--batch-size=5 --tokens=320000) ;;
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
  local seed=$1 corpus=$2 regime command
  for regime in $REGIMES; do
    command=("$PY" -m clusterclip.experiments.lm "${MODEL[@]}" "${DATA[@]}" --corpus="$corpus"
      --workdir="$WORK/$corpus" --out="$RESULTS/$corpus" --epochs="${regime%%:*}"
      --seeds="$seed" --policies="${regime#*:}" --device="$DEVICE"
      --data-seed="$DATA_SEED" --threads="$THREADS")
    if [ "${DRY_RUN:-0}" = 1 ]; then echo "${command[*]}"; else "${command[@]}"; fi
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
