"""Sentences given in Python (``fine_tune``'s and the Keras layer's ``corpus=``), checked as they are read."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from embedtune.errors import EmbedtuneError


def checked_sentences(sentences):
    """``sentences`` as Corpus reads them, each checked as it is read: a str, or an iterable of str
    tokens. Anything else (bytes, an int token) is an EmbedtuneError naming the sentence's index,
    the type found and what is expected, not a TypeError from deep in the reading. A one-pass
    iterator stays one (Corpus spools it); a re-iterable stays re-iterable."""
    if isinstance(sentences, (bytes, bytearray)) or not isinstance(sentences, Iterable):
        raise EmbedtuneError(f"corpus is {type(sentences).__name__}; expected a path, or sentences: an iterable "
                             "of str or of lists of str tokens")
    if isinstance(sentences, Iterator):
        return (_checked(number, sentence) for number, sentence in enumerate(sentences))
    return _CheckedSentences(sentences)


class _CheckedSentences:
    def __init__(self, sentences):
        self.sentences = sentences

    def __iter__(self):
        return (_checked(number, sentence) for number, sentence in enumerate(self.sentences))


def _checked(number: int, sentence):
    if isinstance(sentence, str):
        return sentence
    expected = "expected a str or a list of str tokens"
    if isinstance(sentence, (bytes, bytearray)):
        raise EmbedtuneError(f"sentences[{number}] is {type(sentence).__name__} ({_short(sentence)}); "
                             f"{expected} (decode bytes first)")
    if not isinstance(sentence, Iterable):
        raise EmbedtuneError(f"sentences[{number}] is {type(sentence).__name__} ({_short(sentence)}); {expected}")
    tokens = sentence if isinstance(sentence, (list, tuple)) else list(sentence)
    if not all(isinstance(token, str) for token in tokens):
        at, token = next((i, t) for i, t in enumerate(tokens) if not isinstance(t, str))
        raise EmbedtuneError(f"sentences[{number}][{at}] is {type(token).__name__} ({_short(token)}); "
                             f"{expected}" + (" (decode bytes first)" if isinstance(token, bytes) else ""))
    return tokens


def _short(value, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
