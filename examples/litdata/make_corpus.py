"""Write the first N verses of the King James Bible bundled with clusterclip as jsonl."""

import gzip
import itertools
import sys
from importlib import resources

out, count = sys.argv[1], int(sys.argv[2])
source = resources.files("clusterclip.data") / "kjv-verses.jsonl.gz"
with (
    source.open("rb") as raw,
    gzip.open(raw, "rt", encoding="utf-8") as verses,
    open(out, "w", encoding="utf-8") as handle,
):
    handle.writelines(itertools.islice(verses, count))
