"""The package's shape (issue 25): no import circle anywhere, one concern a file, about 500 lines at most.

Imports are read with ast, those inside functions and under ``if TYPE_CHECKING:`` included (a lazy import
hides a circle and an annotation's import is one a type checker follows; neither removes it).
"""

from __future__ import annotations

import ast
import re
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
    embedtune.objectives reaches the config's loader (embedtune.config, embedtune.config.load), by any import:
    they read the declarations (embedtune.config.keys) and the classes (embedtune.config.schema) only."""
    files = sources()
    graph = {name: imports(name, path, set(files)) for name, path in files.items()}
    assert "embedtune.objectives" in graph["embedtune.config.load"]   # the one direction: config reads the registry

    def reach(start):
        seen, todo = set(), [start]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        return seen

    objectives = [name for name in graph if name == "embedtune.objectives" or name.startswith("embedtune.objectives.")]
    assert [name for name in objectives if {"embedtune.config", "embedtune.config.load"} & reach(name)] == []


# --- floors (issue 47, item 2): folders import down, the few imports that run up are named with their reason ---
ARCHITECTURE = REPO / "docs" / "architecture.md"


def folder_of(module: str) -> str:
    """The folder (or top-level module) a module belongs to: "config" for embedtune.config.load, "cli" for
    embedtune.cli.main, "" for embedtune's own __init__."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _home(path: str) -> str:
    """`embedtune/config/`, `embedtune/wordnet.py`, `cli/`, `embedtune/__init__.py` -> its folder_of name."""
    if path.startswith("cli/"):
        return "cli"
    name = path.removeprefix("embedtune/").rstrip("/").removesuffix(".py")
    return "" if name == "__init__" else name


def _module(path: str) -> str:
    """`embedtune/config/load.py` -> embedtune.config.load; `embedtune/objectives/` -> embedtune.objectives."""
    return path.rstrip("/").removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def stated_floors() -> tuple[list[list[str]], set[tuple[str, str]]]:
    """docs/architecture.md's "## The floors": the floors from the top (folder_of names), and the upward
    imports it names with their reasons, as (module, module)."""
    text = ARCHITECTURE.read_text(encoding="utf-8").split("## The floors", 1)[1].split("\n## ", 1)[0]
    floors, upward = [], set()
    for line in text.splitlines():
        if line[:1].isdigit() and ". " in line:
            floors.append([_home(path) for path in re.findall(r"`([^`]+)`", line)])
        elif line.startswith("- ") and " → " in line:
            importer, imported = re.findall(r"`([^`]+)`", line)[:2]
            upward.add((_module(importer), _module(imported)))
    return floors, upward


def folder_imports() -> list[tuple[str, str]]:
    """(importer, imported) for every import from one folder into another, modules named."""
    files = sources()
    return [(name, other) for name, path in files.items() for other in sorted(imports(name, path, set(files)))
            if folder_of(name) != folder_of(other)]


def upward_imports(edges: list[tuple[str, str]], floors: list[list[str]]) -> set[tuple[str, str]]:
    """The imports of ``edges`` from a folder into one on a higher floor (``floors`` from the top)."""
    height = {name: len(floors) - i for i, names in enumerate(floors) for name in names}
    return {(a, b) for a, b in edges if height[folder_of(b)] > height[folder_of(a)]}


def folder_circles(edges: list[tuple[str, str]], allowed: set[tuple[str, str]]) -> list[list[str]]:
    """Circles of folders through ``edges`` less ``allowed`` (the named upward imports)."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        if (a, b) not in allowed:
            graph.setdefault(folder_of(a), set()).add(folder_of(b))
    circles = []

    def visit(node, path, done):
        for nxt in sorted(graph.get(node, ())):
            if nxt in path:
                circles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in done:
                visit(nxt, path + [nxt], done)
        done.add(node)

    done: set[str] = set()
    for name in sorted(graph):
        if name not in done:
            visit(name, [name], done)
    return circles


def test_every_folder_sits_on_one_floor_of_the_architecture_page():
    floors, _ = stated_floors()
    placed = [name for names in floors for name in names]
    assert len(floors) > 5 and len(placed) == len(set(placed)), floors
    assert {folder_of(name) for name in sources()} - set(placed) == set()


def test_imports_run_down_the_floors_but_the_named_few():
    """An import from a folder into one on a higher floor is one of those the page names with its reason
    (at most 5), and every one named is still there: a new upward import fails until it is argued for."""
    floors, named = stated_floors()
    up = upward_imports(folder_imports(), floors)
    assert len(named) <= 5
    assert up == named, (f"not named in docs/architecture.md: {sorted(up - named)}; "
                         f"named but gone: {sorted(named - up)}")


def test_no_folder_circle_but_through_a_named_upward_import():
    """Two folders that import each other are one idea or a wrong cut: folders on one floor import each other
    one way only, and a circle through two floors goes through an upward import the page names."""
    _, named = stated_floors()
    circles = folder_circles(folder_imports(), named)
    assert circles == [], "\n".join(" -> ".join(c) for c in circles)


def test_the_floor_checks_can_fail():
    """The checks above on made-up imports: an import up a floor is found, and so is a circle of two folders
    on one floor, unless the import closing it is a named one."""
    floors = [["api"], ["training", "plan"], ["errors"]]
    edges = [("embedtune.errors", "embedtune.api"), ("embedtune.training.loop", "embedtune.plan.rows"),
             ("embedtune.plan.rows", "embedtune.training.progress"), ("embedtune.api", "embedtune.errors")]
    assert upward_imports(edges, floors) == {("embedtune.errors", "embedtune.api")}
    assert folder_circles(edges, set()) == [["api", "errors", "api"], ["plan", "training", "plan"]]
    assert folder_circles(edges, {("embedtune.errors", "embedtune.api"),
                                  ("embedtune.plan.rows", "embedtune.training.progress")}) == []


# embedtune.keras imports run only for save_checked, which issue 47.1 moves to embedtune/frozen.py: gone then.
KERAS_INTO_RUN_LEFT = {("embedtune.keras._project", "embedtune.run")}


def test_the_keras_package_imports_neither_api_nor_run():
    """The layer decides its rows by the loop's own call (plan.rows.decide_rows) and its options by
    embedtune.config.from_options: it reaches no whole-run module."""
    into = {(a, b) for a, b in folder_imports() if folder_of(a) == "keras" and folder_of(b) in ("api", "run")}
    assert into - KERAS_INTO_RUN_LEFT == set()


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


def test_the_init_choices_have_one_source_and_a_config_load_brings_no_new_word_code():
    """--init's choices are embedtune.newwords.defaults.METHODS itself (schema repeated them once); importing
    the config for them loads none of the new-word code (numpy's arrays, the corpus readers): only defaults.py."""
    import subprocess
    import sys

    from embedtune.config import schema
    from embedtune.newwords import defaults

    assert schema.INITS is defaults.METHODS
    assert schema.VocabConfig().init == defaults.DEFAULT_METHOD
    loaded = subprocess.run([sys.executable, "-c", "import sys, embedtune.config; "
                             "print(sorted(m for m in sys.modules if m.startswith('embedtune.newwords')))"],
                            capture_output=True, text=True, check=True).stdout.split("\n")[0]
    assert loaded == "['embedtune.newwords', 'embedtune.newwords.defaults']"

