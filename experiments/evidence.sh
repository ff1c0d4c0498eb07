#!/usr/bin/env bash
# The evidence grid of experiments/ANALYSIS.md (issue 30), in the order that decides most first.
#
#   bash experiments/evidence.sh            # every phase (hours on 2 cores; resumes)
#   PHASES="main" bash experiments/evidence.sh
#   SIZE=tiny RESULTS=/tmp/ev WORK=/tmp/evw bash experiments/evidence.sh   # checks the script
#
# Phases (each a call of grid.sh; every run appends one line to
# $RESULTS/<phase>/<corpus>/results.jsonl plus its per-document losses, and a rerun skips
# finished runs, so an interrupted grid resumes where it stopped):
#   main   kjv and fortunes, 1 and 4 passes, random / recommended / uniform, seeds 0-9
#   split  the same at --data-seed 1 (another subset, clustering and split), seeds 0-4
#   clip   the clip isolated: kjv natural at 8 passes, and the constructed tail at 4 and 8
#          passes; random, uniform, clusterclip R = P, 2P, 4P, planned R = 2P; seeds 0-4
# The corpora of one phase train side by side (PARALLEL=1, one torch thread each).
# Then: python -m clusterclip.experiments.answer $RESULTS   (the declared analysis)
set -euo pipefail
cd "$(dirname "$0")/.."
export SIZE=${SIZE:-cpu}
RESULTS=${RESULTS:-experiments/results/evidence}
WORK=${WORK:-runs/evidence}
PHASES=${PHASES:-main split clip}
if [ "$SIZE" = tiny ]; then TEN=0,1; FIVE=0,1; else TEN=0,1,2,3,4,5,6,7,8,9; FIVE=0,1,2,3,4; fi
MAIN1=random,clusterclip-r4,uniform
MAIN4=random,clusterclip-r8,uniform
clip_arms() {  # the clip grid's arms at P passes
  local p=$1
  echo "random,uniform,clusterclip-r$p,clusterclip-r$((2 * p)),clusterclip-r$((4 * p)),planned-r$((2 * p))"
}

for phase in $PHASES; do
  case "$phase" in
    main)
      SEEDS=$TEN REGIMES="1:$MAIN1 4:$MAIN4" PARALLEL=1 WORK=$WORK/main \
        RESULTS=$RESULTS/main bash experiments/grid.sh ;;
    split)
      SEEDS=$FIVE DATA_SEED=1 REGIMES="1:$MAIN1 4:$MAIN4" PARALLEL=1 WORK=$WORK/split \
        RESULTS=$RESULTS/split bash experiments/grid.sh ;;
    clip)
      # natural kjv at 8 passes and the tail at 4 and 8 passes, side by side
      SEEDS=$FIVE CORPORA=kjv REGIMES="8:$(clip_arms 8)" PARALLEL=1 WORK=$WORK/clip \
        RESULTS=$RESULTS/clip bash experiments/grid.sh &
      natural=$!
      SEEDS=$FIVE VIEW=tail REGIMES="4:$(clip_arms 4) 8:$(clip_arms 8)" PARALLEL=1 \
        WORK=$WORK/clip-tail RESULTS=$RESULTS/clip-tail bash experiments/grid.sh
      wait "$natural" ;;
    *) echo "evidence.sh: unknown phase $phase (main, split, clip)" >&2; exit 2 ;;
  esac
done
