"""Build the benchmark corpus: real English text, lower-cased, one article or paragraph per line.

    python benchmarks/make_corpus.py [--out benchmarks/_data/corpus.txt]

Sources, in this order (all offline, all real text):

1. wiki    gensim's Wikipedia dump excerpt
           (test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2),
           markup stripped and tokenised by gensim.corpora.WikiCorpus; one article per line.
2. lee     gensim's lee_background.cor (Australian news, Lee et al. 2005); one article per line.
3. pydocs  the English prose of the Python 3.11 documentation (reST sources shipped by the
           Debian package python3.11-doc, PSF licence): code blocks, doctest lines and
           directives dropped, one paragraph per line.

Sources 1 and 2 give about 0.53M tokens, well under the 1M the speed benchmark asks for.
gensim's other large corpus, head500.noblanks.cor, is Porter-stemmed with its stop words removed
("anarch greek rule stem archon ..."): few of its tokens are GloVe words and its word
frequencies are not those of English, so it is left out unless ``--with-head500`` is given.
Source 3 needs ``apt-get install python3.11-doc`` (it is read from /usr/share/doc).

Everything goes through one tokenizer (gensim's wikicorpus.tokenize: alphabetic runs,
lower-cased, 1..30 characters), so every source splits words the same way.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import sys
import time

from gensim.corpora.wikicorpus import WikiCorpus, tokenize
from gensim.test.utils import datapath

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "_data", "corpus.txt")
WIKI = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
PYDOCS = "/usr/share/doc/python3.11/html/_sources"
TOKEN_MIN, TOKEN_MAX = 1, 30   # keep one-letter words ("a", "i"): word2vec and GloVe keep them
TARGET_TOKENS = 1_000_000


def words(text: str) -> list[str]:
    return list(tokenize(text, TOKEN_MIN, TOKEN_MAX, lower=True))


def wiki_lines():
    """One line per article of gensim's Wikipedia excerpt."""
    # dictionary={} skips building a gensim Dictionary (a whole extra pass).
    corpus = WikiCorpus(datapath(WIKI), dictionary={}, processes=1,
                        token_min_len=TOKEN_MIN, token_max_len=TOKEN_MAX, lower=True)
    for tokens in corpus.get_texts():
        yield tokens


def plain_lines(name: str):
    """One line per line of a gensim plain-text corpus."""
    with open(datapath(name), encoding="utf-8") as f:
        for line in f:
            yield words(line)


ROLE = re.compile(r":[a-z]+(?::[a-z]+)*:`")   # :func:`x`, :c:macro:`y` -> keep only x, y
CODE_DIRECTIVE = re.compile(r"^\.\. (code-block|sourcecode|doctest|testcode|testoutput|productionlist|"
                            r"literalinclude|highlight|raw|csv-table|include)::")


def rest_paragraphs(text: str):
    """Prose paragraphs of one reST file: blocks between blank lines, minus code and directives."""
    code_follows = False   # the previous block announced a literal block ("::" or a code directive)
    for block in re.split(r"\n\s*\n", text):
        lines = [ln for ln in block.split("\n") if ln.strip()]
        if not lines:
            continue
        indented = lines[0][:1].isspace()
        if indented and code_follows:
            continue   # literal block: keep code_follows for its next indented block
        first = lines[0].strip()
        code_follows = bool(CODE_DIRECTIVE.match(first)) or lines[-1].rstrip().endswith("::")
        if first.startswith("..") or first.startswith(">>>"):
            continue   # directive, comment, label or doctest
        prose = " ".join(ln.strip() for ln in lines if not ln.strip().startswith((">>>", "...", "$ ")))
        yield ROLE.sub("", prose)


def pydocs_lines():
    """One line per prose paragraph of the Python documentation."""
    if not os.path.isdir(PYDOCS):
        sys.exit(f"make_corpus: {PYDOCS} not found; install it with: apt-get install python3.11-doc")
    for path in sorted(glob.glob(os.path.join(PYDOCS, "**", "*.rst.txt"), recursive=True)):
        with open(path, encoding="utf-8") as f:
            for paragraph in rest_paragraphs(f.read()):
                yield words(paragraph)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("--with-head500", action="store_true",
                        help="also add gensim's stemmed head500.noblanks.cor (0.33M tokens)")
    args = parser.parse_args()

    sources = [("wiki", wiki_lines), ("lee", lambda: plain_lines("lee_background.cor")),
               ("pydocs", pydocs_lines)]
    if args.with_head500:
        sources.insert(2, ("head500", lambda: plain_lines("head500.noblanks.cor")))

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    temporary = args.out + ".partial"
    total_tokens = total_lines = 0
    with open(temporary, "w", encoding="utf-8") as out:
        for name, lines in sources:
            began = time.perf_counter()
            n_tokens = n_lines = 0
            for tokens in lines():
                if tokens:
                    out.write(" ".join(tokens) + "\n")
                    n_tokens += len(tokens)
                    n_lines += 1
            print(f"{name:8s} {n_tokens:>10,} tokens {n_lines:>8,} lines  ({time.perf_counter() - began:.1f} s)")
            total_tokens += n_tokens
            total_lines += n_lines
    os.replace(temporary, args.out)
    print(f"{'total':8s} {total_tokens:>10,} tokens {total_lines:>8,} lines  -> {args.out}")
    if total_tokens < TARGET_TOKENS:
        print(f"warning: {total_tokens:,} tokens, fewer than the {TARGET_TOKENS:,} the benchmark asks for",
              file=sys.stderr)


if __name__ == "__main__":
    main()
