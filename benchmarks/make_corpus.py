"""Build the benchmark corpus: real English text, lower-cased, one article or paragraph per line.

    python benchmarks/make_corpus.py [--out benchmarks/_data/corpus.txt]
    python benchmarks/make_corpus.py --large [--out benchmarks/_data/corpus-large.txt]
    python benchmarks/make_corpus.py --fiction [--out benchmarks/_data/corpus-fiction.txt]

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

``--large`` writes a second corpus of at least 5M tokens (default corpus-large.txt): sources 1-3
as above, then, one Debian package each (a missing one is named in the error message):

4. bible     the King James Bible (public domain), printed by the program of bible-kjv
             (which brings bible-kjv-text); one chapter per line, headings and verse numbers dropped.
5. wordnet   WordNet 3.0 glosses (wordnet-base, WordNet licence: permissive), from the data.noun,
             data.verb, data.adj and data.adv files: a definition and its quoted examples per line.
6. perldoc   the prose of Perl's documentation (the .pod files of perl-doc, GPL or Artistic):
             ordinary paragraphs only, formatting codes (C<...>, L<text|...>) replaced by their text;
             commands, verbatim blocks, the table of contents perltoc and the Chinese, Japanese and
             Korean perlcn/perljp/perlko/perltw dropped. One paragraph per line.
7. jargon    the Jargon File 4.4.7 (jargon-text, public domain): one prose paragraph per line;
             entry heads, table of contents, headings, code and ASCII art dropped.
8. handbook  The Debian Administrator's Handbook, English HTML edition (debian-handbook,
             GPL-2+ or CC-BY-SA-3.0): one <div class="para"> per line, <pre> blocks dropped.

Sources 4-8 need ``apt-get install bible-kjv wordnet-base perl-doc jargon-text debian-handbook``
(Debian 12 paths: perl-doc's .pod files are read from /usr/share/perl/5.36.0/pod).

``--fiction`` writes a corpus of another domain and register (default corpus-fiction.txt; issue 40's second
corpus): narrative prose and sayings instead of reference, news and technical text. One Debian package each:

9. austen    Jane Austen's six novels (r-cran-janeaustenr, public domain), printed by R's Rscript from the
             package's data (austen_books()); one paragraph per line, chapter headings and titles dropped.
10. fortunes the English fortune cookies of fortunes and fortunes-min (quotations, literature, humour,
             sayings; public domain or freely redistributable), one cookie per line; ascii-art dropped.

Sources 9-10 need ``apt-get install r-cran-janeaustenr fortunes fortunes-min``.

Everything goes through one tokenizer (gensim's wikicorpus.tokenize: alphabetic runs,
lower-cased, 1..30 characters), so every source splits words the same way.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import html
import os
import re
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser

from gensim.corpora.wikicorpus import WikiCorpus, tokenize
from gensim.test.utils import datapath

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "_data", "corpus.txt")
LARGE_OUT = os.path.join(HERE, "_data", "corpus-large.txt")
FICTION_OUT = os.path.join(HERE, "_data", "corpus-fiction.txt")
WIKI = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
PYDOCS = "/usr/share/doc/python3.11/html/_sources"
WORDNET = "/usr/share/wordnet"
PERLPOD = "/usr/share/perl/5.36.0/pod"
JARGON = "/usr/share/doc/jargon-text/jargon.txt.gz"
HANDBOOK = "/usr/share/doc/debian-handbook/html/en-US"
FORTUNES = "/usr/share/games/fortunes"
TOKEN_MIN, TOKEN_MAX = 1, 30   # keep one-letter words ("a", "i"): word2vec and GloVe keep them
TARGET_TOKENS = 1_000_000
LARGE_TARGET_TOKENS = 5_000_000
FICTION_TARGET_TOKENS = 900_000


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


def require(path: str, package: str) -> None:
    if not os.path.exists(path):
        sys.exit(f"make_corpus: {path} not found; install it with: apt-get install {package}")


def pydocs_lines():
    """One line per prose paragraph of the Python documentation."""
    require(PYDOCS, "python3.11-doc")
    for path in sorted(glob.glob(os.path.join(PYDOCS, "**", "*.rst.txt"), recursive=True)):
        with open(path, encoding="utf-8") as f:
            for paragraph in rest_paragraphs(f.read()):
                yield words(paragraph)


# ---- sources of the large corpus (--large) ----

CHAPTER = re.compile(r"^(?:[1-3] )?[A-Z][A-Za-z ]+ \d+$")   # "Genesis 1", "1 Kings 3", "Song of Solomon 2"
VERSE = re.compile(r"^\s+\d+ ")                              # "  12 And God said, ..."


def bible_lines():
    """One line per chapter of the King James Bible, chapter headings and verse numbers stripped."""
    # bible-kjv-text keeps the text in its own compressed format; its reader is bible-kjv's program.
    if shutil.which("bible") is None:
        sys.exit("make_corpus: the program bible not found; install it with: apt-get install bible-kjv")
    # -l0: one verse a line, unwrapped; the whole text is one verse range.
    text = subprocess.run(["bible", "-l0", "gen1:1-rev22:21"], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, check=True).stdout
    chapter: list[str] = []
    for line in text.split("\n"):
        if CHAPTER.match(line):
            yield chapter
            chapter = []
        elif line.strip():
            chapter.extend(words(VERSE.sub("", line)))
    yield chapter


def wordnet_lines():
    """One line per WordNet synset: its gloss, a definition and its quoted example sentences."""
    require(WORDNET, "wordnet-base")
    for part in ("noun", "verb", "adj", "adv"):
        with open(os.path.join(WORDNET, f"data.{part}"), encoding="ascii") as f:
            for line in f:
                if not line.startswith("  "):   # the licence header is indented
                    yield words(line.split(" | ", 1)[1])


POD_CODE = re.compile(r"([BCEFILSXZ])<([^<>]*)>")                 # C<x>, innermost first
POD_CODE_LONG = [re.compile(rf"([BCEFILSXZ]){'<' * n}\s+(.*?)\s+{'>' * n}") for n in (4, 3, 2)]  # C<< x >>
PERLPOD_SKIP = {"perltoc.pod",                                              # table of contents of the rest
                "perlcn.pod", "perljp.pod", "perlko.pod", "perltw.pod"}   # Chinese, Japanese, Korean


def pod_code(match: re.Match) -> str:
    """The text a POD formatting code stands for: X<> (index entries) and Z<> vanish, E<> is a character,
    L<text|target> is its text, and B<>, C<>, F<>, I<>, S<> are their inner text."""
    code, inner = match.group(1), match.group(2)
    if code in "XZ":
        return ""
    if code == "E":
        if inner.isdigit():
            return chr(int(inner))
        if inner.lower().startswith("0x"):
            return chr(int(inner, 16))
        return html.unescape(f"&{inner};")
    if code == "L":
        if "|" in inner:
            return inner.split("|", 1)[0]
        return "" if "://" in inner else inner.replace("/", " ").replace('"', " ")
    return inner


def pod_paragraphs(text: str):
    """Prose paragraphs of one POD file: ordinary paragraphs with their formatting codes resolved;
    command paragraphs (=head, =item, ...), verbatim (indented) paragraphs and =begin/=end, =for
    and =cut regions dropped."""
    in_pod, in_begin = True, False
    for block in re.split(r"\n\s*\n", text):
        lines = [ln for ln in block.split("\n") if ln.strip()]
        if not lines:
            continue
        if re.match(r"=[a-zA-Z]", lines[0]):
            command = lines[0].split()[0]
            in_pod = command != "=cut"
            in_begin = command == "=begin" or (in_begin and command != "=end")
            continue   # command paragraph, =for paragraph included
        if not in_pod or in_begin or lines[0][:1].isspace():
            continue   # code after =cut, a =begin region, or a verbatim block
        paragraph = " ".join(ln.strip() for ln in lines)
        for pattern in POD_CODE_LONG:
            paragraph = pattern.sub(pod_code, paragraph)
        while True:
            paragraph, n = POD_CODE.subn(pod_code, paragraph)
            if not n:
                break
        yield paragraph


def perldoc_lines():
    """One line per prose paragraph of Perl's documentation (the .pod files of perl-doc)."""
    require(PERLPOD, "perl-doc")
    for path in sorted(glob.glob(os.path.join(PERLPOD, "*.pod"))):
        if os.path.basename(path) in PERLPOD_SKIP:
            continue
        with open(path, encoding="utf-8") as f:
            for paragraph in pod_paragraphs(f.read()):
                yield words(paragraph)


JARGON_ENTRY = re.compile(r"^:[^:]+:")   # ":baroque: adj." heads an entry


def jargon_lines():
    """One line per prose paragraph of the Jargon File: entry heads, table of contents, headings,
    code and ASCII art dropped."""
    require(JARGON, "jargon-text")
    with gzip.open(JARGON, "rt", encoding="utf-8") as f:
        text = f.read()
    for block in re.split(r"\n\s*\n", text):
        lines = [ln for ln in block.split("\n") if ln.strip()]
        if not lines:
            continue
        indents = {len(ln) - len(ln.lstrip()) for ln in lines}
        if min(indents) < 3 or 4 in indents:
            continue   # code (4 spaces) and ASCII art; prose is indented 3, quotes and lists 5
        first = lines[0].strip()
        if JARGON_ENTRY.match(first):
            continue
        if len(lines) == 1 and not first.endswith((".", "!", "?", "”", '"', ")")):
            continue   # table of contents, headings
        yield words(" ".join(ln.strip() for ln in lines))


class HandbookParagraphs(HTMLParser):
    """The text of each <div class="para"> of a Debian handbook page, minus <pre> blocks
    (commands and their output)."""

    def __init__(self):
        super().__init__()
        self.divs: list[bool] = []        # open <div>s: is it a paragraph?
        self.open: list[list[str]] = []   # text of the open paragraphs, innermost last
        self.in_pre = 0
        self.paragraphs: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "div":
            is_para = dict(attrs).get("class") == "para"
            self.divs.append(is_para)
            if is_para:
                self.open.append([])
        elif tag == "pre":
            self.in_pre += 1

    def handle_endtag(self, tag):
        if tag == "div" and self.divs:
            if self.divs.pop():
                self.paragraphs.append("".join(self.open.pop()))
        elif tag == "pre":
            self.in_pre -= 1

    def handle_data(self, data):
        if self.open and not self.in_pre:
            self.open[-1].append(data)


def handbook_lines():
    """One line per paragraph of The Debian Administrator's Handbook (English HTML edition)."""
    require(HANDBOOK, "debian-handbook")
    for path in sorted(glob.glob(os.path.join(HANDBOOK, "*.html"))):
        parser = HandbookParagraphs()
        with open(path, encoding="utf-8") as f:
            parser.feed(f.read())
        parser.close()
        for paragraph in parser.paragraphs:
            yield words(paragraph)


# ---- sources of the fiction corpus (--fiction) ----

AUSTEN_HEADING = re.compile(r"^(CHAPTER|Chapter) [0-9IVXLC]+\.?$|^(VOLUME|Volume) [0-9IVXLC]+$|^by Jane Austen$|^\(\d{4}\)$"
                            r"|^[A-Z][A-Z &']+$|^THE END$")


def austen_lines():
    """One line per paragraph of Jane Austen's six novels (janeaustenr's austen_books())."""
    if shutil.which("Rscript") is None:
        sys.exit("make_corpus: Rscript not found; install it with: apt-get install r-cran-janeaustenr")
    script = "suppressMessages(library(janeaustenr)); writeLines(austen_books()$text)"
    text = subprocess.run(["Rscript", "-e", script], stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if text.returncode:
        sys.exit("make_corpus: R could not read janeaustenr's novels; install them with: "
                 "apt-get install r-cran-janeaustenr")
    for block in re.split(r"\n\s*\n", text.stdout):
        lines = [ln.strip() for ln in block.split("\n") if ln.strip()]
        if len(lines) == 1 and AUSTEN_HEADING.match(lines[0]):
            continue
        yield words(" ".join(lines))


FORTUNES_SKIP = {"ascii-art"}   # pictures, not text


def fortunes_lines():
    """One line per fortune cookie of the English fortune files (fortunes, fortunes-min)."""
    require(os.path.join(FORTUNES, "fortunes"), "fortunes fortunes-min")
    for path in sorted(glob.glob(os.path.join(FORTUNES, "*"))):
        name = os.path.basename(path)
        if "." in name or name in FORTUNES_SKIP or not os.path.isfile(path):
            continue   # the .dat indexes and .u8 links
        with open(path, encoding="utf-8", errors="replace") as f:
            for cookie in re.split(r"^%$", f.read(), flags=re.M):
                yield words(cookie)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help=f"default {DEFAULT_OUT}, or {LARGE_OUT} with --large")
    parser.add_argument("--with-head500", action="store_true",
                        help="also add gensim's stemmed head500.noblanks.cor (0.33M tokens)")
    parser.add_argument("--large", action="store_true",
                        help="the large corpus (5M tokens or more): also the KJV Bible, WordNet glosses, "
                             "Perl's documentation, the Jargon File and the Debian handbook")
    parser.add_argument("--fiction", action="store_true",
                        help="the second corpus (issue 40): Jane Austen's novels and the fortune cookies")
    args = parser.parse_args()
    if args.fiction and (args.large or args.with_head500):
        parser.error("--fiction is a corpus of its own: no --large or --with-head500 with it")
    args.out = args.out or (FICTION_OUT if args.fiction else LARGE_OUT if args.large else DEFAULT_OUT)
    target = FICTION_TARGET_TOKENS if args.fiction else LARGE_TARGET_TOKENS if args.large else TARGET_TOKENS

    sources = [("wiki", wiki_lines), ("lee", lambda: plain_lines("lee_background.cor")),
               ("pydocs", pydocs_lines)]
    if args.with_head500:
        sources.insert(2, ("head500", lambda: plain_lines("head500.noblanks.cor")))
    if args.large:
        sources += [("bible", bible_lines), ("wordnet", wordnet_lines), ("perldoc", perldoc_lines),
                    ("jargon", jargon_lines), ("handbook", handbook_lines)]
    if args.fiction:
        sources = [("austen", austen_lines), ("fortunes", fortunes_lines)]

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
    if total_tokens < target:
        print(f"warning: {total_tokens:,} tokens, fewer than the {target:,} the benchmark asks for",
              file=sys.stderr)


if __name__ == "__main__":
    main()
