"""classify's --valid: its labelled lines read as the training's rows and labels see them, their scores
for a classifier (the report's lines about them: classify/describe.py)."""

from __future__ import annotations

import numpy as np

from embedtune.corpus.labelled import LabelledCorpus
from embedtune.objectives.classify.model import Classifier, line_features, line_means, scores
from embedtune.objectives.classify.ngrams import NgramRows, ngram_features


def read_valid(corpus: LabelledCorpus, local_index: dict, label_index: dict, grams: NgramRows,
               n: int, outside=None) -> dict | None:
    """The --valid lines as local ids and label ids, and their n-grams of up to ``n`` words that have
    rows (see the package's docstring for what is dropped); None without --valid. outside : word -> the
    vectors file's row of a pretrained word that no training line has (LocalRows.outside), or None: such
    words count with that row, as they do in the output vectors, ids after the local ones ("outside":
    their rows [X, dim], in the order first seen), as fastText's -pretrainedVectors counts them."""
    if corpus.valid is None:
        return None
    ids, starts, gold, gram_ids, gram_starts = [], [0], [], [], [0]
    n_local, extra, extra_rows = len(local_index), {}, []

    def word_id(word):
        i = local_index.get(word)
        if i is None and outside is not None:
            if word not in extra:   # looked up once a word
                row = outside(word)
                extra[word] = None if row is None else n_local + len(extra_rows)
                if row is not None:
                    extra_rows.append(row)
            i = extra[word]
        return i

    unseen, first_unseen, no_word = 0, None, 0
    for example in corpus.valid_examples():
        labels = sorted({label_index[l] for l in example.labels if l in label_index})
        if not labels:
            unseen += 1
            first_unseen = first_unseen or example.line
            continue
        local = [i for i in map(word_id, example.tokens) if i is not None]
        no_word += not local
        ids.extend(local)
        starts.append(len(ids))
        gold.append(labels)
        if grams.ngrams:   # n-grams the training lines made rows of (the others are ignored, as unknown words), the line end
            gram_ids.extend(grams.index[g] for g in line_features(example.tokens, n, grams.index))
            gram_starts.append(len(gram_ids))
    return {"path": corpus.valid, "ids": np.asarray(ids, np.int32), "starts": np.asarray(starts, np.int64),
            "gram_ids": np.asarray(gram_ids, np.int32), "gram_starts": np.asarray(gram_starts, np.int64),
            "gold": gold, "unseen": unseen, "first_unseen": first_unseen, "no_word": no_word,
            "outside": np.asarray(extra_rows, np.float32) if extra_rows else np.zeros((0, 0), np.float32)}


def evaluate(valid: dict, local_vectors: np.ndarray, classifier: Classifier) -> dict:
    """--valid's figures (``read_valid``'s lines) for these local rows and this classifier (its n-gram
    rows included)."""
    ngrams = ngram_features(*classifier.feature_rows(), valid["gram_ids"], valid["gram_starts"])
    if len(valid["outside"]):   # the pretrained words no training line has, after the local rows
        local_vectors = np.concatenate([local_vectors, valid["outside"]])
    return scores(classifier, line_means(local_vectors, valid["ids"], valid["starts"], ngrams), valid["gold"])
