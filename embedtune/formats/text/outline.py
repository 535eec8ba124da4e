"""The dry run's read of a text vectors file (formats.outline_vectors): every row's word, and only the first
rows' values, parsed and checked as TextReader parses them. The values of the other rows are never parsed,
so a file too large to load is read in the memory of its words and a block."""

from __future__ import annotations

import numpy as np

from embedtune.errors import EmbedtuneError
from embedtune.formats.io import new_matrix
from embedtune.formats.text.parse import nth_newline
from embedtune.formats.text.read import TextReader


class TextOutline(TextReader):
    """A TextReader that reads ``outline``: the words, a sample of the rows."""

    def outline(self, sample: int):
        """-> (words [n], float32 [min(n, sample), dim], line number of the first row): every row's word, and
        the first ``sample`` rows parsed and checked as ``read`` parses them; the values of the rows after
        them are not parsed (the dry run's read: it needs the words, not the matrix). The file's shape is
        checked as ``read`` checks it: the header's count, blank lines only at the end."""
        data, line, count, _ = self._start()
        first_line = line
        words, parsed, blank_line = [], [], None
        for block, n_block in self._blocks(data, line):
            body, n_body, blank_line = self._without_blank_end(block, n_block, line, blank_line)
            take = min(n_body, max(0, sample - len(words)))
            if take:
                cut = nth_newline(body, take) + 1
                block_words, block_matrix = self._parse_lines(body[:cut], line, take)
                words.extend(block_words)
                parsed.append(block_matrix)
                body = body[cut:]
            if body:
                words.extend(self._words_of(body, line + take))
            line += n_block
        if count is not None and len(words) < count:
            raise EmbedtuneError(
                f"file ends early (expected {count} rows as the header says, got {len(words)})", self.name, line)
        if count is not None and len(words) > count:
            raise EmbedtuneError(f"more rows than the header says (expected {count}, got {len(words)})",
                                 self.name, first_line + count)
        matrix = np.concatenate(parsed) if parsed else new_matrix(0, self.dim, self.name)
        return words, matrix, first_line

    def _words_of(self, body: bytes, line: int) -> list[str]:
        """The words of ``body``'s lines (each ending in a newline; the first is ``line``), their values not
        parsed: a line of a word and dim values after single spaces has its word before the first space;
        any other, as the per-line reader splits it (the last dim fields are the values)."""
        dim = self.dim
        lines = body.split(b"\n")
        lines.pop()   # after the final newline
        raw = [text[:text.index(b" ")] if text.count(b" ") == dim else self._word_of(text, line + i)
               for i, text in enumerate(lines)]
        try:
            return b"\n".join(raw).decode("utf-8").split("\n")
        except UnicodeDecodeError:
            return [self._decode(word, line + i) for i, word in enumerate(raw)]

    def _word_of(self, text: bytes, number: int) -> bytes:
        parts = text.rsplit(None, self.dim)
        if not parts:
            raise EmbedtuneError(f"empty line (expected a word and {self.dim} values)", self.name, number)
        return parts[0]
