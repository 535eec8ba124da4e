"""classify's --valid: its labelled lines read as the training's rows and labels see them, their scores
for a classifier (the report's lines about them: embedtune/report/text.py)."""

from __future__ import annotations

import numpy as np

from embedtune.corpus.labelled import LabelledCorpus
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
