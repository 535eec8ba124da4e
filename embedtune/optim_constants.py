"""The lazy optimizers' constants: one source for TensorFlow's step (sparse.py) and the compiled one
(kernels.py), whose arithmetic must agree (tests/test_classify_kernel.py). Keras's defaults, so that
the lazy optimizers match Keras's dense ones on the rows a batch touches (tests/test_sparse.py)."""

EPSILON = 1e-7                    # adagrad and adam: lr / (sqrt(state) + EPSILON)
ADAGRAD_INITIAL_ACCUMULATOR = 0.1
ADAM_BETA_1 = 0.9                 # the first moment's decay
ADAM_BETA_2 = 0.999               # the second moment's decay
