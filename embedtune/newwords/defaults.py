"""Every default of the new words in one place: how they are chosen and how they start. Imports nothing,
so an objective (its ``init_window``) and the commands read them without the new-word code."""

METHODS = ("alacarte", "context-mean", "form-context", "random")
DEFAULT_METHOD = "form-context"   # the best test R@10 after training on the recovery benchmark, rare and
                                  # frequent words (benchmarks/README.md, recovery)
DEFAULT_MIN_COUNT = 5       # when no list is given and --min-count is unset
DEFAULT_WINDOW = 5          # words on each side
DEFAULT_MIN_CONTEXTS = 1    # fewer contexts than this: random start (even 1 context beats random)
DEFAULT_SIF = 30.0          # a context word seen n times weighs a / (a + n); 0 = every word weighs 1
DEFAULT_FIT_MIN_COUNT = 20  # a pretrained word fits the map A when seen this often
DEFAULT_FIT_MAX_WORDS = 50_000  # the most frequent such words; bounds the sums' memory
DEFAULT_FIT_OCCURRENCES = 300   # occurrences sampled per fitting word, most of the context pass's work: as good
                                # as 1,000 on benchmarks/newwords.py (benchmarks/log/glove_job.md)
DEFAULT_FORM_K = 10.0       # form-context: the contexts weigh n / (n + k); best of 5/10/20/40 on the rare
                            # validation words (benchmarks/recovery.py --rare), as in the rare-words note
