"""Time `embedtune report`'s parts (and --logdir's projector files) on 400k-word vectors.

    python benchmarks/report_speed.py --dim 50    # benchmarks/_data/glove.6B.50d.txt as BEFORE
    python benchmarks/report_speed.py --dim 300   # a made 400k x 300 file (written once, word2vec text)

AFTER is made from BEFORE as a fine-tune leaves it: the first 5,000 rows kept, 20% of the rest moved
a little (noise of 5% of the row's length), 2,000 new words appended. The made 300-d BEFORE is GloVe
50d through a fixed random 50 x 300 map plus a little noise, so neighbours and benchmarks mean what
they do on real vectors. Prints each part's seconds, the median of --repeat runs of the report.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from embedtune.formats import load_vectors, save_vectors  # noqa: E402
from embedtune.vectors import Vectors  # noqa: E402

DATA = HERE / "_data"
GLOVE = DATA / "glove.6B.50d.txt"


def made_files(dim: int) -> tuple[str, str, str]:
    """(before, after, format): written once into benchmarks/_data."""
    fmt = "glove" if dim == 50 else "word2vec"   # text: GloVe's own 300-d files are text too
    before_path = GLOVE if dim == 50 else DATA / f"made-400k-{dim}d.txt"
    after_path = DATA / f"made-400k-{dim}d-after.txt"
    rng = np.random.default_rng(0)
    if not before_path.exists():
        glove = load_vectors(str(GLOVE))
        lift = rng.standard_normal((50, dim)).astype(np.float32) / np.sqrt(50)
        matrix = glove.matrix @ lift + 0.01 * rng.standard_normal((len(glove.words), dim)).astype(np.float32)
        save_vectors(Vectors(glove.words, matrix), str(before_path), fmt)
    if not after_path.exists():
        before = load_vectors(str(before_path))
        matrix = before.matrix.copy()
        n = len(before.words)
        moved = 5000 + rng.choice(n - 5000, (n - 5000) // 5, replace=False)
        norms = np.linalg.norm(matrix[moved], axis=1, keepdims=True)
        matrix[moved] += 0.05 * norms * rng.standard_normal((len(moved), dim)).astype(np.float32) / np.sqrt(dim)
        pairs = rng.integers(0, 20000, (2000, 2))
        new = (matrix[pairs[:, 0]] + matrix[pairs[:, 1]]) / 2
        save_vectors(Vectors(list(before.words) + [f"newword{i}" for i in range(2000)],
                             np.vstack([matrix, new])), str(after_path), fmt)
    return str(before_path), str(after_path), fmt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dim", type=int, default=50, choices=(50, 300))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from embedtune.report import build_report, write_report
    from embedtune.report.projector import projector_rows, write_projector

    before_path, after_path, fmt = made_files(args.dim)
    began = time.perf_counter()
    before = load_vectors(before_path, format=fmt)
    after = load_vectors(after_path, format=fmt)
    print(f"load both files ({fmt}, {len(after.words):,} x {after.dim}): {time.perf_counter() - began:.1f} s")
    runs = []
    for _ in range(args.repeat):
        began, cpu = time.perf_counter(), time.process_time()
        report = build_report(before, after, before_path=before_path, after_path=after_path)
        write_report(report, os.devnull)
        runs.append({**report.seconds, "page (render + write)": time.perf_counter() - began - sum(report.seconds.values()),
                     "total": time.perf_counter() - began, "total CPU (every thread)": time.process_time() - cpu})
    for key in runs[0]:
        print(f"  {key}: {statistics.median(r[key] for r in runs):.2f} s  (runs: "
              f"{', '.join(f'{r[key]:.2f}' for r in runs)})")
    m = report.map
    points = np.random.default_rng(1).standard_normal((2 * len(m.words), after.dim))
    began = time.perf_counter()
    for _ in range(10):
        np.linalg.svd(points - points.mean(axis=0), full_matrices=False)
    print(f"map: {len(m.words)} words; the PCA's SVD of {points.shape[0]} x {points.shape[1]}: "
          f"{(time.perf_counter() - began) / 10 * 1000:.1f} ms")
    began = time.perf_counter()
    rows = projector_rows(before, after)
    picked = time.perf_counter() - began
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        write_projector(folder, rows)
        size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    print(f"projector: {len(rows.words):,} rows picked in {picked:.2f} s, written in "
          f"{time.perf_counter() - began - picked:.2f} s ({size / 1e6:.1f} MB)")
    print(f"load average: {os.getloadavg()}")


if __name__ == "__main__":
    main()
