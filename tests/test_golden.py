"""Golden runs: deterministic `embedtune train` runs, held fixed while the code moves.

Each case is a short deterministic run on the shipped samples (in-process, as a user's arithmetic
runs; the two-worker case as real processes). Two comparisons, both on every machine:

- Exact: sha256 of the output file and of the `--json` summary (less timings and paths), kept per
  machine fingerprint (CPU model and flags, numeric package versions) in tests/golden/train.json.
  --deterministic's compiled kernels give the same bits on every x86-64 CPU (no fastmath:
  embedtune/kernels/common.py), so the glove, sgns and retrofit cases give the same bytes on an Intel
  Xeon and an AMD EPYC; what can still differ is the BLAS kernel OpenBLAS picks at run time (the a la
  carte start, by 1e-9; the classify cases' L-BFGS start, scipy's), so a run is held to the hashes
  recorded on its own kind of machine, where there are any.
- Portable (never skipped): what cannot depend on the CPU stays exact (the row order, which rows
  moved, the bytes of every row that did not (frozen rows are copies of the input), every count,
  step, string and flag of the summary), and what rounding may move is compared to recorded values
  with the case's tolerance: the summary's floats (losses) and the displacement ``D`` of the moved
  rows (output minus input; a new word's row itself): its Frobenius norm, its column sums, its row
  norms summed over ``GROUPS`` runs of consecutive moved rows (a change confined to a few rows shows
  in its run), and the whole values of ``SAMPLE`` moved rows. A distance is the largest gap over the
  recorded group's largest value.

The tolerances are measured, not guessed: benchmarks/golden_spread.py runs every case again under
settings that change the float arithmetic the way another CPU does (numba compiled for other CPUs,
XLA and oneDNN held to narrower vector units, other OpenBLAS kernels, numpy without AVX-512, other
thread counts), takes each case's largest distance, and writes a multiple of it into
tests/golden/train.json, with the machine and the variants it came from (``tolerance_from``). Its
emulated AMD machine ("zen4") gives the bytes the AMD EPYC recorded, bit for bit, so the tolerances,
measured on a real Intel Xeon against it and an AVX2-only "zen3", hold the two kinds of machine CI
runs on. Where the bits no longer depend on the CPU the tolerance is the floor. The classify cases
amplify rounding (the classifier's start is an unconverged L-BFGS fit, whose own BLAS calls are
OpenBLAS's for the CPU), so their tolerances are wide and only their exact hashes hold them tightly.
benchmarks/README.md ("Golden tests across machines") has the figures.

A change of bits that is meant needs its reason in the commit that records again (one process):

    EMBEDTUNE_GOLDEN=record python -m pytest -q -n 0 tests/test_golden.py

It records this machine's hashes and the portable values; another machine's hashes of a case whose
results changed here (its bits, or its values beyond the tolerance) are dropped with a warning (they
no longer describe the code), never rewritten. Tolerances are only written by the script.
Interrupted-and-resumed runs giving an uninterrupted run's bytes is tests/test_resume.py's.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import platform
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from train_fixtures import REPO, SAMPLE_CORPUS, SAMPLE_VECTORS, run

GOLDEN = Path(__file__).parent / "golden" / "train.json"
RECORD = os.environ.get("EMBEDTUNE_GOLDEN") == "record"
DATA = REPO / "data" / "sample"
GLOSSES = DATA / "wordnet-glosses.train.txt"

# Summary keys that vary with where the test runs (paths); timings (*seconds, *_per_second) vary too.
PATHS = {"vectors", "corpus", "output", "valid", "lexicon", "antonyms", "checkpoint_dir", "logdir"}
GROUPS = 64   # runs of consecutive moved rows whose displacement norms are summed
SAMPLE = 8    # moved rows kept whole

# name -> (corpus, options): each deterministic, a few dozen steps at most.
CASES = {
    "glove-default": (SAMPLE_CORPUS, ["--freeze-top", 5000]),
    "glove-sgd-capped-no-anchor": (SAMPLE_CORPUS, ["--objective", "glove", "--optimizer", "sgd", "--lr", 0.05,
                                                   "--clip-norm", 0.01, "--anchor", 0, "--freeze-top", 5000]),
    "glove-adam-freeze-pattern": (SAMPLE_CORPUS, ["--objective", "glove", "--optimizer", "adam", "--lr", 0.01,
                                                  "--freeze-pattern", "^[a-m]", "--min-count", 1000000]),
    "glove-freeze-list-context-mean": (SAMPLE_CORPUS, ["--freeze-list", "{tmp}/freeze.txt", "--init",
                                                       "context-mean"]),
    "sgns-per-pair": (SAMPLE_CORPUS, ["--objective", "sgns", "--negatives", "per-pair", "--freeze-top", 5000]),
    "sgns-shared": (SAMPLE_CORPUS, ["--objective", "sgns", "--negatives", "shared", "--freeze-top", 5000]),
    "sgns-adagrad-train-pattern": (SAMPLE_CORPUS, ["--objective", "sgns", "--optimizer", "adagrad", "--lr", 0.1,
                                                   "--train-pattern", "^[s-z]", "--init", "random"]),
    "sgns-adam-capped-anchored-pretrained-frozen": (
        SAMPLE_CORPUS, ["--objective", "sgns", "--optimizer", "adam", "--lr", 0.01, "--clip-norm", 0.05,
                        "--anchor", 0.5, "--freeze-pretrained", "--init", "alacarte"]),
    "sgns-checkpointed": (SAMPLE_CORPUS, ["--objective", "sgns", "--freeze-top", 5000, "--checkpoint-every", 10,
                                          "--checkpoint-dir", "{tmp}/ckpt"]),
    "classify": (GLOSSES, ["--objective", "classify", "--freeze-top", 3000]),
    "classify-bigrams-adagrad": (GLOSSES, ["--objective", "classify", "--word-ngrams", 2, "--optimizer",
                                           "adagrad", "--lr", 0.2, "--freeze-top", 3000]),
    "classify-anchored": (GLOSSES, ["--objective", "classify", "--anchor", 0.5, "--freeze-top", 3000]),
    "retrofit": (None, ["--objective", "retrofit", "--lexicon", DATA / "wordnet-synonyms.10k.txt",
                        "--antonyms", DATA / "wordnet-antonyms.10k.txt", "--freeze-top", 5000]),
}
STEPS = 30
TWO_WORKERS = "sgns-two-workers"


def fingerprint() -> dict:
    """What the bits depend on beyond the code: the CPU (its vector units) and the numeric packages."""
    from importlib.metadata import version

    cpu = ""
    try:
        info = Path("/proc/cpuinfo").read_text()
        model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "")
        flags = next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), [])
        cpu = model + " " + hashlib.sha256(" ".join(sorted(flags)).encode()).hexdigest()[:16]
    except OSError:
        pass
    return {"machine": platform.machine(), "cpu": cpu or platform.processor(),
            **{name: version(name) for name in ("tensorflow", "numpy", "numba")}}


def options(corpus, extra, tmp_path, output: Path, summary: Path) -> list:
    # The freeze list: every third of the sample's first 6,000 words.
    words = SAMPLE_VECTORS.read_text(encoding="utf-8").splitlines()[:6000:3]
    (tmp_path / "freeze.txt").write_text("".join(line.split(" ", 1)[0] + "\n" for line in words), encoding="utf-8")
    extra = [str(o).replace("{tmp}", str(tmp_path)) for o in extra]
    return ["train", SAMPLE_VECTORS, *([corpus] if corpus else []), "-o", output, "--seed", 1, "--deterministic",
            "--epochs", 2, "--max-steps", STEPS, "--json", summary, *extra]


def run_case(name: str, tmp_path: Path, more=()) -> tuple[Path, Path]:
    """Run a golden case into ``tmp_path``; (output, summary). ``more``: options after the case's own
    (benchmarks/golden_spread.py's deliberate changes)."""
    output, summary = tmp_path / "out.txt", tmp_path / "summary.json"
    if name == TWO_WORKERS:
        args = options(SAMPLE_CORPUS, ["--objective", "sgns", "--freeze-top", 5000, "--workers", 2], tmp_path,
                       output, summary)
        done = subprocess.run([sys.executable, "-m", "embedtune.cli.main", "-q", *map(str, [*args, *more])],
                              cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    else:
        corpus, extra = CASES[name]
        result = run(["-q", *options(corpus, extra, tmp_path, output, summary), *more])
        assert result.exit_code == 0, result.output
    return output, summary


# --- the two digests -----------------------------------------------------------------------------

def kept_summary(summary: Path) -> dict:
    s = json.loads(summary.read_text())
    return {k: v for k, v in sorted(s.items()) if k not in PATHS and not k.endswith(("seconds", "per_second"))}


def exact(output: Path, summary: Path) -> dict:
    return {"output": hashlib.sha256(output.read_bytes()).hexdigest(),
            "summary": hashlib.sha256(json.dumps(kept_summary(summary), sort_keys=True).encode()).hexdigest()}


@functools.cache
def _input_rows() -> dict[str, np.ndarray]:
    rows = {}
    for line in SAMPLE_VECTORS.read_text(encoding="utf-8").splitlines():
        word, values = line.split(" ", 1)
        rows[word] = np.array(values.split(" "), dtype=np.float32)
    return rows


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def portable(output: Path, summary: Path) -> dict:
    """What holds on any machine: the exact parts as they are, the floats to compare."""
    given = _input_rows()
    words, moved, unchanged, displacement = [], [], [], []
    for i, line in enumerate(output.read_text(encoding="utf-8").splitlines()):
        word, values = line.split(" ", 1)
        row = np.array(values.split(" "), dtype=np.float32)
        words.append(word)
        before = given.get(word)
        if before is not None and np.array_equal(before, row):
            unchanged.append(line)
            continue
        moved.append(i)
        displacement.append(row.astype(np.float64) - (0.0 if before is None else before))
    d = np.array(displacement).reshape(len(moved), -1)
    norms = np.linalg.norm(d, axis=1)
    sample = np.linspace(0, len(moved) - 1, min(SAMPLE, len(moved))).round().astype(int)
    return {"words": _sha("\n".join(words)), "moved": _sha(" ".join(map(str, moved))), "n_moved": len(moved),
            "unchanged": _sha("\n".join(unchanged)), "summary": kept_summary(summary),
            "frobenius": _short(np.linalg.norm(d)), "column_sums": _short(d.sum(axis=0)),
            "group_norms": _short([g.sum() for g in np.array_split(norms, min(GROUPS, len(moved)))]),
            "sample": {words[moved[i]]: _short(d[i]) for i in sample}}


def _short(values):
    """Ten significant digits: far below any tolerance, in a smaller golden file."""
    if np.ndim(values) == 0:
        return float(f"{float(values):.10g}")
    return [float(f"{v:.10g}") for v in np.asarray(values, dtype=np.float64)]


def _leaves(value, path=""):
    """(path, value) for every leaf of a JSON value."""
    if isinstance(value, dict):
        for k in sorted(value):
            yield from _leaves(value[k], f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{path}[{i}]")
    else:
        yield path, value


def _relative(got, want) -> float:
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return math.inf
    scale, gap = np.abs(want).max(initial=0.0), np.abs(got - want).max(initial=0.0)
    return float(gap / scale) if scale else (0.0 if gap == 0 else math.inf)


def _both_float(a, b) -> bool:
    return isinstance(a, float) and isinstance(b, float)


def mismatches(got: dict, want: dict) -> list[str]:
    """What differs among the parts that must be equal on any machine."""
    wrong = [f"{k} differs" for k in ("words", "moved", "unchanged") if got[k] != want[k]]
    if got["n_moved"] != want["n_moved"]:
        wrong.append(f"moved rows: {got['n_moved']}, recorded {want['n_moved']}")
    g, w = dict(_leaves(got["summary"])), dict(_leaves(want["summary"]))
    wrong += [f"summary{k}: not in both" for k in sorted(g.keys() ^ w.keys())]
    wrong += [f"summary{k}: {g[k]!r}, recorded {w[k]!r}" for k in sorted(g.keys() & w.keys())
              if not _both_float(g[k], w[k]) and g[k] != w[k]]
    if got["sample"].keys() != want["sample"].keys():
        wrong.append(f"sampled rows: {sorted(got['sample'])}, recorded {sorted(want['sample'])}")
    return wrong


def distances(got: dict, want: dict) -> dict[str, float]:
    """Each float group's relative distance from the recorded one (0 for equal runs)."""
    g, w = dict(_leaves(got["summary"])), dict(_leaves(want["summary"]))
    floats = [k for k in sorted(g.keys() & w.keys()) if _both_float(g[k], w[k])]
    rows = sorted(got["sample"].keys() & want["sample"].keys())
    groups = [_relative(a, b) for a, b in zip(got["group_norms"], want["group_norms"])]
    return {"summary": max((_relative(g[k], w[k]) for k in floats), default=0.0),
            "frobenius": _relative(got["frobenius"], want["frobenius"]),
            "column_sums": _relative(got["column_sums"], want["column_sums"]),
            "group_norms": max(groups, default=0.0) if len(got["group_norms"]) == len(want["group_norms"])
            else math.inf,
            "sample": _relative([got["sample"][r] for r in rows], [want["sample"][r] for r in rows])}


# --- the golden file -----------------------------------------------------------------------------

def load_golden() -> dict:
    data = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    return {"exact": data.get("exact", []), "portable": data.get("portable", {}),
            "tolerance": data.get("tolerance", {}), "tolerance_from": data.get("tolerance_from", "")}


def write_golden(data: dict) -> None:
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def hashes_here(data: dict) -> dict:
    """This machine's exact hashes ({} where none were recorded on its kind of machine)."""
    here = fingerprint()
    return next((entry["cases"] for entry in data["exact"] if entry["fingerprint"] == here), {})


def _merge(data: dict, runs: dict) -> None:
    """Record ``runs`` ({case: {"exact", "portable"}}) made here; another machine's hashes of a case
    whose results changed here no longer describe the code: dropped, with a warning."""
    here = fingerprint()
    entry = next((e for e in data["exact"] if e["fingerprint"] == here), None)
    if entry is None:
        entry = {"fingerprint": here, "cases": {}}
        data["exact"].append(entry)
    for name, got in sorted(runs.items()):
        was, before = entry["cases"].get(name), data["portable"].get(name)
        changed = (was is not None and was != got["exact"]) or (before is not None and (
            mismatches(got["portable"], before)
            or max(distances(got["portable"], before).values()) > data["tolerance"].get(name, 0.0)))
        for other in data["exact"]:
            if changed and other is not entry and other["cases"].pop(name, None) is not None:
                warnings.warn(f"{name}: its results changed here, so the hashes recorded on "
                              f"{other['fingerprint']['cpu']} were dropped (record them there again)")
        entry["cases"][name] = got["exact"]
        data["portable"][name] = got["portable"]
        if name not in data["tolerance"]:
            warnings.warn(f"{name}: no tolerance yet (python benchmarks/golden_spread.py --write)")


@pytest.fixture(scope="module")
def golden():
    data = load_golden()
    if not RECORD:
        yield data
        return
    runs: dict = {}
    yield runs
    data = load_golden()   # read again: record into the file as it is now
    _merge(data, runs)
    write_golden(data)


def check(golden: dict, name: str, output: Path, summary: Path) -> None:
    got = {"exact": exact(output, summary), "portable": portable(output, summary)}
    if RECORD:
        golden[name] = got
        return
    assert name in golden["portable"], f"{name}: nothing recorded (EMBEDTUNE_GOLDEN=record)"
    assert name in golden["tolerance"], f"{name}: no tolerance (python benchmarks/golden_spread.py --write)"
    wrong = mismatches(got["portable"], golden["portable"][name])
    gaps = distances(got["portable"], golden["portable"][name])
    far = {k: v for k, v in gaps.items() if v > golden["tolerance"][name]}
    assert not wrong and not far, f"{name}: " + "; ".join(
        [*wrong, *([f"relative distances over the tolerance {golden['tolerance'][name]:.1e}: {far}"] if far else [])])
    recorded_here = hashes_here(golden).get(name)
    if recorded_here is not None:
        assert got["exact"] == recorded_here, f"{name}: the bits differ from those recorded on this kind of machine"


@pytest.mark.parametrize("name", CASES)
def test_a_deterministic_run_gives_its_recorded_results(name, golden, tmp_path):
    check(golden, name, *run_case(name, tmp_path))


def test_two_workers_give_their_recorded_results(golden, tmp_path):
    check(golden, TWO_WORKERS, *run_case(TWO_WORKERS, tmp_path))


def test_recording_here_drops_other_machines_hashes_only_when_results_changed_saying_so():
    name, elsewhere = "retrofit", {"machine": "x86_64", "cpu": "elsewhere"}
    recorded = {"output": "a" * 64, "summary": "b" * 64}
    values = {"words": "w", "moved": "m", "n_moved": 2, "unchanged": "u", "summary": {"loss": 1.0, "steps": 3},
              "frobenius": 2.0, "column_sums": [1.0, -1.0], "group_norms": [1.0, 1.0], "sample": {"x": [0.5, 0.5]}}

    def golden_file():
        return {"exact": [{"fingerprint": fingerprint(), "cases": {name: dict(recorded)}},
                          {"fingerprint": elsewhere, "cases": {name: {"output": "c" * 64, "summary": "d" * 64}}}],
                "portable": {name: json.loads(json.dumps(values))}, "tolerance": {name: 1e-6}}

    data = golden_file()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _merge(data, {name: {"exact": dict(recorded), "portable": json.loads(json.dumps(values))}})
    assert name in data["exact"][1]["cases"]                    # the same results here: kept

    for changed in ({"exact": {**recorded, "output": "e" * 64}, "portable": values},     # other bits here
                    {"exact": recorded, "portable": {**values, "frobenius": 2.1}},     # values moved
                    {"exact": recorded, "portable": {**values, "n_moved": 3}}):        # other rows moved
        data = golden_file()
        with pytest.warns(UserWarning, match="elsewhere were dropped"):
            _merge(data, {name: changed})
        assert name not in data["exact"][1]["cases"]
        assert data["exact"][0]["cases"][name] == changed["exact"] and data["portable"][name] == changed["portable"]
