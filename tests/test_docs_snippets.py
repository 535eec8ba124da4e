"""Every code block of README.md and docs/*.md runs as written (issue 45, item 4).

The convention, for whoever writes docs:

- A ```` ```python ```` block runs with python, a ```` ```sh ```` block with bash (`set -euo pipefail`), each page's
  blocks in order in one folder of their own, so a block may use what an earlier one of its page wrote.
- That folder holds the shipped sample (`data/`, `configs/`) and the file names the docs use for a user's
  own files, made from the sample: `glove.6B.50d.txt`, `VECTORS` (the sample's GloVe words), `CORPUS`
  (100 of its lines), `tuned.txt` and `quickstart-out.txt` with `frozen.txt` (their first 5,000 words as in
  the sample, bit for bit), `vectors.bin`,
  `GoogleNews-vectors-negative300.bin` (word2vec binary), `corpus.txt.gz`, `vectors.txt.gz`,
  `my_pairs.tsv`, `my_analogies.txt`, `words.txt`, `my-run.toml`. A block that needs another file of the
  user's names one of these.
- Kept cheap: `embedtune train` runs with `--max-steps 2` added (every check, the load, the new words, the
  write and its read-back still run); `xdg-open`, `open` and `tensorboard` check their argument (the page,
  the projector's files) instead of opening a window or serving forever.
- A block that cannot run as written (a synopsis with metavariables in brackets, a fragment of a plugin,
  a command that needs WordNet installed) says so in its info string: ```` ```sh illustrative ````
  (GitHub still highlights it as sh). Such blocks are few: ILLUSTRATIVE_AT_MOST.
- The README's "Two commands" block are run by .ci/run, in a fresh virtual environment (they install). Three
  more README sections are run as written by a test of their own, which checks what they print or write
  (RUN_ELSEWHERE): running them here too would check nothing more and cost a process each (one a
  TensorFlow start).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SAMPLE_VECTORS = ROOT / "data" / "sample" / "glove.6B.50d.20k.txt"
SAMPLE_CORPUS = ROOT / "data" / "sample" / "lee_background.cor"
ILLUSTRATIVE_AT_MOST = 3
RUN_BY_CI = ("README.md", "Two commands")   # .ci/run runs them in a fresh venv
# Sections whose blocks another test runs as written, read from README.md there: (page, section) -> that file.
RUN_ELSEWHERE = {RUN_BY_CI: ".ci/run",
                 ("README.md", "Use in CI"): "tests/test_ci_usage.py",   # as written, with its --max-steps 20
                 ("README.md", "Python"): "tests/test_api.py",
                 ("README.md", "Your own Keras model"): "tests/test_keras.py"}
BLOCK = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.S | re.M)


@dataclass
class Block:
    page: Path
    line: int
    language: str
    illustrative: bool
    section: str
    text: str

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)} line {self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in BLOCK.finditer(text):
        info = match.group(1).split()
        headings = re.findall(r"^#+ (.*)$", text[:match.start()], re.M)
        found.append(Block(page, text.count("\n", 0, match.start()) + 1, info[0] if info else "",
                           "illustrative" in info[1:], headings[-1] if headings else "", match.group(2)))
    return found


def commands(block: Block) -> list[str]:
    """The block's logical lines (continuations joined), comments and blank lines left out."""
    text = block.text.replace("\\\n", " ")
    lines = (re.sub(r"\s+#.*$" if block.language == "sh" else r"\s+#[^'\"]*$", "", line).strip()
             for line in text.splitlines())
    return [" ".join(line.split()) for line in lines if line and not line.startswith("#")]


def runnable(page: Path) -> list[Block]:
    """The page's blocks to run: python and sh, neither illustrative nor run elsewhere, and not repeating an earlier
    page's (every command of it run by an earlier page, from the same starting folder: the test's time)."""
    earlier = {line for before in PAGES[:PAGES.index(page)] for b in _own(before) for line in commands(b)}
    return [b for b in _own(page) if b.language == "python" or not set(commands(b)) <= earlier]


def _own(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.language in ("python", "sh") and not b.illustrative
            and (page.name, b.section) not in RUN_ELSEWHERE]


def test_the_sections_run_elsewhere_are_read_there_and_hold_blocks():
    """Each section left to another test holds a block, and that file still reads it (by its heading):
    a test that stopped running it, or a heading renamed, fails here instead of leaving the block unrun."""
    for (page, section), runner in RUN_ELSEWHERE.items():
        assert [b for b in blocks(ROOT / page) if b.section == section], (page, section)
        assert f"## {section}" in (ROOT / runner).read_text(encoding="utf-8"), (runner, section)


def test_illustrative_blocks_are_few_and_the_rest_are_python_or_sh():
    every = [b for page in PAGES for b in blocks(page)]
    illustrative = [b.where() for b in every if b.illustrative]
    assert len(illustrative) <= ILLUSTRATIVE_AT_MOST, illustrative
    # a block in another language that holds a command would escape the test: only these are allowed
    others = {b.language for b in every} - {"python", "sh", "toml", "text", "json", ""}
    assert not others, others
    ci = [b for b in every if (b.page.name, b.section) == RUN_BY_CI]
    assert [b.text.strip() for b in ci] == ["pip install -e . && embedtune train --config configs/quickstart.toml",
                                            "pip install -e '.[test]' && python -m pytest -q"]


# --- the folder each page's blocks run in ----------------------------------------------------------

EMBEDTUNE_SHIM = """#!{python}
import sys
sys.path.insert(0, {root!r})
args = sys.argv[1:]
if next((arg for arg in args if not arg.startswith("-")), None) == "train":
    args += ["--max-steps", "2"]   # the last one wins over a block's own
sys.argv = ["embedtune", *args]
from embedtune.cli.main import main
main()
"""
OPEN_SHIM = '#!/bin/sh\ntest -s "$1" || {{ echo "{name}: no page $1" >&2; exit 1; }}\n'
TENSORBOARD_SHIM = """#!/bin/sh
[ "$1" = --logdir ] && test -s "$2/projector_config.pbtxt" || { echo "tensorboard: no projector in $2" >&2; exit 1; }
"""


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    return make_template(tmp_path_factory.mktemp("docs-template"))


def make_template(folder: Path) -> Path:
    from embedtune import load_vectors, save_vectors

    for name in ("data", "configs"):
        (folder / name).symlink_to(ROOT / name)
    for name in ("glove.6B.50d.txt", "VECTORS"):
        (folder / name).symlink_to(SAMPLE_VECTORS)
    lines = SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines(keepends=True)[:100]
    (folder / "CORPUS").write_text("".join(lines), encoding="utf-8")
    with gzip.open(folder / "corpus.txt.gz", "wt", encoding="utf-8") as out:
        out.write("".join(lines))
    vectors = load_vectors(SAMPLE_VECTORS)
    save_vectors(vectors, folder / "vectors.bin", "word2vec-binary")
    save_vectors(vectors, folder / "GoogleNews-vectors-negative300.bin", "word2vec-binary")
    with gzip.open(folder / "vectors.txt.gz", "wb") as out:
        out.write(SAMPLE_VECTORS.read_bytes())
    vectors.matrix[5000:] *= np.float32(1.01)   # a tuned file: the first 5,000 rows kept
    save_vectors(vectors, folder / "tuned.txt", "glove")
    shutil.copyfile(folder / "tuned.txt", folder / "quickstart-out.txt")   # configs/quickstart.toml's output
    (folder / "frozen.txt").write_text("\n".join(vectors.words[:5000]) + "\n", encoding="utf-8")
    (folder / "words.txt").write_text("france\ngermany\nparis\nberlin\n", encoding="utf-8")
    (folder / "my-run.toml").write_text("[vocab]\nmin_count = 5\n", encoding="utf-8")
    (folder / "my_pairs.tsv").write_text("king\tqueen\t8.5\ncar\tautomobile\t9.0\ncup\tcoffee\t6.5\n"
                                         "stock\tjaguar\t0.9\nnoon\tstring\t0.5\n", encoding="utf-8")
    (folder / "my_analogies.txt").write_text(": capitals\nathens greece berlin germany\n"
                                             "paris france rome italy\nberlin germany madrid spain\n",
                                             encoding="utf-8")
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    shims = {"embedtune": EMBEDTUNE_SHIM.format(python=sys.executable, root=str(ROOT)),
             "xdg-open": OPEN_SHIM.format(name="xdg-open"), "open": OPEN_SHIM.format(name="open"),
             "tensorboard": TENSORBOARD_SHIM}
    for name, text in shims.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return folder


# A page's python blocks that follow one another run in one interpreter, each in a namespace of its own as
# a fresh `python -c` would give it, so that a name an earlier block defined is still an error: the pages
# about Keras would otherwise import TensorFlow once a block. A block's traceback names it (its page and
# line); a block that exits with 0 lets the next one run, as it would by hand.
PYTHON_BLOCKS = """
import json, sys
for where, text in json.loads(sys.argv[1]):
    try:
        exec(compile(text, where, "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    except SystemExit as stop:
        if stop.code not in (None, 0):
            raise
"""


def run_blocks(blocks: list[Block], folder: Path) -> subprocess.CompletedProcess:
    """One sh block (bash), or python blocks of a page in order (one interpreter, PYTHON_BLOCKS)."""
    env = {**os.environ, "PATH": f"{folder / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    if blocks[0].language == "python":
        assert all(block.language == "python" for block in blocks)
        command = [sys.executable, "-c", PYTHON_BLOCKS, json.dumps([[b.where(), b.text] for b in blocks])]
    else:
        (block,) = blocks
        command = ["bash", "-euo", "pipefail", "-c", block.text]
    return subprocess.run(command, cwd=folder, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=600)


def run_block(block: Block, folder: Path) -> subprocess.CompletedProcess:
    return run_blocks([block], folder)


def turns(page: Path) -> list[list[Block]]:
    """The page's runnable blocks in order, python blocks that follow one another together."""
    out: list[list[Block]] = []
    for block in runnable(page):
        if block.language == "python" and out and out[-1][0].language == "python":
            out[-1].append(block)
        else:
            out.append([block])
    return out


@pytest.mark.parametrize("page", [p for p in PAGES if runnable(p)], ids=lambda p: p.name)
def test_every_block_runs_as_written(page, template, tmp_path):
    folder = tmp_path / "work"
    shutil.copytree(template, folder, symlinks=True)
    for blocks in turns(page):
        done = run_blocks(blocks, folder)
        where = ", ".join(block.where() for block in blocks)
        assert done.returncode == 0, f"{where} exited {done.returncode}:\n{done.stderr[-3000:]}"
        assert "Traceback" not in done.stderr, f"{where}:\n{done.stderr[-3000:]}"


def test_a_block_that_fails_fails_the_test(template, tmp_path):
    """The runner above sees a block's failure: a Python name never defined (docs/keras.md's first block
    before issue 45 used x and y), a failing command in the middle of a block."""
    folder = tmp_path / "work"
    shutil.copytree(template, folder, symlinks=True)
    undefined = Block(ROOT / "README.md", 1, "python", False, "", "import numpy as np\nprint(np.mean(x))\n")
    failing = Block(ROOT / "README.md", 1, "sh", False, "", "embedtune inspect no-such-file.txt\necho done\n")
    assert run_block(undefined, folder).returncode != 0
    assert run_block(failing, folder).returncode != 0
    # python blocks in one interpreter: a name an earlier block defined is not defined in the next, an
    # error in the last block is seen, and a block's sys.exit(0) does not end the blocks after it
    defines = Block(ROOT / "README.md", 1, "python", False, "", "import numpy as np\nx = np.ones(3)\n")
    exits = Block(ROOT / "README.md", 5, "python", False, "", "import sys\nsys.exit(0)\n")
    uses = Block(ROOT / "README.md", 9, "python", False, "", "print(np.mean(x))\n")
    done = run_blocks([defines, exits, uses], folder)
    assert done.returncode != 0 and "README.md line 9" in done.stderr and "NameError" in done.stderr, done.stderr
    assert run_blocks([defines, exits, Block(ROOT / "README.md", 9, "python", False, "", "print(1)\n")],
                      folder).returncode == 0
    stops = Block(ROOT / "README.md", 5, "python", False, "", "import sys\nsys.exit(3)\n")
    assert run_blocks([defines, stops, uses], folder).returncode == 3
