"""Text classification on labelled lines (fastText's supervised model), as an objective.

CORPUS is in fastText's supervised format: one example per line, its labels being the tokens that
start with the label prefix (``__label__`` by default, anywhere on the line, as fastText reads
them), every other token a word:

    __label__noun.animal __label__noun.food a small edible crustacean

The model is fastText's: the mean of the line's word vectors -> a linear layer -> softmax over
the labels, or one sigmoid per label (one-vs-all) when any training line has several labels;
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
first and train the second as unlabelled). On ``--valid``, words outside the training lines'
vocabulary are ignored (as fastText does: its dictionary is the training file's); a line with
none of them is predicted from the biases alone (fastText skips it; counting it keeps the
accuracy's denominator every line); labels never seen in training cannot be predicted and are
dropped from their line, and a line left with no label is skipped with a note
(``valid_lines_unseen_labels``), as fastText's ``test`` does.

Memory: the training lines are kept as int32 ids with an offset a line, and their targets as a dense
float32 [lines, labels] matrix (the fit reads it whole): 6.8 MB for the 65,692 glosses and 26 labels,
but 4 GB for a million lines and a thousand labels; a sparse form would be needed there.
"""

from __future__ import annotations

import copy
import itertools
import json
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from embedtune._tf import lazy as tf

from embedtune.corpus.labelled import LABEL_PREFIX, LabelledCorpus
from embedtune.errors import EmbedtuneError, counted
from embedtune.keys import INT64_MAX, Key, Range
from embedtune.objectives.base import Objective
from embedtune.objectives.classifier import (Classifier, fit_classifier, fit_classifier_by_shares, line_means,
                                             save_classifier, scores, word_ngrams)
from embedtune.objectives.rows import LocalRows

if TYPE_CHECKING:   # the config is built from the objectives' keys, so it is not imported here
    from embedtune.config import TrainConfig

TOKEN_SLACK = 1.25     # a batch's token slots: this many times the mean line length per line slot
WORD_SLACK = 1.25      # a batch's distinct-word slots: this many times the most of WORD_SAMPLES sampled batches
WORD_SAMPLES = 4


# --- the objective ------------------------------------------------------------------------------

@dataclass
class LinesChunk:
    """One epoch: every usable training line once."""

    raw_tokens: int


class Classify(Objective):
    """fastText's supervised model over the local rows of a run (trainable ids first, then frozen)."""

    name = "classify"
    help = "CORPUS of labelled lines, fastText's supervised format"
    keys = (
        Key("label_prefix", str, LABEL_PREFIX, help="Tokens starting with this are labels (fastText's -label)."),
        # each length adds about a row a corpus token (the n-gram rows)
        Key("word_ngrams", int, 1, range=Range(1, 5), only="used", shown_default="1: words only",
            help="Word n-grams up to this length are features too, each a trainable row of the classifier "
                 "(never frozen, not in the output vectors; fastText's -wordNgrams)."),
        Key("ngram_min_count", int, 1, range=Range(1, INT64_MAX), only="used",
            help="An n-gram becomes a row at this many occurrences in the training lines."),
        Key("valid", str, table="", path=True, only="used",
            help="Labelled lines (same format) to report accuracy on, before training (classifier alone) "
                 "and after."),
        Key("save_classifier", str, table="", path=True, only="used",
            help="Write the trained classifier here ('labels dim', then 'label bias w1 ... wdim' a line; "
                 "docs/classify.md)."),
    )
    # Chosen on the WordNet noun glosses' validation split, 5 epochs (benchmarks/classify.py,
    # benchmarks/README.md). batch_size counts lines; window: new words' context window for their start.
    defaults = {"window": 5, "optimizer": "adam", "anchor": 0.0, "epochs": 5, "batch_size": 256}
    learning_rates = {"adam": 0.01}   # same sweep
    settings = ("label_prefix", "word_ngrams", "ngram_min_count")
    word_keys = ("word",)   # the batch entry holding word-table ids
    distinct_ids = True     # a batch lists each of its words once ("word"); the side ids are the labels

    @classmethod
    def memory(cls, train, dim, n_local, corpus_words, corpus_lines):
        """The classifier: a row a label (bounded here by the lines), and with --word-ngrams N at most
        N - 1 n-gram rows a corpus word; the corpus kept as int32 ids with an int64 offset a line (and
        its n-grams' likewise)."""
        grams = (train.word_ngrams - 1) * corpus_words
        return ((min(corpus_lines, 1 << 16) + grams + 1) * (dim + 1) * 4,
                (corpus_words + grams) * 4 + corpus_lines * 8 * (1 + (grams > 0)))

    @classmethod
    def open_corpus(cls, source, config, **options) -> LabelledCorpus:
        return LabelledCorpus(source, label_prefix=config.train.label_prefix, valid=config.valid, **options)

    @classmethod
    def check_corpus_start(cls, path, config) -> None:
        LabelledCorpus.check_start(path, config.train.label_prefix)

    def __init__(self, rows: LocalRows, train: TrainConfig, corpus: LabelledCorpus):
        """corpus : the LabelledCorpus, or shares of its lines (a multi-worker run's distribute.WorkerShare,
        or the tests' one-process emulation holding all of them). By shares, the lines held here are those of
        the shares held, each share's apart; the figures every worker needs alike are combined over all
        shares: label counts (so every worker has the same label index), lines, the batch budgets, the
        classifier-alone fit (each share's loss and gradient summed at every L-BFGS iteration) and the
        anchor's slices. --valid is read and evaluated by the chief alone: it writes the summary, the
        others' figures would go nowhere, and the tables it is evaluated on are the same everywhere."""
        shares = None if isinstance(corpus, LabelledCorpus) else corpus
        source = corpus if shares is None else shares.corpus
        if not isinstance(source, LabelledCorpus):
            raise EmbedtuneError("--objective classify reads a corpus in fastText's supervised format "
                                 "(embedtune.objectives.classify.LabelledCorpus)")
        self.rows = rows
        self.corpus_path = source.path
        self.lines_per_batch = train.batch_size
        index = rows.local_index
        self.word_ngrams, self.ngram_min_count = train.word_ngrams, train.ngram_min_count
        if shares is not None and self.word_ngrams > 1:
            # The n-gram rows' list would have to be gathered across workers as the labels are (not built).
            raise EmbedtuneError("--word-ngrams runs in one process: several workers do not share n-gram rows yet")
        held = [None] if shares is None else [(k, shares.size) for k in shares.held]
        # A worker's config already holds its part of the batch; the emulation's (all shares held) the whole.
        self.part_lines = train.batch_size // shares.size if shares is not None and len(held) > 1 else train.batch_size
        self.share_index = shares.held[0] if shares is not None and len(held) == 1 else None
        ids, starts, line_labels, line_tokens = [], [0], [], []
        figures = []   # each held share's: label counts, lines, raw tokens, skipped lines, several labels
        self.line_range = {}   # share -> its lines' [first, end) among those held
        for share in held:
            label_counts: Counter = Counter()
            first, raw, skipped, several = len(line_labels), 0, 0, False
            for example in source.examples(share):
                raw += len(example.tokens)
                local = [i for i in map(index.get, example.tokens) if i is not None]
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
        for figure, share in zip(figures, held):   # what the batch budgets need, at a part's lines a batch
            figure["budget"] = self._budget_figures(*self.line_range[share and share[0]])
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
        self.targets = self._targets([[self.label_index[l] for l in labels] for labels in line_labels])
        budgets = np.array([f["budget"] for f in figures], np.int64)   # [shares, 4]
        most_tokens, tokens, n_lines, most_distinct = budgets[:, 0].max(), budgets[:, 1].sum(), budgets[:, 2].sum(), \
            budgets[:, 3].max()
        self.tokens_per_batch = int(max(most_tokens, np.ceil(TOKEN_SLACK * (tokens / n_lines) * self.part_lines)))
        self.words_per_batch = min(self.tokens_per_batch, int(max(most_tokens, np.ceil(WORD_SLACK * most_distinct))))
        self.side_fixed_from = None   # every label row and n-gram row trains
        self._shares = shares

        # The classifier alone on the starting vectors: the "before" figure and the training's start.
        start = rows.vectors(np.arange(rows.n_local)) if rows.n_local else np.zeros((0, rows.dim), np.float32)
        self._ngram_rows(line_tokens, start)
        means = line_means(start, self.ids, self.starts, self._ngram_features(self.ngram_start, self.gram_ids,
                                                                               self.gram_starts))
        began = time.perf_counter()
        if shares is None:
            # The fit (TensorFlow's ops and L-BFGS, which release the GIL) on a thread while this one reads
            # --valid (Python): the same fit, the same bits, in about the longer of the two.
            with ThreadPoolExecutor(1) as pool:
                fitted = pool.submit(fit_classifier, means, self.targets, self.one_vs_all)
                self.valid = self._read_valid(source)
                weights, bias = fitted.result()
        else:   # the fit's collectives on this thread
            self.valid = self._read_valid(source) if shares.chief else None
            parts = [(means[a:b], self.targets[a:b]) for a, b in (self.line_range[k] for k in shares.held)]
            weights, bias = fit_classifier_by_shares(parts, self.one_vs_all, self.train_lines, shares.sum_arrays)
        self.fit_seconds = time.perf_counter() - began
        self.start_classifier = Classifier(self.labels, weights.astype(np.float32), bias.astype(np.float32),
                                           self.one_vs_all, self.ngrams, self.ngram_start)
        self.before = self._evaluate(start, self.start_classifier) if self.valid else None

    def part(self, k: int, size: int) -> Classify:
        """Share k's own lines and its part of the batch (the tests' one-process emulation of several
        workers holds all shares)."""
        part = copy.copy(self)
        part.share_index, part.lines_per_batch = k, self.part_lines
        return part

    def concatenate(self, raws: list[dict]) -> dict:
        """The shares' batches (``part``'s) as one batch of this objective's lines_per_batch: the words
        one after another, each part's slots and line segments moved past the parts before it (a
        padding token's segment to the last, padding one)."""
        lines, width, B = len(raws[0]["targets"]), len(raws[0]["word"]), self.lines_per_batch
        batch = {key: np.concatenate([raw[key] for raw in raws]) for key in ("word", "weight", "targets")}
        batch["slot"] = np.concatenate([raw["slot"] + k * width for k, raw in enumerate(raws)]).astype(np.int32)
        batch["segment"] = np.concatenate([np.where(raw["segment"] == lines, B, raw["segment"] + k * lines)
                                           for k, raw in enumerate(raws)]).astype(np.int32)
        batch["pairs"] = sum(raw["pairs"] for raw in raws)
        return batch

    def _ngram_rows(self, line_tokens: list[list[str]], start: np.ndarray) -> None:
        """The n-gram rows (--word-ngrams): the n-grams of 2 to word_ngrams tokens of the training lines
        (``line_tokens``: each line's tokens) seen at least ngram_min_count times, most frequent first (ties
        by text, so runs and resumes agree), as side rows after the labels, each line's as ids (a line's
        2-grams in order, then its 3-grams, ...: ``word_ngrams``' order); each starts at the mean of its
        words' starting rows (words of the run; zero with none), so that a line's mean starts near its
        words' mean and the fitted classifier still fits."""
        self.ngrams: list[str] = []
        self.gram_ids = self.gram_starts = self.ngram_start = None
        self.grams_per_batch = self.distinct_grams_per_batch = 0
        if self.word_ngrams < 2:
            return
        # The n-grams as numbers, not strings: each distinct token an int, each k-gram the rank of (its
        # first k - 1 tokens' (k-1)-gram, its last token), counted and ranked by np.unique; only the
        # rows kept are joined into text, to sort ties by it. The same rows, ids and starts as a string
        # an occurrence (word_ngrams, a Counter, a dict lookup each), in about half the time
        # (benchmarks/README.md, classify).
        n_lines = len(line_tokens)
        tokens = list(itertools.chain.from_iterable(line_tokens))
        lengths = np.fromiter(map(len, line_tokens), np.int64, n_lines)
        line_of = np.repeat(np.arange(n_lines), lengths)
        left = np.repeat(np.cumsum(lengths), lengths) - np.arange(len(tokens))   # tokens to the line's end
        seen: dict[str, int] = {}   # token -> where it first occurs
        token_ids = np.fromiter(map(seen.setdefault, tokens, itertools.count()), np.int64, len(tokens))
        width = len(tokens) + 1   # every token id and k-gram rank is below it
        prefix = token_ids        # at each place, the id of the (k-1)-gram starting there
        gram_at, gram_line, first, size = [], [], [], []   # per k: each occurrence's gram, its line; each gram's first place
        for k in range(2, self.word_ngrams + 1):
            at = np.flatnonzero(left >= k)
            _, first_k, rank = np.unique(prefix[at] * width + token_ids[at + k - 1], return_index=True,
                                         return_inverse=True)
            offset = sum(map(len, first))
            gram_at.append(offset + rank)
            gram_line.append(line_of[at])
            first.append(at[first_k])
            size.append(np.full(len(first_k), k))
            prefix = np.zeros(len(tokens), np.int64)
            prefix[at] = rank
        # Occurrences in word_ngrams' order: by line (stable: within a line by k, then place).
        gram_line = np.concatenate(gram_line)
        order = np.argsort(gram_line, kind="stable")
        gram_at, gram_line = np.concatenate(gram_at)[order], gram_line[order]
        first, size = np.concatenate(first), np.concatenate(size)
        counts = np.bincount(gram_at, minlength=len(first))
        kept = np.flatnonzero(counts >= self.ngram_min_count)
        texts = [" ".join(tokens[p:p + k]) for p, k in zip(first[kept].tolist(), size[kept].tolist())]
        # Most frequent first, ties by text: sorted by text, then a stable sort by count.
        by_text = np.array(sorted(range(len(kept)), key=texts.__getitem__), np.int64)
        by_count = by_text[np.argsort(-counts[kept[by_text]], kind="stable")]
        self.ngrams = [texts[i] for i in by_count.tolist()]
        self.ngram_index = {g: i for i, g in enumerate(self.ngrams)}
        row = np.full(len(first), -1, np.int64)
        row[kept[by_count]] = np.arange(len(kept))
        ids = row[gram_at]
        known = ids >= 0
        self.gram_ids = ids[known].astype(np.int32)
        self.gram_starts = np.concatenate([[0], np.cumsum(np.bincount(gram_line[known], minlength=n_lines))])
        # Each n-gram's words, in order: the tokens from its first place on.
        index = self.rows.local_index
        local = np.full(len(tokens) + 1, -1, np.int64)   # token id -> local row (-1: not a word of the run)
        local[np.fromiter(seen.values(), np.int64, len(seen))] = np.fromiter(
            map(index.get, seen, itertools.repeat(-1)), np.int64, len(seen))
        gram_size = size[kept[by_count]]
        of_gram = np.repeat(np.arange(len(self.ngrams)), gram_size)
        places = np.repeat(first[kept[by_count]], gram_size) + np.arange(len(of_gram)) \
            - np.repeat(np.cumsum(gram_size) - gram_size, gram_size)
        word_ids = local[token_ids[places]]
        found = word_ids >= 0
        self.ngram_start = line_means(start, word_ids[found], np.concatenate(
            [[0], np.cumsum(np.bincount(of_gram[found], minlength=len(self.ngrams)))]))
        if len(self.gram_ids):
            lengths = np.diff(self.gram_starts)
            self.grams_per_batch = int(max(lengths.max(), np.ceil(TOKEN_SLACK * lengths.mean() * self.lines_per_batch)))
            self.distinct_grams_per_batch = min(self.grams_per_batch,
                                                self._distinct_budget(self.gram_ids, self.gram_starts))

    def _ngram_features(self, table, ids, starts):
        """line_means' ``ngrams`` argument, or None without n-gram rows."""
        return None if not self.ngrams else (table, ids, starts)

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

    def _budget_figures(self, first: int, end: int) -> list[int]:
        """[longest line, tokens, lines, most distinct words] of lines [first, end) held here, the last
        seen in a few batches of part_lines lines drawn with a fixed seed (the run's own random state is
        left alone); zeros for no line. ``__init__`` makes the batch budgets from every share's: token
        slots TOKEN_SLACK times the mean line length a line slot, distinct-word slots WORD_SLACK times
        the most distinct words, each at least the longest line."""
        if end == first:
            return [0, 0, 0, 0]
        lengths = np.diff(self.starts[first:end + 1])
        most = _most_distinct(self.ids, self.starts, first, end, self.part_lines)
        return [int(lengths.max()), int(lengths.sum()), int(end - first), most]

    def _distinct_budget(self, ids: np.ndarray, starts: np.ndarray) -> int:
        """Distinct n-gram slots a batch (one process: n-grams are not built by shares): WORD_SLACK
        times the most distinct ``ids`` seen in a few batches of lines drawn with a fixed seed (the run's
        own random state is left alone), and at least a line's (_budget_figures does the words')."""
        most = _most_distinct(ids, starts, 0, self.n_lines, self.lines_per_batch)
        return int(max(np.diff(starts).max(), np.ceil(WORD_SLACK * most)))

    def _targets(self, gold: list[list[int]]) -> np.ndarray:
        targets = np.zeros((len(gold), len(self.labels)), np.float32)
        for row, labels in enumerate(gold):
            targets[row, labels] = 1.0
        if not self.one_vs_all:   # one label a line (a repeated one counts once)
            targets /= targets.sum(axis=1, keepdims=True)
        return targets

    def _read_valid(self, corpus: LabelledCorpus) -> dict | None:
        """The --valid lines as local ids and label ids (see the module's docstring for what is dropped)."""
        if corpus.valid is None:
            return None
        index = self.rows.local_index
        ids, starts, gold, gram_ids, gram_starts = [], [0], [], [], [0]
        unseen, first_unseen, no_word = 0, None, 0
        for example in corpus.valid_examples():
            labels = sorted({self.label_index[l] for l in example.labels if l in self.label_index})
            if not labels:
                unseen += 1
                first_unseen = first_unseen or example.line
                continue
            local = [i for i in map(index.get, example.tokens) if i is not None]
            no_word += not local
            ids.extend(local)
            starts.append(len(ids))
            gold.append(labels)
            if self.ngrams:   # n-grams the training lines made rows of; the others are ignored, as unknown words
                gram_ids.extend(i for i in map(self.ngram_index.get, word_ngrams(example.tokens, self.word_ngrams))
                                if i is not None)
                gram_starts.append(len(gram_ids))
        return {"path": corpus.valid, "ids": np.asarray(ids, np.int32), "starts": np.asarray(starts, np.int64),
                "gram_ids": np.asarray(gram_ids, np.int32), "gram_starts": np.asarray(gram_starts, np.int64),
                "gold": gold, "unseen": unseen, "first_unseen": first_unseen, "no_word": no_word}

    def _evaluate(self, local_vectors: np.ndarray, classifier: Classifier) -> dict:
        """--valid's figures for these local rows and this classifier (its n-gram rows included)."""
        v = self.valid
        ngrams = self._ngram_features(classifier.ngram_vectors, v["gram_ids"], v["gram_starts"])
        return scores(classifier, line_means(local_vectors, v["ids"], v["starts"], ngrams), v["gold"])

    def report(self, words, side) -> tuple[dict, Classifier]:
        """The summary's figures and the trained classifier, given the local rows [n_local, dim] and
        the side table [L + 1, dim + 1] as trained (callables: see Objective.report)."""
        local_vectors, side = words(), side()
        dim, L = self.rows.dim, len(self.labels)
        classifier = Classifier(self.labels, side[:L, :dim].copy(), side[:L, dim].copy(), self.one_vs_all,
                                self.ngrams, side[L:L + len(self.ngrams), :dim].copy() if self.ngrams else None)
        figures = {
            "labels": len(self.labels),
            "word_ngrams": self.word_ngrams,
            "ngram_rows": len(self.ngrams),
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
                "path": v["path"], "before": self.before, "after": self._evaluate(local_vectors, classifier),
                "lines_unseen_labels": v["unseen"], "first_line_unseen_labels": v["first_unseen"],
                "lines_no_known_word": v["no_word"]}
        return figures, classifier

    # --- host side: lines -> fixed-size batches ----------------------------------------------------
    def side_start(self) -> np.ndarray:
        """[L + G + 1, dim + 1] the fitted classifier (weights, then bias), then the G n-gram rows (their
        starts; the last column unused), then the sink."""
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
        batch, padded to all three (one traced step shape). "word" [W + 1] the batch's distinct local
        ids (sorted; the last slot and unused ones are padding), "weight" [W + 1] 1 for a real one;
        "slot" [T] each token's place in "word" (padding: the last slot), "segment" [T] its line slot
        (padding: the extra slot B); "targets" [B, L].

        The step gathers, and the trainer merges and updates, each distinct row once: a row repeated
        in a batch (``the``, ``of``: 13.9k tokens but 4.3k distinct words in 1,024 glosses) comes
        back from the step already summed, and the trainer does not merge it (``distinct_ids``). That
        and token slots 1.25x the mean instead of 2x, against a slot a token, cut the step's CPU
        (benchmarks/README.md, classify)."""
        B, T, W = self.lines_per_batch, self.tokens_per_batch, self.words_per_batch
        starts, lengths = self.starts[:-1], np.diff(self.starts)
        if not self.n_lines:   # a worker whose share has no usable line: its padding has the shape, nothing in it
            if not len(order):
                return
            yield {"word": np.zeros(W + 1, np.int32), "weight": np.zeros(W + 1, np.float32),
                   "slot": np.full(T, W, np.int32), "segment": np.full(T, B, np.int32),
                   "targets": np.zeros((B, len(self.labels)), np.float32), "pairs": 0}
            return
        if self.ngrams:
            TG, G = self.grams_per_batch, self.distinct_grams_per_batch
            gram_starts, gram_lengths = self.gram_starts[:-1], np.diff(self.gram_starts)
        at = 0
        while at < len(order):
            # The most lines from ``at`` on that fit the token budget, then the distinct-word one (then
            # the n-grams' two, which may cut the lines again).
            take, flat, words, slot = self._cut(order[at:at + B], self.ids, starts, lengths, T, W)
            if self.ngrams:
                fewer, gram_flat, grams, gram_slot = self._cut(take, self.gram_ids, gram_starts, gram_lengths, TG, G)
                if len(fewer) < len(take):
                    take, flat, words, slot = self._cut(fewer, self.ids, starts, lengths, T, W)
            at += len(take)
            used, n_words = len(flat), len(words)
            word = np.zeros(W + 1, np.int32)
            word[:n_words] = words
            weight = np.zeros(W + 1, np.float32)
            weight[:n_words] = 1
            slots = np.full(T, W, np.int32)
            slots[:used] = slot
            segment = np.full(T, B, np.int32)
            segment[:used] = np.repeat(np.arange(len(take), dtype=np.int32), lengths[take])
            targets = np.zeros((B, len(self.labels)), np.float32)
            targets[:len(take)] = self.targets[take]
            batch = {"word": word, "weight": weight, "slot": slots, "segment": segment, "targets": targets,
                     "pairs": len(take)}
            if self.ngrams:
                # Side ids: label rows are [0, L), n-gram g is row L + g; padding reads the sink row.
                L, sink = len(self.labels), len(self.labels) + len(self.ngrams)
                gram = np.full(G + 1, sink, np.int32)
                gram[:len(grams)] = L + grams
                gram_weight = np.zeros(G + 1, np.float32)
                gram_weight[:len(grams)] = 1
                gram_slots = np.full(TG, G, np.int32)
                gram_slots[:len(gram_flat)] = gram_slot
                gram_segment = np.full(TG, B, np.int32)
                gram_segment[:len(gram_flat)] = np.repeat(np.arange(len(take), dtype=np.int32), gram_lengths[take])
                batch.update(gram=gram, gram_weight=gram_weight, gram_slot=gram_slots, gram_segment=gram_segment)
            yield batch

    def _cut(self, take: np.ndarray, ids: np.ndarray, starts: np.ndarray, lengths: np.ndarray, T: int, W: int):
        """(the most lines of ``take`` from its start, and at least one, whose ``ids`` fit in T tokens and W
        distinct ids; those lines' ids in order; their distinct ids, sorted; each id's place among them)."""
        ends = np.cumsum(lengths[take])
        take = take[:max(np.searchsorted(ends, T, side="right"), 1)]
        n, ends = lengths[take], ends[:len(take)]
        flat = ids[np.arange(ends[-1]) + np.repeat(starts[take] - (ends - n), n)]
        words, slot = self._distinct(flat, ids)
        if len(words) > W:
            _, first = np.unique(flat, return_index=True)
            seen = np.zeros(len(flat) + 1, np.int64)
            seen[first + 1] = 1
            distinct = np.cumsum(seen)[ends]   # distinct ids up to each line's end (a line may have none)
            take = take[:max(np.searchsorted(distinct, W, side="right"), 1)]
            flat = flat[:ends[len(take) - 1]]
            words, slot = self._distinct(flat, ids)
        return take, flat, words, slot

    def _distinct(self, flat: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the distinct ids of ``flat``, sorted; each token's index among them): np.unique's, by a
        mark a row where the rows are few against the tokens, instead of a sort, which cost more
        (benchmarks/README.md, classify). ``ids``: the word ids (local rows) or the n-gram ids."""
        rows = self.rows.n_local if ids is self.ids else len(self.ngrams)
        if rows > 16 * len(flat):
            return np.unique(flat, return_inverse=True)
        present = np.zeros(rows, bool)
        present[flat] = True
        words = np.flatnonzero(present)
        place = np.empty(rows, np.int32)
        place[words] = np.arange(len(words), dtype=np.int32)
        return words, place[flat]

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
        from embedtune.kernels.classify import ClassifyKernel

        return ClassifyKernel(words, side, matrix, frozen_rows, n_trainable, len(self.labels), self.one_vs_all,
                              update, threads)

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
    def input_files(cls, config) -> list[tuple[str | None, str]]:
        return [(config.valid, "--valid file")]

    @classmethod
    def output_files(cls, config) -> list[tuple[str | None, str]]:
        return [(config.save_classifier, "--save-classifier")]

    @classmethod
    def check_run(cls, config, resume: bool, workers: int) -> None:
        if workers > 1 and config.train.word_ngrams > 1:
            raise EmbedtuneError("--workers: --word-ngrams runs in one process (the workers would need the "
                                 "n-gram rows' list gathered as the labels are; not built)")

    @classmethod
    def dry_run_reads(cls, corpus) -> None:
        for _ in corpus.valid_examples():   # checked as training would read them
            pass

    @classmethod
    def write_outputs(cls, result, config) -> None:
        if config.save_classifier:
            save_classifier(result.model, config.save_classifier)

    @classmethod
    def report_lines(cls, result, config) -> list[str]:
        """The run's lines, then labels, skipped lines, --valid before and after, the classifier written."""
        lines = super().report_lines(result, config)
        s = result.stats
        lines.append(f"Classifier: {counted(s['labels'], 'label')} ({s['loss_kind']}), {s['train_lines']:,} "
                     "training lines"
                     + (f", {counted(s['train_lines_no_known_word'], 'line')} with no known word skipped"
                        if s["train_lines_no_known_word"] else "")
                     + (f", {counted(s['ngram_rows'], 'n-gram row')} (up to {s['word_ngrams']} words)"
                        if s["ngram_rows"] else ""))
        v = s["valid"]
        if v is not None:
            def figure(f):
                if f["accuracy"] is None:
                    return "no line"
                r1 = (f"; P@1 {f['precision_at_1']:.4f}, R@1 {f['recall_at_1']:.4f}"
                      if s["loss_kind"] == "one-vs-all" else "")
                return f"{f['accuracy']:.4f}{r1}"
            lines.append(f"Valid {v['path']} ({v['after']['lines']:,} lines): accuracy before {figure(v['before'])} "
                         f"(classifier alone), after {figure(v['after'])}")
            if note := valid_note(s):
                lines.append(f"Note: {note}")
        if config.save_classifier:
            lines.append(f"Wrote the classifier to {config.save_classifier}")
        return lines


def _most_distinct(ids: np.ndarray, starts: np.ndarray, first: int, end: int, lines: int) -> int:
    """The most distinct ``ids`` in WORD_SAMPLES batches of ``lines`` lines drawn from lines [first, end)
    with a fixed seed (the run's own random state is left alone): what a batch's distinct slots follow."""
    rng, most = np.random.default_rng(0), 0
    for _ in range(WORD_SAMPLES):
        take = first + rng.choice(end - first, min(lines, end - first), replace=False)
        flat = np.concatenate([ids[starts[i]:starts[i + 1]] for i in take])
        most = max(most, len(np.unique(flat)))
    return most


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


def valid_note(figures: dict) -> str | None:
    """A note for --valid lines skipped because none of their labels was seen in training."""
    v = figures.get("valid")
    if not v or not v["lines_unseen_labels"]:
        return None
    return (f"{counted(v['lines_unseen_labels'], 'line')} of {v['path']} (first: line {v['first_line_unseen_labels']}) "
            "had only labels the training lines never have; skipped, as fastText's test does")

