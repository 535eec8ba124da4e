"""How far the golden runs move on another CPU, and how far a real change moves them (tests/test_golden.py).

This session has one physical machine, so other CPUs are emulated by the settings that change the float
arithmetic the way another CPU does: numba compiled for other CPUs (NUMBA_CPU_NAME / NUMBA_CPU_FEATURES:
generic x86-64, Haswell and Zen 3 (AVX2), Zen 4 and Skylake-AVX512 (AVX-512), no FMA), XLA held to
narrower vector units (XLA_FLAGS=--xla_cpu_max_isa), oneDNN on and held to AVX2, other OpenBLAS kernels
(OPENBLAS_CORETYPE), numpy without AVX-512 (NPY_DISABLE_CPU_FEATURES), and other thread counts; "zen3"
and "zen4" combine them as on an AMD EPYC. Each variant runs every golden case in a fresh process (the
settings are read at import) and keeps its output and summary under DIR/VARIANT/CASE/. The real changes
run the same way: the learning rate times 1.001 and 1.1, one step fewer, and Adagrad's initial
accumulator and Adam's 1 - beta_2 times 1.001.

For each case it prints the largest relative distance (tests/test_golden.py's ``distances``; "exact parts
differ" where a part that must be equal on any machine differs) of every variant from the host run,
the tolerance that follows (FACTOR times the largest spread over the machine variants run, at least
FLOOR), and whether each real change falls outside it; then which variants give the bytes recorded on a
machine. ``--write`` puts the tolerances into tests/golden/train.json, with the host and the variants
they come from (``tolerance_from``). "zen4" gave an AMD EPYC's recorded bytes for every case (the
EPYC that recorded them, benchmarks/README.md): run on a real Intel Xeon, ``--only zen4,zen3`` measures
the two kinds of machine CI runs on.

    python benchmarks/golden_spread.py [--dir DIR] [--only VARIANT,...] [--write]

Variants already kept under DIR are reused, not run again (delete the folder to measure again).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

FACTOR = 4.0
FLOOR = 1e-6
NO_AVX512 = "X86_V4 AVX512_ICL AVX512_SPR"

# name -> (environment, change): change None = the same run on an emulated machine.
VARIANTS = {
    "host": ({}, None),
    "numba-generic": ({"NUMBA_CPU_NAME": "generic"}, None),
    "numba-haswell": ({"NUMBA_CPU_NAME": "haswell", "NUMBA_CPU_FEATURES": "+sse2"}, None),
    "numba-znver3": ({"NUMBA_CPU_NAME": "znver3", "NUMBA_CPU_FEATURES": "+sse2"}, None),
    "numba-znver4": ({"NUMBA_CPU_NAME": "znver4", "NUMBA_CPU_FEATURES": "+sse2"}, None),
    "numba-skx": ({"NUMBA_CPU_NAME": "skylake-avx512", "NUMBA_CPU_FEATURES": "+sse2"}, None),
    "numba-nofma": ({"NUMBA_CPU_FEATURES": "no-fma"}, None),   # the host's features less fma (below)
    "xla-avx2": ({"XLA_FLAGS": "--xla_cpu_max_isa=AVX2"}, None),
    "xla-sse42": ({"XLA_FLAGS": "--xla_cpu_max_isa=SSE4_2"}, None),
    "onednn-on": ({"TF_ENABLE_ONEDNN_OPTS": "1"}, None),
    "onednn-avx2": ({"TF_ENABLE_ONEDNN_OPTS": "1", "ONEDNN_MAX_CPU_ISA": "AVX2"}, None),
    "blas-zen": ({"OPENBLAS_CORETYPE": "Zen"}, None),
    "blas-sandy": ({"OPENBLAS_CORETYPE": "Sandybridge"}, None),
    "numpy-avx2": ({"NPY_DISABLE_CPU_FEATURES": NO_AVX512}, None),
    "threads-1": ({}, ("threads", 1)),
    "threads-4": ({}, ("threads", 4)),
    "zen3": ({"NUMBA_CPU_NAME": "znver3", "NUMBA_CPU_FEATURES": "+sse2", "XLA_FLAGS": "--xla_cpu_max_isa=AVX2",
              "OPENBLAS_CORETYPE": "Zen", "NPY_DISABLE_CPU_FEATURES": NO_AVX512}, None),
    "zen4": ({"NUMBA_CPU_NAME": "znver4", "NUMBA_CPU_FEATURES": "+sse2", "OPENBLAS_CORETYPE": "Zen"}, None),
    "lr-1e-3": ({}, ("lr", 1.001)),
    "lr-1e-1": ({}, ("lr", 1.1)),
    "one-step-fewer": ({}, ("steps", -1)),
    "constants-1e-3": ({}, ("constants", 1.001)),
}
CHANGES = ("lr-1e-3", "lr-1e-1", "one-step-fewer", "constants-1e-3")
# What a change sets itself (the summary echoes it): masked, so that a change is caught by the arithmetic.
ECHOED = ("lr", "steps", "words_done", "stopped_at_limit")


def host_features_without_fma() -> str:
    import llvmlite.binding as llvm

    return llvm.get_host_cpu_features().flatten().replace("+fma,", "-fma,")


def more_options(change, host_summary: Path) -> list | None:
    """The options a variant adds to a case; None where the change does not apply (no lr, no steps)."""
    if change is None:
        return []
    what, value = change
    if what == "threads":
        return ["--threads", value]
    if what == "constants":
        return []
    summary = json.loads(host_summary.read_text())
    if what == "lr":
        return None if summary.get("lr") is None else ["--lr", repr(summary["lr"] * value)]
    return None if not summary.get("steps") else ["--max-steps", summary["steps"] + value]


def change_constants(factor: float) -> None:
    """Adagrad's initial accumulator times ``factor``, and Adam's 1 - beta_2 likewise (TensorFlow's step;
    a compiled kernel's constants are fixed when numba compiles it, so only the accumulator reaches it)."""
    from embedtune.training import optimizers

    optimizers.ADAGRAD_INITIAL_ACCUMULATOR *= factor
    optimizers.Adagrad.__init__.__defaults__ = (optimizers.ADAGRAD_INITIAL_ACCUMULATOR, optimizers.EPSILON)
    beta_2 = 1 - (1 - optimizers.ADAM_BETA_2) * factor
    optimizers.Adam.__init__.__defaults__ = (optimizers.ADAM_BETA_1, beta_2, optimizers.EPSILON)


def collect(folder: Path, change) -> None:
    """Run every golden case here (in this process, with its environment) into ``folder``."""
    import test_golden as golden

    if change and change[0] == "constants":
        change_constants(change[1])
    for name in [*golden.CASES, golden.TWO_WORKERS]:
        more = more_options(change, folder.parent / "host" / name / "summary.json")
        if more is None:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            output, summary = golden.run_case(name, Path(tmp), more)
            (folder / name).mkdir(parents=True, exist_ok=True)
            shutil.copy(output, folder / name / "out.txt")
            shutil.copy(summary, folder / name / "summary.json")
        print(name, file=sys.stderr, flush=True)


def run_variant(root: Path, name: str) -> None:
    if (root / name / "done").exists():
        return
    env, change = VARIANTS[name]
    env = {**os.environ, **env}
    if env.get("NUMBA_CPU_FEATURES") == "no-fma":
        env["NUMBA_CPU_FEATURES"] = host_features_without_fma()
    print(f"== {name}", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, __file__, "--collect", str(root / name), "--change", json.dumps(change)],
                   env=env, check=True)
    (root / name / "done").touch()


def spread(root: Path, names: list[str]) -> dict:
    """{case: {variant: (what differs among the exact parts, largest relative distance from the host run
    (None where other rows moved)), or "n/a"}}."""
    import test_golden as golden

    table: dict = {}
    for case in [*golden.CASES, golden.TWO_WORKERS]:
        base = root / "host" / case
        want = golden.portable(base / "out.txt", base / "summary.json")
        for name in names:
            there = root / name / case
            if not (there / "out.txt").exists():
                table.setdefault(case, {})[name] = "n/a"
                continue
            got = golden.portable(there / "out.txt", there / "summary.json")
            if name in CHANGES:
                got["summary"].update({k: want["summary"][k] for k in ECHOED if k in want["summary"]})
            wrong = golden.mismatches(got, want)
            gap = max(golden.distances(got, want).values()) if got["sample"].keys() == want["sample"].keys() else None
            table.setdefault(case, {})[name] = (wrong, gap)
    return table


def reproduced(root: Path, names: list[str]) -> None:
    """Print, for each variant, the recorded machines whose exact hashes it gives (all cases)."""
    import test_golden as golden

    recorded = golden.load_golden()["exact"]
    for name in ["host", *names]:
        cases = [*golden.CASES, golden.TWO_WORKERS]
        if not all((root / name / case / "out.txt").exists() for case in cases):
            continue
        got = {case: golden.exact(root / name / case / "out.txt", root / name / case / "summary.json")
               for case in cases}
        same = [entry["fingerprint"]["cpu"] for entry in recorded
                if all(entry["cases"].get(case) == got[case] for case in cases)]
        if same:
            print(f"{name}: every case's output and summary bytes as recorded on {', '.join(same)}")


def report(table: dict) -> dict:
    """Print the table; the tolerance of each case."""
    tolerance = {}
    for case, row in table.items():
        machines = {k: v for k, v in row.items() if k not in CHANGES and v != "n/a"}
        broken = {k: v[0] for k, v in machines.items() if v[0] or v[1] is None}
        assert not broken, f"{case}: exact parts differ on an emulated machine: {broken}"
        tolerance[case] = max(FLOOR, FACTOR * max(v[1] for v in machines.values()))
        print(f"\n{case}: tolerance {tolerance[case]:.1e}")
        for name, value in row.items():
            if value == "n/a":
                print(f"  {name:16s} n/a")
                continue
            wrong, gap = value
            shown = ("exact parts differ; " if wrong else "") + ("other rows moved" if gap is None else f"{gap:.2e}")
            caught = "" if name not in CHANGES else "  caught by the floats" if gap is not None and \
                gap > tolerance[case] else "  caught by the exact parts" if wrong else \
                "  (the run does not use it)" if gap == 0 else "  NOT caught"
            print(f"  {name:16s} {shown}{caught}")
    return tolerance


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "golden-spread")
    parser.add_argument("--only", help="variants to run, comma-separated (host always)")
    parser.add_argument("--write", action="store_true",
                        help="write the tolerances from the variants run into tests/golden/train.json, naming them")
    parser.add_argument("--collect", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--change", type=json.loads, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.collect:
        collect(args.collect, args.change)
        return
    names = ["host", *[n for n in (args.only.split(",") if args.only else VARIANTS) if n != "host"]]
    for name in names:
        run_variant(args.dir, name)
    tolerance = report(spread(args.dir, names[1:]))
    print()
    reproduced(args.dir, names[1:])
    if args.write:
        import test_golden as golden

        data = golden.load_golden()
        data["tolerance"] = tolerance
        machines = [n for n in names[1:] if n not in CHANGES]
        data["tolerance_from"] = (f"{FACTOR:g} x the largest distance (at least {FLOOR:g}) from the run on "
                                  f"{golden.fingerprint()['cpu']} of: {', '.join(machines)} "
                                  f"(benchmarks/golden_spread.py --only {','.join(names[1:])} --write)")
        golden.write_golden(data)


if __name__ == "__main__":
    main()
