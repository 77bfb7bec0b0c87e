"""Budget profiles: how long each run of a sweep trains. A budget changes epochs and subset sizes
(and, for smoke, the sweep's seed list: seed 0 only) — never another axis of a comparison.

Precedence: defaults < budget profile < explicit overrides. `budget=none` leaves the defaults.
"""

from __future__ import annotations

from typing import Any

BUDGETS: dict[str, dict[str, dict[str, Any]]] = {
    "none": {"mnist": {}, "copy": {}},
    # CI: a whole sweep in about 2 minutes on 2 cores. Proves the plumbing, answers nothing.
    "smoke": {
        "mnist": {"trainer.max_epochs": 1, "data.train_subset": 512, "data.val_size": 256,
                  "data.test_subset": 512, "run.probe_batch": 32},
        "copy": {"trainer.max_epochs": 1, "data.n_train": 512, "data.n_val": 128, "data.n_test": 128,
                 "run.probe_batch": 32},
    },
    # This machine (2 cores, 2 workers): sized so the largest sweep (scaling, 96 runs) fits in about
    # 8 minutes. Whether that is enough to answer each question is for the findings to show.
    "quick": {
        "mnist": {"trainer.max_epochs": 1, "data.train_subset": 3000, "data.val_size": 1000,
                  "data.test_subset": 2000},
        "copy": {"trainer.max_epochs": 3, "data.n_train": 1600, "data.n_val": 500, "data.n_test": 500},
    },
    # Paper quality, meant for GPUs: the whole training set, long training.
    "full": {
        "mnist": {"trainer.max_epochs": 20},
        "copy": {"trainer.max_epochs": 30, "data.n_train": 100000, "data.n_val": 2000, "data.n_test": 5000},
    },
}

SMOKE_SEEDS = [0]


def profile(budget: str, task: str) -> dict[str, Any]:
    return dict(BUDGETS[budget][task])
