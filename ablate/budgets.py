"""Budget profiles: how long each run of a sweep trains. A budget changes epochs and subset sizes
(and, for smoke, the sweep's seed list: seed 0 only) — never another axis of a comparison.

Precedence: defaults < budget profile < the sweep's own profile < explicit overrides.
`budget=none` leaves the defaults.
"""

from __future__ import annotations

from typing import Any

from .registry import TASKS
from .registry import spec as task_spec

# Each task's own profiles live in its registry entry (ablate/registry.py, `budgets`):
#   smoke  CI: a whole sweep in about 2 minutes on 2 cores. Proves the plumbing, answers nothing.
#   quick  this machine (2 cores): each sweep in at most 10 minutes.
#   none   the defaults.
#   full   paper quality, meant for GPUs: the whole training set, long training.
NAMES: tuple[str, ...] = ("none", "smoke", "quick", "full")


def task_profile(budget: str, task: str) -> dict[str, Any]:
    """A task's own settings at `budget` (its registry entry; none for `none`)."""
    return dict(task_spec(task).budgets.get(budget, {}))


# A derived view, budget -> task -> settings (read it; change the registry entries)
BUDGETS: dict[str, dict[str, dict[str, Any]]] = {b: {t: task_profile(b, t) for t in TASKS} for b in NAMES}

# Per sweep (run.group), on top of the budget's profile: settings of a sweep whose grid is too big or
# too deep for its tasks' quick profile within 10 minutes here, or whose question needs models trained
# further than the quick profile's (budget -> group -> task -> settings).
# Table 3 (E) (issue 24) compares learned and sinusoidal positions at convergence: MNIST rows' quick
# profile (376 steps, about 88 %) is still learning, so these sweeps train 12,000 images for 6 epochs
# (1,128 steps, with the sweeps' cosine decay) and test on all 10,000 test images. Sized by one pilot
# (sinusoidal, seed 0, 15,000 images for 8 epochs, cosine: 96.9 %, +0.2 points of validation accuracy
# over its last 2 epochs), cut to 12,000 images and 6 epochs so that pos_enc_3e fits 10 minutes here;
# whether the runs converged is reported from their own last-epoch gain.
_CONVERGED_ROWS = {"mnist": {"trainer.max_epochs": 6, "data.train_subset": 12000, "data.val_size": 2000,
                             "data.test_subset": None}}
# Pre-LN vs Post-LN against depth and warm-up (issue 25): 5 rates x 2 placements x 3 seeds per depth and
# warm-up, up to 24 layers, does not fit 10 minutes at copy's quick profile (630 steps; a 24-layer run
# about 71 s here), so these train 4 epochs (252 steps): twice what both placements took to solve copy
# at 12 layers and lr 1e-3 in sweep norm (125 steps).
_NORM_DEPTH = {"copy": {"trainer.max_epochs": 4}}
SWEEPS: dict[str, dict[str, dict[str, dict[str, Any]]]] = {
    "quick": {"pos_enc_3e": _CONVERGED_ROWS, "pos_enc_3e_bert": _CONVERGED_ROWS,
              "rnn_rows_converged": _CONVERGED_ROWS,  # the LSTM against pos_enc_3e's learned arm (issue 25)
              **{f"norm_{part}": _NORM_DEPTH
                 for part in ("6", "12_warm", "12_cold", "24_warm_pre", "24_warm_post", "24_cold_pre", "24_cold_post")}}}

SMOKE_SEEDS = [0]

# NAMES above is the one home of the budget names: the `budget` key, `ablate sweep --budget`,
# `ablate report export --budget` and the export's preference all read them from here.
# Least training first. `none` (the defaults, 5 epochs of the whole training set) trains more than
# quick and less than full. Export prefers the last present and never silently replaces a table
# with one from an earlier name.
BY_TRAINING: tuple[str, ...] = ("smoke", "quick", "none", "full")
assert sorted(BY_TRAINING) == sorted(NAMES), "every budget has its place in BY_TRAINING"
assert all(set(t.budgets) <= set(NAMES) for t in TASKS.values()), "a task's budget profiles use budget names"


def profile_keys() -> frozenset[str]:
    """Every key a budget profile sets (a task's or a sweep's): epochs, subset sizes, probe batch."""
    tasks = [settings for t in TASKS.values() for settings in t.budgets.values()]
    sweeps = [settings for groups in SWEEPS.values() for g in groups.values() for settings in g.values()]
    return frozenset(k for settings in (*tasks, *sweeps) for k in settings)


def profile(budget: str, task: str, group: str | None = None) -> dict[str, Any]:
    """The settings `budget` gives a run of `task` in sweep `group` (explicit overrides win over them)."""
    out = task_profile(budget, task)
    out.update(SWEEPS.get(budget, {}).get(group or "", {}).get(task, {}))
    return out
