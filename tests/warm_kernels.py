"""Compile the numba kernels most test runs use, once, before the test processes start (tests/conftest.py).

On a fresh checkout numba's cache (``__pycache__/*.nbi``) is empty, and every process that reaches a kernel
before some process has written it compiles it again: at the start of the suite two test processes and the
runs they start all do, at once. One tiny run of each objective here writes the cache first.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import embedtune

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample"


# Two parts, two processes at once, of about equal wall on a cold cache on 2 cores (the shared negatives' strict run
# moved to "glove" for that: benchmarks/log/test-suite-time.md). "glove" also takes the kernel many tests reach and
# the other part's runs do not: the lazy step of every adagrad and adam sgns run (on a cold cache, each test process
# and each run it starts that meets the step before one has cached it compiles it).
RUNS = {"glove": [dict(objective="glove", min_count=2), dict(objective="glove", deterministic=True),
                  dict(objective="sgns", optimizer="adam"),
                  dict(objective="sgns", negatives="shared", deterministic=True)],
        "other": [dict(objective="sgns"), dict(objective="sgns", deterministic=True), dict(objective="classify"),
                  dict(objective="classify", deterministic=True)]}   # --deterministic's strict twins too


def main(part: str) -> None:
    from embedtune.corpus import fast

    # The compiled reader for these small files too, as in the test processes (conftest.py's
    # compiled_reader_for_small_files): its kernels are what they meet first.
    fast.SMALL_FILE = 0
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        vectors = folder / "v.txt"
        vectors.write_bytes(b"".join((SAMPLE / "glove.6B.50d.20k.txt").read_bytes().splitlines(True)[:3000]))
        corpus = folder / "c.txt"
        corpus.write_bytes(b"".join((SAMPLE / "lee_background.cor").read_bytes().splitlines(True)[:40]))
        labelled = folder / "l.txt"
        labelled.write_bytes(b"".join((SAMPLE / "wordnet-glosses.train.txt").read_bytes().splitlines(True)[:200]))
        for options in RUNS[part]:
            text = labelled if options["objective"] == "classify" else corpus
            # (No output is written: a table this small is rendered by numpy, formats/text/write.py's
            # COMPILED_MIN_VALUES, so writing it would warm no kernel.)
            embedtune.fine_tune(str(vectors), str(text), epochs=1, **options)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
