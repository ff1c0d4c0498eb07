#!/usr/bin/env bash
# Install clusterclip and its extras into the given interpreter's environment.
# Prefers a CPU build of torch where one is available locally (a plain `torch`
# requirement can otherwise resolve to a multi-GB CUDA build).
set -euo pipefail
python=${1:?usage: install.sh PYTHON [EXTRAS]}
extras=${2:-all,test}
pip=("$python" -m pip install --quiet)

if ! "$python" -c "import torch" 2>/dev/null; then
  cpu_wheel=""
  for dir in ${PIP_FIND_LINKS:-} /opt/wheels; do
    [ -d "$dir" ] || continue
    found=$(ls "$dir"/torch-*+cpu-*.whl 2>/dev/null | sort -V | tail -n 1 || true)
    [ -n "$found" ] && cpu_wheel=$found && break
  done
  if [ -n "$cpu_wheel" ]; then
    echo "install.sh: using local CPU torch wheel $cpu_wheel"
    "${pip[@]}" "$cpu_wheel"
  elif "${pip[@]}" torch --index-url https://download.pytorch.org/whl/cpu 2>/dev/null; then
    echo "install.sh: installed torch from the PyTorch CPU index"
  else
    echo "install.sh: no CPU torch wheel found; pip will choose torch itself"
  fi
fi
"${pip[@]}" -e ".[${extras}]"
