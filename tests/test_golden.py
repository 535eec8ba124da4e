"""Golden runs: the bytes of deterministic `embedtune train` runs, held fixed while the code moves.

Each case is a short deterministic run on the shipped samples; its output file and its `--json` summary
(less timings and paths) must hash to what tests/golden/train.json recorded. A change of bits that is
meant needs its reason in the commit that records the new hashes:

    EMBEDTUNE_GOLDEN=record python -m pytest -q tests/test_golden.py

TensorFlow's and numba's float32 arithmetic is exact only per machine (vector width, oneDNN's kernels),
so the hashes hold where they were recorded: the file keeps that machine's fingerprint (CPU model and
flags, package versions), and elsewhere these tests skip, saying so. Interrupted-and-resumed runs giving
an uninterrupted run's bytes is tests/test_resume.py's; here a run that writes checkpoints is one case.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from train_fixtures import REPO, SAMPLE_CORPUS, SAMPLE_VECTORS, run

GOLDEN = Path(__file__).parent / "golden" / "train.json"
RECORD = os.environ.get("EMBEDTUNE_GOLDEN") == "record"
DATA = REPO / "data" / "sample"
GLOSSES = DATA / "wordnet-glosses.train.txt"

# Summary keys that vary with where the test runs (paths); timings (*seconds, *_per_second) vary too.
PATHS = {"vectors", "corpus", "output", "valid", "lexicon", "antonyms", "checkpoint_dir", "logdir"}

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


def digest(output: Path, summary: Path) -> dict:
    s = json.loads(summary.read_text())
    kept = {k: v for k, v in sorted(s.items()) if k not in PATHS and not k.endswith(("seconds", "per_second"))}
    return {"output": hashlib.sha256(output.read_bytes()).hexdigest(),
            "summary": hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest(),
            "steps": s.get("steps"), "loss_last": s.get("loss_last")}


@pytest.fixture(scope="module")
def recorded():
    if RECORD:
        data = {"fingerprint": fingerprint(), "cases": {}}
        yield data
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        return
    data = json.loads(GOLDEN.read_text())
    if data["fingerprint"] != fingerprint():
        pytest.skip(f"golden hashes were recorded on {data['fingerprint']}; this is {fingerprint()} "
                    f"(float32 bits differ by machine: record them here with EMBEDTUNE_GOLDEN=record)")
    yield data


def check(recorded, name: str, got: dict) -> None:
    if RECORD:
        recorded["cases"][name] = got
        return
    assert name in recorded["cases"], f"{name}: no golden hashes recorded (EMBEDTUNE_GOLDEN=record)"
    assert got == recorded["cases"][name], name


def options(corpus, extra, tmp_path, output: Path, summary: Path) -> list:
    # The freeze list: every third of the sample's first 6,000 words.
    words = SAMPLE_VECTORS.read_text(encoding="utf-8").splitlines()[:6000:3]
    (tmp_path / "freeze.txt").write_text("".join(line.split(" ", 1)[0] + "\n" for line in words), encoding="utf-8")
    extra = [str(o).replace("{tmp}", str(tmp_path)) for o in extra]
    return ["train", SAMPLE_VECTORS, *([corpus] if corpus else []), "-o", output, "--seed", 1, "--deterministic",
            "--epochs", 2, "--max-steps", STEPS, "--json", summary, *extra]


@pytest.mark.parametrize("name", CASES)
def test_a_deterministic_run_gives_its_recorded_bytes(name, recorded, tmp_path):
    corpus, extra = CASES[name]
    output, summary = tmp_path / "out.txt", tmp_path / "summary.json"
    result = run(["-q", *options(corpus, extra, tmp_path, output, summary)])
    assert result.exit_code == 0, result.output
    check(recorded, name, digest(output, summary))


def test_two_workers_give_their_recorded_bytes(recorded, tmp_path):
    output, summary = tmp_path / "out.txt", tmp_path / "summary.json"
    args = options(SAMPLE_CORPUS, ["--objective", "sgns", "--freeze-top", 5000, "--workers", 2], tmp_path, output,
                   summary)
    done = subprocess.run([sys.executable, "-m", "embedtune.cli.main", "-q", *map(str, args)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    check(recorded, "sgns-two-workers", digest(output, summary))
