"""Budget profiles: how long each run of a sweep trains. A budget changes epochs and subset sizes
(and, for smoke, the sweep's seed list: seed 0 only) — never another axis of a comparison.

Precedence: defaults < budget profile < the sweep's own profile < explicit overrides.
`budget=none` leaves the defaults.
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
    # This machine (2 cores, 2 workers): each sweep in at most 8 minutes, all of them in about 40.
    # The default below trains the tutorial's model to about 88 % on MNIST rows (376 steps) and gives
    # the copy task 630 steps: it sits on a plateau near 30 % until a model learns it, then jumps to
    # 100 %; 1-2 heads and fixed positions (sinusoidal, RoPE) get past it within 630 steps, the
    # tutorial's 4 heads with learned positions do not. The big sweeps cannot afford even this and
    # get less (SWEEPS below).
    "quick": {
        "mnist": {"trainer.max_epochs": 4, "data.train_subset": 6000, "data.val_size": 1000,
                  "data.test_subset": 2000},
        "copy": {"trainer.max_epochs": 10, "data.n_train": 4000, "data.n_val": 500, "data.n_test": 500},
    },
    # Paper quality, meant for GPUs: the whole training set, long training.
    "full": {
        "mnist": {"trainer.max_epochs": 20},
        "copy": {"trainer.max_epochs": 30, "data.n_train": 100000, "data.n_val": 2000, "data.n_test": 5000},
    },
}

# Per sweep (run.group), on top of the budget's profile: the quick budget of the sweeps whose grids
# are too big or too deep for the default within 8 minutes here. Measured per-run cost on 2 cores
# (1 thread per worker): about 4 s of fixed cost (start, probes, evaluation) plus the training.
SWEEPS: dict[str, dict[str, dict[str, dict[str, Any]]]] = {
    "quick": {
        # 96 runs with d_head up to 512: MNIST 158 steps, copy 189 (still on its plateau)
        "scaling": {"mnist": {"trainer.max_epochs": 2, "data.train_subset": 5000},
                    "copy": {"trainer.max_epochs": 3}},
        # 60 runs (5 schemes x causal x 2 tasks x 3 seeds), copy also evaluated at twice the length: MNIST 237 steps
        "pos_enc": {"mnist": {"trainer.max_epochs": 3, "data.train_subset": 5000}},
        # 60 runs up to 16 layers: MNIST 94 steps
        "residual": {"mnist": {"trainer.max_epochs": 2, "data.train_subset": 3000}},
        # 54 runs up to 12 layers: MNIST 88 steps (3200 images took 479 s, at the limit)
        "norm": {"mnist": {"trainer.max_epochs": 2, "data.train_subset": 2800}},
    },
}

SMOKE_SEEDS = [0]

# The one home of the budget names: the `budget` key, `ablate sweep --budget`, `ablate report export
# --budget` and the export's preference all read them from here.
NAMES: tuple[str, ...] = tuple(BUDGETS)
# Least training first. `none` (the defaults, 5 epochs of the whole training set) trains more than
# quick and less than full. Export prefers the last present and never silently replaces a table
# with one from an earlier name.
BY_TRAINING: tuple[str, ...] = ("smoke", "quick", "none", "full")
assert sorted(BY_TRAINING) == sorted(NAMES), "every budget has its place in BY_TRAINING"


def profile(budget: str, task: str, group: str | None = None) -> dict[str, Any]:
    """The settings `budget` gives a run of `task` in sweep `group` (explicit overrides win over them)."""
    out = dict(BUDGETS[budget][task])
    out.update(SWEEPS.get(budget, {}).get(group or "", {}).get(task, {}))
    return out
