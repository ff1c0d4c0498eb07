#!/usr/bin/env bash
# Run every examples/*/run.sh as written, each in a fresh output folder; print one line per
# example and exit non-zero if any failed. Logs: $EXAMPLES_LOGS (default: a temporary folder).
#   usage: scripts/run-examples.sh [PYTHON] [NAME...]     (NAME: run only these examples)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -gt 0 ] && [ -x "$1" ] && [ ! -d "$root/examples/$1" ]; then
  export CLUSTERCLIP_PYTHON=$1
  shift
fi
logs=${EXAMPLES_LOGS:-$(mktemp -d -t clusterclip-examples.XXXXXX)}
mkdir -p "$logs"
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for script in "$root"/examples/*/run.sh; do names+=("$(basename "$(dirname "$script")")"); done
fi
failed=()
for name in "${names[@]}"; do
  script=$root/examples/$name/run.sh
  out=$(mktemp -d -t "clusterclip-example-$name.XXXXXX")
  began=$(date +%s)
  if EXAMPLE_OUT=$out bash "$script" >"$logs/$name.log" 2>&1; then
    status=ok
  else
    status=FAILED
    failed+=("$name")
  fi
  printf '%-20s %-7s %4ss  %s\n' "$name" "$status" "$(($(date +%s) - began))" \
    "$(tail -n 1 "$logs/$name.log")"
  [ "$status" = ok ] && rm -rf "$out"
done
echo "logs: $logs"
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]} (output kept in /tmp/clusterclip-example-<name>.*)" >&2
  exit 1
fi
