"""The lazy optimizers' constants: one source for TensorFlow's step (embedtune/training/optimizers.py) and
the compiled steps (embedtune/kernels/common.py). A leaf, so neither package reads the other for them.

Keras's defaults, so that the lazy optimizers match Keras's dense ones on the rows a batch touches
(tests/test_sparse.py); the compiled steps' arithmetic must agree (tests/test_classify_kernel.py).
"""

EPSILON = 1e-7                    # adagrad and adam: lr / (sqrt(state) + EPSILON)
ADAGRAD_INITIAL_ACCUMULATOR = 0.1
ADAM_BETA_1 = 0.9                 # the first moment's decay
ADAM_BETA_2 = 0.999               # the second moment's decay
