"""What a new user types first, in an interpreter as fresh as a new virtual environment's (issue 45, item 1).

A module that reached a submodule through its parent (`importlib.util` after `import importlib`) worked only
where something else had imported the submodule first: here a `.pth` file in the system's site-packages did,
in a fresh venv nothing does, and `embedtune --help` ended in a traceback. So the commands run under
`python -S` (no site-packages start-up code at all, only their folders on sys.path), and every module of
embedtune/ and cli/ is checked for a submodule it uses without importing it.
"""

import ast
import importlib.machinery
import importlib.util
import os
import site
import subprocess
import sys
from pathlib import Path

import embedtune
from embedtune.cli.main import COMMANDS

ROOT = Path(embedtune.__file__).resolve().parent.parent   # the checkout whose embedtune is under test
SOURCES = [ROOT / "embedtune", ROOT / "cli"]


def _site_dirs() -> list[str]:
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return [d for d in dirs if Path(d).is_dir()]


# Run in a bare interpreter: the checkout first, then site-packages' folders, with none of their .pth code.
BARE_PRELUDE = (f"import sys\nsys.path[:0] = [{str(ROOT)!r}]\nsys.path.extend({_site_dirs()!r})\n"
                "assert 'importlib.util' not in sys.modules, 'the interpreter is not bare'\n")


def bare_python(code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-S", "-c", BARE_PRELUDE + code, *args], cwd=ROOT,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_the_bare_interpreter_has_no_importlib_util():
    """The premise of the tests below: in the interpreter they use, nothing has imported importlib.util
    (where something had, the missing import went unseen)."""
    proc = bare_python("import importlib, click\nprint(hasattr(importlib, 'util'))")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.strip() == "False"


# (arguments, the exit codes allowed, a text the output must hold)
FIRST_COMMANDS = [([], {0, 2}, "Usage: embedtune"),   # the help; click 8.2 on exits 2 (a usage error), 8.1 exited 0
                  (["--help"], {0}, "Usage: embedtune"),
                  (["-h"], {0}, "Commands:"),
                  (["--version"], {0}, embedtune.__version__),
                  (["trian"], {2}, "Error: No such command 'trian'; did you mean 'train'?"),
                  (["frobnicate"], {2}, "Error: No such command 'frobnicate'"),
                  *[([name, "--help"], {0}, f"Usage: embedtune {name}") for name in COMMANDS]]


def test_every_first_command_ends_cleanly_in_a_fresh_interpreter():
    code = "from embedtune.cli.main import main\nsys.argv = ['embedtune', *sys.argv[1:]]\nmain()\n"
    # All at once: each needs a fresh process, and together they take about as long as the slowest.
    procs = [(args, codes, text, bare_python(code, *args)) for args, codes, text in FIRST_COMMANDS]
    for args, expected_codes, text, proc in procs:
        out, err = proc.communicate(timeout=300)
        assert "Traceback" not in err and "Traceback" not in out, (args, err)
        assert proc.returncode in expected_codes, (args, proc.returncode, err)
        assert text in out + err, (args, out, err)


# ---------------------------------------------------------------------------------------------
# the class: a submodule reached through its parent without an import


def _spec(name: str):
    """`name`'s module spec, found without importing (or running) anything."""
    parent, _, child = name.rpartition(".")
    if not parent:
        return importlib.util.find_spec(name) if name not in sys.builtin_module_names else None
    parent_spec = _spec(parent)
    if parent_spec is None or parent_spec.submodule_search_locations is None:
        return None
    return importlib.machinery.PathFinder.find_spec(name, list(parent_spec.submodule_search_locations))


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[0] == "cli":
        parts.insert(0, "embedtune")   # cli/ installs as embedtune.cli (pyproject.toml)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _absolute(module: str, is_package: bool, level: int, name: str | None) -> str:
    if level == 0:
        return name or ""
    base = module.split(".")
    base = base[:len(base) - level + (1 if is_package else 0)]
    return ".".join(base + ([name] if name else []))


def unimported_submodule_uses(label: str, module: str, is_package: bool, text: str) -> list[tuple[str, int, str, str]]:
    """(label, line, parent, submodule) for each `parent.submodule` attribute read in the module's text where
    `submodule` is a module of the package `parent`, and the text imports it nowhere."""
    tree = ast.parse(text)
    names: dict[str, str] = {}   # a name the file binds by an import -> the module it may be
    imported: set[str] = set()   # every module the file imports, and their parents
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                imported.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
                names[alias.asname or parts[0]] = alias.name if alias.asname else parts[0]
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, is_package, node.level, node.module)
            parts = source.split(".")
            imported.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
            for alias in node.names:
                imported.add(f"{source}.{alias.name}")   # `from p import m` imports p.m when m is a module
                names[alias.asname or alias.name] = f"{source}.{alias.name}"
    uses = []
    for node in ast.walk(tree):
        # `name.attr` only: deeper chains (`a.b.c`) are the attribute `c` of the node `a.b`, whose own
        # first level is checked here, and whose deeper levels need an import of `a.b` anyway.
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)) or node.value.id not in names:
            continue
        parent = names[node.value.id]
        child = f"{parent}.{node.attr}"
        if child in imported:
            continue
        parent_spec = _spec(parent)
        if parent_spec is None or parent_spec.submodule_search_locations is None:
            continue
        if _spec(child) is not None:
            uses.append((label, node.lineno, parent, child))
    return uses


def missing_imports(sources: list[tuple[str, str, bool, str]]) -> list[str]:
    """One line per use of a submodule that neither the file nor its parent package imports."""
    uses = sorted({use for source in sources for use in unimported_submodule_uses(*source)})
    # A parent package that imports the submodule itself (os imports os.path) makes the use safe: asked of a
    # bare interpreter, where nothing else has imported anything.
    pairs = sorted({(parent, child) for _, _, parent, child in uses})
    code = ("import importlib\nfor parent, child in " + repr(pairs) + ":\n"
            "    print(hasattr(importlib.import_module(parent), child.rpartition('.')[2]))\n")
    proc = bare_python(code)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    bound = dict(zip(pairs, (line == "True" for line in out.split())))
    return [f"{label}:{line}: {child} used, never imported" for label, line, parent, child in uses
            if not bound[(parent, child)]]


def test_no_module_reaches_a_submodule_it_did_not_import():
    sources = [(str(path.relative_to(ROOT)), _module_name(path), path.name == "__init__.py",
                path.read_text(encoding="utf-8")) for folder in SOURCES for path in sorted(folder.rglob("*.py"))]
    assert len(sources) > 50
    missing = missing_imports(sources)
    assert not missing, "\n".join(missing)


def test_the_check_finds_a_submodule_used_without_its_import():
    """The check above can fail: cli/main.py before the fix is caught, os.path (which os imports) is not,
    nor a submodule the file imports."""
    text = ("import importlib\nimport os\nimport concurrent.futures\nimport xml\n\n"
            "def f(name):\n    importlib.util.find_spec(name)\n    os.path.join(name)\n"
            "    concurrent.futures.wait([])\n    return xml.dom\n")
    assert missing_imports([("probe.py", "embedtune.probe", False, text)]) == [
        "probe.py:7: importlib.util used, never imported", "probe.py:10: xml.dom used, never imported"]


# ---------------------------------------------------------------------------------------------
# importing the library prints nothing (issue 45, item 5)

# A CUDA driver whose cuInit fails, as on a machine with the driver and no GPU: TensorFlow's device probe
# then logs "E0000 ... failed call to cuInit" straight to file descriptor 2.
FAKE_DRIVER = """
int cuInit(unsigned int flags) { return 999; }
int cuDriverGetVersion(int *version) { *version = 12040; return 0; }
int cuGetErrorString(int error, const char **text) { *text = "no device (a test's driver)"; return 0; }
int cuGetErrorName(int error, const char **text) { *text = "CUDA_ERROR_UNKNOWN"; return 0; }
"""

IMPORTS = {
    # the library alone: nothing at all on either stream
    "library": "import embedtune\nimport embedtune.keras\n",
    # the caller's own `import keras` first (docs/keras.md): TensorFlow's import lines are the caller's;
    # from ours on, nothing, the first op included
    "after the caller's keras": "import keras\nimport os\nos.write(2, b'--\\n')\nos.write(1, b'--\\n')\n"
                                "import embedtune.keras\n",
}


def _fake_driver(folder: Path) -> dict:
    """LD_LIBRARY_PATH for a failing libcuda.so.1, where a C compiler can build one (else none: the probe's
    state is still checked below, and the streams are, with whatever driver this machine has)."""
    import shutil

    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None or not sys.platform.startswith("linux"):
        return {}
    (folder / "fake.c").write_text(FAKE_DRIVER)
    built = subprocess.run([compiler, "-shared", "-fPIC", "-o", folder / "libcuda.so.1", folder / "fake.c"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    return {"LD_LIBRARY_PATH": f"{folder}:{os.environ.get('LD_LIBRARY_PATH', '')}".rstrip(":")}


def test_importing_the_library_prints_nothing(tmp_path):
    env = {key: value for key, value in os.environ.items() if not key.startswith("TF_CPP")}
    env.update(_fake_driver(tmp_path))
    after = ("from tensorflow.python.eager import context\n"
             "probed = context.context()._physical_devices is not None\n"
             "import keras\nkeras.ops.ones(2)\nimport sys\nsys.stderr.write(f'probed={probed}')\n")
    procs = {name: subprocess.Popen([sys.executable, "-c", code + after], cwd=tmp_path, env=env, text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for name, code in IMPORTS.items()}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, (name, err)
        err, _, probed = err.rpartition("probed=")
        # the probe is done (nothing left for a later op to print), and what it printed was kept off
        assert probed == "True", (name, err)
        if name != "library":
            out, err = out.partition("--\n")[2], err.partition("--\n")[2]
        assert (out, err) == ("", ""), name


# ---------------------------------------------------------------------------------------------
# no test skips on a full `.[test]` install (issue 45, item 3)


def test_a_skip_no_machine_explains_fails_the_session(tmp_path):
    """tests/conftest.py fails a session in which a test skipped for a reason outside ALLOWED_SKIPS (a
    package missing from the test extra), and keeps one whose skips a machine explains."""
    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text(encoding="utf-8"))
    (tmp_path / "test_probe.py").write_text(
        "import pytest\n\ndef test_missing():\n    pytest.importorskip('embedtune_no_such_module')\n\n"
        "@pytest.mark.skipif(True, reason='no /dev/full')\ndef test_machine():\n    pass\n")
    runs = {which: subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
                                   f"test_probe.py::{which}"], cwd=tmp_path, capture_output=True, text=True,
                                  timeout=300)
            for which in ("test_missing", "test_machine")}
    assert runs["test_machine"].returncode == 0, runs["test_machine"].stdout
    assert runs["test_missing"].returncode == 1, runs["test_missing"].stdout
    assert "test_probe.py::test_missing: could not import 'embedtune_no_such_module'" in runs["test_missing"].stdout
