"""A --freeze-pattern or --train-pattern over the words, bounded in time: Python's re, matched a chunk of
words at a time under a SIGALRM timer, so a pattern that backtracks without end is an error naming the
word, not a run that never ends."""

from __future__ import annotations

import itertools
import re
import signal
import threading
import time

import numpy as np

from embedtune.config.keys import pattern_problem
from embedtune.errors import EmbedtuneError, option_name

# Words a pattern is matched over between two looks at the clock, and the seconds it may take over them:
# far more than an ordinary pattern needs (benchmarks/README.md, patterns), far less than re takes
# where it backtracks without end, as (a|aa)+$ does over aaa...ab (hours for one word).
PATTERN_CHUNK = 1024
PATTERN_CHUNK_SECONDS = 1.0


def compile_pattern(pattern: str, key: str) -> re.Pattern:
    if pattern == "":   # re.search finds "" in every word: a rule that says nothing would freeze (or train) all
        raise EmbedtuneError(f"{_option(key)}: empty pattern (it would match every word)")
    problem = pattern_problem(pattern)   # the declaration's check: re.error, and OverflowError for a{4294967296}
    if problem:
        raise EmbedtuneError(f"{_option(key)} {problem}")
    return re.compile(pattern)


def _option(key: str) -> str:
    return option_name(key)


class PatternTooCostly(Exception):
    """Raised by the timer's handler inside re's matching (re looks for signals as it backtracks)."""


class WordPattern:
    """A --freeze-pattern or --train-pattern: ``re.search`` over each word, exactly as Python's re
    means it (the regex package and RE2 differ from it on \\w, \\s and \\d beyond ASCII), with the work
    bounded: re cannot be told to stop, but it handles signals as it backtracks, so in the main thread
    a timer (SIGALRM, when nothing else uses it) ends a chunk of words that takes too long, and the
    word it took longest over is named. Elsewhere (a caller's thread, its own timer) the match is unbounded."""

    def __init__(self, pattern: str, key: str):
        self.pattern, self.key = pattern, key
        self.compiled = compile_pattern(pattern, key)

    def matches(self, words, n: int) -> np.ndarray:
        """[n] bool: which of the first ``n`` ``words`` the pattern finds something in."""
        search = self.compiled.search
        found = np.zeros(n, bool)
        if not _timer_free():
            found[:] = np.fromiter((search(w) is not None for w in words), bool, n)
            return found
        chunk: list = []
        armed = [False]   # a timer's signal handled after its chunk was done raises nothing

        def too_costly(signum, frame):
            if armed[0]:
                raise PatternTooCostly

        previous = signal.signal(signal.SIGALRM, too_costly)
        words = iter(words)
        try:
            for at in range(0, n, PATTERN_CHUNK):
                chunk = list(itertools.islice(words, min(PATTERN_CHUNK, n - at)))
                armed[0] = True
                signal.setitimer(signal.ITIMER_REAL, PATTERN_CHUNK_SECONDS)
                found[at:at + len(chunk)] = [search(w) is not None for w in chunk]
                armed[0] = False
                signal.setitimer(signal.ITIMER_REAL, 0)
        except PatternTooCostly:
            # Which word: the chunk is matched again word by word, each under the timer, slowest named.
            raise EmbedtuneError(
                f"{_option(self.key)} {self.pattern!r} took more than {PATTERN_CHUNK_SECONDS:g} s over "
                f"{_shown(self._costly(chunk, armed))} (it backtracks without end: nested repeats such as "
                "(a|aa)+ do; rewrite it)") from None
        finally:
            armed[0] = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        return found

    def _costly(self, chunk: list, armed: list) -> str:
        """The word of ``chunk`` the pattern takes longest over (the first that runs out the timer)."""
        slowest, worst, word = "", -1.0, ""
        try:
            for word in chunk:
                began = time.perf_counter()
                armed[0] = True
                signal.setitimer(signal.ITIMER_REAL, PATTERN_CHUNK_SECONDS)
                self.compiled.search(word)
                armed[0] = False
                took = time.perf_counter() - began
                if took > worst:
                    slowest, worst = word, took
        except PatternTooCostly:
            return word
        finally:
            armed[0] = False
            signal.setitimer(signal.ITIMER_REAL, 0)
        return slowest


def _shown(word: str) -> str:
    return f"the word {word[:80]!r}{'...' if len(word) > 80 else ''}"


def _timer_free() -> bool:
    """The main thread, with no SIGALRM handler or timer of anyone else's."""
    return (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGALRM) == signal.SIG_DFL
            and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0))
