#!/usr/bin/env bash
# MosaicML streaming reads a ClusterClip schedule: export it as MDS, train in
# schedule order, stop after 5 steps, resume from StreamingDataLoader.state_dict().
#
#   bash examples/mosaic_streaming/run.sh        (from anywhere; about a minute)
#
# The work directory is made with the project's .venv (`make install`; or set
# CLUSTERCLIP_PYTHON); the export and the loop run in .venvs/streaming, which
# mosaicml-streaming needs for its own pins (`make client-envs` builds it).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
python=${CLUSTERCLIP_PYTHON:-.venv/bin/python}
[ -f .venvs/streaming/.installed ] || bash scripts/install-client-env.sh streaming
client=.venvs/streaming/bin
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export CLUSTERCLIP_PROGRESS=${CLUSTERCLIP_PROGRESS:-0} HF_HUB_OFFLINE=1

# 1. a work directory: 400 KJV verses (bundled), tf-idf, 8 clusters, 2 epochs, R = 2
"$python" examples/mosaic_streaming/make_corpus.py "$out/verses.jsonl" 400
"$python" -m clusterclip run "$out/verses.jsonl" --workdir "$out/work" --encoder tfidf \
  --n-clusters 8 --epochs 2 --max-repeats 2 --no-report > /dev/null

# 2. the MDS export (prints its disk cost first: every draw is stored by value)
"$client/clusterclip" export --workdir "$out/work" --format mds --out "$out/mds"

# 3. a training loop that stops after 5 steps, then a new process that resumes
"$client/python" examples/mosaic_streaming/train_loop.py "$out/mds" --stop-after 5 --state "$out/state.json"
"$client/python" examples/mosaic_streaming/train_loop.py "$out/mds" --resume "$out/state.json"
