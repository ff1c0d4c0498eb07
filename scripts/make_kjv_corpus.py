"""Rebuild the bundled demo corpus from Debian's `bible-kjv` package.

    apt-get install -y --no-install-recommends bible-kjv
    python scripts/make_kjv_corpus.py src/clusterclip/data/kjv-verses.jsonl.gz

One JSON line per verse: {"id": "Genesis 1:1", "book": "Genesis", "chapter": 1,
"verse": 1, "text": ...}. The King James Version text is in the public domain.
"""

import gzip
import json
import re
import subprocess
import sys

out_path = sys.argv[1]
text = subprocess.run(
    ["bible", "-l0", "Gen1:1-Rev22:21"], check=True, capture_output=True, text=True
).stdout
chapter_line = re.compile(r"^(\S.*?) (\d+)$")
verse_line = re.compile(r"^\s+(\d+) (.*)$")
book, chapter, count = None, None, 0
# mtime=0 keeps the archive byte-identical across rebuilds.
with gzip.GzipFile(out_path, "wb", mtime=0) as out:
    for line in text.splitlines():
        if match := chapter_line.match(line):
            book, chapter = match.group(1), int(match.group(2))
        elif match := verse_line.match(line):
            verse = int(match.group(1))
            record = {
                "id": f"{book} {chapter}:{verse}", "book": book, "chapter": chapter,
                "verse": verse, "text": match.group(2).strip(),
            }
            out.write((json.dumps(record) + "\n").encode("utf-8"))
            count += 1
print(f"wrote {count} verses to {out_path}")
