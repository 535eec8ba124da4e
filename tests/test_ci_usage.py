"""The README's "Use in CI" lines, run as written from the repository root (issue 10, item 2)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from train_fixtures import REPO


def ci_block() -> str:
    section = REPO.joinpath("README.md").read_text(encoding="utf-8").split("\n## Use in CI\n", 1)[1].split("\n## ")[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the CI section holds one sh block"
    return blocks[0]


def env_for(tmp_path) -> dict:
    return {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}",
            "TMPDIR": str(tmp_path)}


@pytest.fixture(scope="module")
def ci_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, str]:
    """The README's lines run once as written; (the run, the folder they wrote in)."""
    script = ci_block()
    for part in ("--dry-run", "--max-steps 20", "diff", "--check-frozen"):
        assert part in script
    # The same lines, and then where they wrote, for the checks below.
    script += 'echo "$work"\n'
    before = sorted(p.name for p in REPO.iterdir())
    result = subprocess.run(["bash", "-c", script], cwd=REPO, env=env_for(tmp_path_factory.mktemp("ci")),
                            capture_output=True, text=True, timeout=600)
    assert sorted(p.name for p in REPO.iterdir()) == before   # the dry run wrote no quickstart-out.txt
    return result, result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""


def test_the_readme_ci_lines_run_and_pass(ci_run):
    result, work = ci_run
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Dry run: every check passed")
    summary = json.loads(open(os.path.join(work, "summary.json")).read())
    assert summary["steps"] == 20 and summary["stopped_at_limit"] == "max_steps"
    assert summary["frozen"] == 5000 and summary["max_frozen_change"] == 0.0


def test_the_ci_check_fails_when_a_frozen_row_moved(ci_run, tmp_path):
    """The diff line is a real check: one frozen row off by one bit makes the block fail. The block's
    lines from the frozen list on, as written, on a copy of the run's output with that row changed (the
    lines before them, the dry run and the training, are the run above's)."""
    result, work = ci_run
    assert result.returncode == 0, result.stderr
    shutil.copy(os.path.join(work, "tuned.txt"), tmp_path / "tuned.txt")
    block = ci_block()
    tail = block[block.index("head -n 5000 data/sample"):]
    tamper = ('python -c "import sys; p = sys.argv[1]; t = open(p).read().split(chr(10)); '
              "w = t[3].split(' '); w[1] = repr(float(w[1]) + 1e-6); t[3] = ' '.join(w); "
              'open(p, \'w\').write(chr(10).join(t))" "$work/tuned.txt"\n')
    script = f"set -euo pipefail\nwork={shlex.quote(str(tmp_path))}\n{tamper}{tail}"
    result = subprocess.run(["bash", "-c", script], cwd=REPO, env=env_for(tmp_path), capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 1, result.stderr
    assert re.search(r"Error: 1 of \d+ frozen words changed or removed", result.stderr), result.stderr[-300:]
