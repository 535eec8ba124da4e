"""CPU seconds per test of the suite: its own process's and those of the processes it started and waited for.

A pytest plugin (each xdist process loads it too) that appends one JSON line per test, set-up and
tear-down included (so a module fixture's runs count to the first test that uses it), to
$SUITE_CPU_OUT; then, run as a script, a table per file and the costliest tests:

    PYTHONPATH=benchmarks SUITE_CPU_OUT=/tmp/cpu.jsonl python -m pytest -q -p no:cacheprovider -p suite_cpu
    python benchmarks/suite_cpu.py /tmp/cpu.jsonl

"child" counts only children the test waited for (subprocess.run, Popen.wait), with their own waited
children: a process left to init is not counted. Compare CPU, not wall, on a shared machine.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import sys
import time

import pytest


def _cpu() -> tuple[float, float]:
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before, began = _cpu(), time.monotonic()
    yield
    after = _cpu()
    with open(os.environ.get("SUITE_CPU_OUT", "suite_cpu.jsonl"), "a", encoding="utf-8") as f:
        f.write(json.dumps({"id": item.nodeid, "self": after[0] - before[0], "child": after[1] - before[1],
                            "wall": time.monotonic() - began, "pid": os.getpid()}) + "\n")


def report(path: str, top: int = 30) -> None:
    rows = [json.loads(line) for line in open(path, encoding="utf-8")]
    files = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for r in rows:
        f = files[r["id"].split("::", 1)[0]]
        f[0] += r["self"]
        f[1] += r["child"]
        f[2] += 1
    own, children = sum(r["self"] for r in rows), sum(r["child"] for r in rows)
    print(f"{len(rows)} tests: {own + children:.1f} CPU-s ({own:.1f} in the test processes, {children:.1f} in "
          f"processes they started)\n\n  CPU-s    own  child  tests  file")
    for name, (o, c, n) in sorted(files.items(), key=lambda kv: -(kv[1][0] + kv[1][1])):
        print(f"{o + c:7.1f} {o:6.1f} {c:6.1f} {n:6d}  {name}")
    print("\n  CPU-s    own  child  test")
    for r in sorted(rows, key=lambda r: -(r["self"] + r["child"]))[:top]:
        print(f"{r['self'] + r['child']:7.1f} {r['self']:6.1f} {r['child']:6.1f}  {r['id']}")


if __name__ == "__main__":
    report(sys.argv[1])
