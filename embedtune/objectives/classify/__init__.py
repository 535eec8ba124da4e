"""Text classification on labelled lines (fastText's supervised model), as an objective.

CORPUS is in fastText's supervised format: one example per line, its labels being the tokens that
start with the label prefix (``__label__`` by default, anywhere on the line, as fastText reads
them), every other token a word:

    __label__noun.animal __label__noun.food a small edible crustacean

The model is fastText's: the mean of the line's word vectors and of the line end's row (fastText's
``</s>``, model.LINE_END, a side row every line counts) -> a linear layer -> softmax over the labels, or one sigmoid per label (one-vs-all) when any training line has several labels;
the choice is made once for the run. The classifier's weights and biases are the objective's own
table ("side" table), one row per label, ``dim + 1`` wide (weights, then the bias); every label
row is read by every step (a full softmax: the cost grows with the number of labels, as fastText's
``-loss softmax``; there is no hierarchical softmax). Word rows go through the trainer's sparse step
like sgns's and glove's: frozen rows bit-identical, slices merged, capped, lazy optimizers, the
anchor, new words started from their contexts.

Word n-grams (``--word-ngrams N``, fastText's ``-wordNgrams``): a line's features are then its words
and its n-grams of 2 to N consecutive tokens (every token of the line, known word or not, as fastText
takes them), the mean over both. fastText hashes n-grams into ``-bucket`` rows; here each n-gram the
training lines hold at least ``--ngram-min-count`` times is a row of its own, in the side table after
the label rows (a row ``dim + 1`` wide whose last value is unused), started at the mean of its words'
starting rows. These rows are never frozen (no freeze rule names them): they give a run whose
vocabulary is mostly frozen rows that train, and a higher accuracy there (benchmarks/README.md,
classify). They are not written to the output vectors; --save-classifier
writes them after the labels, and --valid reads the n-grams of its lines that have rows.

Before training, the classifier is fitted alone on the starting vectors (scipy's L-BFGS on the
mean vectors of the training lines, FIT_ITERATIONS iterations); it is both the "before" figure on
``--valid`` (the classifier-alone baseline) and the classifier the training starts from (fastText
starts it at zero).

Words: a line's words are the words of the run's vocabulary (pretrained rows and new words of
the corpus). A training line with none of them is skipped, counted in the summary
(``train_lines_no_known_word``): its mean is undefined, and fastText skips it too. A label-only
line or a line without a label is an error naming the file and line (fastText would skip the
first and train the second as unlabelled). On ``--valid``, a word of the vectors file that no
training line has counts with its pretrained row (as written to the output, unchanged: what a user's
prediction from the output reads; fastText's -pretrainedVectors adds every pretrained word to its
dictionary likewise), and a word in neither is ignored; a line with none of them is predicted from the biases alone (fastText skips it; counting it keeps the
accuracy's denominator every line); labels never seen in training cannot be predicted and are
dropped from their line, and a line left with no label is skipped with a note
(``valid_lines_unseen_labels``), as fastText's ``test`` does.

The package: this module is the objective itself (keys, set-up, batches' shapes, loss, report);
``model.py`` the classifier, its file and its fits; ``ngrams.py`` the n-gram rows; ``batches.py`` the
batch layout and its budgets; ``valid.py`` --valid's lines and scores.

Memory: the training lines are kept as int32 ids with an offset a line, and their targets as a dense
float32 [lines, labels] matrix (the fit reads it whole): 6.8 MB for the 65,692 glosses and 26 labels,
but 4 GB for a million lines and a thousand labels; a sparse form would be needed there.
"""

from __future__ import annotations

import copy
import json
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from embedtune._tf import lazy as tf

from embedtune.config.keys import INT64_MAX, OwnKeys, Range, key
from embedtune.config.schema import Config, TrainConfig
from embedtune.cores import local_cores
from embedtune.corpus.labelled import LABEL_PREFIX, LabelledCorpus
from embedtune.errors import EmbedtuneError
from embedtune.objectives.base import Objective
from embedtune.objectives.classify.batches import (GramLines, SeenWords, budget_figures, gram_budgets, joined_lines,
                                                   line_batches, line_targets, word_budgets)
from embedtune.objectives.classify.describe import ClassifyDescribe
from embedtune.objectives.classify.model import (Classifier, fit_classifier, fit_classifier_by_shares, line_means,
                                                 save_classifier)
from embedtune.objectives.classify.ngrams import ngram_features, ngram_rows, with_line_end
from embedtune.objectives.classify.valid import evaluate, read_valid
from embedtune.objectives.rows import LocalRows


@dataclass
class LinesChunk:
    """One epoch: every usable training line once."""

    raw_tokens: int


@dataclass(frozen=True)
class ClassifyKeys(OwnKeys):
    """classify's own keys of [train]."""

    label_prefix: str = key(LABEL_PREFIX, help="Tokens starting with this are labels (fastText's -label).")
    # each length adds about a row a corpus token (the n-gram rows)
    word_ngrams: int = key(1, range=Range(1, 5), only="used", shown_default="1: words only",
                           help="Word n-grams up to this length are features too, each a trainable row of the "
                                "classifier (never frozen, not in the output vectors; fastText's -wordNgrams).")
    ngram_min_count: int = key(1, range=Range(1, INT64_MAX), only="used",
                               help="An n-gram becomes a row at this many occurrences in the training lines.")


@dataclass(frozen=True)
class ClassifyFiles(OwnKeys):
    """classify's own keys of the file's top level: the files it reads and writes besides the run's."""

    table = ""
    valid: str | None = key(path="read", only="used",
                            help="Labelled lines (same format) to report accuracy on, before training (classifier "
                                 "alone) and after.")
    save_classifier: str | None = key(path="write", only="used",
                                      help="Write the trained classifier here ('labels dim', then 'label bias w1 ... "
                                           "wdim' a line; docs/classify.md).")


class _Describe(ClassifyDescribe):
    files = ClassifyFiles   # where its text finds --save-classifier's name (describe.py is imported by this module)


class Classify(Objective):
    """fastText's supervised model over the local rows of a run (trainable ids first, then frozen)."""

    name = "classify"
    help = "CORPUS of labelled lines, fastText's supervised format"
    keys = (ClassifyKeys, ClassifyFiles)
    # Chosen on the validation parts of 5 shuffled splits of two tasks, the WordNet noun glosses and the
    # fortune cookies by file, at 5 and 25 epochs (benchmarks/classify.py, benchmarks/README.md, classify):
    # adagrad's steps shrink as a row's gradients add up, as fastText's SGD steps shrink with the
    # gradient, where adam's stay about lr whatever the gradient (0.01: behind fastText on the small task,
    # and overfitting at 25 epochs). batch_size counts lines; window: new words' context window for their start.
    defaults = {"window": 5, "optimizer": "adagrad", "anchor": 0.0, "epochs": 5, "batch_size": 256}
    learning_rates = {"adagrad": 0.3, "adam": 0.01}   # adam's: the glosses' best before (same README)
    # New words start at random: the loop learns their rows from the lines' labels, and on the valid parts of
    # the glosses' 5 shuffled splits they did as well as from their contexts and spelling (form-context, the
    # default) without its corpus pass and spelling fit (benchmarks/log/classify.md, issue 48).
    new_word_start = "random"
    settings = ("label_prefix", "word_ngrams", "ngram_min_count")
    word_keys = ("word",)   # the batch entry holding word-table ids
    distinct_ids = True     # a batch lists each of its words once ("word"); the side ids are the labels
    joins_batches = True    # several workers' batches: their words merged (batches.joined_lines)
    describe = _Describe

    @classmethod
    def memory(cls, train, dim, n_local, corpus_words, corpus_lines, units=None):
        """The classifier: a row a label (bounded here by the lines), and with --word-ngrams N at most
        N - 1 n-gram rows a corpus word; the corpus kept as int32 ids with an int64 offset a line (and
        its n-grams' likewise)."""
        grams = (train.keys_of(ClassifyKeys).word_ngrams - 1) * corpus_words
        return ((min(corpus_lines, 1 << 16) + grams + 1) * (dim + 1) * 4,
                (corpus_words + grams) * 4 + corpus_lines * 8 * (1 + (grams > 0)))

    @classmethod
    def open_corpus(cls, source, config, **options) -> LabelledCorpus:
        return LabelledCorpus(source, label_prefix=config.train.keys_of(ClassifyKeys).label_prefix,
                              valid=config.keys_of(ClassifyFiles).valid, **options)

    @classmethod
    def check_corpus_start(cls, config: Config) -> None:
        """CORPUS and --valid, both labelled lines."""
        for path in (config.corpus, config.keys_of(ClassifyFiles).valid):
            LabelledCorpus.check_start(path, config.train.keys_of(ClassifyKeys).label_prefix)

    def __init__(self, rows: LocalRows, train: TrainConfig, corpus: LabelledCorpus):
        """corpus : the LabelledCorpus, or shares of its lines (corpus.HeldLines: a multi-worker run's
        distribute.WorkerShare, or the tests' one-process emulation holding all of them). By shares, the lines held here are those of
        the shares held, each share's apart; the figures every worker needs alike are combined over all
        shares: label counts (so every worker has the same label index), lines, the batch budgets, the
        classifier-alone fit (each share's loss and gradient summed at every L-BFGS iteration) and the
        anchor's slices. --valid is read and evaluated by the chief alone: it writes the summary, the
        others' figures would go nowhere, and the tables it is evaluated on are the same everywhere."""
        shares = None if isinstance(corpus, LabelledCorpus) else corpus
        source = corpus if shares is None else shares.corpus
        if not isinstance(source, LabelledCorpus):
            raise EmbedtuneError("--objective classify reads a corpus in fastText's supervised format "
                                 "(embedtune.corpus.labelled.LabelledCorpus)")
        self.rows = rows
        self.corpus_path = source.path
        self.epochs = train.epochs
        index = rows.local_index
        own = train.keys_of(ClassifyKeys)
        self.word_ngrams, self.ngram_min_count = own.word_ngrams, own.ngram_min_count
        if shares is not None and self.word_ngrams > 1:
            # The n-gram rows' list would have to be gathered across workers as the labels are (not built).
            raise EmbedtuneError("--word-ngrams runs in one process: several workers do not share n-gram rows yet")
        held = [None] if shares is None else [(k, shares.size) for k in shares.held]
        # A worker's config holds its part of the batch, or the whole where its batches are joined (gathered.py);
        # the emulation's (all shares held) the whole. A worker makes its part's batches.
        one = shares is not None and len(held) == 1
        self.part_lines = train.batch_size // shares.size if shares is not None and (not one or shares.joined) \
            else train.batch_size
        self.lines_per_batch = self.part_lines if one else train.batch_size
        self.share_index = shares.held[0] if one else None
        line_labels, line_tokens, figures = self._read_lines(source, held, index)
        for figure, share in zip(figures, held):   # what the batch budgets need, at a part's lines a batch
            figure["budget"] = budget_figures(self.ids, self.starts, *self.line_range[share and share[0]],
                                              self.part_lines)
        if shares is not None:   # every share's figures, in share order, on every worker
            figures = [json.loads(data) for data in shares.gather_bytes([json.dumps(f).encode() for f in figures])]
        label_counts = Counter()
        for figure in figures:
            label_counts.update(dict(figure["labels"]))
        self.train_lines = sum(f["lines"] for f in figures)
        self.skipped = sum(f["skipped"] for f in figures)
        self.share_raw = [f["raw"] for f in figures]
        self.raw_tokens = sum(self.share_raw)
        if not self.train_lines:
            raise EmbedtuneError("no training line has a word of the vectors (or a new word)", source.path)
        # fastText's order: most frequent label first (ties by name, so runs agree).
        self.labels = sorted(label_counts, key=lambda label: (-label_counts[label], label))
        self.label_index = {label: i for i, label in enumerate(self.labels)}
        self.one_vs_all = any(f["several"] for f in figures)
        self.targets = line_targets([[self.label_index[l] for l in labels] for labels in line_labels],
                                    len(self.labels), self.one_vs_all)
        self.tokens_per_batch, self.words_per_batch = word_budgets([f["budget"] for f in figures], self.part_lines)
        self.side_fixed_from = None   # every label row and n-gram row trains
        self._shares = shares

        start = rows.vectors(np.arange(rows.n_local)) if rows.n_local else np.zeros((0, rows.dim), np.float32)
        # The n-gram rows (--word-ngrams) and the line end's (fastText's </s>, model.LINE_END): side rows
        # after the labels.
        grams = with_line_end(ngram_rows(line_tokens, self.word_ngrams, self.ngram_min_count, index, start),
                              self.n_lines, rows.dim)
        self.ngrams, self.grams = grams.ngrams, grams
        self.gram_ids, self.gram_starts, self.ngram_start = grams.ids, grams.starts, grams.start
        self.grams_per_batch, self.distinct_grams_per_batch = (
            gram_budgets(self.gram_ids, self.gram_starts, self.lines_per_batch) if self.ngrams else (0, 0))
        self._fit_start(source, shares, index, start, train.threads, train.deterministic)

    def _read_lines(self, source: LabelledCorpus, held: list, index: dict) -> tuple[list, list, list]:
        """The held shares' lines as local ids (``ids``, ``starts``; a line without a known word
        skipped), each share's apart (``line_range``). Returns (each line's labels, each line's tokens
        (with --word-ngrams, else none), each held share's figures: label counts, lines, raw tokens,
        skipped lines, several labels)."""
        # One process's lines as the compiled reader kept them while counting (no text read again); the n-gram
        # rows need each line's tokens as text, and a worker its share: read as examples there.
        lines = source.line_ids(index) if held == [None] and self.word_ngrams == 1 else None
        if lines is not None:
            self.ids, self.starts, line_labels, figure = lines.with_known_words()
            self.n_lines = len(line_labels)
            self.line_range = {None: (0, self.n_lines)}
            return line_labels, [], [figure]
        ids, starts, line_labels, line_tokens = [], [0], [], []
        figures = []
        local_id = SeenWords(index).__getitem__
        self.line_range = {}   # share -> its lines' [first, end) among those held
        for share in held:
            label_counts: Counter = Counter()
            first, raw, skipped, several = len(line_labels), 0, 0, False
            for example in source.examples(share):
                raw += len(example.tokens)
                local = [i for i in map(local_id, example.tokens) if i is not None]
                if not local:
                    skipped += 1
                    continue
                ids.extend(local)
                starts.append(len(ids))
                line_labels.append(example.labels)
                label_counts.update(example.labels)
                several = several or len(set(example.labels)) > 1
                if self.word_ngrams > 1:
                    line_tokens.append(example.tokens)
            self.line_range[share and share[0]] = (first, len(line_labels))
            figures.append({"labels": sorted(label_counts.items()), "lines": len(line_labels) - first, "raw": raw,
                            "skipped": skipped, "several": several})
        self.ids = np.asarray(ids, np.int32)
        self.starts = np.asarray(starts, np.int64)
        self.n_lines = len(line_labels)   # held here
        return line_labels, line_tokens, figures

    def _fit_start(self, source: LabelledCorpus, shares, index: dict, start: np.ndarray, threads: int,
                   strict: bool) -> None:
        """The classifier alone on the starting vectors (``start``): the training's start and the
        "before" figure on --valid (read here). ``strict``: --deterministic's fit (model.fit_classifier)."""
        means = line_means(start, self.ids, self.starts, ngram_features(self.ngrams, self.ngram_start, self.gram_ids,
                                                                        self.gram_starts))
        began = time.perf_counter()
        if shares is None:
            # The fit (a compiled kernel that releases the GIL, under L-BFGS) on a thread while this one
            # reads --valid (Python): the same fit, the same bits, in about the longer of the two. The fit
            # on the run's threads: the read is short, and with scipy's BLAS threads kept from spinning
            # (model.py) two threads halve the fit's wall at the same CPU (benchmarks/README.md, classify).
            with ThreadPoolExecutor(1) as pool:
                fitted = pool.submit(fit_classifier, means, self.targets, self.one_vs_all,
                                     threads=threads or local_cores(), strict=strict)
                self.valid = read_valid(source, index, self.label_index, self.grams, self.word_ngrams,
                                        self.rows.outside)
                weights, bias = fitted.result()
        else:   # the fit's collectives on this thread
            self.valid = (read_valid(source, index, self.label_index, self.grams, self.word_ngrams,
                                     self.rows.outside) if shares.chief else None)
            parts = [(means[a:b], self.targets[a:b]) for a, b in (self.line_range[k] for k in shares.held)]
            weights, bias = fit_classifier_by_shares(parts, self.one_vs_all, self.train_lines, shares.sum_arrays,
                                                     strict=strict)
        self.fit_seconds = time.perf_counter() - began
        self.start_classifier = Classifier(self.labels, weights.astype(np.float32), bias.astype(np.float32),
                                           self.one_vs_all, self.ngrams[:-1],
                                           self.ngram_start[:-1] if len(self.ngrams) > 1 else None, self.ngram_start[-1])
        self.before = evaluate(self.valid, start, self.start_classifier) if self.valid else None

    def padding_batch(self) -> dict:
        """A batch of the first held line (none on a worker whose share has no usable line), weighing nothing:
        its feature rows (the line end's) neither."""
        batch = self.emptied(self.batches(np.zeros(1, np.int32)))
        return dict(batch, gram_weight=np.zeros_like(batch["gram_weight"])) if "gram_weight" in batch else batch

    @cached_property
    def slices(self) -> np.ndarray:
        """[n_trainable] the batches of an epoch that hold each trainable row (expected), over which the
        anchor's per-epoch weight is spread: a batch gives a row one slice (its words are distinct).
        A row in k of the N lines misses a batch of b lines with probability C(N - k, b) / C(N, b);
        an epoch is N // B batches of B lines and one of the rest (the token budgets cut few). Read
        by the trainer only with an anchor, so computed on first use. By shares: each share's batches
        (of a part's lines) summed over the shares."""
        if self._shares is None:
            return self._share_slices(0, self.n_lines)
        return self._shares.sum_arrays([self._share_slices(*self.line_range[k]) for k in self._shares.held])

    def _share_slices(self, first: int, end: int) -> np.ndarray:
        from scipy.special import gammaln

        ids = self.ids[self.starts[first]:self.starts[end]]
        lengths = np.diff(self.starts[first:end + 1])
        n_local, n_trainable, N = self.rows.n_local, self.rows.n_trainable, end - first
        line = np.repeat(np.arange(N, dtype=np.int64), lengths)
        pairs = np.unique(line * n_local + ids)   # (line, word) once each
        k = np.bincount(pairs % n_local, minlength=n_local)[:n_trainable].astype(np.float64)
        B = min(self.part_lines, N)
        slices = np.zeros(n_trainable)
        for b, batches in ((B, N // B if B else 0), (N % B if B else 0, 1)):
            if b and batches:
                missed = np.exp(gammaln(N - k + 1) - gammaln(N - k - b + 1) - gammaln(N + 1) + gammaln(N - b + 1),
                                where=k <= N - b, out=np.zeros(n_trainable))
                slices += batches * (1 - missed)
        return slices

    def worker_part(self, k: int, size: int) -> Classify:
        """Share k's own lines at a part's lines a batch (a worker's objective is its share's already)."""
        if self.share_index == k:
            return self
        part = copy.copy(self)
        part.share_index, part.lines_per_batch = k, self.part_lines
        return part

    def join(self, parts: list[dict]) -> dict:
        return joined_lines(parts)

    def report(self, words, side) -> tuple[dict, Classifier]:
        """The summary's figures and the trained classifier, given the local rows [n_local, dim] and
        the side table [L + 1, dim + 1] as trained (callables: see Objective.report)."""
        local_vectors, side = words(), side()
        dim, L = self.rows.dim, len(self.labels)
        G = len(self.ngrams) - 1   # the n-gram rows, then the line end's
        classifier = Classifier(self.labels, side[:L, :dim].copy(), side[:L, dim].copy(), self.one_vs_all,
                                self.ngrams[:G], side[L:L + G, :dim].copy() if G else None, side[L + G, :dim].copy())
        figures = {
            "labels": len(self.labels),
            "word_ngrams": self.word_ngrams,
            "ngram_rows": len(self.ngrams) - 1,   # the line end's is not an n-gram's
            "loss_kind": "one-vs-all" if self.one_vs_all else "softmax",
            "train_lines": self.train_lines,
            "train_lines_no_known_word": self.skipped,
            "lines_per_batch": self.part_lines * (self._shares.size if self._shares is not None else 1),
            "fit_seconds": round(self.fit_seconds, 3),   # the classifier-alone fit (and --valid read)
            "valid": None,
        }
        if self.valid is not None:
            v = self.valid
            figures["valid"] = {
                "path": v["path"], "before": self.before, "after": evaluate(self.valid, local_vectors, classifier),
                "lines_unseen_labels": v["unseen"], "first_line_unseen_labels": v["first_unseen"],
                "lines_no_known_word": v["no_word"]}
        return figures, classifier

    # --- host side: lines -> fixed-size batches ----------------------------------------------------
    def side_start(self) -> np.ndarray:
        """[L + G + 1, dim + 1] the fitted classifier (weights, then bias), then the G feature rows: the
        n-gram rows and the line end's (their starts; the last column unused), then the sink."""
        c = self.start_classifier
        table = [np.concatenate([c.weights, c.bias[:, None]], axis=1)]
        if self.ngrams:
            table.append(np.concatenate([self.ngram_start, np.zeros((len(self.ngrams), 1), np.float32)], axis=1))
        return np.concatenate([*table, np.zeros((1, table[0].shape[1]), np.float32)]).astype(np.float32)

    def chunks(self, corpus, local_index) -> Iterator[LinesChunk]:
        yield LinesChunk(self.raw_tokens if self.share_index is None else self.share_raw[self.share_index])

    def units(self, chunk: LinesChunk, rng: np.random.Generator) -> tuple[np.ndarray]:
        """The held lines in a random order; a share's (a worker's, or a part's of the emulation) only."""
        if self.share_index is None:
            return (rng.permutation(self.n_lines),)
        first, end = self.line_range[self.share_index]
        return (first + rng.permutation(end - first),)

    def batches(self, order: np.ndarray) -> Iterator[dict]:
        """Up to lines_per_batch lines, tokens_per_batch tokens and words_per_batch distinct words a
        batch, padded to all three (classify/batches.py, ``line_batches``), with the n-gram rows' own
        two budgets where there are n-grams."""
        grams = GramLines(self.gram_ids, self.gram_starts, len(self.ngrams), self.grams_per_batch,
                          self.distinct_grams_per_batch) if self.ngrams else None
        return line_batches(order, self.ids, self.starts, self.targets, len(self.labels), self.rows.n_local,
                            self.lines_per_batch, self.tokens_per_batch, self.words_per_batch, grams)

    @classmethod
    def compiles(cls, train) -> bool:
        """Any optimizer, with or without the cap; not with an anchor (its proximal step is TensorFlow's alone)."""
        return not train.anchor

    @classmethod
    def why_not_compiled(cls, train) -> str | None:
        return "--anchor" if train.anchor else None

    def compiled_step(self, words, side, matrix, frozen_rows, n_trainable, threads, deterministic=True, update=None):
        """The numba step (embedtune/kernels/classify.py): the TensorFlow step's arithmetic and
        lazy optimizers (sgd, adagrad, adam, with the cap), deterministic whatever the thread count."""
        from embedtune.kernels.classify import SERIAL_LINE_EPOCHS, ClassifyKernel

        return ClassifyKernel(words, side, matrix, frozen_rows, n_trainable, len(self.labels), self.one_vs_all,
                              update, threads, deterministic, small=self.train_lines * self.epochs < SERIAL_LINE_EPOCHS)

    # --- device side: inside the step ------------------------------------------------------------
    def side_ids(self, batch, rng: tf.random.Generator, real: tf.Tensor, sink: int) -> tf.Tensor:
        """[L] every label row (a full softmax), then with n-grams [G + 1] the batch's n-gram rows."""
        labels = tf.range(len(self.labels), dtype=tf.int32)
        return tf.concat([labels, batch["gram"]], 0) if self.ngrams else labels

    def loss(self, words: list[tf.Tensor], side: tf.Tensor, batch) -> tf.Tensor:
        """Summed loss of the batch's lines. words : [rows of "word", [W + 1, dim]]; side : [L, dim + 1].

        A token counts where its word is real (its slot's weight): padding, and every token of a
        batch whose weights the trainer zeroed (a multi-worker run's empty share), count for nothing,
        and a line without a counted token drops out of the loss."""
        B, dim, L = self.lines_per_batch, self.rows.dim, len(self.labels)
        weight = tf.gather(batch["weight"], batch["slot"])
        tokens = _gather_dense_gradient(words[0], batch["slot"]) * weight[:, None]
        sums = tf.math.unsorted_segment_sum(tokens, batch["segment"], B + 1)[:B]
        counts = tf.math.unsorted_segment_sum(weight, batch["segment"], B + 1)[:B]
        means = sums / tf.maximum(counts, 1.0)[:, None]
        if self.ngrams:
            # n-gram rows count in a line's mean as its words do; a line still needs a counted word.
            gram_weight = tf.gather(batch["gram_weight"], batch["gram_slot"])
            grams = _gather_dense_gradient(side[L:, :dim], batch["gram_slot"]) * gram_weight[:, None]
            gram_sums = tf.math.unsorted_segment_sum(grams, batch["gram_segment"], B + 1)[:B]
            gram_counts = tf.math.unsorted_segment_sum(gram_weight, batch["gram_segment"], B + 1)[:B]
            means = (sums + gram_sums) / tf.maximum(counts + gram_counts, 1.0)[:, None]
            side = side[:L]
        logits = tf.matmul(means, side[:, :dim], transpose_b=True) + side[:, dim]
        if self.one_vs_all:
            per_line = tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(labels=batch["targets"], logits=logits),
                                     axis=1)
        else:
            per_line = tf.nn.softmax_cross_entropy_with_logits(labels=batch["targets"], logits=logits)
        return tf.reduce_sum(tf.where(counts > 0, per_line, 0.0))

    # --- what a run reads, refuses and reports (Objective's hooks) ----------------------------------
    @classmethod
    def input_files(cls, config: Config) -> list[tuple[str | None, str]]:
        return [(config.keys_of(ClassifyFiles).valid, "--valid file")]

    @classmethod
    def output_files(cls, config: Config) -> list[tuple[str | None, str]]:
        return [(config.keys_of(ClassifyFiles).save_classifier, "--save-classifier")]

    @classmethod
    def check_run(cls, config: Config, resume: bool, workers: int) -> None:
        if workers > 1 and config.train.keys_of(ClassifyKeys).word_ngrams > 1:
            raise EmbedtuneError("--workers: --word-ngrams runs in one process (the workers would need the "
                                 "n-gram rows' list gathered as the labels are; not built)")

    @classmethod
    def dry_run_reads(cls, corpus) -> None:
        for _ in corpus.valid_examples():   # checked as training would read them
            pass

    @classmethod
    def write_outputs(cls, result, config: Config) -> None:
        path = config.keys_of(ClassifyFiles).save_classifier
        if path:
            save_classifier(result.model, path)



def _gather_dense_gradient(params: tf.Tensor, ids: tf.Tensor) -> tf.Tensor:
    """tf.gather(params, ids) whose gradient is the dense [len(params), dim] sum, made in the step's XLA
    cluster: tf.gather's own (IndexedSlices of one slice a token) leaves the cluster and is summed
    by TensorFlow's kernels, at a higher CPU cost (benchmarks/README.md, classify)."""
    @tf.custom_gradient
    def gather(params):
        def grad(upstream):
            return tf.math.unsorted_segment_sum(upstream, ids, params.shape[0])
        return tf.gather(params, ids), grad
    return gather(params)
