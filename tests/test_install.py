"""An editable install works from the folder that holds the clone (issue 35).

A clone is usually a folder named embedtune; run from the folder above it, Python's own search finds that
folder first. With setuptools' import-hook editable install (what a package-dir mapping gets), that search
won and `import embedtune` gave an empty namespace package (`embedtune.fine_tune`: AttributeError). The
checkout's root on sys.path (no mapping; cli/ reaches embedtune.cli through the link embedtune/cli) makes
the real package win. This runs the README's install for real: a copy of the checkout in a folder named
embedtune, a fresh virtual environment (the system's packages seen through it), `pip install -e`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHECKOUT = ("pyproject.toml", "README.md", "embedtune", "cli")


def test_an_editable_install_imports_the_package_from_the_folder_above_the_clone(tmp_path):
    clone = tmp_path / "embedtune"
    clone.mkdir()
    for name in CHECKOUT:   # the working tree as it is (a git clone would take the last commit)
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, clone / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(source, clone / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
                                "--no-deps", "--disable-pip-version-check", "-e", str(clone)],
                               capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    code = ("import embedtune, embedtune.cli.main as cli; "
            "print(embedtune.fine_tune.__module__, embedtune.__file__, cli.__file__)")
    run = subprocess.run([str(python), "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    module, package_file, cli_file = run.stdout.split()
    assert module == "embedtune.api"
    assert Path(package_file) == clone / "embedtune" / "__init__.py"
    assert Path(cli_file).resolve() == (clone / "cli" / "main.py").resolve()
    # and the command, from there too
    version = subprocess.run([str(venv / "bin" / "embedtune"), "--version"], cwd=tmp_path, capture_output=True,
                             text=True, timeout=120)
    assert version.returncode == 0 and "embedtune, version" in version.stdout, version.stderr
