"""gensim's ``most_similar(positive=[b, c], negative=[a], topn=5, restrict_vocab=r)`` for many analogy
questions at once, with gensim's answers (tests/test_compare.py compares them question by question).

Scoring every question against every word is a (questions x dim) @ (dim x words) product: 19,486 Google
questions and 300,000 words are 6e11 flops. But a question's query is (b + c - a) / |b + c - a| over
unit vectors, and the questions share few words (about 900), so the products of those words with
every row (900 x 300,000) give every question's scores by two additions and a scale: twenty times fewer
flops, and the additions run inside the compiled screen below, never stored (benchmarks/README.md,
eval_speed). The scores so found differ from gensim's in the last bits, so they only pick candidates:
every row within MARGIN of a question's 8th best is kept and re-scored with gensim's own formula.

The screen need not add up every row for every question either. The questions share their (a, b) pairs too
(550 in the Google set, each asked with about 35 words c), so a tile of rows is cut into GROUPS groups and the
largest (b - a) of each pair and the largest c of each word in each group are found once; a group whose two
largest add up to less than a question's threshold holds no candidate for it and is passed over (float32
addition is monotonic, so the bound holds in the screen's own arithmetic). About 1 group in 100 is read.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

from embedtune.cores import local_cores
from embedtune.kernels.compiling import listen

listen()   # a compile said (kernels/compiling.py)

# Rows of the vocabulary screened at a time, each question reading its groups' bounds and the few groups they
# let through, and groups a tile is cut into: group g holds the tile's rows g, g + GROUPS, g + 2 * GROUPS, ...
# (8 rows), so that its largest values come from halving the tile elementwise, which vectorises. Smaller groups
# let fewer rows through but cost each question more bounds to test. With the products made a tile at a time
# (BLOCK_ROWS), tiles of 2,048 rows in groups of 8 took the least CPU of 512 to 4,096 rows in groups of 4 to 16
# (benchmarks/log/eval_speed.md).
TILE_ROWS = 2048
GROUPS = 256
# Rows whose products are computed by one matrix product: one tile (a block of several, as the tests set, is cut
# to what BLOCK_BYTES holds, never below a tile). The screen reads each tile's products several times
# over (the groups' bounds, then the rows of the groups let through); a tile's products for the Google set's
# 904 words (7 MB) stay in the processor's last-level cache where a block of 8 tiles did not. Large blocks were
# once chosen for OpenBLAS's threads, which waited for each other on a busy machine; eval runs it on one
# thread (cli/blas_threads.py), so a small product costs nothing more.
BLOCK_ROWS = TILE_ROWS
BLOCK_BYTES = 64 << 20
# Candidates kept per question: its 8 best and any within MARGIN of the 8th. More than that (rows
# of equal vectors, say) sends the question to the plain product with every row.
SLOTS = 32
# gensim's most_similar(topn=5) ranks the 5 + 3 best words, then drops the question's own three.
TOP = 8
# Questions whose candidates are re-scored together (_ranked_all): their rows gathered at once.
RANK_QUESTIONS = 2048
# The screen's scores and gensim's differ by float32 rounding (~1e-7): a row within this margin of
# the threshold is kept and re-scored.
MARGIN = 1e-4


@njit(nogil=True, cache=True)
def _group_maxima(products, minus, plus, lo, hi, groups, scratch, out):
    """out[i, g] = the largest products[plus[i], r] - products[minus[i], r] (products[plus[i], r] when
    minus[i] < 0) over the rows r = lo + g, lo + g + groups, ... below hi; -inf for a group without rows.

    scratch : float32 [>= hi - lo]; out : float32 [len(plus), >= groups]
    """
    for i in range(plus.size):
        width = hi - lo
        y = products[plus[i], lo:hi]
        if minus[i] >= 0:
            x = products[minus[i], lo:hi]
            for c in range(width):
                scratch[c] = y[c] - x[c]
        else:
            for c in range(width):
                scratch[c] = y[c]
        # Halving keeps each row's group: row c and row c + half are in one group while half is a
        # multiple of groups. Slices indexed from 0 let numba prove the indices non-negative and vectorise.
        while width % 2 == 0 and (width // 2) % groups == 0:
            half = width // 2
            left, right = scratch[:half], scratch[half:width]
            for c in range(half):
                a, b = left[c], right[c]
                left[c] = a if a > b else b
            width = half
        largest = out[i]
        for g in range(groups):
            largest[g] = -np.inf
        for start in range(0, width, groups):
            part = scratch[start:min(start + groups, width)]
            for g in range(part.size):
                a, b = part[g], largest[g]
                largest[g] = a if a > b else b


@njit(nogil=True, cache=True)
def _screen(products, first_row, tile_rows, groups, pair_a, pair_b, c_rows, q_pair, q_c, scale, slot_score, slot_row,
            count, overflow, margin, top, pair_bound, c_bound, scratch):
    """Keep, for each question, the rows of this block scoring above its running threshold, a tile of
    ``tile_rows`` rows at a time for all questions.

    products : float32 [n_words, width], the question words' unit vectors times the block's unit rows
    pair_a, pair_b : int [n_pairs], the rows of ``products`` of each (a, b) pair; c_rows : int [n_c], of each c
    q_pair, q_c : int [m], each question's pair and c (indices into those); scale : float32 [m], 1 / |b + c - a|
    slot_score, slot_row : [m, SLOTS], each question's candidates so far, best first; count : [m],
        how many; overflow : bool [m], set when a question needs more slots than it has
    pair_bound : float32 [n_pairs, groups], c_bound : float32 [n_c, groups], scratch : float32 [tile_rows]:
        room for _group_maxima
    A row's score is (b - a + c) * scale in float32, in that order.
    """
    cap = slot_score.shape[1]
    no_row = np.full(c_rows.size, -1, np.int64)
    for lo in range(0, products.shape[1], tile_rows):
        hi = min(lo + tile_rows, products.shape[1])
        _group_maxima(products, pair_a, pair_b, lo, hi, groups, scratch, pair_bound)
        _group_maxima(products, no_row, c_rows, lo, hi, groups, scratch, c_bound)
        for q in range(q_pair.size):
            if overflow[q]:
                continue
            most_b_a, most_c = pair_bound[q_pair[q]], c_bound[q_c[q]]
            ra, rb, rc = pair_a[q_pair[q]], pair_b[q_pair[q]], c_rows[q_c[q]]
            f = scale[q]
            n = count[q]
            # float32 throughout (a float64 -inf would make every comparison a float64 one, half as wide)
            threshold = slot_score[q, top - 1] - margin if n >= top else np.float32(-np.inf)
            # The bound is compared with the scale on the other side (f > 0), a little below threshold / f
            # (more than its rounding and the product's, and than a quotient too small for a float32 to
            # hold), so every row the exact test below keeps is in a group that passes.
            unscaled = threshold / f
            unscaled -= abs(unscaled) * np.float32(1e-5) + np.float32(1e-30)
            # One pass asking whether any group may hold a hit first: most tiles have none. It vectorises, and an
            # or of booleans takes 8 floats a step where a count in int64 took 4 (benchmarks/log/eval_speed.md).
            hit = False
            for g in range(groups):
                hit |= most_b_a[g] + most_c[g] >= unscaled
            if not hit:
                continue
            for g in range(groups):
                if not most_b_a[g] + most_c[g] >= unscaled:
                    continue
                for c in range(lo + g, hi, groups):
                    s = (products[rb, c] - products[ra, c] + products[rc, c]) * f
                    if not s >= threshold:
                        continue
                    if n == cap:
                        overflow[q] = True
                        break
                    i = n   # insertion keeps the slots sorted best first
                    while i > 0 and slot_score[q, i - 1] < s:
                        slot_score[q, i] = slot_score[q, i - 1]
                        slot_row[q, i] = slot_row[q, i - 1]
                        i -= 1
                    slot_score[q, i] = s
                    slot_row[q, i] = first_row + c
                    n += 1
                    if n >= top:
                        threshold = slot_score[q, top - 1] - margin
                        while n > top and slot_score[q, n - 1] < threshold:
                            n -= 1
                        unscaled = threshold / f
                        unscaled -= abs(unscaled) * np.float32(1e-5) + np.float32(1e-30)
                if overflow[q]:
                    break
            count[q] = n


@njit(nogil=True, cache=True, error_model="numpy")
def _fill_unit_rows_transposed(matrix, norms, out):
    """out[:, r] = matrix[r] / norms[r], zeros where that has a value that is not finite."""
    dim = matrix.shape[1]
    for r in range(out.shape[1]):
        finite = True
        for j in range(dim):
            finite &= np.isfinite(matrix[r, j] / norms[r])
        for j in range(dim):
            out[j, r] = matrix[r, j] / norms[r] if finite else np.float32(0.0)


def _unit_rows_transposed(matrix: np.ndarray, norms: np.ndarray, restrict: int) -> np.ndarray:
    """float32 [dim, restrict]: the first rows divided by their norms, a row without direction (zero,
    NaN) as zeros; one compiled pass, where numpy's took three and a temporary per block."""
    unit_t = np.empty((matrix.shape[1], restrict), np.float32)
    _fill_unit_rows_transposed(matrix, norms, unit_t)
    return unit_t


def _queries(matrix: np.ndarray, norms: np.ndarray, abc: np.ndarray) -> np.ndarray:
    """float32 [m, dim]: gensim's unit query of each question, the same bits: get_mean_vector of
    positive [b, c] and negative [a] (pre-normalised, in that order), then unitvec."""
    from embedtune.compare.gensim_compat import unit_rows

    m, dim = abc.shape[0], matrix.shape[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        means = np.zeros((m, dim), matrix.dtype)
        total_weight = 0
        for weight, column in zip(np.concatenate((np.ones(2), -1.0 * np.ones(1))), (1, 2, 0)):
            rows = abc[:, column]
            means += weight * (matrix[rows] / norms[rows, None])
            total_weight += abs(weight)
        means = means / total_weight
    return unit_rows(means)


def _ranked(matrix: np.ndarray, norms: np.ndarray, candidates: np.ndarray, query: np.ndarray, top: int) -> list:
    """The top best of the candidate rows (ascending) by gensim's score, the dot of each row with the
    unit query divided by the row's norm; equal scores in row order, as gensim's stable sort has them.
    Called under np.errstate(divide="ignore", invalid="ignore"): a zero row's score is NaN, as gensim's."""
    exact = matrix[candidates] @ query / norms[candidates]
    return candidates[np.lexsort((candidates, -exact))][:top].tolist()


def _ranked_all(matrix: np.ndarray, norms: np.ndarray, rows: np.ndarray, counts: np.ndarray, queries: np.ndarray,
                top: int) -> np.ndarray:
    """_ranked for many questions at once: int64 [len(counts), top], each question's best rows (-1 past its
    count). rows : every question's candidates one after the other in ascending order, counts[j] of question j.

    The rows are gathered once and ranked by one sort (the question first): what is left per question is
    the product with its query, one sgemv on its own candidates' rows as _ranked's, so the same bits
    (tests/test_compare.py). Called under np.errstate(divide="ignore", invalid="ignore"), as _ranked."""
    m = len(counts)
    ends = np.cumsum(counts)
    starts = ends - counts
    gathered = matrix[rows]
    exact = np.concatenate([gathered[a:b] @ q for q, a, b in zip(queries, starts.tolist(), ends.tolist())]
                           + [np.empty(0, matrix.dtype)])
    exact /= norms[rows]
    question = np.repeat(np.arange(m), counts)
    order = np.lexsort((rows, -exact, question))   # by question, then as _ranked
    ranked = np.full((m, top), -1, np.int64)
    place = np.arange(len(rows)) - np.repeat(starts, counts)   # each sorted row's place in its question
    kept = place < top
    ranked[question[kept], place[kept]] = rows[order][kept]
    return ranked


class _Share:
    """One thread's questions as the screen takes them: their own words' unit vectors (the rows of the thread's own
    products), their (a, b) pairs and words c, each once, as rows of those products, each question's pair and c as
    indices into those, and the thread's own room for the products and the groups' bounds."""

    def __init__(self, questions: slice, abc: np.ndarray, unit_t: np.ndarray, restrict: int):
        self.questions = questions
        words, inverse = np.unique(abc[questions], return_inverse=True)
        qa, qb, qc = inverse.reshape(-1, 3).T
        self.word_units = np.ascontiguousarray(unit_t[:, words].T)
        pairs, q_pair = np.unique(np.stack([qa, qb], axis=1), axis=0, return_inverse=True)
        self.pair_a, self.pair_b = np.ascontiguousarray(pairs[:, 0]), np.ascontiguousarray(pairs[:, 1])
        self.c_rows, q_c = np.unique(qc, return_inverse=True)
        self.q_pair, self.q_c = q_pair.reshape(-1).astype(np.int64), q_c.reshape(-1).astype(np.int64)
        self.pair_bound = np.empty((len(pairs), GROUPS), np.float32)
        self.c_bound = np.empty((len(self.c_rows), GROUPS), np.float32)
        self.scratch = np.empty(TILE_ROWS, np.float32)
        self.block_rows = max(TILE_ROWS, min(BLOCK_ROWS, BLOCK_BYTES // (4 * len(words)) // TILE_ROWS * TILE_ROWS))
        self.products = np.empty(len(words) * min(self.block_rows, restrict), np.float32)


def answer_analogies(matrix: np.ndarray, restrict: int, abc: np.ndarray, progress=None,
                     threads: int | None = None) -> list[list[int]]:
    """Each question's up to 5 answers, as rows, best first, its own three rows left out.

    matrix : float32 [n, dim]; restrict : only rows below it are candidates
    abc : int array of shape [m, 3], the rows of a, b and c (each below ``restrict``)
    progress : called with a number of questions' worth of work done since the last call (m in all)
    threads : how many threads screen the questions; by default one a core this process may use

    A question whose query has a NaN (one of its words is a zero row) gets no answer; one whose query
    has no direction, or more near-ties than SLOTS, is scored against every row.
    """
    m = abc.shape[0]
    if m == 0:
        return []
    top = min(TOP, restrict)
    threads = max(1, min(threads or local_cores(), m))
    norms = np.linalg.norm(matrix[:restrict], axis=1)   # gensim's fill_norms
    queries = _queries(matrix, norms, abc)
    unit_t = _unit_rows_transposed(matrix, norms, restrict)
    words, inverse = np.unique(abc, return_inverse=True)
    qa, qb, qc = inverse.reshape(m, 3).T
    word_units = np.ascontiguousarray(unit_t[:, words].T)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        direction = np.linalg.norm(word_units[qb] + word_units[qc] - word_units[qa], axis=1)
        scale = (1.0 / direction).astype(np.float32)
    no_answer = ~np.isfinite(queries).all(axis=1)
    overflow = ~np.isfinite(scale) | (direction == 0) | no_answer   # not screened
    slot_score = np.full((m, SLOTS), -np.inf, np.float32)
    slot_row = np.zeros((m, SLOTS), np.int64)
    count = np.zeros(m, np.int64)
    # Each thread screens its own share of the questions with the products of its own words (their slots are theirs
    # alone, so the answers do not depend on the split), never waiting for another thread until all are done: on a
    # busy machine a thread that waited at each block for the other to be given a core lost its turn meanwhile.
    # The main thread takes the first share and says the progress.
    shares = [_Share(slice(i * m // threads, (i + 1) * m // threads), abc, unit_t, restrict) for i in range(threads)]

    def screen(share, progress=None):
        s = share.questions
        reported = 0
        for start in range(0, restrict, share.block_rows):
            block = unit_t[:, start:start + share.block_rows]
            width = block.shape[1]
            products = share.products[:len(share.word_units) * width].reshape(len(share.word_units), width)
            np.matmul(share.word_units, block, out=products)   # eval runs OpenBLAS on one thread: cli/
            _screen(products, start, TILE_ROWS, GROUPS, share.pair_a, share.pair_b, share.c_rows, share.q_pair,
                    share.q_c, scale[s], slot_score[s], slot_row[s], count[s], overflow[s], np.float32(MARGIN), top,
                    share.pair_bound, share.c_bound, share.scratch)
            if progress is not None:
                done = m * (start + width) // restrict
                progress(done - reported)
                reported = done

    with ThreadPoolExecutor(threads - 1) if threads > 1 else contextlib.nullcontext() as pool:
        others = [pool.submit(screen, share) for share in shares[1:]]
        screen(shares[0], progress)
        for other in others:
            other.result()
    del shares   # their products: room for the candidates' rows
    return _answers(matrix, norms, queries, abc, restrict, top, slot_row, count, overflow, no_answer)


def _answers(matrix, norms, queries, abc, restrict, top, slot_row, count, overflow, no_answer) -> list[list[int]]:
    """answer_analogies's answers from the screen's candidates (slot_row, count) by gensim's own score: each question's
    candidates, or every row for a question that ``overflow``-ed its slots, none for ``no_answer``."""
    m = len(abc)
    # Each question's candidates in row order, sorted all at once: the unused slots sort last.
    slot_row[np.arange(SLOTS) >= count[:, None]] = restrict
    slot_row.sort(axis=1)
    screened = np.flatnonzero(~overflow)
    ranked = np.full((m, top), -1, np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):   # once, not once a question: see _ranked
        # RANK_QUESTIONS at a time: all at once, the candidates' rows (about 10 a question) were a tenth of the
        # command's peak memory on GloVe 400k
        for cut in range(0, len(screened), RANK_QUESTIONS):
            some = screened[cut:cut + RANK_QUESTIONS]
            counts = count[some]
            ranked[some] = _ranked_all(matrix, norms, slot_row[some][np.arange(SLOTS) < counts[:, None]], counts,
                                       queries[some], top)
        every_row = np.arange(restrict)
        for j in np.flatnonzero(overflow & ~no_answer).tolist():
            best = _ranked(matrix, norms, every_row, queries[j], top)
            ranked[j, :len(best)] = best
    # gensim's most_similar leaves out the question's own words and keeps the first 5 of the rest: the rows
    # kept moved to the front in their order (a stable sort of "left out" flags), then cut at 5 or fewer.
    left_out = (ranked[:, :, None] == abc[:, None, :]).any(axis=2) | (ranked < 0)
    ranked = np.take_along_axis(ranked, np.argsort(left_out, axis=1, kind="stable"), axis=1)
    kept = np.minimum(top - left_out.sum(axis=1), 5)
    kept[no_answer] = 0
    return [row[:k] for row, k in zip(ranked.tolist(), kept.tolist())]
