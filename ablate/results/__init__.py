"""The results table of a sweep: one row per run, from its run directories or from W&B.

    from ablate.results import load, aggregate, best_lr, swept_keys

    df = load("scaling")                 # $ABLATE_RUNS_DIR/scaling/*/summary.json (default ./runs)
    swept_keys(df)                       # ['model.d_head', 'model.qk_scale', 'data.task', 'optim.lr', 'seed']
    aggregate(best_lr(df), metrics=["test/acc"])   # each variant at its best lr: test/acc_mean, _lo, _hi
                                         # (the 95 % interval `ablate compare` and the reports quote for
                                         # the same runs: ablate.results.interval), _std (ddof=1), _n
    aggregate(df)                        # a tuned sweep: each variant at its chosen value, with the
                                         # tuned.<key> column and the stage-1 curve (stats.tuned)

Columns, always in this order (see `table` for each):
    run_id | config keys (model.*, data.*, optim.*, trainer.*, run.*, pooling, budget, tracking) | seed
    | tuned.<key>, stage (a tuned sweep only) | status | metrics (test/*, val/*, train/*, then eval/n_test,
      eval/n_val: the examples each evaluation split holds, and ref/*) | probes (probe/init/*, probe/final/*, ...)
    | params/attention, params/ffn, params/recurrent (when a run is model.arch=lstm/gru), params/embedding,
      params/other, params/total (a part the model lacks: 0)
    | wall_time_s, train_samples_per_s, global_step, attempts, diverged_step, commit, dirty,
      commit_mismatch, error, run_dir

A run whose files cannot be read is a row with status `corrupt` (`corrupt_warnings(df)`: one line
each), never an exception.

`ablate results NAME [--csv PATH] [--parquet PATH] [--wandb ENTITY/PROJECT]` prints and writes it;
the printed short view fits the terminal (`format_table`).
"""

from ..lazy import exports

# The package imports nothing when it is imported (PEP 562): each name is loaded from its home on first
# use, so `from ablate.results.stats import aggregate` (the reports) stays clear of the harness that
# load() and export need (the config, run directories, sweep files, W&B). tests/layering.py reads LAZY.
LAZY = {
    "ResultsError": ".stats",
    "aggregate": ".stats",
    "best_lr": ".stats",
    "swept_keys": ".stats",
    "t_quantile_975": ".stats",
    "tuned": ".stats",
    "commit_warnings": ".table",
    "corrupt_warnings": ".table",
    "format_table": ".table",
    "from_records": ".table",
    "load": ".table",
    "table_warnings": ".table",
    "write": ".table",
    "load_wandb": ".wandb_runs",
    "config_defaults": ".export",
    "config_keys": ".export",
}

__all__ = sorted(LAZY)


__getattr__, __dir__ = exports(__name__, globals(), LAZY)
