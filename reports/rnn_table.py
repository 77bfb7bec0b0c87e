# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # The tutorial's first table: an RNN beside the Transformer
#
# The tutorial opens with a table of claims about recurrent networks against Transformers. Each row is
# answered here from its own measurement, with an LSTM of matched size (`model.arch=lstm`,
# `model.rnn_hidden` null: the hidden size whose parameter count is closest to the Transformer
# encoder's; the count is in each table's `params/total`) trained by the same tasks, budgets and
# learning-rate search as the Transformer:
#
# 1. **Computation and complexity** — serial vs parallel, O(n) vs O(n²), "eats memory":
#    `ablate bench rnn` (`reports/data/rnn_cost.csv`), one training step against sequence length n.
# 2. **Long-range dependencies** — an RNN forgets the start of a long sequence, attention reaches any
#    position in one step: sweeps `rnn_copy` + `rnn_copy_long` + `rnn_copy_long_transformer` (copy at 8,
#    16, 32 tokens, LSTM and Transformer, each with and without positions, tuned), `rnn_copy_64` (64 tokens, untuned: added after
#    the primary comparison had been read, supporting only) and `rnn_reverse` (reverse copy, 8 and 32).
# 3. **Position information** — an RNN reads in order, a Transformer needs positional encoding: the
#    same copy sweeps at 8 tokens, and `rnn_rows` (MNIST rows, tested with the rows permuted).
# 4. **The tutorial's MNIST model against an LSTM of matched size** — `rnn_rows`: accuracy and time
#    per training epoch.
#
# ## The tests, fixed before the data are read
#
# *Provenance, said plainly:* these tests, margins and reasons were written before any quick-budget run
# of these sweeps had finished, with only the smoke runs (one epoch, plumbing) seen, and committed before
# the quick tables were read; the one outcome seen by then was the sweep log's learning-rate choice for
# the LSTM at 8 tokens (validation accuracy 0.97 at the largest rate). None was changed after reading an
# outcome; a deviation would be marked here.
#
# | row | anchor | kind | primary test | why this test |
# | --- | --- | --- | --- | --- |
# | complexity | Vaswani Table 1: self-attention O(n² · d) per layer, recurrent O(n · d²) | outcome | `rnn_cost`: the log-log slope of one training step's time in n (upper half of n), Transformer minus LSTM, at least `SLOPE_GAP` | Table 1 counts operations; time per step is what they cost. Both models at the tutorial's d_model, batch and task, so only n moves |
# | computation | Vaswani Table 1: sequential operations O(n) for recurrent, O(1) for self-attention | outcome | `rnn_cost`: with parallel hardware, the Transformer's time slope below the LSTM's; on a CPU run **not testable** (the premise is parallel hardware) | the claim is about wall time when all positions can be computed at once; one or two CPU threads have no idle lanes to fill |
# | long range | Vaswani §4 (path length O(n) vs O(1)); Bengio et al. 1994 (vanishing gradients) | outcome | copy at the longest length, **32 tokens**, test accuracy, Transformer with sinusoidal positions vs LSTM without positions, greater | copy at length L needs every token L + 1 steps after it was read; the longest length is where the path matters most. Sinusoidal: no parameters (the matched LSTM has the same count at every length) and no max_len |
# | position information | Vaswani §3.5: without recurrence, order must be injected | outcome | copy at **8 tokens**, test accuracy, LSTM without positions vs Transformer without positions, greater | neither gets a position signal; the shortest length is where the LSTM's memory is least in the way, so what is left is reading in order |
# | position information | the same, as a mechanism | mechanism | `rnn_rows`, MNIST rows: the accuracy lost when the test rows are permuted (`test/acc` − `test/acc_perm`), LSTM without positions vs Transformer without, greater | a model that reads in order computes something else on permuted rows; a Transformer without positions is permutation-invariant (mean pooling) and loses nothing |
# | MNIST | Vaswani §1: recurrence precludes parallelization within training examples | outcome | `rnn_rows`: seconds per training epoch (training examples / samples per second), LSTM / Transformer (the tutorial's), greater; on a CPU run **not testable** (one thread per run: no parallel hardware) | the tutorial's model against an LSTM of its size, on its own task; the training throughput leaves out validation, test and probes |
#
# Supporting (never moves a verdict): the same comparisons at every other length and on reverse copy;
# the LSTM's accuracy at 32 tokens against its own at 8; the LSTM with and without sinusoidal positions
# (sameness within `SAME_MARGIN`); the Transformer without positions at the order-blind level at every
# length; the tutorial's model against the LSTM in MNIST test accuracy (sameness within `SAME_MARGIN`);
# the memory slopes, the crossover lengths and the LSTM's serial part from `ablate bench rnn`.
#
# **Where in the sequence the errors sit** (early or late positions): *added after the primary results
# had been read*, supporting only. Test accuracy at each emitted token (`final/acc_by_position`, computed
# at export from each run's final checkpoint: the runs predate the probe), figure `rnn_error_positions`,
# and the LSTM's accuracy on the first against the last quarter of the emitted tokens at copy 32 (and 16)
# and reverse copy 32. "Forgets the start" predicts, in plain copy, the first quarter worse (the start of
# the sequence, with the most input read after it; every token there waits length + 1 steps), in reverse
# copy the last quarter worse (the first tokens read, 2 × length steps back).
#
# ## MNIST at convergence, decided before the runs of `rnn_rows_converged` (issue 25)
#
# Written and committed before any run of sweep `rnn_rows_converged`; the git history shows the order.
# **A test changed after its outcome was read**, and why: the MNIST accuracy test above (`rnn_rows`, ±2
# points) was read in earlier builds; it compared models still learning at the quick budget (376 steps) on
# 3 seeds, which cannot decide "an LSTM of the same size is not less accurate". It stays, as supporting.
# **The runs:** the matched LSTM without positions (`rnn_rows_converged`) against the tutorial's Transformer
# (learned positions N(0, 1): `pos_enc_3e`'s learned arm, at the same settings), both on MNIST rows trained
# to convergence (12,000 images, 6 epochs, cosine decay: the two sweeps' own quick profile), each at its
# own learning rate (4 values on seed 0, the best on `val/acc_best` run on 10 seeds), tested on all 10,000
# test images, paired by seed (the same data order). **Margin ±0.5 points**, Q1's Table 3 (E) margin at
# convergence (see reports/q1_word_order.py for why half a point).
#
# | row | anchor | kind | primary test | why this test |
# | --- | --- | --- | --- | --- |
# | MNIST | the tutorial's table: an LSTM of the same size is not less accurate — **replaces the `rnn_rows` accuracy test, which becomes supporting** | outcome | `pos_enc_3e` (learned) + `rnn_rows_converged`: MNIST test accuracy, the tutorial's Transformer vs the LSTM without positions, paired by seed, same within **±0.5 points** (TOST) | both trained until they stop learning, each at its own rate, 10 seeds |
#
# **A deviation, marked:** the LSTM chose 1e-2, the top of its 4 rates, on seed 0, so its best may lie above
# the grid. 3e-2 was added to `rnn_rows_converged` after that choice was read, and the whole sweep rerun
# (its test and margin unchanged).
#
# ## The long range, one token at a time, decided before the runs of the recall sweeps (issue 25)
#
# Written and committed before any run of sweeps `recall_lstm`, `recall_lstm_128`, `recall_lstm_256`,
# `recall_transformer`, `recall_transformer_128` and `recall_transformer_256`; the git history shows the order.
# **A test changed after its outcome was read**, and why: the long-range test above (copy at 32 tokens) was
# read in earlier builds; the LSTM was at chance there at every rate, a training failure at 630 steps, and
# copy at length L holds L tokens at once, so it confounds memory with capacity. It stays, as supporting.
# **The runs:** the lag-recall task (`ablate/data/recall.py`: n tokens and a query, emit the first token;
# one token to hold, so only the lag moves) at lags n = 8, 16, 32, 64, 128, 256; the matched LSTM without
# positions and the Transformer with sinusoidal positions, both d_model 32, 2 layers, dropout 0, 500 steps,
# each at its own learning rate (4 values on seed 0 per lag, the best on `val/acc_best` run on 5 seeds). Every
# run of one lag is tested on the same 1,000 sequences (the sets depend on data.seed alone), so the arms are
# paired by seed. A run *learned* when its best validation accuracy is above the order-blind level (30 % at
# lag 8, falling towards chance, 10 %, as the lag grows).
#
# | row | anchor | kind | primary test | why this test |
# | --- | --- | --- | --- | --- |
# | long range | Vaswani §4 (path length O(n) vs O(1)); Bengio et al. 1994 (vanishing gradients) — **replaces the copy-32 test, which becomes supporting** | outcome | recall at the longest lag, **`RECALL_LAG` = 256**, test accuracy, Transformer (sinusoidal) − LSTM (no PE), paired by seed, greater | one token to hold: the lag alone is the question; the longest lag is where the path matters most |
#
# Supporting (never moves a verdict): at each lag, each arm's test accuracy and the runs that learned; the
# lag at which each arm falls to chance (the shortest lag at which none of its 5 runs learned), or none; the
# same comparison at every shorter lag; whether each arm's runs converged or plateaued (the last epoch's
# gain in validation accuracy, against `R.convergence`'s threshold); the LSTM's lag-8 against its lag-256
# accuracy (falling with the lag is what "forgets" predicts).
#
# ## The LSTM with its standard remedies, decided before the runs of `recall_lstm_256_remedies` (issue 37)
#
# Written and committed before any run of sweep `recall_lstm_256_remedies`; the git history shows the order.
# The LSTM above starts from torch's default gates and trains without gradient clipping; a practitioner would
# give it its standard remedies. **The runs:** the lag-256 LSTM arm with gradient clipping at norm 1
# (`optim.grad_clip`) and either a forget-gate bias of 1 (Gers et al. 2000; Jozefowicz et al. 2015) or chrono
# initialisation (Tallec & Ollivier 2018: b_f ~ log U(1, T_max − 1), b_i = −b_f, T_max the task's longest
# sequence), `model.rnn_init`; each at its own learning rate (4 values on seed 0, the best on `val/acc_best`
# run on 5 seeds), as every arm. The LSTM's remedy is then chosen as its rate is: the one of torch's init,
# forget1 and chrono whose seed-0 run at its chosen rate has the best `val/acc_best` (ties: the simpler,
# in that order).
#
# | row | anchor | kind | primary test | why this test |
# | --- | --- | --- | --- | --- |
# | long range | Vaswani §4; Bengio et al. 1994 — **replaces the recall test above, which becomes supporting** | outcome | recall at lag **`RECALL_LAG` = 256**, test accuracy, Transformer (sinusoidal) − the LSTM at its chosen remedy, paired by seed, greater | a fair baseline: every arm at its own best settings |
#
# **Changed after an outcome was read**, and why: the review that asked for these arms reported a replica of
# this LSTM with chrono initialisation recalling at lag 256 after 2,000 steps, before this test was written.
# The test is what a fair comparison needs whatever that outcome; it is marked because the outcome was known.
# Supporting: "forgets the start" and "slower to learn" are different claims: whether the chosen LSTM's runs
# at lag 256 were still learning at the end of the budget (`R.convergence`) says which of the two the data
# show.

# %%
import re

import matplotlib.pyplot as plt  # noqa: F401 - the figures' backend, before seaborn
import numpy as np
import pandas as pd
import seaborn as sns
from IPython.display import display

from ablate import report as R
from ablate.report import figures as F
from ablate.report.prose import BUDGET_ZH

R.setup()

# ---- the primary tests (fixed before the data are read) ----
COPY_METRIC = "test/acc"  # copy accuracy per blank position, test split at the training length
LONG_LENGTH = 32  # the long-range test's length: the longest the tuned copy grid trains (rnn_copy_long)
ORDER_LENGTH = 8  # the position test's length: the shortest
SLOPE_GAP = 0.3  # complexity: the Transformer's time slope at least this much above the LSTM's
SAME_MARGIN = 0.02  # supporting sameness claims: ±2 points of accuracy (Q1's margin for "nearly identical")
CONVERGED_MARGIN = 0.005  # MNIST at convergence (issue 25): ±0.5 points, Q1's Table 3 (E) margin there
RECALL_LAG = 256  # the long-range test's lag (issue 25): the longest the recall sweeps train
RECALL_SWEEPS = ("recall_lstm", "recall_lstm_128", "recall_lstm_256",
                 "recall_transformer", "recall_transformer_128", "recall_transformer_256")
REMEDIES = ("recall_lstm_256_remedies",)  # issue 37: the lag-256 LSTM with forget1 or chrono, and clipping
REMEDY_ORDER = ("default", "forget1", "chrono")  # model.rnn_init, simplest first (the tie rule)
DROP = "test/acc_drop_perm"  # test/acc - test/acc_perm, per run (computed below)
EPOCH_S = "train_s_per_epoch"  # data.train_subset / train_samples_per_s, per run (computed below)
TF_PE = {"model.arch": "transformer", "model.pos_enc": "sinusoidal"}
TF_NONE = {"model.arch": "transformer", "model.pos_enc": "none"}
LSTM_NONE = {"model.arch": "lstm", "model.pos_enc": "none"}
LSTM_PE = {"model.arch": "lstm", "model.pos_enc": "sinusoidal"}
TUTORIAL = {"model.arch": "transformer", "model.pos_enc": "learned"}  # MNIST: the tutorial's model

ARCH = {"transformer": "Transformer", "lstm": "LSTM", "gru": "GRU"}
PE_ZH = {"none": "无位置编码", "sinusoidal": "正弦位置编码", "learned": "可学习位置编码"}
# One colour per variant in every figure of this notebook: the Transformer's schemes keep their Q1 colours
# (sinusoidal blue, learned orange, none grey); the LSTM is vermillion without positions, pink with.
VARIANT_COLOURS = {"Transformer, sinusoidal": F.BLUE, "Transformer, learned": F.ORANGE, "Transformer, no PE": F.GREY,
                   "LSTM, no PE": F.VERMILLION, "LSTM, sinusoidal": F.PINK, "LSTM, learned": F.BROWN}
# the benchmark's models: the LSTM, the tutorial's Transformer, and (where measured) the same at dropout 0, whose
# attention takes torch's fused kernel and does not store the n x n weights
MODEL_COLOURS = {"lstm": F.VERMILLION, "transformer": F.BLUE, "transformer_p0": F.SKY}
MODEL_NAMES = {"lstm": "LSTM", "transformer": "Transformer", "transformer_p0": "Transformer, dropout 0"}


def variant(arch, pe, zh=False):
    """'LSTM, no PE' / 'Transformer, sinusoidal' (in Chinese: 'LSTM，无位置编码')."""
    if zh:
        return f"{ARCH.get(arch, arch)}，{PE_ZH.get(pe, pe)}"
    return f"{ARCH.get(arch, arch)}, {F.label('model.pos_enc', pe)}"


def labelled(df):
    """The table with a 'variant' column (architecture and positional encoding)."""
    df = df.copy()
    df["variant"] = [variant(a, p) for a, p in zip(df["model.arch"], df["model.pos_enc"])]
    return df


def has(df, where):
    return df is not None and not R.rows(df, where).empty


def one_rate(df):
    """The one learning rate every run of an untuned sweep has (None where they differ)."""
    rates = pd.to_numeric(df["optim.lr"]).unique()
    return float(rates[0]) if len(rates) == 1 else None


def rate_words(df) -> str:
    """'Adam 1e-3': the optimiser and the one learning rate an untuned sweep's runs share ('' where they differ)."""
    lr, names = one_rate(df), df["optim.name"].unique() if "optim.name" in df else []
    if lr is None or len(names) != 1:
        return ""
    mantissa, exponent = f"{lr:.0e}".split("e")
    return f"{'Adam' if names[0] == 'adam' else names[0]} {mantissa}e{int(exponent)}"


def variants_in(df):
    return [v for v in VARIANT_COLOURS if v in set(df["variant"])]


def zh(x) -> str:
    """An Estimate / Effect / Fraction as the Chinese text writes it: the same numbers."""
    return format(x, "zh")


COPY = R.sweeps("rnn_copy", "rnn_copy_long", "rnn_copy_long_transformer")
C64 = R.sweep("rnn_copy_64")  # 64 tokens, Adam 1e-3, 2 seeds: supporting, added after the primary had been read
REV, ROWS, COST = R.sweep("rnn_reverse"), R.sweep("rnn_rows"), R.sweep("rnn_cost")
# MNIST at convergence (issue 25): the LSTM's sweep and its partner, pos_enc_3e's learned arm (the tutorial's model)
ROWS_LSTM, ROWS_TF = R.sweep("rnn_rows_converged"), R.sweep("pos_enc_3e")
COST_MISSING = "not measured yet — run `ablate bench rnn --csv reports/data/rnn_cost.csv`"

# %% [markdown]
# ## 1 · Computation and complexity: one training step against sequence length
# `ablate bench rnn`: forward, backward and an Adam step of the LSTM and of the tutorial's Transformer on
# copy-task batches of n tokens, the same d_model and batch. Slopes of log cost against log n are fitted
# over the upper half of n (dashed). Right: the LSTM at a fixed number of tokens per step (batch × n
# constant), so the arithmetic is the same at every n and only the number of steps that must run one
# after another grows.

# %%
T1_COST = R.Anchor(
    "Vaswani et al. 2017, Table 1",
    "a self-attention layer costs O(n² · d) operations in sequence length n, a recurrent layer O(n · d²)",
    "自注意力层的运算量是序列长度 n 的 O(n² · d)，循环层是 O(n · d²)",
    wording="Complexity per Layer: Self-Attention O(n² · d), Recurrent O(n · d²)",
    tutorial=True,
)
T1_SERIAL = R.Anchor(
    "Vaswani et al. 2017, Table 1",
    "a recurrent layer needs O(n) sequential operations, self-attention O(1): on parallel hardware its wall "
    "time grows with n while self-attention's need not",
    "循环层需要 O(n) 次顺序运算，自注意力只需 O(1)：在并行硬件上循环层的耗时随 n 增长，自注意力不必如此",
    wording="Sequential Operations: Self-Attention O(1), Recurrent O(n)",
    tutorial=True,
)
Q_COST = R.question("rnn-compute", anchors=[T1_COST, T1_SERIAL])
display(Q_COST)


def fitted(g, y):
    """The slope of log y against log n over the rows at or above the fitted range's start."""
    upper = g[g["n"] >= g["fit_from_n"].iloc[0]]
    return R.loglog_slope(upper["n"], upper[y]), upper


if COST.ready:
    cost = COST.df
    main = cost[cost["series"] == "batch"]
    serial = cost[cost["series"] == "tokens"]
    models = [m for m in MODEL_COLOURS if m in set(main["model"])]
    fig, axes = F.subplots(1, 3, figsize=(17, 3.9))
    for ax, y, what in zip(axes, ("time_ms", "mem_mb"), ("time per training step (ms)", "memory per step (MB)")):
        for m in models:
            g = main[main["model"] == m].sort_values("n")
            slope, upper = fitted(g, y)
            # the fitted slope in the legend: labels at the curves' ends overlapped where two slopes are close
            ax.plot(g["n"], g[y], marker="o", color=MODEL_COLOURS[m], label=f"{MODEL_NAMES[m]} (slope {slope:.2f})")
            # rounded: LAPACK's last bits vary between runs, which must not move a pixel of the figure
            fit = np.exp(np.round(np.polyval(np.polyfit(np.log(upper["n"]), np.log(upper[y]), 1), np.log(upper["n"])), 9))
            ax.plot(upper["n"], fit, ls="--", lw=1, color="grey")
        ns = sorted(main["n"].unique())
        ax.set(xscale="log", yscale="log", xlabel="sequence length n", ylabel=what)
        F.integer_ticks(ax, "x", ns)
        ax.tick_params(axis="x", labelrotation=45)
        F.legend(ax, "model (log-log slope, dashed: its fit)")
    axes[1].set_title(f"memory: {main['mem_kind'].iloc[0].replace('_', ' ')}")
    axes[0].set_title(f"batch {int(main['batch'].iloc[0])}")
    if not serial.empty:
        s = serial.sort_values("n")
        axes[2].plot(s["n"], s["time_ms"], marker="o", color=MODEL_COLOURS["lstm"], label="LSTM")
        axes[2].set(xscale="log", xlabel="sequence length n (batch × n fixed)", ylabel="time per training step (ms)",
                    title=f"LSTM, {int(s['batch'].iloc[-1] * s['n'].iloc[-1])} tokens per step")
        F.integer_ticks(axes[2], "x", sorted(s["n"].unique()))
        axes[2].tick_params(axis="x", labelrotation=45)
        axes[2].set_ylim(bottom=0)
    else:
        axes[2].set_axis_off()
    first = main.iloc[0]
    F.stamp(fig, extra=f"{first['device']}, {int(first['threads'])} thread(s), torch {first['torch']}")
    fig_cost = R.savefig(fig, "rnn_cost")
else:
    print(COST_MISSING)

# %% tags=["answer"]
if not COST.ready:
    Q_COST.not_run_yet(COST_MISSING)
else:
    slopes = {m: {y: fitted(main[main["model"] == m], y)[0] for y in ("time_ms", "mem_mb")} for m in models}
    fit_from = int(main["fit_from_n"].iloc[0])
    n_lo, n_hi = int(main["n"].min()), int(main["n"].max())
    device, threads = str(first["device"]), int(first["threads"])
    parallel = not device.startswith("cpu")

    def at(m, n, y):
        return float(main.loc[(main["model"] == m) & (main["n"] == n), y].iloc[0])

    def crossings(column):
        """The lengths where the LSTM's and the Transformer's `column` cross: interpolated linearly in log n against
        log(LSTM / Transformer) between the two measured lengths around a change of sign (exact for power laws)."""
        ns = sorted(int(n) for n in main["n"].unique())
        r = np.log([at("lstm", n, column) for n in ns]) - np.log([at("transformer", n, column) for n in ns])
        x = np.log(ns)
        found = [float(n) for n, v in zip(ns, r) if v == 0]
        found += [float(np.exp(x[i] + r[i] / (r[i] - r[i + 1]) * (x[i + 1] - x[i])))
                  for i in range(len(ns) - 1) if r[i] * r[i + 1] < 0]
        return sorted(found)

    tf_t, ls_t = slopes["transformer"]["time_ms"], slopes["lstm"]["time_ms"]
    tf_m, ls_m = slopes["transformer"]["mem_mb"], slopes["lstm"]["mem_mb"]
    gap = tf_t - ls_t
    checks = [T1_COST.judge(
        bool(gap >= SLOPE_GAP) if gap >= SLOPE_GAP or gap <= 0 else None,
        f"time slope in n ≥ {fit_from}: Transformer {tf_t:.2f}, LSTM {ls_t:.2f}, difference {gap:.2f} (agrees at ≥ "
        f"{SLOPE_GAP:g}, disagrees at ≤ 0)",
        evidence_zh=f"n ≥ {fit_from} 时时间对 n 的斜率：Transformer {tf_t:.2f}，LSTM {ls_t:.2f}，相差 {gap:.2f}"
                    f"（≥ {SLOPE_GAP:g} 为成立，≤ 0 为不成立）",
        primary=True, reason="Table 1 counts operations; one training step's time is what they cost, both models at the "
                             "same d_model, batch and task",
        reason_zh="Table 1 统计的是运算次数；一个训练步的时间就是它们的代价，两个模型的 d_model、批大小和任务都相同")]
    if parallel:
        checks.append(T1_SERIAL.judge(
            bool(tf_t < ls_t), f"on {device}: time slope Transformer {tf_t:.2f}, LSTM {ls_t:.2f}", primary=True,
            reason="with parallel hardware the Transformer computes all n positions at once; the LSTM's n steps run "
                   "one after another",
            evidence_zh=f"在 {device.upper()} 上：时间斜率 Transformer {tf_t:.2f}，LSTM {ls_t:.2f}",
            reason_zh="有并行硬件时 Transformer 同时计算全部 n 个位置；LSTM 的 n 步只能一步接一步地运行"))
    else:
        checks.append(T1_SERIAL.not_testable(
            "wall time against n", f"measured on {device} with {threads} thread(s): no parallel hardware for the "
            "Transformer to fill, so both times follow their arithmetic", primary=True,
            reason="the claim is about wall time when all positions can be computed at once",
            what_zh="耗时随 n 的变化", why_zh=f"在 {device.upper()} 上用 {threads} 个线程测量：没有可供 Transformer 填满的并行硬件，"
                                         "两者的时间都只反映各自的运算量",
            reason_zh="这个论断说的是所有位置能同时计算时的耗时"))
    checks.append(T1_COST.judge(bool(tf_m > ls_m), f"memory slope in n ≥ {fit_from}: Transformer {tf_m:.2f}, LSTM {ls_m:.2f}",
                                evidence_zh=f"n ≥ {fit_from} 时内存的斜率：Transformer {tf_m:.2f}，LSTM {ls_m:.2f}",
                                primary=False))
    serial_slope = fitted(serial, "time_ms")[0] if not serial.empty else float("nan")
    if not serial.empty:
        checks.append(T1_SERIAL.judge(
            bool(serial_slope > 0.1) if abs(serial_slope) > 0.1 else None,
            f"the LSTM at a fixed number of tokens per step: time slope in n {serial_slope:.2f} (0: the recurrence costs "
            "nothing beyond its arithmetic; 1: time grows with the serial steps)",
            evidence_zh=f"每步词元数固定时 LSTM 的时间对 n 的斜率 {serial_slope:.2f}（0：循环本身不增加运算之外的代价；"
                        "1：时间随顺序步数增长）", primary=False))
    t_cross, m_cross = crossings("time_ms"), crossings("mem_mb")

    def crossing(found, column):
        """Where the two curves of `column` first cross (none), and the cheaper model at each end of n."""
        cheaper = {n: "LSTM" if at("lstm", n, column) < at("transformer", n, column) else "Transformer"
                   for n in (n_lo, n_hi)}
        return dict(cross=found[0] if found else None, low=cheaper[n_lo], high=cheaper[n_hi])

    p0 = slopes.get("transformer_p0")
    params = {m: int(main.loc[main["model"] == m, "params"].iloc[0]) for m in models}
    record = dict(  # the prose: reports/prose/<lang>/rnn-compute.md
        tf_t=tf_t, ls_t=ls_t, tf_m=tf_m, ls_m=ls_m, steeper=bool(tf_t > ls_t), fit_from=fit_from, n_lo=n_lo, n_hi=n_hi,
        ratio_hi=at("transformer", n_hi, "time_ms") / at("lstm", n_hi, "time_ms"),
        time=crossing(t_cross, "time_ms"), memory=crossing(m_cross, "mem_mb"), device=device, threads=threads,
        parallel=parallel, mem_kind=first["mem_kind"].replace("_", " "),
        p0=dict(time=p0["time_ms"], memory=p0["mem_mb"]) if p0 else None,
        serial_slope=None if serial.empty else serial_slope, batch=int(first["batch"]),
        ms={f"{m}_{end}": at(m, n, "time_ms") for m in ("lstm", "transformer") for end, n in (("lo", n_lo), ("hi", n_hi))},
        params_lstm=params["lstm"], params_tf=params["transformer"], slope_gap=SLOPE_GAP)
    Q_COST.answer(record=record, details="", checks=checks, figure=fig_cost)

# %% [markdown]
# ## 2 · Long-range dependencies: copy against length
# Each variant at its chosen learning rate (copy up to 32 tokens) or Adam's 1e-3 (copy at 64 tokens,
# reverse copy); bars: 95 % bootstrap intervals over seeds. Dashed: the order-blind level at each length (what a model blind to order can
# expect), dotted: chance. The test set has the training length.

# %%
LONG = R.Anchor(
    "Vaswani et al. 2017, §4; Bengio et al. 1994",
    "an RNN forgets the start of a long sequence (the path between two positions is O(n) steps and gradients "
    "vanish along it); self-attention reaches any position in one step",
    "RNN 会忘记长序列的开头（两个位置之间的路径长 O(n) 步，梯度沿途消失）；自注意力一步就能到达任何位置",
    wording="Maximum Path Length: Self-Attention O(1), Recurrent O(n) (Table 1)",
    tutorial=True,
)
Q_LONG = R.question("rnn-long-range", anchors=[LONG])
display(Q_LONG)


def length_levels(df, split="test"):
    """{length: the order-blind (else chance) level of that length's runs}."""
    return {int(n): R.level(df, {"data.length": n}, split=split) for n in sorted(df["data.length"].unique())}


def length_figure(ax, df, title):
    lengths = sorted(int(n) for n in df["data.length"].unique())
    sns.pointplot(df, x="data.length", y=COPY_METRIC, hue="variant", order=lengths, hue_order=variants_in(df),
                  palette=VARIANT_COLOURS, errorbar=R.errorbar, dodge=0.3, ax=ax)
    levels = length_levels(df)
    ax.plot(range(len(lengths)), [levels[n] for n in lengths], ls="--", color="dimgrey", label="order-blind level")
    F.hline(ax, float(pd.to_numeric(df["ref/test/chance"]).mean()), "chance", ls=":")
    ax.set(xlabel="tokens to copy (training and test length)", ylabel="test accuracy per token", ylim=(0, 1.05),
           title=title)


if COPY.ready:
    best = labelled(R.at_best_lr(COPY.df))
    best["data.length"] = best["data.length"].astype(int)
    summary = best.groupby(["variant", "data.length", "optim.lr"], as_index=False).agg(
        runs=("seed", "count"), params=("params/total", "first"), val_acc_best=("val/acc_best", "mean"),
        test_acc=(COPY_METRIC, "mean"), test_seq_acc=("test/seq_acc", "mean"))
    print(R.lr_phrase(COPY.df))
    R.show_table(summary)
else:
    print(COPY.missing)
if REV.ready:
    rev = labelled(REV.df)
    rev["data.length"] = rev["data.length"].astype(int)
if C64.ready:
    c64 = labelled(C64.df)
    c64["data.length"] = c64["data.length"].astype(int)
    R.show_table(c64.groupby(["variant", "data.length"], as_index=False).agg(
        runs=("seed", "count"), val_acc_best=("val/acc_best", "mean"), test_acc=(COPY_METRIC, "mean")))
else:
    print(f"rnn_copy_64: {C64.missing}")
# every copy length in one table: the tuned ones at their chosen rates, 64 tokens at Adam's 1e-3
lengthwise = pd.concat([best, c64], ignore_index=True) if COPY.ready and C64.ready else best if COPY.ready else None

figures_long = []
if COPY.ready or REV.ready:
    panels = [(COPY, "copy") for _ in [0] if COPY.ready] + [(REV, "reverse copy") for _ in [0] if REV.ready]
    fig, axes = F.subplots(1, len(panels), figsize=(6.5 * len(panels), 3.9), squeeze=False, sharey=True)
    for ax, (S, title) in zip(axes[0], panels):
        length_figure(ax, lengthwise if S is COPY else rev, title + (
            f" ({int(c64['data.length'].max())} tokens: {rate_words(c64)})" if S is COPY and C64.ready else ""))
        F.legend(ax, "model", outside=ax is axes[0][-1])
        if ax is not axes[0][-1] and ax.get_legend() is not None:
            ax.get_legend().remove()
    F.stamp(fig, *(S for S, _ in panels), *([C64] if C64.ready and COPY.ready else []))
    figures_long.append(R.savefig(fig, "rnn_length"))

# %% [markdown]
# ## Learning curves at the longest length
# Validation accuracy over training at the longest copy length, mean over seeds with its 95 % band, each
# variant at its chosen learning rate.

# %%
if COPY.ready:
    longest = int(best["data.length"].max())
    fig, ax = F.subplots(figsize=(7, 3.8))
    at_longest = best[best["data.length"] == longest]
    curves = COPY.curves("val/acc").merge(at_longest[["run_id", "variant"]], on="run_id")
    sns.lineplot(curves, x="step", y="val/acc", hue="variant", hue_order=variants_in(at_longest),
                 palette=VARIANT_COLOURS, errorbar=R.errorbar, seed=0, ax=ax)
    F.reference_lines(ax, at_longest, split="val")
    ax.set(xlabel="optimiser step", ylabel="validation accuracy", ylim=(0, 1.05), title=f"copy, {longest} tokens")
    F.legend(ax, "model", outside=True)
    F.stamp(fig, COPY)
    figures_long.append(R.savefig(fig, "rnn_curves"))

# %% [markdown]
# ## Where in the sequence the errors sit
# *Added after the primary results had been read* (supporting only: it moves no verdict). Test accuracy at
# each emitted token (`final/acc_by_position`: the k-th blank holds the k-th token read, or in reverse copy
# the k-th from the end), mean over seeds with its 95 % band, copy at 16 and 32 tokens (each variant at its
# chosen learning rate) and reverse copy at 8 and 32 (Adam 1e-3: the lengths that sweep ran). The runs were
# trained before the probe existed; export computed it from each run's final checkpoint on its test set.
# In plain copy every token waits length + 1 steps between being read and being emitted, and the first
# tokens are the start of the sequence, with the most input read after them: "forgets the start" predicts
# the first emitted quarter worse than the last. In reverse copy the last emitted tokens are the first
# read, 2 × length steps back: the claim predicts the last emitted quarter worse.

# %%
POSITIONS = "final/acc_by_position"  # each run's test accuracy at each emitted token (reports/data/<sweep>.npz)
QUARTER_FIRST, QUARTER_LAST = "test/acc_first_quarter", "test/acc_last_quarter"


def by_position(S, df, task):
    """Long: one row per run and emitted position (1 … length) with its test accuracy; None when the export
    holds no accuracy by position for these runs."""
    rows = [{"run_id": r, "variant": v, "data.length": int(n), "task": task, "position": k + 1, "acc": float(a)}
            for r, v, n in zip(df["run_id"], df["variant"], df["data.length"]) if f"{r}/{POSITIONS}" in S.arrays
            for k, a in enumerate(S.arrays[f"{r}/{POSITIONS}"])]
    return pd.DataFrame(rows) if rows else None


def with_quarters(S, df):
    """df with each run's mean test accuracy over the first and over the last quarter of its emitted tokens."""
    df = df.copy()
    arrays = [S.arrays.get(f"{r}/{POSITIONS}") for r in df["run_id"]]
    df[QUARTER_FIRST] = [a[: max(1, len(a) // 4)].mean() if a is not None else np.nan for a in arrays]
    df[QUARTER_LAST] = [a[-max(1, len(a) // 4):].mean() if a is not None else np.nan for a in arrays]
    return df


positions = [p for p in ((by_position(COPY, best, "copy") if COPY.ready else None),
                         (by_position(REV, rev, "reverse copy") if REV.ready else None)) if p is not None]
positions = pd.concat(positions, ignore_index=True) if positions else None
if positions is not None:
    panels = [(t, n) for t, lengths in (("copy", (16, 32)), ("reverse copy", (8, 32))) for n in lengths
              if not positions[(positions["task"] == t) & (positions["data.length"] == n)].empty]
    fig, axes = F.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.8), squeeze=False, sharey=True)
    for ax, (task, n) in zip(axes[0], panels):
        here = positions[(positions["task"] == task) & (positions["data.length"] == n)]
        sns.lineplot(here, x="position", y="acc", hue="variant", hue_order=variants_in(here), palette=VARIANT_COLOURS,
                     errorbar=R.errorbar, seed=0, marker="o", markersize=3, ax=ax)
        table = best if task == "copy" else rev
        ax.axhline(R.level(table, {"data.length": n}, split="test"), ls="--", lw=1, color="dimgrey",
                   label="order-blind level")
        F.hline(ax, float(pd.to_numeric(table["ref/test/chance"]).mean()), "chance", ls=":")
        ax.set(xlabel="emitted token (1: " + ("the last read)" if task == "reverse copy" else "the first read)"),
               ylabel="test accuracy", ylim=(0, 1.05), title=f"{task}, {n} tokens")
        F.integer_ticks(ax, "x", [1, *range(4, n + 1, 4)] if n > 8 else list(range(1, n + 1)))
        F.legend(ax, "model", outside=ax is axes[0][-1])
        if ax is not axes[0][-1] and ax.get_legend() is not None:
            ax.get_legend().remove()
    F.stamp(fig, *([COPY] if COPY.ready else []), *([REV] if REV.ready else []))
    figures_long.append(R.savefig(fig, "rnn_error_positions"))
else:
    print("accuracy by position: not in the exported tables (export again: `ablate report export --sweeps "
          "rnn_copy,rnn_copy_long,rnn_copy_long_transformer,rnn_reverse`)")

# %% [markdown]
# ## The long range, one token at a time: recall at lag n (issue 25)
# The lag-recall task: read n tokens and a query, emit the first token (chance 10 %). Each arm at its own rate
# per lag, 5 seeds; dashed: the order-blind level at each lag. The primary test is at lag `RECALL_LAG`.

# %%
RECALL, REMEDY = R.sweeps(*RECALL_SWEEPS), R.sweeps(*REMEDIES)


def recall_table(df):
    """Each variant at its chosen rate; a diverged run recalled nothing: it enters at chance (test) and learned
    nothing (validation), as in copy."""
    df = labelled(R.at_best_lr(df))
    df["data.length"] = df["data.length"].astype(int)
    diverged = df["status"] == "diverged"
    df[COPY_METRIC] = pd.to_numeric(df[COPY_METRIC], errors="coerce").where(~diverged, df["ref/test/chance"])
    df["val/acc_best"] = pd.to_numeric(df["val/acc_best"], errors="coerce").where(~diverged, df["ref/val/chance"])
    df["status"] = df["status"].where(~diverged, "completed")
    return df


if RECALL.ready:
    recall = recall_table(RECALL.df)
    lags = sorted(int(n) for n in recall["data.length"].unique())
    recall_arms = [(LSTM_NONE, "lstm"), (TF_PE, "transformer")]
    recall_learned = {(arm, n): R.learned(recall, {**where, "data.length": n}) for where, arm in recall_arms
                      for n in lags}
    recall_acc = {(arm, n): R.estimate(recall, COPY_METRIC, {**where, "data.length": n}) for where, arm in recall_arms
                  for n in lags}
    recall_level = {n: R.level(recall, {"data.length": n}, split="test") for n in lags}

    def falls_at(arm):
        """The shortest lag at which none of the arm's runs learned (None: it learned at every lag)."""
        return next((n for n in lags if recall_learned[arm, n].n and recall_learned[arm, n].k == 0), None)

    def plateau(arm):
        """'converged' / 'plateaued' / 'still learning' for each lag's runs of the arm: the median run's
        validation gain over its last epoch against R.PLATEAU (1 point), 'solved' at >= 99 %."""
        out = {}
        for n in lags:
            runs = R.rows(recall, {"model.arch": arm, "data.length": n})
            gain = (pd.to_numeric(runs["val/gain_last_epoch"], errors="coerce").median()
                    if "val/gain_last_epoch" in runs else float("nan"))
            best_acc = pd.to_numeric(runs["val/acc_best"], errors="coerce").median()
            out[n] = ("solved" if best_acc >= R.SOLVED else "unknown" if not np.isfinite(gain) else
                      "still learning" if gain > R.PLATEAU else
                      "plateaued at the order-blind level" if best_acc <= recall_level[n] + R.LEVEL_MARGIN
                      else "plateaued")
        return out

    recall_state = {arm: plateau(arm) for _, arm in recall_arms}
    R.show_table(pd.DataFrame([{"lag": n, "model": ARCH[arm], "lr": R.rows(recall, {"model.arch": arm, "data.length": n})
                                ["optim.lr"].iloc[0], "test acc": str(recall_acc[arm, n]),
                                "learned": str(recall_learned[arm, n]), "runs": recall_state[arm][n],
                                "order-blind": round(100 * recall_level[n], 1)}
                               for _, arm in recall_arms for n in lags]))
    fig, ax = F.subplots(figsize=(7, 3.8))
    sns.pointplot(recall, x="data.length", y=COPY_METRIC, hue="variant", order=lags, hue_order=variants_in(recall),
                  palette=VARIANT_COLOURS, errorbar=R.errorbar, dodge=0.2, ax=ax)
    ax.plot(range(len(lags)), [recall_level[n] for n in lags], ls="--", color="dimgrey", label="order-blind level")
    F.hline(ax, float(pd.to_numeric(recall["ref/test/chance"]).mean()), "chance", ls=":")
    ax.set(xlabel="lag n (tokens read after the one to recall)", ylabel="test accuracy", ylim=(0, 1.05),
           title="recall of the first token at lag n, each model at its own rate")
    F.legend(ax, "model", outside=True)
    F.stamp(fig, RECALL)
    figures_long.insert(0, R.savefig(fig, "rnn_recall"))
else:
    print(RECALL.missing)

# %% tags=["answer"]
if not COPY.ready:
    Q_LONG.not_run_yet(COPY)
else:
    lengths = sorted(int(n) for n in best["data.length"].unique())
    long_len = LONG_LENGTH if LONG_LENGTH in lengths else lengths[-1]
    short = lengths[0]

    def acc(df, where, length):
        return R.estimate(df, COPY_METRIC, {**where, "data.length": length})

    def lvl(df, length):
        return R.level(df, {"data.length": length}, split="test")

    tf_long, ls_long = acc(best, TF_PE, long_len), acc(best, LSTM_NONE, long_len)
    recall_primary = RECALL.ready and RECALL_LAG in lags  # issue 25's recall test replaces copy's as the primary
    reason = ("copy needs every token length + 1 steps after it was read; the longest trained length is where the "
              "recurrent path matters most. Sinusoidal positions add no parameters, so the matched LSTM has the same "
              "count at every length")
    reason_zh = ("复制任务要求每个词元在读入（长度 + 1）步之后被输出；训练的最长长度是循环路径最要紧的地方。正弦位置编码不增加参数，"
                 "所以在每个长度上匹配的 LSTM 参数量都相同")
    checks = [LONG.greater(R.effect(tf_long, ls_long), f"copy at {long_len} tokens, test: Transformer (sinusoidal) vs "
                           "LSTM (no PE)", level=lvl(best, long_len), primary=not recall_primary,  # replaced (issue 25)
                           reason=reason,
                           what_zh=f"{long_len} 个词元的复制任务，测试集：Transformer（正弦位置编码）对 LSTM（无位置编码）",
                           reason_zh=reason_zh)]
    for n in lengths:
        if n != long_len and has(best, {**TF_PE, "data.length": n}) and has(best, {**LSTM_NONE, "data.length": n}):
            checks.append(LONG.greater(R.effect(acc(best, TF_PE, n), acc(best, LSTM_NONE, n)),
                                       f"copy at {n} tokens, test: Transformer (sinusoidal) vs LSTM (no PE)",
                                       level=lvl(best, n), primary=False,
                                       what_zh=f"{n} 个词元的复制任务，测试集：Transformer（正弦位置编码）对 LSTM（无位置编码）"))
    if long_len != short:
        checks.append(LONG.less(R.effect(ls_long, acc(best, LSTM_NONE, short)),
                                f"the LSTM (no PE), test: {long_len} tokens vs {short}", primary=False,
                                what_zh=f"LSTM（无位置编码），测试集：{long_len} 个词元对 {short} 个词元"))
    recall_rec = None  # the recall test's numbers, for the prose
    if recall_primary:  # issue 25: one token at lag n, the primary long-range test
        def recall_effect(n):
            return R.paired(recall, COPY_METRIC, {**TF_PE, "data.length": n}, {**LSTM_NONE, "data.length": n})

        top_lag = recall_effect(RECALL_LAG)
        remedied = None
        if REMEDY.ready:  # issue 37: the LSTM's remedy chosen on seed 0's validation, as its rate is
            plain_rows = R.rows(recall, {**LSTM_NONE, "data.length": RECALL_LAG}).assign(**{"model.rnn_init": "default"})
            pool = pd.concat([plain_rows, recall_table(REMEDY.df)])
            stage1 = pool[pool["seed"] == 0].groupby("model.rnn_init")["val/acc_best"].mean()
            remedy = max((r for r in REMEDY_ORDER if r in stage1.index), key=lambda r: (stage1[r], -REMEDY_ORDER.index(r)))
            chosen_rows = pool[pool["model.rnn_init"] == remedy]
            arms = pd.concat([R.rows(recall, {**TF_PE, "data.length": RECALL_LAG}).assign(arm="transformer"),
                              chosen_rows.assign(arm="lstm")])
            remedied = R.paired(arms, COPY_METRIC, {"arm": "transformer"}, {"arm": "lstm"})
            remedy_en = {"default": "torch's init, no clipping", "forget1": "forget bias 1, clipping at 1",
                         "chrono": "chrono init, clipping at 1"}[remedy]
            remedy_zh = {"default": "默认初始化、不裁剪", "forget1": "遗忘门偏置 1、梯度裁剪到 1",
                         "chrono": "`chrono` 初始化、梯度裁剪到 1"}[remedy]
            remedied_acc = R.estimate(chosen_rows, COPY_METRIC)
            checks.insert(0, LONG.greater(
                remedied, f"recall at lag {RECALL_LAG}, test: Transformer (sinusoidal) − the LSTM (no PE) at its chosen "
                f"remedy ({remedy_en}; of torch's init, forget bias 1 and chrono, by seed 0's validation), paired by seed",
                level=recall_level[RECALL_LAG], primary=True,
                reason="a fair baseline: every arm at its own best settings (written before the runs of "
                       "recall_lstm_256_remedies; the review's replica was known)",
                what_zh=f"间隔 {RECALL_LAG} 的回忆任务，测试集：Transformer（正弦位置编码）− 采用所选补救办法的 LSTM（{remedy_zh}；"
                        "在默认初始化、遗忘门偏置 1 和 `chrono` 初始化中按种子 0 的验证结果选定），按种子配对",
                reason_zh="公平的基线：每一方都用它自己最好的设置（在 recall_lstm_256_remedies 运行之前写定；写定前已知审阅者复现的结果）"))
        checks.insert(1 if remedied is not None else 0, LONG.greater(
            top_lag, f"recall at lag {RECALL_LAG}, test: Transformer (sinusoidal) − LSTM (no PE), paired by seed",
            level=recall_level[RECALL_LAG], primary=False,  # the primary test until issue 37
            reason="one token to hold, so the lag alone is the question; the longest lag is where the path matters most",
            what_zh=f"间隔 {RECALL_LAG} 个词元的回忆任务，测试集：Transformer（正弦位置编码）− LSTM（无位置编码），按种子配对",
            reason_zh="只需记住一个词元，变化的只有间隔长短；间隔最长时，路径长度的差别影响最大"))
        if remedied is None:  # the remedies' sweep is not there: the registered primary test cannot run
            checks.insert(0, LONG.not_testable(
                f"recall at lag {RECALL_LAG}: Transformer − the LSTM at its chosen remedy", REMEDY.missing, primary=True,
                reason="a fair baseline: every arm at its own best settings", reason_zh="公平的基线：每一方都用它自己最好的设置",
                what_zh=f"间隔 {RECALL_LAG} 的回忆任务：Transformer − 采用所选补救办法的 LSTM",
                why_zh=R.missing_zh(REMEDY.missing)))
        for n in lags:
            if n != RECALL_LAG:
                checks.append(LONG.greater(recall_effect(n), f"recall at lag {n}, test: Transformer − LSTM, paired by seed",
                                           level=recall_level[n], primary=False,
                                           what_zh=f"间隔 {n} 个词元的回忆任务，测试集：Transformer − LSTM，按种子配对"))
        if lags[0] != RECALL_LAG:
            checks.append(LONG.less(R.effect(recall_acc["lstm", RECALL_LAG], recall_acc["lstm", lags[0]]),
                                    f"the LSTM (no PE), recall, test: lag {RECALL_LAG} vs lag {lags[0]}", primary=False,
                                    level=recall_level[lags[0]],  # the order-blind floor itself falls with the lag
                                    what_zh=f"LSTM（无位置编码），回忆任务，测试集：间隔 {RECALL_LAG} 对间隔 {lags[0]}"))

        def states(arm):
            """Runs of lags in a row that share a state ('solved', 'still learning', ...): lag 8 solved, 16–256 …"""
            groups = []
            for n in lags:
                if groups and groups[-1]["state"] == recall_state[arm][n]:
                    groups[-1]["last"] = n
                else:
                    groups.append(dict(first=n, last=n, state=recall_state[arm][n]))
            return dict(arch=ARCH[arm], groups=groups)

        recall_rec = dict(
            lo=lags[0], hi=RECALL_LAG, lstm_lo=recall_acc["lstm", lags[0]], lstm_hi=recall_acc["lstm", RECALL_LAG],
            tf_lo=recall_acc["transformer", lags[0]], tf_hi=recall_acc["transformer", RECALL_LAG],
            lstm_falls=falls_at("lstm"), tf_falls=falls_at("transformer"), level_hi=recall_level[RECALL_LAG],
            top=top_lag, states=[states(a) for a in ("lstm", "transformer")],
            remedy=None if remedied is None else dict(name=dict(en=remedy_en, zh=remedy_zh), acc=remedied_acc,
                                                       effect=remedied),
            steps=int(recall["global_step"].max()), rates=int(R.rows(RECALL.df, LSTM_NONE)["optim.lr"].nunique()))
    # the untuned secondary sweeps, each length: Transformer (sinusoidal) vs LSTM (no PE), supporting
    secondary = (([(c64, f"copy at {{n}} tokens ({rate_words(c64)})", f"{{n}} 个词元的复制任务（{rate_words(c64)}）")]
                  if C64.ready else [])
                 + ([(rev, "reverse copy at {n} tokens", "{n} 个词元的反向复制")] if REV.ready else []))
    for frame, where, where_zh in secondary:
        for n in sorted(int(x) for x in frame["data.length"].unique()):
            if has(frame, {**TF_PE, "data.length": n}) and has(frame, {**LSTM_NONE, "data.length": n}):
                checks.append(LONG.greater(R.effect(acc(frame, TF_PE, n), acc(frame, LSTM_NONE, n)),
                                           f"{where.format(n=n)}, test: Transformer (sinusoidal) vs LSTM (no PE)",
                                           level=lvl(frame, n), primary=False,
                                           what_zh=f"{where_zh.format(n=n)}，测试集：Transformer（正弦位置编码）对 LSTM（无位置编码）"))

    # where the errors sit: added after the primary results had been read, supporting only
    added = " (added after the primary results had been read)"
    added_zh = "（在读过主要结果之后加入）"
    quarters = {}  # (task, length) -> (first quarter, last quarter, emitted token where the mean is lowest)
    if positions is not None:
        for task, S, table, n in (("copy", COPY, best, long_len), ("copy", COPY, best, 16),
                                  ("reverse copy", REV, rev if REV.ready else None, 32)):
            where = {**LSTM_NONE, "data.length": n}
            if table is None or (task, n) in quarters or not has(table, where):
                continue
            q = with_quarters(S, table)
            if q[QUARTER_FIRST].isna().all():
                continue
            curve = positions[(positions["task"] == task) & (positions["data.length"] == n)
                              & (positions["variant"] == variant("lstm", "none"))].groupby("position")["acc"].mean()
            first, last = (R.estimate(q, c, where) for c in (QUARTER_FIRST, QUARTER_LAST))
            quarters[task, n] = (first, last, int(curve.idxmin()))
            # "forgets the start": in copy the first tokens emitted are the start of the sequence (first quarter
            # below the last); in reverse copy the last emitted are the first read, 2 x length steps back
            claim = LONG.less if task == "copy" else LONG.greater
            said = ("the first quarter of the emitted tokens (the start of the sequence) vs the last" if task == "copy"
                    else "the first quarter of the emitted tokens (read last) vs the last quarter (read first)")
            said_zh = ("输出的前四分之一（序列的开头）对最后四分之一" if task == "copy"
                       else "输出的前四分之一（最后读入）对最后四分之一（最先读入）")
            checks.append(claim(R.effect(first, last), f"the LSTM (no PE), {task} at {n} tokens, test: {said}{added}",
                                level=lvl(table, n), primary=False,
                                what_zh=f"LSTM（无位置编码），{n} 个词元的{'复制任务' if task == 'copy' else '反向复制'}，"
                                        f"测试集：{said_zh}{added_zh}"))

    def variant_at(r):
        return f"{r['variant']}, {int(r['data.length'])} tokens"

    def line(df, where, lang):
        return ("; " if lang == "en" else "；").join(
            f"{n}: {acc(df, where, n):{'zh' if lang == 'zh' else ''}}" for n in sorted(int(x) for x in df["data.length"].unique())
            if has(df, {**where, "data.length": n}))

    f_tf, f_ls = (R.learned(best, {**w, "data.length": long_len}, COPY_METRIC, threshold=R.SOLVED)
                  for w in (TF_PE, LSTM_NONE))
    ls_short = acc(best, LSTM_NONE, short)

    def by_length(df, k):
        """One variant's test accuracy at each length it has (k: architecture, positional encoding)."""
        where = dict(zip(("model.arch", "model.pos_enc"), k))
        return dict(variant=dict(en=variant(*k), zh=variant(*k, zh=True)),
                    accs=[dict(n=n, acc=acc(df, where, n)) for n in sorted(int(x) for x in df["data.length"].unique())
                          if has(df, {**where, "data.length": n})])

    copy_variants = (("transformer", "sinusoidal"), ("transformer", "none"), ("lstm", "none"), ("lstm", "sinusoidal"))
    record = dict(  # the prose: reports/prose/<lang>/rnn-long-range.md
        recall=recall_rec,
        copy=dict(long=long_len, short=short, tf=tf_long, lstm=ls_long, level=lvl(best, long_len),
                  ahead=bool(tf_long.mean > ls_long.mean),
                  blind=bool(ls_long.mean <= lvl(best, long_len) + R.LEVEL_MARGIN),
                  drops=bool(ls_short.mean - ls_long.mean > 0.02), lstm_short=ls_short, solved=R.SOLVED,
                  solved_tf=f_tf, solved_lstm=f_ls, tuned_to=max(lengths), furthest=int(lengthwise["data.length"].max())),
        reverse=None if not (REV.ready and has(rev, LSTM_NONE)) else dict(
            lr=one_rate(rev), lstm=[dict(n=n, acc=acc(rev, LSTM_NONE, n)) for n in sorted(int(x) for x in rev["data.length"].unique())],
            lines=[by_length(rev, k) for k in (("transformer", "sinusoidal"), ("lstm", "none"))
                   if has(rev, dict(zip(("model.arch", "model.pos_enc"), k)))]),
        where=None if not quarters else [dict(task=task, n=n, first=first, last=last, low=low,
                                              near=bool(max(first.mean, last.mean)
                                                        <= lvl(best if task == "copy" else rev, n) + R.LEVEL_MARGIN))
                                         for (task, n), (first, last, low) in quarters.items()],
        copy_lr=dict(en=R.lr_phrase(COPY.df), zh=R.lr_phrase(COPY.df, lang="zh")),
        copy_lines=[by_length(lengthwise, k) for k in copy_variants if has(best, dict(zip(("model.arch", "model.pos_enc"), k)))],
        levels=[dict(n=n, level=v) for n, v in length_levels(lengthwise).items()],
        c64=None if not C64.ready else dict(
            n=int(c64["data.length"].max()), lr=one_rate(c64), seeds=int(c64["seed"].nunique()),
            minutes=float(pd.to_numeric(R.rows(c64, TF_PE)["wall_time_s"]).median() / 60)
            if "wall_time_s" in c64 and has(c64, TF_PE) else None))

    def details(lang):
        z = lang == "zh"

        def lag(r):
            return f"{r['variant']}, lag {int(r['data.length'])}"

        out = []
        if RECALL.ready:
            out += [f"回忆任务：{R.lr_phrase(RECALL.df, lang=lang)}（{R.chosen_lrs(recall, lag, lang=lang)}）。" if z else
                    f"Recall: {R.lr_phrase(RECALL.df)} ({R.chosen_lrs(recall, lag, lang=lang)}).",
                    R.convergence(recall, "recall runs", lang=lang)]
        out += [f"复制：{R.lr_phrase(COPY.df, lang=lang)}（{R.chosen_lrs(best, variant_at, lang=lang)}）。" if z else
                f"Copy: {R.lr_phrase(COPY.df)} ({R.chosen_lrs(best, variant_at, lang=lang)}).",
                R.convergence(best, lang=lang), R.caveat(best, lang=lang)]
        if C64.ready:
            n64 = int(c64["data.length"].max())
            out += [f"{n64} 个词元的复制（在读过主要比较之后才加的，仅作佐证）：{R.lr_phrase(C64.df, lang=lang)}。" if z else
                    f"Copy at {n64} tokens (added after the primary comparison had been read; supporting): "
                    f"{R.lr_phrase(C64.df)}.", R.convergence(c64, "runs", lang=lang)]
        else:
            out.append(f"更长的复制（rnn_copy_64）：{R.missing_zh(C64.missing)}。" if z else
                       f"Longer copy (rnn_copy_64): {C64.missing}.")
        if REV.ready:
            out += [("Reverse copy: ", "倒序复制：")[z] + R.lr_phrase(REV.df, lang=lang) + R.full_stop(lang),
                    R.convergence(rev, "runs", lang=lang)]
        else:
            out.append(f"倒序复制：{R.missing_zh(REV.missing)}。" if z else f"Reverse copy: {REV.missing}.")
        return out

    Q_LONG.answer(record=record, details=details, checks=checks,
                  figure=figures_long[0] if figures_long else None, figures=figures_long)

# %% [markdown]
# ## 3 · Position information: no positional encoding on either side
# Left: copy at each length without positions, the LSTM against the Transformer (and each with
# sinusoidal positions, faint). Right: MNIST rows, the test accuracy each model reaches on its test rows
# as trained and with the rows in one fixed permuted order.

# %%
ORDER = R.Anchor(
    "Vaswani et al. 2017, §3.5",
    "a model without recurrence or convolution must be given the positions to use the order of the sequence; an "
    "RNN reads in order and needs none",
    "既无循环也无卷积的模型必须被告知位置才能利用序列的顺序；RNN 按顺序读入，不需要位置编码",
    wording="Since our model contains no recurrence and no convolution, in order for the model to make use of the "
            "order of the sequence, we must inject some information about the relative or absolute position of the "
            "tokens in the sequence.",
    tutorial=True,
)
ORDER_MECH = R.Anchor(
    "Vaswani et al. 2017, §3.5",
    "without positions self-attention is blind to a permutation of its input (a bag of rows), an RNN is not",
    "没有位置编码时，自注意力看不出输入被重新排列（一袋行），RNN 看得出",
    kind="mechanism",
    tutorial=True,
)
Q_ORDER = R.question("rnn-position", anchors=[ORDER, ORDER_MECH])
display(Q_ORDER)


def with_drop(df):
    """The table with the accuracy lost on permuted test rows (test/acc - test/acc_perm) and the seconds per
    training epoch (training examples / samples per second)."""
    df = labelled(df)
    df[DROP] = pd.to_numeric(df["test/acc"]) - pd.to_numeric(df["test/acc_perm"])
    examples = pd.to_numeric(df["data.train_subset"])  # MNIST: the training images each epoch
    df[EPOCH_S] = examples / pd.to_numeric(df["train_samples_per_s"])
    df["wall_s_per_epoch"] = pd.to_numeric(df["wall_time_s"]) / pd.to_numeric(df["trainer.max_epochs"])
    return df


if ROWS.ready:
    rows = with_drop(R.at_best_lr(ROWS.df))
    rsummary = rows.groupby(["variant", "optim.lr"], as_index=False).agg(
        runs=("seed", "count"), params=("params/total", "first"), test_acc=("test/acc", "mean"),
        test_acc_perm=("test/acc_perm", "mean"), drop_on_permuted_rows=(DROP, "mean"),
        train_s_per_epoch=(EPOCH_S, "mean"), wall_s_per_epoch=("wall_s_per_epoch", "mean"))
    print(R.lr_phrase(ROWS.df))
    R.show_table(rsummary)
else:
    print(ROWS.missing)

figures_order = []
if COPY.ready or ROWS.ready:
    fig, axes = F.subplots(1, 2, figsize=(13, 3.9))
    if COPY.ready:
        length_figure(axes[0], lengthwise, "copy")
        F.legend(axes[0], "model")
    else:
        axes[0].set_axis_off()
    if ROWS.ready:
        long_rows = rows.melt(id_vars=["variant", "seed"], value_vars=["test/acc", "test/acc_perm"],
                              var_name="test rows", value_name="accuracy")
        long_rows["test rows"] = long_rows["test rows"].map({"test/acc": "as trained", "test/acc_perm": "permuted"})
        sns.barplot(long_rows, x="variant", y="accuracy", hue="test rows", order=variants_in(rows),
                    hue_order=["as trained", "permuted"], palette=F.palette("test rows"), errorbar=R.errorbar, ax=axes[1])
        F.reference_lines(axes[1], rows, split="test")
        axes[1].set(xlabel="", ylabel="MNIST test accuracy", ylim=(0, 1.05), title="MNIST rows: test rows as trained / permuted")
        axes[1].tick_params(axis="x", labelrotation=20)
        F.legend(axes[1], "test rows", outside=True)
    else:
        axes[1].set_axis_off()
    F.stamp(fig, *([COPY] if COPY.ready else []), *([ROWS] if ROWS.ready else []))
    figures_order.append(R.savefig(fig, "rnn_position"))

# %% tags=["answer"]
if not (COPY.ready or ROWS.ready):
    Q_ORDER.not_run_yet(COPY, ROWS)
else:
    checks = []
    reason_copy = ("neither model gets a position signal; at the shortest length the LSTM's memory is least in the way, "
                   "so what is left is reading in order")
    reason_copy_zh = "两个模型都没有位置信号；在最短的长度上 LSTM 的记忆最不成问题，剩下的就是按顺序读入"
    if COPY.ready:
        lengths = sorted(int(n) for n in best["data.length"].unique())
        order_len = ORDER_LENGTH if ORDER_LENGTH in lengths else lengths[0]
        ls_none, tf_none = (R.estimate(best, COPY_METRIC, {**w, "data.length": order_len}) for w in (LSTM_NONE, TF_NONE))
        level_order = R.level(best, {"data.length": order_len}, split="test")
        checks.append(ORDER.greater(R.effect(ls_none, tf_none), f"copy at {order_len} tokens, test, no PE: LSTM vs "
                                    "Transformer", level=level_order, primary=True, reason=reason_copy,
                                    what_zh=f"{order_len} 个词元的复制任务，测试集，无位置编码：LSTM 对 Transformer",
                                    reason_zh=reason_copy_zh))
        if has(best, LSTM_PE):
            ls_pe = R.estimate(best, COPY_METRIC, {**LSTM_PE, "data.length": order_len})
            checks.append(ORDER.same(R.effect(ls_none, ls_pe), f"copy at {order_len} tokens, test: LSTM without vs with "
                                     "sinusoidal positions", margin=SAME_MARGIN, level=level_order, primary=False,
                                     what_zh=f"{order_len} 个词元的复制任务，测试集：LSTM 无位置编码对有正弦位置编码"))
        every = sorted(int(n) for n in lengthwise["data.length"].unique())
        at_blind = [n for n in every if has(lengthwise, {**TF_NONE, "data.length": n})
                    and R.learned(lengthwise, {**TF_NONE, "data.length": n}, COPY_METRIC).k == 0]
        tested = [n for n in every if has(lengthwise, {**TF_NONE, "data.length": n})]
        checks.append(ORDER.judge(len(at_blind) == len(tested) if tested else None,
                                  "the Transformer without PE at the order-blind level (test): at "
                                  + (", ".join(map(str, at_blind)) or "no length") + f" of {', '.join(map(str, tested))} tokens",
                                  evidence_zh="无位置编码的 Transformer 停在词袋基线（测试集）：在 "
                                              + (", ".join(map(str, at_blind)) or "任何长度上都没有") + f"（所测长度：{'、'.join(map(str, tested))} 个词元）",
                                  primary=False))
    else:
        checks.append(ORDER.not_testable("copy, no PE: LSTM vs Transformer", COPY.missing, primary=True,
                                         reason=reason_copy, reason_zh=reason_copy_zh))
    reason_mech = ("a model that reads in order computes something else on permuted rows; a Transformer without "
                   "positions and with mean pooling is permutation-invariant and loses nothing")
    reason_mech_zh = "按顺序读入的模型在打乱的行上算出的是别的东西；没有位置编码、用平均池化的 Transformer 对排列不变，什么也不会损失"
    if ROWS.ready and has(rows, LSTM_NONE) and has(rows, TF_NONE):
        d_ls = R.estimate(rows, DROP, LSTM_NONE, scale="linear")
        d_tf = R.estimate(rows, DROP, TF_NONE, scale="linear")
        checks.append(ORDER_MECH.greater(R.effect(d_ls, d_tf), "MNIST rows, accuracy lost on permuted test rows: LSTM "
                                         "vs Transformer, both without PE", primary=True, reason=reason_mech,
                                         what_zh="MNIST 按行输入，测试行被打乱时损失的准确率：LSTM 对 Transformer，都没有位置编码",
                                         reason_zh=reason_mech_zh))
        checks.append(ORDER_MECH.judge(bool(abs(d_tf.mean) < 0.005) if d_tf.n else None,
                                       f"the Transformer without PE on MNIST rows: accuracy lost on permuted rows {d_tf} "
                                       "(a bag of rows: none)",
                                       evidence_zh=f"无位置编码的 Transformer 在 MNIST 按行输入上：行被打乱时损失的准确率 "
                                                   f"{zh(d_tf)}（一袋行：不损失）", primary=False))
    else:
        d_ls = d_tf = None
        why = ROWS.missing or "no LSTM or Transformer run without PE"
        checks.append(ORDER_MECH.not_testable("MNIST rows, accuracy lost on permuted rows", why, primary=True,
                                              reason=reason_mech, reason_zh=reason_mech_zh,
                                              what_zh="MNIST 按行输入，行被打乱时损失的准确率",
                                              why_zh=R.missing_zh(why)))
    record = dict(copy=None, rows=None)  # the prose: reports/prose/<lang>/rnn-position.md
    if COPY.ready:
        record["copy"] = dict(
            n=order_len, lstm=ls_none, tf=tf_none, level=level_order,
            learned=R.learned(best, {**LSTM_NONE, "data.length": order_len}, COPY_METRIC),
            lines=[dict(variant=dict(en=variant(*k), zh=variant(*k, zh=True)),
                        acc=R.estimate(best, COPY_METRIC, {"model.arch": k[0], "model.pos_enc": k[1], "data.length": order_len}))
                   for k in (("lstm", "none"), ("lstm", "sinusoidal"), ("transformer", "none"), ("transformer", "sinusoidal"))
                   if has(best, {"model.arch": k[0], "model.pos_enc": k[1]})])
    if d_ls is not None:
        record["rows"] = dict(lstm=d_ls, tf=d_tf, tutorial=R.estimate(rows, DROP, TUTORIAL, scale="linear")
                              if has(rows, TUTORIAL) else None)

    def details(lang):
        z = lang == "zh"
        out = [("Copy: ", "复制：")[z] + R.lr_phrase(COPY.df, lang=lang) + R.full_stop(lang)] if COPY.ready else []
        if ROWS.ready:
            return out + [("MNIST rows: ", "MNIST 按行输入：")[z] + R.lr_phrase(ROWS.df, lang=lang) + R.full_stop(lang),
                          R.convergence(rows, "MNIST runs", lang=lang)]
        return out + [f"MNIST 按行输入：{R.missing_zh(ROWS.missing)}。" if z else f"MNIST rows: {ROWS.missing}."]

    Q_ORDER.answer(record=record, details=details, checks=checks, figure=figures_order[0] if figures_order else None,
                   figures=figures_order)

# %% [markdown]
# ## 4 · The tutorial's MNIST model against an LSTM of matched size
#
# **Changed after the outcome was read** (issue 37): the sameness test on MNIST accuracy (±0.5 points at
# convergence) was this row's verdict on the tutorial, but the tutorial claims nothing about the two models'
# accuracy; the test is ablate's reading of its table. It stays, as a side anchor with its own verdict, and
# the row reports the measured difference as a measurement; the tutorial's own claim in this row is that a
# Transformer trains faster because it computes all positions at once (Vaswani §1), not testable on one CPU
# thread.
# Left: test accuracy of each variant at its chosen learning rate. Right: seconds per training epoch,
# from the training throughput (training examples / samples per second), which leaves out validation,
# test and probes; every run trained on one CPU thread.

# %%
PARALLEL = R.Anchor(
    "Vaswani et al. 2017, §1",
    "recurrence precludes parallelization within training examples, so a recurrent model trains slower than "
    "self-attention on parallel hardware",
    "循环结构使一个训练样本内部无法并行，所以在并行硬件上循环模型训练得比自注意力慢",
    wording="This inherently sequential nature precludes parallelization within training examples, which becomes "
            "critical at longer sequence lengths, as memory constraints limit batching across examples.",
    tutorial=True,
)
SAME_ACC = R.Anchor(
    "the tutorial's table",
    "the table compares how the two compute, not what they can learn: on 28 rows an LSTM of the same size is "
    "not expected to be less accurate",
    "这张表比较的是两者如何计算，而不是能学到什么：在 28 行的输入上，同样大小的 LSTM 不应更不准确",
    cite_zh="教程的对比表",
    tutorial=False,  # ablate's reading of the table, not a claim the tutorial makes (changed after reading, issue 37)
)
Q_MNIST = R.question("rnn-mnist", anchors=[PARALLEL, SAME_ACC])
display(Q_MNIST)

if ROWS.ready:
    fig, axes = F.subplots(1, 2, figsize=(13, 3.9))
    for ax, y, what in zip(axes, ("test/acc", EPOCH_S), ("MNIST test accuracy", "seconds per training epoch")):
        sns.barplot(rows, x="variant", y=y, hue="variant", order=variants_in(rows), hue_order=variants_in(rows),
                    palette=VARIANT_COLOURS, errorbar=R.errorbar, legend=False, ax=ax)
        ax.set(xlabel="", ylabel=what)
        ax.tick_params(axis="x", labelrotation=20)
    F.reference_lines(axes[0], rows, split="test")
    axes[0].set(ylim=(0, 1.05), title="test accuracy")
    axes[1].set(title="training time per epoch (1 CPU thread)")
    F.stamp(fig, ROWS)
    fig_mnist = R.savefig(fig, "rnn_mnist")

# %% tags=["answer"]
if not ROWS.ready:
    Q_MNIST.not_run_yet(ROWS)
else:
    machine = str(ROWS.meta.get("machine", ""))
    parallel_rows = bool(machine) and not machine.startswith("cpu")
    per_run = re.search(r"(\d+) thread", machine)
    threads_run = per_run.group(1) if per_run else "?"
    tut_acc, ls_acc = (R.estimate(rows, "test/acc", w) for w in (TUTORIAL, LSTM_NONE))
    tut_t, ls_t = (R.estimate(rows, EPOCH_S, w, scale="log") for w in (TUTORIAL, LSTM_NONE))
    time_effect = R.effect(ls_t, tut_t)
    reason_t = ("the tutorial's model against an LSTM of its size on its own task; the training throughput leaves out "
                "validation, test and probes")
    reason_t_zh = "教程的模型与同样大小的 LSTM 在教程自己的任务上比较；训练吞吐量不含验证、测试和探针"
    what_t = "MNIST rows, seconds per training epoch: LSTM (no PE) / the tutorial's Transformer"
    what_t_zh = "MNIST 按行输入，每个训练轮次的秒数：LSTM（无位置编码）/ 教程的 Transformer"
    checks = [PARALLEL.greater(time_effect, what_t, premise=parallel_rows,
                               why=f"every run trained on the CPU, {threads_run} thread(s) per run: no parallel hardware "
                                   "for the Transformer to fill, so the times compare arithmetic, not parallelism",
                               why_zh=f"每个运行都在 CPU 上训练，每个运行 {threads_run} 个线程：没有可供 Transformer 填满的"
                                      "并行硬件，所以比较的是运算量，而不是并行",
                               primary=True, reason=reason_t, what_zh=what_t_zh, reason_zh=reason_t_zh)]
    if not parallel_rows:
        checks.append(PARALLEL.greater(time_effect, what_t + " (on one CPU thread)", primary=False,
                                       what_zh=what_t_zh + "（单个 CPU 线程）"))
    CONVERGED_REASON = ("both trained until they stop learning, each at its own rate, 10 seeds, paired by seed on all "
                        "10,000 test images; ±0.5 points fixed before the runs (it replaces the quick-budget test, whose "
                        "models were still learning)")
    CONVERGED_REASON_ZH = ("两者都训练到不再提升，各自用最佳学习率，10 个种子，在全部 10,000 张测试图像上按种子配对；"
                           "±0.5 个百分点的等价界限在运行之前写定（它取代了快速预算下的检验，那里的模型仍在学习）")
    converged = None  # MNIST at convergence (issue 25): the primary accuracy test
    if ROWS_LSTM.ready and ROWS_TF.ready:
        tf_runs = R.rows(R.at_best_lr(ROWS_TF.df), {"model.pos_enc": "learned", "model.learned_std": 1.0})
        converged = pd.concat([tf_runs, R.at_best_lr(ROWS_LSTM.df)], ignore_index=True)
    if converged is not None and has(converged, TUTORIAL) and has(converged, LSTM_NONE):
        conv_tut, conv_ls = (R.estimate(converged, "test/acc", w) for w in (TUTORIAL, LSTM_NONE))
        conv_diff = R.paired(converged, "test/acc", TUTORIAL, LSTM_NONE)
        checks.append(SAME_ACC.same(conv_diff, "MNIST rows trained to convergence, test accuracy: the tutorial's "
                                    "Transformer vs the LSTM (no PE), paired by seed", margin=CONVERGED_MARGIN,
                                    level=R.level(converged, split="test"), primary=True, reason=CONVERGED_REASON,
                                    what_zh="MNIST 按行输入、训练到收敛，测试准确率：教程的 Transformer 对 LSTM（无位置编码），按种子配对",
                                    reason_zh=CONVERGED_REASON_ZH))
    else:
        conv_tut = conv_ls = conv_diff = None
        missing = ROWS_LSTM.missing or ROWS_TF.missing or "no LSTM or tutorial-model run"
        checks.append(SAME_ACC.not_testable("MNIST rows trained to convergence: the tutorial's Transformer vs the LSTM",
                                            missing, primary=True, reason=CONVERGED_REASON, reason_zh=CONVERGED_REASON_ZH,
                                            what_zh="MNIST 按行输入、训练到收敛：教程的 Transformer 对 LSTM",
                                            why_zh=(R.missing_zh(missing)
                                                    if ROWS_LSTM.missing or ROWS_TF.missing else "没有 LSTM 或教程模型的运行")))
    rows_budget = str(ROWS.meta.get("budget", ""))
    rows_learning = R.converged(rows) is False  # as the details' convergence sentence says it
    checks.append(SAME_ACC.same(R.effect(tut_acc, ls_acc), f"MNIST rows, {rows_budget} budget"
                                + (" (still learning)" if rows_learning else "") + ", test accuracy: "
                                "the tutorial's Transformer vs the LSTM (no PE)", margin=SAME_MARGIN,
                                level=R.level(rows, split="test"), primary=False,
                                reason="a claim of sameness needs a margin: ±2 points, Q1's for \"nearly identical\"",
                                what_zh=f"MNIST 按行输入，{BUDGET_ZH.get(rows_budget, rows_budget)}预算"
                                        + ("（仍在学习）" if rows_learning else "")
                                        + "，测试准确率：教程的 Transformer 对 LSTM（无位置编码）",
                                reason_zh="「相同」的论断需要等价界限：±2 个百分点，与 Q1 的「几乎相同」一致"))
    params = {k: int(R.rows(rows, w)["params/total"].iloc[0]) for k, w in (("tut", TUTORIAL), ("lstm", LSTM_NONE))}
    # the encoders are matched; the tutorial's total also holds its learned position table (params/embedding)
    table = (int(R.rows(rows, TUTORIAL)["params/embedding"].iloc[0]) - int(R.rows(rows, LSTM_NONE)["params/embedding"].iloc[0]))

    def per_variant(metric, scale=None):
        return [dict(variant=dict(en=v, zh=variant(*R.rows(rows, {"variant": v})[["model.arch", "model.pos_enc"]].iloc[0],
                                                   zh=True)),
                     value=R.estimate(rows, metric, {"variant": v}, **({"scale": scale} if scale else {})))
                for v in variants_in(rows)]

    record = dict(  # the prose: reports/prose/<lang>/rnn-mnist.md
        budget=rows_budget, still_learning=rows_learning, params_tut=params["tut"], params_lstm=params["lstm"], table=table,
        tut=tut_acc, lstm=ls_acc, diff=R.effect(tut_acc, ls_acc), lstm_s=ls_t, tut_s=tut_t, ratio=ls_t.mean / tut_t.mean,
        lstm_faster=bool(ls_t.mean < tut_t.mean), parallel=parallel_rows, threads=int(per_run.group(1)) if per_run else None,
        converged=None if conv_diff is None else dict(tut=conv_tut, lstm=conv_ls, diff=conv_diff),
        accuracy=per_variant("test/acc"), epoch_s=per_variant(EPOCH_S, "log"),
        wall_s=per_variant("wall_s_per_epoch", "log"))
    def details(lang):
        z = lang == "zh"
        chosen = R.chosen_lrs(rows, lambda r: r['variant'], lang=lang)
        out = [f"MNIST 按行输入：{R.lr_phrase(ROWS.df, lang=lang)}（{chosen}）。" if z else
               f"MNIST rows: {R.lr_phrase(ROWS.df)} ({chosen}).",
               R.convergence(rows, "MNIST runs", lang=lang), R.caveat(rows, lang=lang)]
        if converged is not None:
            out += [("Trained to convergence (rnn_rows_converged, pos_enc_3e): LSTM ",
                     "训练到收敛（rnn_rows_converged、pos_enc_3e）：LSTM ")[z] + R.lr_phrase(ROWS_LSTM.df, lang=lang)
                    + R.full_stop(lang), R.convergence(converged, "converged MNIST runs", lang=lang)]
        return out

    Q_MNIST.answer(record=record, details=details, checks=checks, figure=fig_mnist)
