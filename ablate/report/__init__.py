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
    S = R.sweeps("residual", "residual_deep")  several tables stacked, one Sweep
    R.estimate(df, metric, where)           mean [95 % interval] over seeds: accuracies by a bootstrap over
                                            seeds and evaluation examples, fractions over seeds, gradients
                                            on the log scale, the rest Student's t            (stats.py)
    R.compare(df, metric, a, b), R.effect   a - b (a / b on the log scale) with interval and p-value;
                                            Effect.tost(margin) for sameness
    R.paired(df, metric, a, b)              a - b over runs paired by seed on one evaluation set (ttest_rel)
    R.time_to_solve(df, where), R.solve_test(a, b)
                                            steps to the solve level, unsolved runs censored; the rank test
                                            (exact) and the log-rank test between two variants   (solve.py)
    R.learned(df, where)                    "5 of 5 runs (95 % CI 48–100 %)": runs that learned, exact interval
    R.holm(pvalues), R.errorbar             Holm's adjusted p-values; seaborn's errorbar= (bootstrap)
    R.at_best_lr(df)                        each variant at its best learning rate (a tuned sweep: at the value
                                            its stage 1 chose, every seed)
    R.lr_phrase(df), R.convergence(df)      sentences: how the learning rate was chosen; whether the runs
                                            had converged (median val/gain_last_epoch, solved >= 99 %)  (sentences.py);
                                            R.converged(df) the same as True / False / None
    R.level(df, where), R.at_level(df)      the reference level a run that learned nothing sits at (the
                                            highest its task records below 99 %), and which runs are not
                                            clearly above it (R.above_level, the rule R.learned counts)
    S.probe_curves()                        periodic probes during training (<sweep>_curves.csv), long
    R.show_table(df)                        a table without its index
    A = R.Anchor(cite, claim, claim_zh, kind="outcome"|"mechanism", wording=...)
    Q = R.question(key, anchors=[A, ...])   its title, question (both languages) and sweeps: its study's
                                            manifest, reports/<notebook>.yaml (ablate.studies)
    Q.answer(record=dict(...), details=...,  the prose: reports/prose/<lang>/<key>.md over the record (prose.py)
             checks=[A.greater(effect, what, primary=True, reason=...), A.same(..., margin=...), ...],
             figure=R.savefig(fig, "q2_scores"))            verdicts, Holm, payload: answers.py
    Q.not_run_yet(S)                        "not run yet — run `make sweep-scaling`"

The layer rule holds (tests/test_layering.py, transitively): this package imports only
ablate.results.stats, ablate.results.interval (the interval it shares with the table's aggregate),
ablate.results.exported and the leaf modules (registry, fileio, studies); the CLI reaches
export only inside its functions. Config defaults, swept keys and the full budget's cost come from
meta.json, written at export. Export, which reads run directories (and, for the permuted and sentence
attention maps, their checkpoints), lives in the results layer (ablate.results.export).
"""

from .answers import (
    AGREES,
    AGREES_IN_PART,
    AGREES_IN_PART_UNTESTED,
    ANSWER_MIME,
    DISAGREES,
    DISAGREES_IN_PART,
    DISAGREES_IN_PART_UNTESTED,
    INCONCLUSIVE,
    NOT_RUN,
    NOT_TESTABLE,
    PARTLY_DISAGREES,
    Anchor,
    Check,
    Question,
    overall,
    question,
)
from .data import (
    NotRunYet,
    Sweep,
    Sweeps,
    arrays,
    config_defaults,
    data_dir,
    figures_dir,
    missing_zh,
    read_meta,
    sweep,
    sweeps,
    table,
)
from .display import show_table
from .figures import (
    LABELS,
    PALETTES,
    TASKS,
    heatmap_grid,
    heatmaps,
    hline,
    integer_ticks,
    label,
    learning_curves,
    legend,
    order,
    palette,
    probe_curve,
    reference_curve,
    reference_lines,
    savefig,
    setup,
    stamp,
    stamp_text,
    subplots,
)
from .sentences import (
    at_best_lr,
    caveat,
    chosen_lrs,
    converged,
    convergence,
    full_stop,
    lr_phrase,
    seeds_per_variant,
    tune_info,
)
from .solve import Solve, SolveTest, paired, solve_test, time_to_solve
from .stats import (
    LEVEL_MARGIN,
    PLATEAU,
    SOLVED,
    Effect,
    Estimate,
    Fraction,
    above_level,
    at_level,
    ci95_errorbar,
    clopper_pearson,
    compare,
    effect,
    errorbar,
    estimate,
    geomean,
    holm,
    learned,
    level,
    log_errorbar,
    loglog_slope,
    number,
    row_level,
    row_margin,
    rows,
    slope_estimate,
    values_estimate,
)

__all__ = [
    "Solve",
    "SolveTest",
    "paired",
    "solve_test",
    "time_to_solve",
    "LABELS",
    "PALETTES",
    "Sweeps",
    "hline",
    "integer_ticks",
    "label",
    "learning_curves",
    "legend",
    "order",
    "palette",
    "probe_curve",
    "reference_curve",
    "reference_lines",
    "stamp",
    "stamp_text",
    "subplots",
    "sweeps",
    "show_table",
    "overall",
    "learned",
    "holm",
    "errorbar",
    "clopper_pearson",
    "Fraction",
    "PARTLY_DISAGREES",
    "NOT_TESTABLE",
    "AGREES_IN_PART",
    "AGREES_IN_PART_UNTESTED",
    "DISAGREES_IN_PART",
    "DISAGREES_IN_PART_UNTESTED",
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
    "above_level",
    "at_best_lr",
    "at_level",
    "caveat",
    "chosen_lrs",
    "ci95_errorbar",
    "compare",
    "converged",
    "convergence",
    "data_dir",
    "effect",
    "estimate",
    "geomean",
    "log_errorbar",
    "figures_dir",
    "heatmap_grid",
    "heatmaps",
    "level",
    "loglog_slope",
    "lr_phrase",
    "full_stop",
    "missing_zh",
    "number",
    "question",
    "read_meta",
    "config_defaults",
    "row_level",
    "row_margin",
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
