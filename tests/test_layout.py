"""The package's shape (issue 25): no import circle anywhere, one concern a file, about 500 lines at most.

Imports are read with ast, those inside functions and under ``if TYPE_CHECKING:`` included (a lazy import
hides a circle and an annotation's import is one a type checker follows; neither removes it).
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MAX_LINES = 500


def sources() -> dict[str, Path]:
    """Module name -> file, for embedtune/ and cli/ (installed as embedtune.cli)."""
    found = {}
    for folder, prefix in ((REPO / "embedtune", ("embedtune",)), (REPO / "cli", ("embedtune", "cli"))):
        for path in folder.rglob("*.py"):
            parts = prefix + path.relative_to(folder).with_suffix("").parts
            found[".".join(parts).removesuffix(".__init__")] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The embedtune modules ``name`` imports. ``from package import module`` names the module, not
    the package (whose __init__ runs first in any case)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            modules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known]
            out.update(modules)
            if len(modules) < len(node.names):
                out.add(base)
    return {m for m in out if m in known and m != name}


def test_no_import_circle_in_the_package():
    files = sources()
    graph = {name: imports(name, path, set(files)) for name, path in files.items()}
    circles = []

    def visit(node, path, done):
        for nxt in sorted(graph[node]):
            if nxt in path:
                circles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in done:
                visit(nxt, path + [nxt], done)
        done.add(node)

    done: set[str] = set()
    for name in sorted(graph):
        if name not in done:
            visit(name, [name], done)
    assert circles == [], "\n".join(" -> ".join(c) for c in circles)


def test_the_reader_catches_a_circle_hidden_in_a_function_or_an_annotation(tmp_path):
    """The check above can fail: a lazy import, or one for annotations only, back to a module that
    imports this one is a circle (issue 36: config and the objectives were one, through TYPE_CHECKING)."""
    a = tmp_path / "a.py"
    a.write_text("import pkg.b\n")
    b = tmp_path / "b.py"
    b.write_text("def f():\n    from pkg import a\n\nif TYPE_CHECKING:\n    import pkg.c\n")
    known = {"pkg.a", "pkg.b", "pkg.c"}
    assert imports("pkg.a", a, known) == {"pkg.b"}
    assert imports("pkg.b", b, known) == {"pkg.a", "pkg.c"}


def test_the_config_and_the_objectives_are_no_circle():
    """Named on its own (issue 36, item 6): the config reads the registry; nothing under
    embedtune.objectives reaches embedtune.config, by any import."""
    files = sources()
    graph = {name: imports(name, path, set(files)) for name, path in files.items()}
    assert "embedtune.objectives" in graph["embedtune.config"]   # the one direction: config reads the registry

    def reach(start):
        seen, todo = set(), [start]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        return seen

    objectives = [name for name in graph if name == "embedtune.objectives" or name.startswith("embedtune.objectives.")]
    assert [name for name in objectives if "embedtune.config" in reach(name)] == []


def test_every_source_file_is_at_most_about_500_lines():
    long = {str(path.relative_to(REPO)): n for path in sources().values()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def test_every_package_folder_is_installed():
    """pyproject.toml lists the packages by name (cli/ installs as embedtune.cli): a folder left out
    would be missing from a wheel, though an editable install from the checkout still finds it."""
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    folders = {name for name, path in sources().items() if path.name == "__init__.py"}
    assert folders == listed


# Private state read from outside its object, left as it is (none today).
KNOWN_PRIVATE_READS: set[str] = set()


def private_reads(paths: list[Path], root: Path) -> set[str]:
    """``obj._name`` where ``_name`` is an object's own (assigned as ``self._name``, or a method or property
    of a class here) and ``obj`` is not that object: not ``self``, ``cls``, ``super()``, ``type(self)``
    or a class of the same module."""
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in paths}
    private = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and node.attr.startswith("_")
                    and isinstance(node.value, ast.Name) and node.value.id == "self"):
                private.add(node.attr)
            elif isinstance(node, ast.ClassDef):
                private.update(part.name for part in node.body if isinstance(part, ast.FunctionDef))
    private = {name for name in private if name.startswith("_") and not name.endswith("__")}
    found = set()
    for path, tree in trees.items():
        own = {"self", "cls", "super()", "type(self)"} | {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in private and ast.unparse(node.value) not in own:
                found.add(f"{path.relative_to(root).as_posix()}: {ast.unparse(node)}")
    return found


def test_no_object_reads_another_objects_private_state():
    """An object offers what others need under a public name (issue 36: the trainer's tables, the corpus's
    file, a source's parking); a read of ``other._state`` couples two objects through what one may change."""
    assert private_reads(list(sources().values()), REPO) - KNOWN_PRIVATE_READS == set()


def test_the_reader_catches_a_private_read(tmp_path):
    """The check above can fail: another object's private attribute or method, read or set."""
    (tmp_path / "a.py").write_text("class A:\n    def __init__(self):\n        self._rows = 1\n\n"
                                   "    def _step(self):\n        return self._rows + A._step.__name__.__len__()\n")
    (tmp_path / "b.py").write_text("def f(a):\n    a._rows = a._step()\n    return type(a)._step\n")
    assert private_reads([tmp_path / "a.py", tmp_path / "b.py"], tmp_path) == {
        "b.py: a._rows", "b.py: a._step", "b.py: type(a)._step"}


# The names by which the suite's hooks and fixtures receive pytest's own objects (its items, config,
# session, reports, requests, fixtures): a private attribute of one of them is pytest's to change.
PYTEST_OBJECTS = {"item", "items", "nextitem", "config", "session", "report", "request", "metafunc", "callspec",
                  "parser", "terminalreporter", "fixturedef", "node", "pytestconfig", "pytester",
                  "monkeypatch", "tmp_path_factory", "capsys", "capfd", "caplog", "recwarn"}


def pytest_private_reads(paths: list[Path], root: Path) -> set[str]:
    """``x._name`` where ``x`` (or the name it starts from) is one of PYTEST_OBJECTS, and any import of
    ``_pytest``."""
    found = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.endswith("__"):
                base = node.value
                while isinstance(base, (ast.Attribute, ast.Call, ast.Subscript)):
                    base = base.func if isinstance(base, ast.Call) else base.value
                if isinstance(base, ast.Name) and base.id in PYTEST_OBJECTS:
                    found.add(f"{path.relative_to(root).as_posix()}: {ast.unparse(node)}")
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                found.update(f"{path.relative_to(root).as_posix()}: import {name}" for name in names
                             if name.split(".")[0] == "_pytest")
    return found


def test_the_suite_uses_only_pytests_public_interface():
    """conftest.py groups tests by their fixtures' parameters through ``item.callspec`` and the parametrize
    marks, not ``item._fixtureinfo`` (issue 47): a pytest release may change what it keeps privately."""
    paths = sorted((REPO / "tests").glob("*.py")) + sorted((REPO / "benchmarks").glob("*.py"))
    assert pytest_private_reads(paths, REPO) == set()


def test_the_reader_catches_a_private_read_of_pytests_objects(tmp_path):
    """The check above can fail: a hook's item, a fixture's request, a nested attribute, an import."""
    (tmp_path / "conftest.py").write_text(
        "from _pytest.fixtures import FixtureDef\n\n"
        "def pytest_collection_modifyitems(config, items):\n"
        "    defs = items[0]._fixtureinfo.name2fixturedefs\n"
        "    return config.pluginmanager._name2plugin, defs\n\n"
        "def fixture(request):\n    return request.node.callspec._arg2scope\n")
    assert pytest_private_reads([tmp_path / "conftest.py"], tmp_path) == {
        "conftest.py: import _pytest.fixtures", "conftest.py: items[0]._fixtureinfo",
        "conftest.py: config.pluginmanager._name2plugin", "conftest.py: request.node.callspec._arg2scope"}


def test_the_init_choices_have_one_source_and_a_config_load_brings_no_new_word_code():
    """--init's choices are embedtune.newwords.defaults.METHODS itself (schema repeated them once); importing
    the config for them loads none of the new-word code (numpy's arrays, the corpus readers): only defaults.py."""
    import subprocess
    import sys

    from embedtune import schema
    from embedtune.newwords import defaults

    assert schema.INITS is defaults.METHODS
    assert schema.VocabConfig().init == defaults.DEFAULT_METHOD
    loaded = subprocess.run([sys.executable, "-c", "import sys, embedtune.config; "
                             "print(sorted(m for m in sys.modules if m.startswith('embedtune.newwords')))"],
                            capture_output=True, text=True, check=True).stdout.split("\n")[0]
    assert loaded == "['embedtune.newwords', 'embedtune.newwords.defaults']"

