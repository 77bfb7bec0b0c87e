"""The results table of a sweep: one row per run, from its run directories or from W&B.

    from ablate.results import load, aggregate, best_lr, swept_keys

    df = load("scaling")                 # $ABLATE_RUNS_DIR/scaling/*/summary.json (default ./runs)
    swept_keys(df)                       # ['model.d_head', 'model.qk_scale', 'data.task', 'optim.lr', 'seed']
    aggregate(best_lr(df), metrics=["test/acc"])   # each variant at its best lr: mean, std, 95 % CI, n
    aggregate(df)                        # a tuned sweep: each variant at its chosen value, with the
                                         # tuned.<key> column and the stage-1 curve (stats.tuned)

Columns, always in this order (see `table` for each):
    run_id | config keys (model.*, data.*, optim.*, trainer.*, run.*, pooling, budget, tracking) | seed
    | tuned.<key>, stage (a tuned sweep only) | status | metrics (test/*, val/*, train/*) | probes (probe/init/*, probe/final/*, ...)
    | params/attention, params/ffn, params/embedding, params/other, params/total
    | wall_time_s, train_samples_per_s, global_step, attempts, diverged_step, commit, dirty,
      commit_mismatch, error, run_dir

A run whose files cannot be read is a row with status `corrupt` (`corrupt_warnings(df)`: one line
each), never an exception.

`ablate results NAME [--csv PATH] [--parquet PATH] [--wandb ENTITY/PROJECT]` prints and writes it;
the printed short view fits the terminal (`format_table`).
"""

from ..config import all_keys as config_keys
from .stats import aggregate, best_lr, t_quantile_975, tuned
from .table import (
    ResultsError,
    commit_warnings,
    corrupt_warnings,
    format_table,
    from_records,
    load,
    swept_keys,
    table_warnings,
    write,
)
from .wandb_runs import load_wandb


def config_defaults() -> dict:
    """Every config key with its default ({'model.ffn_mult': 2, ...}): what a report needs to know
    of the harness's defaults, without importing it."""
    from ..config import Config, flat

    return flat(Config())


__all__ = [
    "ResultsError",
    "config_defaults",
    "config_keys",
    "aggregate",
    "best_lr",
    "commit_warnings",
    "corrupt_warnings",
    "format_table",
    "from_records",
    "load",
    "load_wandb",
    "swept_keys",
    "table_warnings",
    "t_quantile_975",
    "tuned",
    "write",
]
