"""Shared test setup.

The tests use tiny tensors, for which intra-op threading only costs: on the 2-core CI/VM machines
a parallel softmax or LayerNorm on a (3, 7, 16) tensor was measured at ~8 ms with 2 threads and
~2 us with 1, which made the suite ~100x slower. One thread keeps the whole suite to seconds.

`needs_mnist` marks a test that trains on the real MNIST: where $ABLATE_DATA_DIR (else the repo's data/) holds
no MNIST/raw/ files it skips, saying so, unless ABLATE_REQUIRE_MNIST=1 (.ci/run sets it), where it runs and fails.
"""

import os
from pathlib import Path

import pytest
import torch

from tests.report_builds import built, committed_build, fixture_build  # noqa: F401  (shared fixtures)

torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("ABLATE_DATA_DIR") or REPO / "data").expanduser()
MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
MNIST_MISSING = [name for name in MNIST_FILES if not (DATA_DIR / "MNIST" / "raw" / name).is_file()]
needs_mnist = pytest.mark.skipif(
    bool(MNIST_MISSING) and os.environ.get("ABLATE_REQUIRE_MNIST") != "1",
    reason=f"no MNIST under {DATA_DIR} (MNIST/raw/{', '.join(MNIST_MISSING)}); set ABLATE_DATA_DIR to the folder "
           "that holds MNIST/raw/ (CI does)",
)
