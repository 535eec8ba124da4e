"""What changed between two sets of vectors, how good they are, and who their neighbours are.

Everything here works on :class:`embedtune.vectors.Vectors`; reading files is the formats' job (diff_file
takes the new file's rows a block at a time from formats.stream_table, so that one matrix is held, not two).

    diff.py       rows moved, words added or lost, frozen rows checked (``embedtune diff``; the verdict:
                  embedtune.frozen)
    evaluation.py word-pair similarity and analogies (``embedtune eval``)
    analogy_search.py  every analogy question answered at once, as gensim's most_similar would
    gensim_compat.py   gensim's test-data folder and unit vectors, without importing gensim
    neighbors.py  nearest neighbours by cosine (``embedtune neighbors``)
"""

from embedtune.compare.diff import Diff, MovedWord, check_frozen, config_frozen_words, diff_file, diff_vectors
from embedtune.compare.evaluation import (AnalogyScore, AnalogySection, Evaluation, SimilarityScore,
                                        default_analogy_files, default_similarity_files, evaluate,
                                        evaluate_analogies, evaluate_similarity, format_score)
from embedtune.compare.neighbors import Neighbors, WordNeighbors, nearest_neighbors
from embedtune.frozen import FrozenCheck

__all__ = ["Diff", "FrozenCheck", "MovedWord", "check_frozen", "config_frozen_words", "diff_file", "diff_vectors",
           "AnalogyScore", "AnalogySection", "Evaluation", "SimilarityScore", "default_analogy_files",
           "default_similarity_files", "evaluate", "evaluate_analogies", "evaluate_similarity", "format_score", "Neighbors",
           "WordNeighbors", "nearest_neighbors"]
