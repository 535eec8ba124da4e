"""classify's --valid: its labelled lines read as the training's rows and labels see them, their scores
for a classifier, and the report's lines about them."""

from __future__ import annotations

import numpy as np

from embedtune.corpus.labelled import LabelledCorpus
from embedtune.errors import counted
from embedtune.objectives.classify.model import Classifier, line_means, scores, word_ngrams
from embedtune.objectives.classify.ngrams import NgramRows, ngram_features


def read_valid(corpus: LabelledCorpus, local_index: dict, label_index: dict, grams: NgramRows,
               n: int) -> dict | None:
    """The --valid lines as local ids and label ids, and their n-grams of up to ``n`` words that have
    rows (see the package's docstring for what is dropped); None without --valid."""
    if corpus.valid is None:
        return None
    ids, starts, gold, gram_ids, gram_starts = [], [0], [], [], [0]
    unseen, first_unseen, no_word = 0, None, 0
    for example in corpus.valid_examples():
        labels = sorted({label_index[l] for l in example.labels if l in label_index})
        if not labels:
            unseen += 1
            first_unseen = first_unseen or example.line
            continue
        local = [i for i in map(local_index.get, example.tokens) if i is not None]
        no_word += not local
        ids.extend(local)
        starts.append(len(ids))
        gold.append(labels)
        if grams.ngrams:   # n-grams the training lines made rows of; the others are ignored, as unknown words
            gram_ids.extend(i for i in map(grams.index.get, word_ngrams(example.tokens, n)) if i is not None)
            gram_starts.append(len(gram_ids))
    return {"path": corpus.valid, "ids": np.asarray(ids, np.int32), "starts": np.asarray(starts, np.int64),
            "gram_ids": np.asarray(gram_ids, np.int32), "gram_starts": np.asarray(gram_starts, np.int64),
            "gold": gold, "unseen": unseen, "first_unseen": first_unseen, "no_word": no_word}


def evaluate(valid: dict, local_vectors: np.ndarray, classifier: Classifier) -> dict:
    """--valid's figures (``read_valid``'s lines) for these local rows and this classifier (its n-gram
    rows included)."""
    ngrams = ngram_features(classifier.ngrams, classifier.ngram_vectors, valid["gram_ids"], valid["gram_starts"])
    return scores(classifier, line_means(local_vectors, valid["ids"], valid["starts"], ngrams), valid["gold"])


def valid_lines(s: dict) -> list[str]:
    """The report's lines about --valid from the run's figures ``s``: before and after, and a note."""
    v = s["valid"]
    if v is None:
        return []

    def figure(f):
        if f["accuracy"] is None:
            return "no line"
        r1 = (f"; P@1 {f['precision_at_1']:.4f}, R@1 {f['recall_at_1']:.4f}"
              if s["loss_kind"] == "one-vs-all" else "")
        return f"{f['accuracy']:.4f}{r1}"
    lines = [f"Valid {v['path']} ({v['after']['lines']:,} lines): accuracy before {figure(v['before'])} "
             f"(classifier alone), after {figure(v['after'])}"]
    if note := valid_note(s):
        lines.append(f"Note: {note}")
    return lines


def valid_note(figures: dict) -> str | None:
    """A note for --valid lines skipped because none of their labels was seen in training."""
    v = figures.get("valid")
    if not v or not v["lines_unseen_labels"]:
        return None
    return (f"{counted(v['lines_unseen_labels'], 'line')} of {v['path']} (first: line {v['first_line_unseen_labels']}) "
            "had only labels the training lines never have; skipped, as fastText's test does")
