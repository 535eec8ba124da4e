"""The new words' context pass, compiled: for each occurrence of a target word, the weighted sums of the
pretrained vectors within ``window`` of it and in its whole line, in time linear in the chunk's tokens.

A line's sum is made once (when the line holds a target) and each occurrence takes it less the word's
own vector, so the sentence-wide context costs one subtraction per occurrence, not a pass over the line.
Occurrences of probe words (frequent pretrained words playing rare ones: embedtune.newwords.fitted) are summed
into nested buckets: an occurrence at ``level`` b counts in buckets b, b + 1, ..., so bucket b holds the
occurrences of every level up to b. Single-threaded and ``nogil``: the spelling model's fit runs beside
it in another thread (embedtune.newwords.form_context.gather).
"""

from __future__ import annotations

import numpy as np

from embedtune.kernels.common import _search_sorted, njit


@njit(nogil=True, cache=True)
def context_pass(ids, line, target, level, probe, n_pre, window, weights, matrix,
                 near, whole, probe_near, probe_whole, repeats, scratch, line_cap=0):
    """Add one chunk's contexts in place.

    ids : [n] int32 token ids (pretrained words < n_pre); line : [n] int32 line of each token (sorted)
    target : [n] int32 target row of each token, -1 where none (or not sampled)
    level : [n] int32 first probe bucket of each token, -1 where none; probe : [n] int32 its probe row
    weights : [n_pre] float32 weight of each pretrained word as context; matrix : [n_pre, dim] float32
    near, whole : [n_targets, dim + 2] float64: the weighted sum, its weight and (last column) the
        occurrences with context (a pretrained word other than itself), within ``window`` and in the line
    probe_near, probe_whole : [n_probes, n_buckets, dim + 2] float64, the same per bucket
    repeats : [n_ids] int32 zeros, scratch: each id's count in the line at hand (left zero on return)
    scratch : [3, dim] float64, overwritten: the line's sum and an occurrence's two sums (made by the caller's
        numpy: an allocation inside a kernel compiles numba's implementation of it in every cold process)
    line_cap : a line of more tokens than this (> 0) gives its occurrences their window as their line's
        context: a sentence-sized line is all about its word, an article-sized one is not (0: every line whole)
    A word's own occurrences are never its context (a probe word stands for one with no vector).
    """
    n = len(ids)
    dim = matrix.shape[1]
    line_sum, acc_near, acc_whole = scratch[0], scratch[1], scratch[2]
    n_buckets = probe_near.shape[1]
    start = 0
    while start < n:
        end, busy = _line_end(line, target, level, start)
        if busy:
            line_mass = _line_sum(ids, start, end, n_pre, weights, matrix, dim, line_sum, repeats)
            for i in range(start, end):
                t = target[i]
                b = level[i]
                if t < 0 and b < 0:
                    continue
                own = ids[i]
                acc_near[:] = 0.0
                mass_near = 0.0
                for j in range(max(start, i - window), min(end, i + window + 1)):
                    c = ids[j]
                    if c < n_pre and c != own:
                        w = weights[c]
                        mass_near += w
                        for d in range(dim):
                            acc_near[d] += w * matrix[c, d]
                mass_whole = line_mass
                for d in range(dim):
                    acc_whole[d] = line_sum[d]
                if line_cap > 0 and end - start > line_cap:
                    mass_whole = mass_near
                    for d in range(dim):
                        acc_whole[d] = acc_near[d]
                elif own < n_pre:   # the line's sum less every occurrence of the word itself
                    w = weights[own] * repeats[own]
                    mass_whole -= w
                    for d in range(dim):
                        acc_whole[d] -= w * matrix[own, d]
                if mass_whole <= 1e-12:
                    continue   # no pretrained word in the line: no context
                if t >= 0:
                    if mass_near > 0:
                        _add(near, t, acc_near, mass_near)
                    _add(whole, t, acc_whole, mass_whole)
                if b >= 0:
                    p = probe[i]
                    for k in range(b, n_buckets):
                        if mass_near > 0:
                            _add(probe_near[p], k, acc_near, mass_near)
                        _add(probe_whole[p], k, acc_whole, mass_whole)
            for j in range(start, end):
                repeats[ids[j]] = 0
        start = end


@njit(inline="always")
def _line_end(line, target, level, start):
    """The end of the line that starts at ``start``, and whether a token of it is a target or a probe."""
    end = start
    busy = False
    while end < len(line) and line[end] == line[start]:
        if target[end] >= 0 or level[end] >= 0:
            busy = True
        end += 1
    return end, busy


@njit(inline="always")
def _line_sum(ids, start, end, n_pre, weights, matrix, dim, line_sum, repeats):
    """The line's weighted sum of pretrained vectors into ``line_sum``, each id's count in it into
    ``repeats``; returns the sum's weight."""
    line_sum[:] = 0.0
    line_mass = 0.0
    for j in range(start, end):
        c = ids[j]
        repeats[c] += 1
        if c < n_pre:
            w = weights[c]
            line_mass += w
            for d in range(dim):
                line_sum[d] += w * matrix[c, d]
    return line_mass


@njit(inline="always")
def _add(table, row, acc, mass):
    dim = len(acc)
    for d in range(dim):
        table[row, d] += acc[d]
    table[row, dim] += mass
    table[row, dim + 1] += 1.0


@njit(nogil=True, cache=True)
def occurrence_marks(ids, line, numbers, target_of, probe_of, probe_count, keep, slots, seed_mix, probe_seed_mix,
                     sampled, probed, target, level, probe):
    """context_pass's ``target``, ``level`` and ``probe`` of one chunk's tokens, in one pass over them: what
    numpy made in a dozen whole-chunk arrays (tests/test_newwords.py's reference, equal bit for bit).

    ids, line : the chunk's (IdChunk); numbers : [lines] int64 each line's number in the corpus (read when
    ``sampled`` or ``probed``); target_of, probe_of : [n_ids] int32 each id's target and probe row (-1: none);
    probe_count : [n_ids] float64 each probe id's corpus count; keep : [n_targets] float64 the chance an
    occurrence of each target is kept (read when ``sampled``); slots : [n_buckets] float64 sorted;
    seed_mix, probe_seed_mix : uint64, each kind of draw's seed times splitmix64's constant
    (newwords.contexts._seed_mix): the targets' draws and the probes' are apart. target, level, probe: [n] int32,
    written (made by the caller's numpy, as context_pass's scratch)."""
    n = len(ids)
    first = 0
    n_slots = len(slots)
    for i in range(n):
        if i > 0 and line[i] != line[i - 1]:
            first = i
        c = ids[i]
        t = target_of[c]
        p = probe_of[c]
        if sampled and t >= 0:
            if _draw(seed_mix, numbers[line[i]], i - first) >= keep[t]:
                t = -1
        b = -1
        if probed and p >= 0:
            b = _search_sorted(slots, _draw(probe_seed_mix, numbers[line[i]], i - first) * probe_count[c], True)
            b = b if b < n_slots else -1
        level[i] = b
        target[i] = t
        probe[i] = p


@njit(inline="always")
def _draw(seed_mix, number, place):
    """One occurrence's draw in [0, 1): splitmix64's mix of the seed, its line's ``number`` and its ``place`` in
    the line (integer arithmetic wrapping modulo 2**64), its top 53 bits as a float64. The same for an
    occurrence whoever reads it and in whatever order: a worker's share of the lines draws as one process does."""
    z = seed_mix + np.uint64(number) * np.uint64(0xD1B54A32D192ED03) + np.uint64(place)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return np.float64(z >> np.uint64(11)) * 2.0 ** -53
