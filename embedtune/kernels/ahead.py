"""A fresh install's kernels compiled ahead, in processes beside the run (issue 48.1).

numba compiles a kernel when a run first calls it (its cache lacks it: a fresh install, an upgrade, another CPU),
one after another on the run's one thread, for seconds each, and a compile holds the GIL, so a thread gains
nothing. Which kernels a run calls, and for which argument types, is known before it reads its vectors (the
objective, optimizer and new words' start its config resolves to, a corpus file's and a vectors file's size):
``start`` hands those its cache lacks to child processes, which compile them into numba's cache (the kernels are
``cache=True``) while the run reads, counts and sets up; a run that reaches one finds it there and loads it.

No kernel is compiled twice: whoever reaches a kernel first (a child, or the run calling it) claims it, a file
made with O_EXCL in a folder of the run's own; the children take the list from its end (what the run needs last
first), the run from its start. The run, reaching a kernel a child has claimed, waits for that child's word that
it is in the cache (its standard output, one label a line) rather than compile it too: numba's dispatcher asks
before it compiles (_adapters/numba_private.wait_before_compiling). A child that fails or dies (an unwritable
cache, a failed import, a kill) ends its output: the run compiles what it lacks, as it did without. The argument
types must be those of the run's calls exactly (numba's cache keys a kernel by them): a run whose calls differ
compiles for its own (tests/test_compile_ahead.py checks that a run given the list compiles nothing).

A warm run (its cache holds every kernel listed) starts nothing. The children are the run's to end: ``Ahead.close``
(the run's exit, an error, Ctrl-C) kills and reaps them; they ignore Ctrl-C (the terminal sends it to the whole
job; the run ends them), write nothing to the terminal, and exit when the run's end of their input closes (the
run killed at once). One child per core beyond the run's own (``RUN_CORES``), at most ``MOST_CHILDREN``; one
core: none.
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

# EMBEDTUNE_COMPILE_AHEAD=N: N children whatever the cores (0: none), read at each run's start (the tests and
# benchmarks/first_run.py compare runs with and without).
ENVIRONMENT = "EMBEDTUNE_COMPILE_AHEAD"
# The cores left to the run itself. On 2 quiet cores one child shortened the cold quickstart (its compiles
# mostly on the run's one busy thread); where other work took the second core it did not, and a child costs
# about 2 CPU-s of its own start either way (benchmarks/log/first_run.md, 2026-12-07).
RUN_CORES = 1
# Each child imports numba and the kernels' modules (about a CPU-second) before it compiles: more than a few
# would share the list's largest kernels with nothing left for the rest.
MOST_CHILDREN = 3
# A corpus file this large or larger counts its pairs with the count's kernels, merges its blocks, and takes their
# dot products with _pair_dots' parallel form (and the new words' biases compiled: kernels/cooccur.py); one this
# small or smaller with numpy and the dot products' serial twin. Between the two, neither is guessed: the run
# compiles what it takes.
LARGE_CORPUS = 16 << 20
SMALL_CORPUS = 2 << 20
# A text vectors file this large holds more values than formats/text/write.COMPILED_MIN_VALUES (its lines are
# rendered by the compiled writer): a value takes 9-10 bytes written as GloVe writes them.
LARGE_TEXT_VECTORS = 40 << 20


@dataclass(frozen=True)
class Kernel:
    """One kernel for one list of argument types: ``module``'s ``name`` (``[key]`` of it where it is a dict of
    kernels, as glove.GLOVE_HOGWILD), ``argtypes`` a tuple of numba types."""

    module: str
    name: str
    key: int | None
    argtypes: tuple

    @property
    def label(self) -> str:
        return f"{self.module}.{self.name}" + ("" if self.key is None else f".{self.key}")

    def dispatcher(self):
        import importlib

        kernel = getattr(importlib.import_module(self.module), self.name)
        return kernel if self.key is None else kernel[self.key]


def _array(dtype: str, ndim: int, readonly: bool = False):
    import numpy as np
    from numba import from_dtype, types

    return types.Array(from_dtype(np.dtype(dtype)), ndim, "C", readonly=readonly)


def _reader(compiled: bool) -> list[Kernel]:
    """The compiler's warm-up (common.warm_up) and, where it reads the corpus (``compiled``: not a small file,
    corpus/fast.SMALL_FILE), the compiled reader (corpus/fast.py)."""
    from numba import types

    i64, a = types.int64, _array
    tokens = "embedtune.kernels.tokens"
    warm_up = [Kernel("embedtune.kernels.common", "_started", None, (a("float64", 1),))]
    return warm_up if not compiled else warm_up + [
        Kernel(tokens, "scan", None, (a("uint8", 1, True), i64, i64, i64, i64, a("uint8", 1), a("uint8", 1), i64,
                                      a("int64", 1), a("int64", 1), a("uint64", 1), a("int64", 1), a("uint8", 1), i64,
                                      a("int32", 1), a("int32", 1), i64, a("int32", 1), a("int64", 1), i64)),
        Kernel(tokens, "rehash", None, (a("uint64", 1), i64, a("int32", 1))),
        Kernel(tokens, "units_with_pieces", None, (a("int32", 1), a("int32", 1), a("int32", 1))),
        Kernel(tokens, "_expand", None, (a("int32", 1), a("int32", 1), a("int64", 1), a("int32", 1), a("int32", 1),
                                          a("int64", 1), a("int64", 1))),
    ]


def _new_words(init: str) -> list[Kernel]:
    """The new words' starts (newwords/contexts.py, newwords/spelling.py) that ``init`` takes."""
    from numba import types

    i64, a, f32 = types.int64, _array, types.float32
    found = []
    if init in ("form-context", "context-mean", "alacarte"):
        contexts = "embedtune.kernels.contexts"
        found += [
            Kernel(contexts, "occurrence_marks", None, (a("int32", 1), a("int32", 1), a("int64", 1), a("int32", 1),
                                                        a("int32", 1), a("float64", 1), a("float64", 1), a("float64", 1),
                                                        types.uint64, types.uint64, types.boolean, types.boolean,
                                                        a("int32", 1), a("int32", 1), a("int32", 1))),
            Kernel(contexts, "context_pass", None, (a("int32", 1), a("int32", 1), a("int32", 1), a("int32", 1),
                                                    a("int32", 1), i64, i64, a("float32", 1), a("float32", 2),
                                                    a("float64", 2), a("float64", 2), a("float64", 3), a("float64", 3),
                                                    a("int32", 1), a("float64", 2), i64)),
        ]
    if init == "form-context":
        spelling = "embedtune.kernels.spelling"
        found += [
            Kernel(spelling, "add_ridge", None, (a("float32", 2), a("float32", 2), f32)),
            Kernel(spelling, "step_residual", None, (a("float32", 2), a("float32", 2), a("float32", 1),
                                                     a("float32", 2), a("float32", 2))),
            Kernel(spelling, "next_direction", None, (a("float32", 2), a("float32", 1), a("float32", 2))),
        ]
    return found


def _glove(optimizer: str, deterministic: bool, corpus_bytes: int | None) -> list[Kernel]:
    """GloVe's set-up (its counts, the side table's fit: kernels/cooccur.py) and its lock-free step."""
    from numba import types

    from embedtune.kernels.common import KERNEL_OPTIMIZERS

    i64, a, f32 = types.int64, _array, types.float32
    cooccur = "embedtune.kernels.cooccur"
    large = corpus_bytes is not None and corpus_bytes >= LARGE_CORPUS
    small = corpus_bytes is not None and corpus_bytes <= SMALL_CORPUS
    dots = (a("float32", 2), a("int32", 1), a("int32", 1), a("float64", 1))
    found = []
    if large:
        ids, counts, csr = (a("int32", 1), a("int32", 1)), a("int64", 1), (a("int64", 1), a("int32", 1), a("float64", 1))
        found += [Kernel(cooccur, "_bucket_pass", None, (*ids, i64, i64, i64, counts, a("int32", 1))),
                  Kernel(cooccur, "_row_sizes", None, (counts, a("int32", 1), i64, i64, i64, counts, a("int32", 1))),
                  Kernel(cooccur, "_row_sums", None, (counts, a("int32", 1), i64, i64, i64, *csr, a("float64", 1))),
                  Kernel(cooccur, "_merge_pass", None, (*csr, *csr, i64, i64, *csr)),
                  Kernel(cooccur, "_pair_dots", None, dots)]
    if small:
        found.append(Kernel(cooccur, "_pair_dots_serial", None, dots))
    found.append(Kernel(cooccur, "fit_rounds", None, (a("int32", 1), a("int32", 1), a("float64", 1), a("float64", 1),
                                                      a("float64", 1), a("bool", 1), i64, i64, a("float64", 1),
                                                      a("float64", 2))))
    if large:
        found.append(Kernel(cooccur, "_new_word_biases", None, (a("int32", 1), a("int32", 1), a("float32", 1),
                                                                a("float32", 1), a("float64", 1), types.float64,
                                                                a("float64", 1), a("bool", 1), a("float64", 1),
                                                                a("float64", 2))))
    if not deterministic:
        found.append(Kernel("embedtune.kernels.glove", "GLOVE_HOGWILD", KERNEL_OPTIMIZERS[optimizer], (
            a("float32", 2), a("float32", 2), a("float32", 2), a("int64", 1), i64, f32, a("int32", 1), a("int32", 1),
            a("float32", 1), a("float32", 1), a("float32", 1), a("float32", 1), a("float32", 1), a("float32", 1), i64,
            f32, f32, a("float32", 2), a("float32", 1), a("float32", 2), a("float32", 2), a("float32", 2),
            a("float32", 2), a("float64", 2), i64)))
    return found


# A labelled corpus this large or smaller has its lines counted (its newlines: a bound on its training lines) to
# tell whether the run takes classify's serial kernels (kernels/classify.py); a larger one is left to the run.
COUNTED_LINES_BYTES = 64 << 20


def _lines_at_most(path) -> int | None:
    """A bound on a plain file's lines (its newlines, and one unended), or None (not one, too large, unreadable)."""
    size = _size(path)
    if size is None or size > COUNTED_LINES_BYTES:
        return None
    try:
        with open(path, "rb") as f:
            newlines = sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 20), b""))
    except OSError:
        return None
    return newlines + 1


def _classify(optimizer: str, deterministic: bool, epochs: int, corpus, step: bool = True) -> list[Kernel]:
    """classify's classifier-alone fit and its step, where the corpus's lines say surely that the run takes their
    serial twins (fewer lines than classify.SERIAL_LINES, lines times epochs fewer than SERIAL_LINE_EPOCHS: most
    of a small run's compiling, benchmarks/log/first_run.md); nothing else is told from a file's size. Where the
    cache holds both twins already (every run after the first) they are listed without reading the corpus: the
    list then starts no child whatever the run takes."""
    from numba import types

    from embedtune._adapters.numba_private import in_cache
    from embedtune.kernels.common import KERNEL_OPTIMIZERS

    i64, f32, a = types.int64, types.float32, _array
    module, strict = "embedtune.kernels.classify", "_strict" if deterministic else ""
    fit = Kernel(module, "fit_loss_grad_serial" + strict, None, (a("float32", 2), a("float32", 2), a("float32", 2),
                                                                 a("float32", 1), types.boolean))
    i32s, f32s, f32m = a("int32", 1), a("float32", 1), a("float32", 2)
    stepped = Kernel(module, "CLASSIFY_STEP_SERIAL" + strict.upper(), KERNEL_OPTIMIZERS[optimizer], (
        f32m, f32m, f32m, a("int64", 1), i64, i64, i32s, f32s, i32s, i32s, i32s, f32s, i32s, i32s, f32m,
        types.boolean, f32, f32, f32, f32, f32m, f32m, f32m, f32m, i64))
    candidates = [fit, stepped] if step else [fit]
    if all(in_cache(k.dispatcher(), k.argtypes) for k in candidates):
        return candidates
    lines = _lines_at_most(corpus)
    if lines is None:
        return []
    from embedtune.kernels import classify

    return [k for k in candidates if (k is fit and lines < classify.SERIAL_LINES)
            or (k is stepped and lines * epochs < classify.SERIAL_LINE_EPOCHS)]


def _text_writer() -> list[Kernel]:
    """A large text table's output lines (formats/text/verbatim.py, render.py), rendered while the run trains."""
    from numba import types

    i64, a = types.int64, _array
    render = "embedtune.formats.text.render"
    return [
        Kernel("embedtune.formats.text.verbatim", "verbatim_lines", None, (a("uint8", 1, True), i64, a("uint8", 1, True),
                                                                           a("float32", 2), a("bool", 1))),
        Kernel(render, "_digits", None, (a("float32", 1), i64, a("float64", 1), a("float64", 1), a("int64", 1),
                                         a("int64", 1), a("int64", 1), a("bool", 1), a("int64", 1))),
        Kernel(render, "_lines", None, (a("uint8", 1, True), a("int64", 1), a("float32", 1), i64, a("int64", 1),
                                        a("int64", 1), a("int64", 1), a("bool", 1), a("uint8", 1, True), a("int64", 1),
                                        a("uint8", 1), a("uint8", 1))),
    ]


def _size(path) -> int | None:
    """A plain, uncompressed file's bytes; None otherwise (standard input, a pipe, gzip or bzip2: unknown)."""
    if not isinstance(path, str) or path == "-" or path.endswith((".gz", ".bz2")):
        return None
    try:
        return os.path.getsize(path) if os.path.isfile(path) else None
    except OSError:
        return None


def kernels_for(config, corpus_file: bool, reader: bool = True) -> list[Kernel]:
    """The kernels, with their argument types, that a run of ``config`` (resolved: its objective and optimizer
    decided) calls, in the order it first calls them (the text writer's put last: a child's first);
    ``corpus_file``: its corpus is a file; ``reader``: the compiled reader counts it (corpus/fast.py; not a small
    file's). Only glove's and classify's compiled runs are listed (the README's jobs; another objective compiles as
    it goes), and only what their files' sizes (classify: its lines) say surely."""
    t = config.train
    if t.objective not in ("glove", "classify") or not corpus_file:
        return []
    from embedtune import kernels

    if not kernels.KERNEL:
        return []
    if t.objective == "classify":   # its step compiled unless anchored (objectives/classify: ``compiles``)
        return _reader(False) + _classify(t.optimizer, bool(t.deterministic), t.epochs, config.corpus,
                                          step=not t.anchor)
    found = _reader(reader) + _new_words(config.vocab.init) + _glove(t.optimizer, bool(t.deterministic),
                                                                     _size(config.corpus))
    vectors_bytes = _size(config.vectors)
    if (config.output is not None and config.format == "glove" and config.to in (None, "glove") and vectors_bytes is not None
            and vectors_bytes >= LARGE_TEXT_VECTORS):
        # Last, so that a child compiles it first: the run's lines rendered ahead wait for the count (run.py, held)
        # rather than compile them on a niced thread that holds numba's lock while the run's own waits.
        found += _text_writer()
    return found


class Ahead:
    """The children compiling ``kernels`` ahead (``start``), and the run's side of their claims."""

    def __init__(self, kernels: list[Kernel], children: int):
        from embedtune._adapters.numba_private import wait_before_compiling

        self.kernels = kernels
        self.folder = tempfile.mkdtemp(prefix="embedtune-compiling-")
        self.done: set[str] = set()
        self.children: list[subprocess.Popen] = []
        self._labels = {}
        self._waiting = []
        for kernel in kernels:
            dispatcher = kernel.dispatcher()
            if wait_before_compiling(dispatcher, self._wait):
                self._waiting.append(dispatcher)
            self._labels[(id(dispatcher), kernel.argtypes)] = kernel.label
        listed = pickle.dumps(kernels)
        # This embedtune, wherever the run found it (a library caller's sys.path, not only PYTHONPATH's).
        package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package, os.environ.get("PYTHONPATH")]))}
        for n in range(children):
            try:
                child = subprocess.Popen([sys.executable, "-m", "embedtune.kernels.ahead", self.folder, str(n)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         close_fds=True, env=env)
            except OSError:   # no process to be had (a limit, no memory): the run compiles what is left
                break
            self.children.append(child)
            try:
                child.stdin.write(len(listed).to_bytes(8, "little") + listed)
                child.stdin.flush()   # kept open: its end tells the child the run is gone
            except OSError:   # died at once: the run compiles its share
                pass

    def compiles(self, module_prefix: str) -> bool:
        """Whether a kernel of a module whose name starts with ``module_prefix`` is among those compiled ahead."""
        return any(kernel.module.startswith(module_prefix) for kernel in self.kernels)

    def _claim(self, label: str, owner: str) -> bool:
        try:
            fd = os.open(os.path.join(self.folder, label), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return False
        except OSError:   # the folder gone (closed): compile here
            return True
        os.write(fd, owner.encode())
        os.close(fd)
        return True

    def _wait(self, dispatcher, argtypes: tuple) -> bool:
        """Called by numba's dispatcher on a cache miss: whether to look again (a child compiled it)."""
        label = self._labels.get((id(dispatcher), argtypes))
        if label is None:
            return False
        if label in self.done:
            return True
        if self._claim(label, "run"):
            return False   # ours to compile
        try:
            with open(os.path.join(self.folder, label)) as f:
                owner = f.read()
        except OSError:
            return False
        if not owner.isdigit() or int(owner) >= len(self.children):
            return False
        out = self.children[int(owner)].stdout
        while label not in self.done:
            line = out.readline()
            if not line:   # the child ended: compile here
                return False
            self.done.add(line.decode().strip())
        return True

    def close(self) -> None:
        """The children killed and reaped, the dispatchers' own caches back, the claims removed."""
        from embedtune._adapters.numba_private import stop_waiting

        for child in self.children:
            if child.poll() is None:
                child.kill()
        for child in self.children:
            child.wait()
            for pipe in (child.stdin, child.stdout):
                try:
                    pipe.close()
                except OSError:
                    pass
        self.children = []
        for dispatcher in self._waiting:
            stop_waiting(dispatcher)
        self._waiting = []
        shutil.rmtree(self.folder, ignore_errors=True)


def start(kernels: list[Kernel], children: int | None = None) -> Ahead | None:
    """Children compiling those of ``kernels`` numba's cache lacks: ``children``, else EMBEDTUNE_COMPILE_AHEAD's
    number, else one per core beyond RUN_CORES, at most MOST_CHILDREN. None where none is to start, the cache has
    them all, or it cannot be asked (the run compiles as it goes)."""
    if children is None:
        from embedtune.cores import local_cores

        given = os.environ.get(ENVIRONMENT, "")
        children = int(given) if given.isdigit() else min(local_cores() - RUN_CORES, MOST_CHILDREN)
    if not kernels or children < 1:
        return None
    from embedtune._adapters.numba_private import in_cache

    missing = []
    for kernel in kernels:
        cached = in_cache(kernel.dispatcher(), kernel.argtypes)
        if cached is None:
            return None
        if not cached:
            missing.append(kernel)
    if not missing:
        return None
    started = Ahead(missing, min(children, len(missing)))
    if not started.children:
        started.close()
        return None
    return started


def compile_now(kernels: list[Kernel], folder: str | None = None, owner: str = "", out=None) -> None:
    """Each of ``kernels`` compiled into numba's cache here, from the list's end (a child's work); with ``folder``
    (the run's claims) only those not claimed yet, each claimed first and its label written to ``out`` once
    cached."""
    for kernel in reversed(kernels):
        if folder is not None:
            try:
                fd = os.open(os.path.join(folder, kernel.label), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                continue
            os.write(fd, owner.encode())
            os.close(fd)
        kernel.dispatcher().compile(kernel.argtypes)
        if out is not None:
            out.write(kernel.label.encode() + b"\n")
            out.flush()


def _compile_listed(folder: str, owner: str, out) -> None:
    """A child's work: the run's list (pickled, on standard input, after its length), ``compile_now``; ends
    when the run's end of standard input closes."""
    import threading

    size = int.from_bytes(sys.stdin.buffer.read(8), "little")
    kernels = pickle.loads(sys.stdin.buffer.read(size))

    def end_with_the_run():
        sys.stdin.buffer.read()   # until the run's end of the pipe closes
        os._exit(0)

    threading.Thread(target=end_with_the_run, daemon=True).start()
    compile_now(kernels, folder, owner, out)


def main(argv: list[str]) -> None:
    import signal

    from embedtune.kernels.lean_start import defer_unused_numpy_packages

    defer_unused_numpy_packages()   # before the compiles load scipy.linalg (lean_start.py)
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the run ends its children
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)   # nothing else reaches the run's pipe
    _compile_listed(argv[0], argv[1], out)


if __name__ == "__main__":
    main(sys.argv[1:])
