"""Reading a corpus: lines of tokens (whitespace tokens, split as the vectors spell words),
counted once, streamed as id chunks.

A corpus is one sentence or paragraph per line; context windows never cross a line.
It is read in passes (one to count, one per epoch) and never held in memory whole:
standard input is spooled once to a temporary file so it can be read again.

    files.py     opening a file: compression by content, lines in bounded pieces, UTF-8
    tokenize.py  whitespace tokens split as the vectors spell words (--tokenize auto)
    text.py      Corpus: plain text, re-readable, counted once, read by shares of lines
    fast.py      a file's count and ids in one compiled pass (the same tokens as text.py's reader)
    labelled.py  LabelledCorpus: fastText's supervised format (classify)
    held.py      HeldLines: the lines held here, and how figures made of them combine over workers
    counts.py    a share's counts as bytes, and the shares merged (several workers)
    chunks.py    the corpus as chunks of row ids
    sentences.py sentences given in Python (fine_tune's, the Keras layer's), checked as they are read"""

from embedtune.corpus.chunks import CHUNK_TOKENS, IdChunk, id_chunks
from embedtune.corpus.counts import ShareCount, merge_counts
from embedtune.corpus.held import HeldLines
from embedtune.corpus.text import Corpus
from embedtune.corpus.tokenize import TOKENIZE, Tokenizer

__all__ = ["CHUNK_TOKENS", "IdChunk", "id_chunks", "ShareCount", "merge_counts", "HeldLines", "Corpus", "TOKENIZE",
           "Tokenizer"]
