"""The report: one notebook per question of the article (reports/*.py, jupytext), each answered from
the results table, built into HTML, PNG figures, an index and reports/FINDINGS.md.

    ablate report export    run directories ($ABLATE_RUNS_DIR/<sweep>) -> reports/data/ (CSV, NPZ, meta.json)
    ablate report build     execute every notebook on reports/data/ -> reports/build/*.html,
                            reports/build/index.html, reports/figures/*.png, reports/FINDINGS.md
    ablate report [all]     both

What a notebook uses (`from ablate import report as R`):

    R.setup()                               fixed figure style
    S = R.sweep("scaling")                  the exported table (S.df), curves, per-layer probes,
                                            attention maps; S.ready is False when not run yet
    R.estimate(df, metric, where)           mean ± 95 % interval over seeds       (stats.py)
    R.compare(df, metric, a, b)             a - b, "no measurable difference" inside its interval
    R.at_best_lr(df)                        each variant at its best learning rate (ablate.results.best_lr;
                                            a tuned sweep: at the value its stage 1 chose, every seed)
    R.lr_phrase(df), R.convergence(df)      sentences: how the learning rate was chosen; whether the runs
                                            had converged (median val/gain_last_epoch, solved >= 99 %)
    R.level(df, where), R.at_level(df)      the reference level a run that learned nothing sits at (the
                                            order-blind level, else chance), and which runs sit there
    S.probe_curves()                        periodic probes during training (<sweep>_curves.csv), long
    Q = R.question(key, title, text, anchors=[R.Anchor(cite, claim)], sweeps=[...])
    Q.answer(text, checks=[anchor.expect_greater(effect), ...], figure=R.savefig(fig, "q2_scores"))
    Q.not_run_yet(S)                        "not run yet — run `make sweep-scaling`"

The layer rule holds (tests/test_layering.py): this package imports only ablate.results and the
leaf utilities (fileio): it reads the exported tables and never imports training code. Export, which
reads run directories (and, for the permuted attention maps, their checkpoints), lives in the results
layer (ablate.results.export), as do the data folder's format and the cost estimate.
"""

from ..results import config_defaults
from .answers import (
    AGREES,
    ANSWER_MIME,
    DISAGREES,
    INCONCLUSIVE,
    NOT_RUN,
    Anchor,
    Check,
    Question,
    question,
)
from .data import NotRunYet, Sweep, arrays, data_dir, figures_dir, read_meta, sweep, table
from .figures import TASKS, heatmap_grid, heatmaps, savefig, setup
from .stats import (
    LEVEL_MARGIN,
    PLATEAU,
    SOLVED,
    Effect,
    Estimate,
    at_best_lr,
    at_level,
    caveat,
    chosen_lrs,
    ci95_errorbar,
    compare,
    convergence,
    effect,
    estimate,
    level,
    loglog_slope,
    lr_phrase,
    number,
    row_level,
    rows,
    seeds_per_variant,
    slope_estimate,
    tune_info,
    values_estimate,
)

__all__ = [
    "AGREES",
    "ANSWER_MIME",
    "LEVEL_MARGIN",
    "PLATEAU",
    "SOLVED",
    "DISAGREES",
    "INCONCLUSIVE",
    "NOT_RUN",
    "Anchor",
    "Check",
    "Effect",
    "Estimate",
    "NotRunYet",
    "Question",
    "Sweep",
    "TASKS",
    "arrays",
    "at_best_lr",
    "at_level",
    "caveat",
    "chosen_lrs",
    "ci95_errorbar",
    "compare",
    "convergence",
    "data_dir",
    "effect",
    "estimate",
    "figures_dir",
    "heatmap_grid",
    "heatmaps",
    "level",
    "loglog_slope",
    "lr_phrase",
    "number",
    "question",
    "read_meta",
    "config_defaults",
    "row_level",
    "rows",
    "savefig",
    "seeds_per_variant",
    "setup",
    "slope_estimate",
    "sweep",
    "table",
    "tune_info",
    "values_estimate",
]


def main(argv: list[str] | None = None) -> int:
    """`ablate report [export|build|all] ...` (see ablate.report.cli)."""
    from .cli import main as cli_main

    return cli_main(argv)
