#!/usr/bin/env bash
# Build the test environment of one trainer-side data library, .venvs/CLIENT,
# with clusterclip[io] installed in it (editable) and the library at the
# version the tests were written against.
#
# Each client gets its own environment because its pins clash with the main
# .venv (mosaicml-streaming 0.13 needs numpy<2.2 and transformers<5; the main
# environment has numpy 2.4 and transformers 5).
#
#   streaming  mosaicml-streaming 0.13.0. `import streaming` imports torchvision
#              (streaming.vision). PyPI's torchvision wheels for Linux x86_64
#              are CUDA builds whose ops do not load beside a CPU torch
#              ("operator torchvision::nms does not exist"), and no CPU build
#              is on PyPI, so this environment takes the matching CUDA pair,
#              torch 2.14.1 + torchvision 0.29.1 (about 6 GB; it runs on the CPU).
#   litdata    litdata 0.2.76 on the local CPU torch wheel. litdata declares
#              torchvision but uses it only in its image and video serializers,
#              which clusterclip's export (text and int columns) never reaches,
#              so every requirement but torchvision is installed; with Ray
#              (clusterclip[ray]), so the export's engine tasks are tested
#              against the real writer on Ray too.
#
# usage: install-client-env.sh CLIENT [PYTHON]     (run from the repository root)
set -euo pipefail
client=${1:?usage: install-client-env.sh streaming|litdata [PYTHON]}
python=${2:-python3}
venv=.venvs/$client
case $client in
  streaming | litdata) ;;
  *) echo "install-client-env.sh: unknown client '$client' (streaming, litdata)" >&2; exit 2 ;;
esac

start=$(date +%s)
rm -rf "$venv"
"$python" -m venv "$venv"
vpython=$venv/bin/python
pip=("$vpython" -m pip install --quiet)

case $client in
  streaming)
    "${pip[@]}" "torch==2.14.1" "torchvision==0.29.1" "mosaicml-streaming==0.13.0" -e ".[io]"
    ;;
  litdata)
    cpu_wheel=""
    for dir in ${PIP_FIND_LINKS:-} /opt/wheels; do
      [ -d "$dir" ] || continue
      found=$(ls "$dir"/torch-*+cpu-*.whl 2>/dev/null | sort -V | tail -n 1 || true)
      [ -n "$found" ] && cpu_wheel=$found && break
    done
    if [ -n "$cpu_wheel" ]; then
      "${pip[@]}" "$cpu_wheel"
    else
      "${pip[@]}" torch --index-url https://download.pytorch.org/whl/cpu
    fi
    "${pip[@]}" --no-deps "litdata==0.2.76"
    # litdata's own requirement list, read from its metadata, less torchvision.
    mapfile -t requirements < <("$vpython" - <<'EOF'
import re
from importlib.metadata import requires
for line in requires("litdata") or []:
    name = re.split(r"[\s<>=!~;\[(]", line, maxsplit=1)[0].lower()
    if name != "torchvision" and ";" not in line:  # extras' lines carry a marker
        print(line)
EOF
)
    "${pip[@]}" "${requirements[@]}" -e ".[io,ray]"
    echo "install-client-env.sh: torchvision is left out of $venv on purpose (pip says it is" \
      "missing): litdata uses it only for images and video"
    ;;
esac
touch "$venv/.installed"
echo "install-client-env.sh: built $venv in $(($(date +%s) - start)) s"
