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
MAX_FUNCTION_LINES = 80


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


def circles_in(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles a depth-first walk of ``graph`` (a node -> the nodes it imports) meets, each as a path."""
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


def test_no_import_circle_in_the_package():
    files = sources()
    circles = circles_in({name: imports(name, path, set(files)) for name, path in files.items()})
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

    objectives = [name for name in graph if name == "embedtune.objectives" or name.startswith("embedtune.objectives.")]
    assert [name for name in objectives if {"embedtune.config", "embedtune.config.load"} & reached(graph, name)] == []


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
    return circles_in(graph)


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


def test_the_keras_package_imports_neither_api_nor_run():
    """The layer decides its rows by the loop's own call (plan.rows.decide_rows) and its options by
    embedtune.config.from_options: it reaches no whole-run module."""
    into = {(a, b) for a, b in folder_imports() if folder_of(a) == "keras" and folder_of(b) in ("api", "run")}
    assert into == set()


def test_every_source_file_is_at_most_about_500_lines():
    long = {str(path.relative_to(REPO)): n for path in sources().values()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def long_functions(paths: list[Path], root: Path) -> dict[str, int]:
    """``file: function`` -> its lines from ``def`` to its last, for each function longer than
    MAX_FUNCTION_LINES (methods and nested functions each count on their own)."""
    found = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if (n := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES:
                    found[f"{path.relative_to(root).as_posix()}: {node.name}"] = n
    return found


def test_no_function_is_over_80_lines():
    """A function reads in one screen (issue 47): a longer one is two ideas, split where its meaning splits."""
    assert long_functions(list(sources().values()), REPO) == {}


def test_the_reader_catches_a_long_function(tmp_path):
    """The check above can fail: a method of 81 lines is caught, one of 80 is not."""
    body = "".join(f"        x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES - 1))
    (tmp_path / "a.py").write_text(f"class A:\n    def fits(self):\n{body}\n    def long(self):\n{body}        return 0\n")
    assert long_functions([tmp_path / "a.py"], tmp_path) == {"a.py: long": MAX_FUNCTION_LINES + 1}


def test_every_package_folder_is_installed():
    """pyproject.toml lists the packages by name (cli/ installs as embedtune.cli): a folder left out
    would be missing from a wheel, though an editable install from the checkout still finds it."""
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    folders = {name for name, path in sources().items() if path.name == "__init__.py"}
    assert folders == listed


# The new words' start, lowest floor first (issue 47: one word's walk from the corpus to its start goes down the
# floors, not back and forth between two files): each module imports only those before it. ``add`` (the pipeline
# above them) and ``choose`` (which words get a row) are not floors of the start.
NEW_WORD_FLOORS = ("defaults", "spelling", "contexts", "common", "context_mean", "alacarte", "fitted", "form_context",
                   "methods")


def test_a_new_words_start_goes_down_the_floors():
    files = sources()
    package = "embedtune.newwords"
    modules = {name.removeprefix(package + ".") for name in files if name.startswith(package + ".")}
    assert modules - {"add", "choose"} == set(NEW_WORD_FLOORS), "a new module of embedtune/newwords: give it a floor"
    upward = []
    for floor, module in enumerate(NEW_WORD_FLOORS):
        name = f"{package}.{module}"
        for used in imports(name, files[name], set(files)):
            if used.startswith(package + ".") and used.removeprefix(package + ".") not in NEW_WORD_FLOORS[:floor]:
                upward.append(f"{name} imports {used}")
    assert upward == []


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


# Another library's private names still used outside embedtune/_adapters/, by name, each with why.
KNOWN_FOREIGN_PRIVATES: dict[str, str] = {
    # Python's own, documented: the process ends without the interpreter's teardown.
    "_exit": "os._exit",
    # LazyRows subclasses keras.optimizers.Optimizer, as Keras's own LossScaleOptimizer does: the base
    # class's protected members, which it inherits and uses on itself (what it reads of the optimizer it
    # wraps goes through embedtune/_adapters/keras_private.py).
    "_iterations": "LazyRows' own step counter (the base class's variable)",
    "_learning_rate": "LazyRows' own learning rate as given (rows=..., learning_rate=...)",
    "_get_current_learning_rate": "LazyRows' own learning rate now",
    "_var_key": "Keras's key of a variable in an optimizer's state",
    "_variables": "the optimizer's variables, LazyRows' own rows state added",
    "_trainable_variables": "the variables the optimizer was built for",
}
# Where another library keeps what it does not export (``keras.src.utils``, ``tensorflow.python.framework``).
PRIVATE_TREES = ("keras.src", "tensorflow.python")


def own_private_names(trees) -> set[str]:
    """The project's own private names: set as ``self._name``, defined in a class or at a module's top
    level, or a module's file name."""
    own = set()
    for path, tree in trees.items():
        own.add(path.stem)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                    and ast.unparse(node.value) == "self"):
                own.add(node.attr)
            elif isinstance(node, (ast.ClassDef, ast.Module)):
                for part in node.body:
                    if isinstance(part, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        own.add(part.name)
                    elif isinstance(part, (ast.Assign, ast.AnnAssign)):
                        for target in part.targets if isinstance(part, ast.Assign) else [part.target]:
                            own.update(name.id for name in ast.walk(target) if isinstance(name, ast.Name))
    return {name for name in own if name.startswith("_") and not name.endswith("__")}


def foreign_private_names(paths: list[Path], root: Path, exempt: Path | None = None, known=()) -> set[str]:
    """``file: what`` for each use of another library's private name (other than ``known``) outside
    ``exempt``: an attribute ``x._name`` (``getattr(x, "_name")`` too) whose name the project never
    defines, read or set; an import from a module path with a private part (``numpy._core``) or from
    PRIVATE_TREES."""
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in paths}
    own = own_private_names(trees)

    def private(name: str) -> bool:
        return name.startswith("_") and not name.endswith("__") and name not in own and name not in known

    trees_below = tuple(f"{prefix}." for prefix in PRIVATE_TREES)
    found = set()
    for path, tree in trees.items():
        if exempt is not None and exempt in path.parents:
            continue
        where = path.relative_to(root).as_posix()
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and private(node.attr):
                found.add(f"{where}: {ast.unparse(node)}")
            elif isinstance(node, ast.Attribute) and ast.unparse(node).startswith(trees_below):
                found.add(f"{where}: {ast.unparse(node)}")
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) > 1
                  and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
                  and private(node.args[1].value)):
                found.add(f"{where}: {ast.unparse(node)}")
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                           else [node.module or ""] if node.level == 0 else [])
                for module in modules:
                    first = module.split(".")[0]
                    if first in ("embedtune", "cli"):
                        continue
                    if any(private(part) for part in module.split(".")) or module.startswith(PRIVATE_TREES):
                        found.add(f"{where}: import {module}")
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module.split(".")[0] != "embedtune":
                    found.update(f"{where}: import {node.module}.{alias.name}"
                                 for alias in node.names if private(alias.name))
    return found


def test_no_private_name_of_another_library_outside_its_adapter():
    """Issue 47.7: where another library has a public way, it is taken; where it has none, its private
    name is read in embedtune/_adapters/ alone (one module a library, each checked by tests/test_adapters.py)."""
    assert foreign_private_names(list(sources().values()), REPO, REPO / "embedtune" / "_adapters",
                                 known=KNOWN_FOREIGN_PRIVATES) == set()


def test_the_reader_catches_another_librarys_private_name(tmp_path):
    """The check above can fail: a private attribute the project never defines, read, called, set or
    named in getattr, and a private module imported; the project's own private names pass."""
    (tmp_path / "a.py").write_text(
        "import atexit\nfrom numpy._core.multiarray import _set_madvise_hugepage\n"
        "from keras.src.utils import tracking\nimport tensorflow.python.framework.config\n\n\n"
        "class A:\n    def __init__(self, model):\n        self._rows = model._flatten_layers()\n"
        "        model.variable._ours = 1\n        atexit._run_exitfuncs()\n"
        "        self._seen = getattr(model, '_cache', None), getattr(self, '_rows')\n\n"
        "    def _step(self):\n        return self._rows, A._step, _helper()\n\n\n"
        "def _helper():\n    return keras.src.utils\n")
    assert foreign_private_names([tmp_path / "a.py"], tmp_path) == {
        "a.py: import numpy._core.multiarray", "a.py: import numpy._core.multiarray._set_madvise_hugepage",
        "a.py: import keras.src.utils", "a.py: import tensorflow.python.framework.config",
        "a.py: model._flatten_layers", "a.py: model.variable._ours", "a.py: atexit._run_exitfuncs",
        "a.py: getattr(model, '_cache', None)", "a.py: keras.src.utils"}
    assert foreign_private_names([tmp_path / "a.py"], tmp_path, exempt=tmp_path) == set()


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

    from embedtune.config import schema
    from embedtune.newwords import defaults
    from embedtune.objectives.base import Objective

    assert schema.INITS is defaults.METHODS
    assert schema.VocabConfig().init is None   # the objective's (Objective.new_word_start), by default the new words'
    assert Objective.new_word_start == defaults.DEFAULT_METHOD
    loaded = subprocess.run([sys.executable, "-c", "import sys, embedtune.config; "
                             "print(sorted(m for m in sys.modules if m.startswith('embedtune.newwords')))"],
                            capture_output=True, text=True, check=True).stdout.split("\n")[0]
    assert loaded == "['embedtune.newwords', 'embedtune.newwords.defaults']"



def reached(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def test_the_promise_has_one_home_below_the_run_training_and_keras():
    """embedtune/frozen.py (issue 47, item 1) holds the frozen rows' checks, hashes, checked write and
    diff's verdict; the run, the loop, diff and the Keras layer call it, so it reaches none of them (nor the
    config or TensorFlow's wrapper) by any import, and the modules it replaced stay gone."""
    files = sources()
    graph = {name: imports(name, path, set(files)) for name, path in files.items()}
    above = ("embedtune.run", "embedtune.api", "embedtune.config", "embedtune.training", "embedtune.keras",
             "embedtune.compare", "embedtune.plan", "embedtune._tf", "embedtune.cli")
    assert sorted(m for m in reached(graph, "embedtune.frozen") if m.startswith(above)) == []
    callers = ("embedtune.run", "embedtune.training.loop", "embedtune.compare.diff", "embedtune.keras.layer")
    assert [m for m in callers if "embedtune.frozen" not in graph[m]] == []
    assert "embedtune.training.frozen" not in files and "embedtune.keras.proof" not in files


def side_attributes(paths: list[Path], root: Path) -> set[str]:
    """Where the fastText model is reached as an attribute set on the side: ``getattr``/``setattr``/``hasattr``/
    ``delattr`` naming ``model`` or a name holding ``fasttext``, or ``x.fasttext = ...`` / ``x._fasttext = ...``."""
    found = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) >= 2
                    and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
                    and (node.args[1].value == "model" or "fasttext" in node.args[1].value.lower())):
                found.add(f"{path.relative_to(root).as_posix()}:{node.lineno}: {ast.unparse(node)}")
            elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del))
                  and node.attr.lstrip("_") == "fasttext"):
                found.add(f"{path.relative_to(root).as_posix()}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_fasttext_model_is_a_declared_field_not_an_attribute_set_on_the_side():
    """Issue 47, item 3 (gensim's FastTextKeyedVectors: extra state is a declared field of the vectors type):
    Vectors.model and PatchedVectors.model are declared, and nothing sets or probes the model by name."""
    import dataclasses

    import numpy as np

    from embedtune.vectors import PatchedVectors, Vectors

    assert side_attributes(list(sources().values()), REPO) == set()
    assert "model" in {f.name for f in dataclasses.fields(Vectors)}
    assert Vectors(["a"], np.zeros((1, 2))).model is None
    assert PatchedVectors(["a"], np.zeros((1, 2), np.float32), np.zeros(0, np.int64), np.zeros((0, 2))).model is None


def test_the_reader_catches_a_model_set_on_the_side(tmp_path):
    """The check above can fail: each way the model used to be reached."""
    (tmp_path / "a.py").write_text("def f(v, w, layer):\n    w.fasttext = v.fasttext\n    layer._fasttext = 1\n"
                                   "    return getattr(v, 'fasttext', None), hasattr(w, 'model')\n")
    assert {line.split(": ", 1)[0] for line in side_attributes([tmp_path / "a.py"], tmp_path)} == {
        "a.py:2", "a.py:3", "a.py:4"}
