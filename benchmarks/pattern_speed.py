"""What matching a --freeze-pattern / --train-pattern over a vocabulary costs, engine by engine (issue 35).

Engines: Python's re as embedtune runs it (embedtune.plan.patterns.WordPattern: re.search per word, a SIGALRM
timer re-armed every PATTERN_CHUNK words), plain re.search, the regex package (with and without its
per-call timeout=) and RE2 (google-re2), each where installed. Vocabularies: the 20,000 words of
data/sample/glove.6B.50d.20k.txt and 400,000 words (those 20,000, then made-up words from them:
word + '_' + k). Prints the median of --repeat runs in ms for each (pattern, engine), and how many words
each engine matched (regex and RE2 differ from re on \\w, \\s and \\d beyond ASCII, which is why
embedtune keeps re's meaning and bounds it with a timer instead).

    python benchmarks/pattern_speed.py --repeat 3
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from pathlib import Path

from embedtune.plan.patterns import WordPattern

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample" / "glove.6B.50d.20k.txt"
PATTERNS = [r"^\d+$", r"ing$", r"^[^a-z]", r"\w+\.\w+", r"^(un|re)\w{3,}ed$"]


def vocabularies() -> dict[str, list[str]]:
    words = [line.split(" ", 1)[0] for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    big = list(words)
    k = 0
    while len(big) < 400_000:
        big.extend(f"{w}_{k}" for w in words[:400_000 - len(big)])
        k += 1
    return {"20k": words, "400k": big}


def engines(pattern: str) -> dict:
    found = {"embedtune (re + timer)": lambda words: int(WordPattern(pattern, "freeze_pattern")
                                                          .matches(words, len(words)).sum())}
    plain = re.compile(pattern)
    found["re"] = lambda words: sum(plain.search(w) is not None for w in words)
    try:
        import regex
    except ImportError:
        regex = None
    if regex is not None:
        r = regex.compile(pattern, regex.VERSION0)
        found["regex"] = lambda words: sum(r.search(w) is not None for w in words)
        found["regex timeout=1"] = lambda words: sum(r.search(w, timeout=1.0) is not None for w in words)
    try:
        import re2
    except ImportError:
        re2 = None
    if re2 is not None:
        r2 = re2.compile(pattern)
        found["re2"] = lambda words: sum(r2.search(w) is not None for w in words)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for size, words in vocabularies().items():
        print(f"vocabulary {size} ({len(words):,} words)")
        for pattern in PATTERNS:
            for name, match in engines(pattern).items():
                times, n = [], 0
                for _ in range(args.repeat):
                    began = time.perf_counter()
                    n = match(words)
                    times.append(time.perf_counter() - began)
                print(f"  {pattern:<22} {name:<24} {statistics.median(times) * 1e3:9.1f} ms  {n:>7,} matched",
                      flush=True)


if __name__ == "__main__":
    main()
