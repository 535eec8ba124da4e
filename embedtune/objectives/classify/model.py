"""The classifier of the classify objective (fastText's supervised model): the mean of a line's
feature vectors -> a linear layer -> softmax over the labels, or one sigmoid per label; its file
format (--save-classifier), its fit on fixed vectors (scipy's L-BFGS, alone or summed over workers'
shares) and its scores. Compiled (embedtune/kernels/classify.py), without TensorFlow: a run whose
step is compiled need not import it for the classifier."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np

from embedtune.errors import EmbedtuneError

FIT_ITERATIONS = 30    # L-BFGS iterations of the classifier-alone fit (see fit_classifier)
FIT_L2 = 1e-4          # L2 weight of that fit, per line: keeps it bounded on separable labels
# fastText's end-of-line word: every line's mean counts one more row, this one, trained with the
# classifier (a learned input that weighs 1 / (words + 1): a bias that follows the line's length).
# Without it the fortune cookies by file lost about 0.01-0.02 to fastText (benchmarks/README.md, classify).
LINE_END = "</s>"


@dataclass
class Classifier:
    """labels : [L] as written; weights : float32 [L, dim]; bias : float32 [L]; one_vs_all : sigmoid
    per label (True) or softmax (False); ngrams : [G] the word n-grams that are features (words
    joined by one space), ngram_vectors : float32 [G, dim] their rows (--word-ngrams; none by default);
    line_end : float32 [dim] the row of LINE_END, in every line's mean (None: a classifier without one,
    written before it was part of the model)."""

    labels: list[str]
    weights: np.ndarray
    bias: np.ndarray
    one_vs_all: bool = False
    ngrams: list[str] = field(default_factory=list)
    ngram_vectors: np.ndarray | None = None
    line_end: np.ndarray | None = None

    def feature_rows(self) -> tuple[list[str], np.ndarray | None]:
        """(the names of the rows a line's mean counts besides its words: the n-grams, then LINE_END; their
        rows [G (+ 1), dim], None with none), as the run's side table holds them."""
        names = list(self.ngrams) + ([LINE_END] if self.line_end is not None else [])
        if not names:
            return names, None
        rows = [r for r in (self.ngram_vectors if self.ngrams else None,
                            None if self.line_end is None else self.line_end[None, :]) if r is not None]
        return names, np.concatenate(rows).astype(np.float32)

    @property
    def word_ngrams(self) -> int:
        """The longest n-gram (1: words only)."""
        return max((g.count(" ") + 1 for g in self.ngrams), default=1)

    def scores(self, means: np.ndarray) -> np.ndarray:
        """[n, L] logits of mean vectors [n, dim]."""
        from embedtune.kernels.classify import scores_kernel

        return scores_kernel(len(means))(np.ascontiguousarray(means, np.float32), np.ascontiguousarray(self.weights, np.float32),
                                 np.ascontiguousarray(self.bias, np.float32))


def predict(classifier: Classifier, means: np.ndarray) -> np.ndarray:
    """[n] the top label's index for each mean vector [n, dim]."""
    return np.argmax(classifier.scores(means), axis=1)


def save_classifier(classifier: Classifier, path: str) -> None:
    """Write ``labels dim`` then ``label bias w1 ... wdim`` per label (float32, shortest text that
    reads back to the same bits), UTF-8, to a temporary file renamed into place. With n-grams the
    header is ``labels dim rows``, and after the labels come those rows: the n-gram rows, ``word word v1 ...
    vdim`` (an n-gram's words, then its row), then the line end's, ``</s> v1 ... vdim`` (LINE_END)."""
    from embedtune.formats.io import open_target
    from embedtune.formats.text.write import render_lines

    n, dim = classifier.weights.shape
    names, rows = classifier.feature_rows()
    with open_target(path) as f:
        f.write((f"{n} {dim}" + (f" {len(names)}" if names else "") + "\n").encode())
        # The vectors' text writer's lines (shortest %g a value): numpy's str a value was slow on the
        # benchmark's bigram rows (benchmarks/README.md, classify).
        f.write(render_lines(classifier.labels, np.concatenate([classifier.bias[:, None], classifier.weights], axis=1)))
        if names:
            f.write(render_lines(names, rows))


def load_classifier(path: str) -> Classifier:
    """Read a file written by ``save_classifier``."""
    try:
        with open(path, encoding="utf-8") as f:
            head = f.readline().split()
            if len(head) not in (2, 3) or not all(h.isdigit() for h in head):
                raise EmbedtuneError("the header should be 'labels dim' (or 'labels dim ngrams'), numbers", path, 1)
            n, dim, n_grams = (*map(int, head), 0)[:3]
            labels, rows, grams, gram_rows = [], [], [], []
            for number, line in enumerate(f, 2):
                fields = line.split()
                if len(rows) < n:
                    if len(fields) != dim + 2:
                        raise EmbedtuneError(f"{len(fields) - 1} values, header says {dim + 1} (bias and {dim} "
                                             "weights)", path, number)
                    labels.append(fields[0])
                    values, into = fields[1:], rows
                else:
                    if len(fields) < dim + 2 and fields[:1] != [LINE_END]:
                        raise EmbedtuneError(f"an n-gram row of {len(fields)} fields: two words or more (or "
                                             f"{LINE_END}), then {dim} values", path, number)
                    grams.append(" ".join(fields[:-dim]))
                    values, into = fields[-dim:], gram_rows
                try:
                    into.append(np.array(values, np.float32))
                except ValueError:
                    raise EmbedtuneError("a value is not a number", path, number) from None
    except (OSError, UnicodeDecodeError) as err:
        raise EmbedtuneError(f"cannot read: {err}", path) from None
    if len(rows) != n:
        raise EmbedtuneError(f"{len(rows)} labels, header says {n}", path)
    if len(grams) != n_grams:
        raise EmbedtuneError(f"{len(grams)} n-gram rows, header says {n_grams}", path)
    table = np.stack(rows) if rows else np.zeros((0, dim + 1), np.float32)
    line_end = None
    if grams and grams[-1] == LINE_END:
        grams, line_end = grams[:-1], gram_rows.pop()
    return Classifier(labels, table[:, 1:], table[:, 0], ngrams=grams,
                      ngram_vectors=np.stack(gram_rows) if gram_rows else None, line_end=line_end)


def _summed_loss_and_grad(X: np.ndarray, Y: np.ndarray, params: np.ndarray, one_vs_all: bool, strict: bool = False):
    """(the cross-entropy of targets Y over inputs X summed over the lines, its gradient [L * dim + L]
    as params are laid out: weights row by row, then the biases), float64; computed in float32 at
    params rounded to float32 (embedtune/kernels/classify.py, ``fit_loss_grad``; ``strict``: its twin without
    fastmath, the same bits on every CPU)."""
    from embedtune.kernels.classify import fit_kernel

    L, dim = Y.shape[1], X.shape[1]
    p32 = params.astype(np.float32)
    loss, grad = fit_kernel(len(X), strict)(X, Y, p32[: L * dim].reshape(L, dim), p32[L * dim:], one_vs_all)
    return loss, np.concatenate([grad[:, :dim].ravel(), grad[:, dim]])


def fit_classifier(means: np.ndarray, targets: np.ndarray, one_vs_all: bool, iterations: int = FIT_ITERATIONS,
                   l2: float = FIT_L2, threads: int | None = None, strict: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The classifier alone on fixed inputs: (weights [L, dim], bias [L]) minimising the mean
    cross-entropy of ``targets`` [n, L] (one-hot, or multi-hot with one_vs_all) + l2/2 |W|^2.

    L-BFGS (scipy) on a loss and gradient computed by a compiled kernel (numpy's matmuls, OpenBLAS's
    threads, were far slower on a loaded machine: benchmarks/README.md, classify). ``iterations``: where the
    WordNet noun glosses' validation accuracy after training levels off, the inputs centred (30 did as
    well as 100 on the 5 shuffled splits: benchmarks/log/classify.md).
    threads : the kernel's threads in the calling thread (numba's setting is a thread's own); the same
    bits whatever the count. strict: the loss and gradient without fastmath (--deterministic's), the same
    bits on every CPU but for the BLAS calls of L-BFGS (scipy's, OpenBLAS's kernel for the CPU)."""
    if threads is not None:
        from numba import set_num_threads

        from embedtune.kernels.common import kernel_threads

        set_num_threads(kernel_threads(threads))
    return fit_classifier_by_shares([(means, targets)], one_vs_all, len(means), lambda arrays: arrays[0],
                                    iterations, l2, strict)


def fit_classifier_by_shares(parts: list[tuple[np.ndarray, np.ndarray]], one_vs_all: bool, n_lines: int,
                             sum_arrays, iterations: int = FIT_ITERATIONS,
                             l2: float = FIT_L2, strict: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``fit_classifier``'s fit over lines held in shares (a multi-worker run: each worker its own).

    parts : (means [n_k, dim], targets [n_k, L]) of each share held here; n_lines : the lines of all
    shares. At each L-BFGS iteration each share's summed cross-entropy and its gradient are computed
    apart and ``sum_arrays`` adds them up over all shares (float64; across workers the same sums on every
    worker, bit for bit: distribute.Worker.sum_array), then the mean and the L2 term are taken: every worker
    sees the same figures, takes the same steps and ends with the same classifier, without any worker
    holding every line (what crosses is L * (dim + 1) + 1 float64 an iteration, after the inputs' sum,
    dim float64, once: the fit's centre). Equal to
    ``fit_classifier`` over all the lines up to the order of the sums."""
    import scipy.optimize

    L, dim = parts[0][1].shape[1], parts[0][0].shape[1]
    # Fitted on the inputs less their mean (over all shares), the bias then moved back (b = b' - W . mean):
    # the same loss at the same weights, but the mean vector of pretrained rows is large beside their
    # spread, which ties the bias to every weight and slowed L-BFGS several times over (benchmarks/log/classify.md).
    centre = sum_arrays([np.asarray(m, np.float64).sum(axis=0) for m, _ in parts]) / n_lines
    shift = centre.astype(np.float32)
    held = [(np.ascontiguousarray(np.asarray(m, np.float32) - shift), np.ascontiguousarray(t, np.float32))
            for m, t in parts]

    def fun(params):
        mine = []
        for X, Y in held:
            loss, grad = _summed_loss_and_grad(X, Y, params, one_vs_all, strict)
            mine.append(np.concatenate([[loss], grad]))
        total = sum_arrays(mine)
        W = params[: L * dim].astype(np.float32).astype(np.float64)
        grad = total[1:] / n_lines
        grad[: L * dim] += l2 * W
        return total[0] / n_lines + 0.5 * l2 * float(W @ W), grad

    with _one_scipy_blas_thread():
        result = scipy.optimize.minimize(fun, np.zeros(L * (dim + 1)), jac=True, method="L-BFGS-B",
                                         options={"maxiter": iterations})
    weights = result.x[: L * dim].reshape(L, dim)
    return weights, result.x[L * dim:] - weights.astype(np.float32).astype(np.float64) @ shift


@contextlib.contextmanager
def _one_scipy_blas_thread():
    """scipy's own OpenBLAS (the wheels' ``scipy.libs/libscipy_openblas*.so``) on one thread while L-BFGS
    runs: its threads, woken by L-BFGS's small BLAS calls at every iteration, spun beside the compiled
    loss and gradient and doubled the fit's CPU (benchmarks/README.md, classify). The same bits: only
    the fit's threads change. A scipy built another way is left as it is."""
    import ctypes
    import glob
    import os

    import scipy

    found = glob.glob(os.path.join(os.path.dirname(scipy.__file__) + ".libs", "libscipy_openblas*.so"))
    try:
        lib = ctypes.CDLL(found[0]) if found else None
        get, set_ = (lib.scipy_openblas_get_num_threads, lib.scipy_openblas_set_num_threads) if lib else (None, None)
    except (OSError, AttributeError):
        get = set_ = None
    if get is None:
        yield
        return
    before = get()
    set_(1)
    try:
        yield
    finally:
        set_(before)


def line_means(vectors: np.ndarray, ids: np.ndarray, starts: np.ndarray, ngrams=None) -> np.ndarray:
    """[n_lines, dim] mean of ``vectors[ids]`` over each line's ids (``starts``: [n_lines + 1]
    offsets); an empty line's mean is zero. ngrams : (ngram_vectors [G, dim], ids, starts) of the
    same lines, whose rows count in each line's mean as its words' do (fastText's -wordNgrams)."""
    import scipy.sparse

    lengths = np.diff(starts)
    gram_lengths = np.diff(ngrams[2]) if ngrams is not None else 0
    scale = 1.0 / np.maximum(lengths + gram_lengths, 1)
    # [n_lines, n_ids] of 1 / length: one sparse product (np.add.at is far slower; init.py's note)
    mean = scipy.sparse.csr_matrix((np.repeat(scale, lengths), ids, starts), shape=(len(lengths), len(vectors)))
    means = mean @ vectors.astype(np.float64)
    if ngrams is not None:
        table, gram_ids, gram_starts = ngrams
        mean = scipy.sparse.csr_matrix((np.repeat(scale, gram_lengths), gram_ids, gram_starts),
                                       shape=(len(lengths), len(table)))
        means = means + mean @ table.astype(np.float64)
    return np.asarray(means, np.float32)


def word_ngrams(tokens: list[str], n: int) -> list[str]:
    """A line's word n-grams of 2 to n words, each once an occurrence, words joined by a space (fastText's
    -wordNgrams takes every token of the line, known word or not: so does this)."""
    return [" ".join(tokens[i:i + k]) for k in range(2, n + 1) for i in range(len(tokens) - k + 1)]


def line_features(tokens: list[str], n: int, rows: dict) -> list[str]:
    """A line's features besides its words that have ``rows`` (name -> row): its n-grams of 2 to n words
    (``word_ngrams``' order), then LINE_END."""
    return [g for g in word_ngrams(tokens, n) + [LINE_END] if g in rows]


def text_means(classifier: Classifier, vectors: np.ndarray, index: dict, lines: list[list[str]]) -> np.ndarray:
    """[n, dim] the classifier's input for token lines: the mean of the rows of their words in ``index``
    (word -> row of ``vectors``), of their n-grams the classifier has and of its line end's, as the run
    computed it."""
    ids = [[index[w] for w in tokens if w in index] for tokens in lines]
    starts = np.cumsum([0] + [len(i) for i in ids])
    ngrams = None
    names, table = classifier.feature_rows()
    if names:
        gram_index = {g: i for i, g in enumerate(names)}
        gram_ids = [[gram_index[g] for g in line_features(tokens, classifier.word_ngrams, gram_index)]
                    for tokens in lines]
        ngrams = (table, np.asarray([i for g in gram_ids for i in g], np.int64),
                  np.cumsum([0] + [len(g) for g in gram_ids]))
    return line_means(vectors, np.asarray([i for line in ids for i in line], np.int64), starts, ngrams)


def scores(classifier: Classifier, means: np.ndarray, gold: list[list[int]]) -> dict:
    """fastText's test figures: P@1 (= accuracy with one label a line) and R@1 over ``gold`` label sets."""
    n = len(gold)
    if not n:
        return {"lines": 0, "accuracy": None, "precision_at_1": None, "recall_at_1": None}
    top = predict(classifier, means)
    hits = sum(int(t in g) for t, g in zip(top, gold))
    return {"lines": n, "accuracy": hits / n, "precision_at_1": hits / n,
            "recall_at_1": hits / sum(map(len, gold))}
