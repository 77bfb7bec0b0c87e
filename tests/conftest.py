"""Shared test setup.

The tests use tiny tensors, for which intra-op threading only costs: on the 2-core CI/VM machines
a parallel softmax or LayerNorm on a (3, 7, 16) tensor was measured at ~8 ms with 2 threads and
~2 us with 1, which made the suite ~100x slower. One thread keeps the whole suite to seconds.
"""

import torch

torch.set_num_threads(1)
