#!/usr/bin/env bash
# LitData reads a ClusterClip schedule: export it as a LitData optimized dataset, train in
# schedule order, stop after 5 steps, resume from its StreamingDataLoader.state_dict().
#
#   bash examples/litdata/run.sh        (from anywhere; about a minute)
#
# The work directory is made with the project's .venv (`make install`; or set
# CLUSTERCLIP_PYTHON); the export and the loop run in .venvs/litdata, which
# keeps litdata apart from the main environment (`make client-envs` builds it).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
python=${CLUSTERCLIP_PYTHON:-.venv/bin/python}
[ -f .venvs/litdata/.installed ] || bash scripts/install-client-env.sh litdata
client=.venvs/litdata/bin
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export CLUSTERCLIP_PROGRESS=${CLUSTERCLIP_PROGRESS:-0} HF_HUB_OFFLINE=1

# 1. a work directory: 400 KJV verses (bundled), tf-idf, 8 clusters, 2 epochs, R = 2
"$python" examples/litdata/make_corpus.py "$out/verses.jsonl" 400
"$python" -m clusterclip run "$out/verses.jsonl" --workdir "$out/work" --encoder tfidf \
  --n-clusters 8 --epochs 2 --max-repeats 2 --no-report > /dev/null

# 2. the LitData export, laid out for the reader: 1 rank, 2 workers, batches of 8
#    (prints its disk cost first: every draw is stored by value)
"$client/clusterclip" export --workdir "$out/work" --format litdata --out "$out/lit" \
  --world-size 1 --loader-workers 2 --loader-batch-size 8

# 3. a training loop that stops after 5 steps, then a new process that resumes
"$client/python" examples/litdata/train_loop.py "$out/lit" --stop-after 5 --state "$out/state.json"
"$client/python" examples/litdata/train_loop.py "$out/lit" --resume "$out/state.json"
