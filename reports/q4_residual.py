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
# # Q4 · Residual connections and deep stacks
#
# **Primary comparison** (sweeps `residual`, depth 1, 2, 4, `residual_8`, depth 8, and `residual_deep`, depth
# 16; three sweeps so that each fits 10 minutes at quick, `residual_8` split off on 2026-12-06 after the depths
# 1 to 8 together took about 11.5 minutes alone): skip connections around both sub-layers on or off, on the
# **copy task** (it needs positions and two layers' worth of routing; a model blind to order sits at the
# order-blind level, 30 %), d_model 32, 2 heads, **Pre-LN**, each variant at its own learning rate.
# **Why Pre-LN:** with skips every depth is then trainable, and without them the stack is a plain deep
# network with a LayerNorm before each sub-layer — the setting of He et al.'s plain networks, which had
# BatchNorm; Post-LN adds a depth problem of its own (the norm claim's question). Periodic probes record
# every layer's gradient norm, token cosine and effective rank every 50 steps during training, besides
# at initialisation and after training.
#
# **Secondary:** `residual_sgd` (depth 2 and 16 with plain SGD: Adam rescales each parameter's step, so
# whether gradients reach the first layers shows more directly in what SGD learns) and `residual_norm`
# (depth 2 and 16 with Post-LN and without LayerNorm; Adam's 1e-3, 2 seeds).
#
# **Learning rates:** 4 values spanning 30× are tried on seed 0; each variant's best on validation
# (`val/acc_best`) is run on 5 seeds.

# %% [markdown]
# ## The tests, fixed before the data are read
#
# *Provenance, said plainly:* these tests and margins were written when the answers were rebuilt for
# issue 14, after an earlier build of these findings had been read. Each reason below rests on the paper
# or on the task's design, not on an outcome, and none was changed to reach a verdict; a deviation made
# after reading an outcome is marked as such where there is one.
#
# All primary tests are at the deepest stack, **16 layers** (`residual_deep`), skips vs none. The
# mechanism (what the probes show) is judged apart from the outcome (what training reaches).
#
# | anchor | kind | primary test | why this test |
# | --- | --- | --- | --- |
# | Dong et al. 2021: rank collapse | mechanism | token cosine after the last layer **at initialisation**, no skips vs skips, greater | the claim is about the architecture: at initialisation no optimiser has had a chance to counter it, and both arms start from the same distribution of weights |
# | He et al. 2016b: the identity skip carries the gradient back | mechanism | first / last layer gradient norm **at initialisation**, skips vs none, greater (a ratio, log scale) | the "gradient highway": with skips the earliest layer's gradient contains the last layer's unchanged. At initialisation the two arms see the same data and weights; during training the runs that solved the task have near-zero loss and so near-zero gradients, which would confound the comparison |
# | He et al. 2016a: plain nets with normalisation keep healthy gradients | mechanism | the first layer's gradient norm **at initialisation**, no skips vs skips, the same within a factor `HEALTHY_FACTOR` (TOST on the log scale) | the tutorial's story says the first layers of a deep plain stack are starved of gradient; He et al. measured that they are not, with BatchNorm. The first layer's own gradient, not its ratio to the last, is what a starved layer lacks |
# | He et al. 2016a: deeper plain nets train worse | outcome | **test accuracy**, skips vs none, greater | the held-out test set (validation chose the learning rates); copy is learned or not, so the runs that learned (above the order-blind level) are reported as well |
#
# Supporting: the same quantities during training (periodic probes), after training, at every depth,
# with plain SGD, with Post-LN and without LayerNorm.
#
# ## At initialisation over 120 seeds, decided before the runs of `residual_init` (issue 24)
#
# Written and committed before any run of sweeps `residual_init` and `residual_init_around`; the git
# history shows the order. The three mechanism tests above are measurements of the model as initialised,
# so they need no training: `trainer.max_steps=0` records the probes at initialisation and trains nothing,
# and 120 seeds cost what 5 trained runs did. **The tests do not change** (the same quantities, directions
# and the ×2 margin of He et al. 2016a's sameness claim); **their data do**: from `residual_init` (the
# model of `residual_deep`, 120 seeds, every run: the initialisation does not depend on the learning rate)
# instead of `residual_deep`'s 5 seeds, whose interval on the first layer's gradient was a factor of about 3
# wide (log-sd ≈ 1.2), too wide for a ×2 margin ever to be shown. The outcome test stays on `residual_deep`.
# Where `residual_init` is not there, the tests fall back to `residual_deep`.
#
# Supporting, new (`residual_init_around`): a skip around the attention only and around the FFN only,
# beside both and neither, on the same three quantities: which of the two skips carries the gradient to
# the first layer and which keeps the tokens apart.
#
# ## The mechanism, decided before the runs of `residual_dynamics`, `residual_dynamics_sgd` and `residual_skipinit` (issue 37)
#
# Written and committed before any run of those three sweeps; the git history shows the order. *Why, said
# plainly:* a review read the data above and found that they contradict the tutorial's explanation while
# the tests above could certify it. At initialisation the plain stack's first layer gets ×5.2 (4 layers)
# and ×3.4 (8 layers) *more* gradient than the residual one, and those stacks fail all the same; at 16
# layers ×0.49, a halving, not an exponential decay. Token collapse at initialisation does not explain the
# depth threshold either: 1- and 2-layer plain stacks start collapsed and learn. So the explanation gets
# tests of its own, on new data, with the depths chosen from the outcome data (not from these runs):
#
# - **where**: every depth at which the plain stack fails with Adam — fewer than half of its runs learned
#   copy in `residual` / `residual_8` / `residual_deep` at its chosen rate (the data say which; 4, 8 and 16 are expected);
# - **the tutorial's explanation** (a claim of the tutorial, so it enters the headline): *without skips the
#   gradient vanishes on its way back, so the first layers are starved*. Test, at each such depth: the first
#   layer's gradient norm over the first 100 optimiser steps (geometric mean of the probes at steps 10 … 100,
#   `residual_dynamics`: Adam at one rate, 1e-4, for every arm), no skips / skips. It **agrees** when the
#   95 % interval of the ratio lies wholly below ×0.5 (the plain first layer gets under half: the factor of
#   the sameness test above, `HEALTHY_FACTOR`), **disagrees** when wholly above ×0.5, otherwise inconclusive.
#   Supporting: the same with plain SGD at 0.1 (`residual_dynamics_sgd`), whose step is the gradient itself;
# - **collapse** (He et al. 2023, a side anchor): a plain stack whose attention mixes no tokens at
#   initialisation (`model.value_skipinit`, (αI + βA)V from α = 1, β = 0; `residual_skipinit`, each depth at
#   its own rate over the same 4 rates, 5 seeds) against the plain stack, test accuracy, greater, at each such
#   depth. If it agrees, attention's collapse of the tokens is what stopped the plain stack there.
#
# **Deviation, after reading an outcome (issue 37):** every stage-1 run of `residual_skipinit` (4 and 8
# layers, all 4 rates) ended at chance (validation loss ln 10): with β = 0 the scores do not reach the loss,
# so W_Q and W_K get no gradient at initialisation (tested), β random-walks near 0 (|β| ≤ 0.28 after 630
# steps at 3e-3) and the stack never mixes tokens. That arm cannot tell collapse from gradient flow. A second
# collapse arm is added, written before any of its runs: **shaped attention** (`model.shaped_attention`,
# (αI + βA − γC)V with W_Q from 0, the identity at initialisation with a gradient for W_Q from the first
# step; Noci et al. 2023, He & Hofmann 2024), sweep `residual_shaped`, the same depths, rates and seeds,
# tested the same way (test accuracy, greater than the plain stack's, at each failing depth; primary, in the
# side family with the Value-SkipInit tests, which stay as registered). Collapse counts as shown at a depth
# where either arm's test agrees.
#
# **Changed after the outcome was read** (issue 43): which runs "learned", i.e. sit above the task's reference
# level. A run 1.4 points above chance on 128 examples counted as learned: the rule was "more than 1 point
# above the order-blind level, else chance". It is now "more than 1 point above the highest reference level
# below 99 %, and more than a predictor at that level scores by luck on the evaluation set (the top of its
# 95 % binomial range)", one rule for the notebooks and `ablate compare` (`ablate.report.stats.above_level`).
# It moved supporting counts only, no primary test and no verdict: plain SGD, 2 layers without skips, learned 5 → 4 of 5 runs. The change is marked because those
# outcomes were known when it was made.
#
# **The answer's words follow from those verdicts (after Holm), fixed now:** at a depth where only the
# collapse test agrees, the concrete problem named is collapse and the tutorial's explanation is said not
# to be borne out there; where only the gradient test agrees, the tutorial's explanation is said to hold; where both
# agree, both are named; where neither does, the answer says these runs do not decide what stops the
# stack there, with the numbers of both tests. The question's "只有 1 层" is answered from `residual`'s
# 1-layer arm: whether a one-layer stack without skips learns copy.

# %%
import matplotlib.pyplot as plt  # noqa: F401 - the figures' backend, before seaborn
import numpy as np
import pandas as pd
import seaborn as sns
from IPython.display import display

from ablate import report as R
from ablate.report import figures as F
from ablate.report.answers import correct  # the verdicts after Holm, for the plain answer's wording

DEEP = 16  # layers: the primary comparison
COLLAPSE = "probe/init/cosine"  # mean pairwise cosine of the token representations, per layer (last layer: _last)
RATIO = "probe/init/grad_ratio"  # first layer's gradient norm / last layer's, at initialisation
FIRST = "probe/init/grad_l0"  # the first layer's gradient norm at initialisation
OUTCOME = "test/acc"
# "Healthy" as a factor: a plain stack whose first layer gets within ×/÷2 of the residual stack's first-layer
# gradient is as well fed as it; the vanishing the highway story describes compounds over 16 layers (0.9 per
# layer is already ×0.19), far outside a factor of 2.
HEALTHY_FACTOR = 2.0
ALIKE = 0.99  # mean token cosine from which the answer calls a plain stack's tokens collapsed (the mechanism's words)
EARLY = 100  # optimiser steps: the window of residual_dynamics(_sgd), whose gradient the mechanism tests read
VANISH = 1 / HEALTHY_FACTOR  # "starved": the plain first layer gets under half of the residual one's gradient
NORM_ZH = {"pre": "Pre-LN", "post": "Post-LN", "none": "无层归一化"}

R.setup()
DONG = R.Anchor(
    "Dong et al. 2021",
    "without skip connections, self-attention's token representations collapse to rank 1 as depth grows (proved for "
    "pure attention; FFNs slow it, skips prevent it)",
    "没有残差连接时，随着深度增加，自注意力的词元表示会坍缩到秩 1（对纯注意力证明；FFN 会减缓，残差连接能阻止）",
    kind="mechanism",
    wording="pure attention loses rank doubly exponentially with depth",
)
HE_IDENTITY = R.Anchor(
    "He et al. 2016b (identity mappings), §3",
    "an identity skip carries the gradient back to the earliest layers undiminished (the tutorial's \"gradient "
    "highway\"; that without skips it vanishes is the tutorial's addition, not this paper's claim)",
    "以恒等映射作残差连接时，梯度能原样传回最早的层（即教程的「梯度高速公路」；没有残差连接梯度就会消失，是教程加上的，不是这篇论文的论断）",
    kind="mechanism",
    wording="the forward and backward signals can be directly propagated from one block to any other block, when using "
            "identity mappings as the skip connections and after-addition activation",
    tutorial=True,
)
HE_PLAIN = R.Anchor(
    "He et al. 2016a (deep residual learning), §4.1",
    "deep plain networks with normalisation keep healthy gradient norms: their trouble is not vanishing gradients",
    "带归一化的深层普通网络梯度范数保持正常：它们的问题不在于梯度消失",
    kind="mechanism",
    wording="We argue that this optimization difficulty is unlikely to be caused by vanishing gradients. These plain "
            "networks are trained with BN ... We also verify that the backward propagated gradients exhibit healthy "
            "norms with BN.",
)
HE_DEPTH = R.Anchor(
    "He et al. 2016a (deep residual learning), §1 and Table 2",
    "a deep plain network trains worse than the same network with residual connections (ImageNet top-1 error, "
    "10-crop: plain-34 28.54 %, ResNet-34 25.03 %)",
    "深的普通网络比加了残差连接的同一网络训练得更差（ImageNet top-1 错误率，10 次裁剪：plain-34 为 28.54%，ResNet-34 为 25.03%）",
    wording="Our extremely deep residual nets are easy to optimize, but the counterpart \"plain\" nets (that simply "
            "stack layers) exhibit higher training error when the depth increases",
    tutorial=True,
)
TUTORIAL_VANISH = R.Anchor(
    "the tutorial's explanation (the gradient highway)",
    "without skip connections the gradient vanishes on its way back through a deep stack: its first layers are "
    "starved of gradient, which is why the stack does not learn",
    "没有残差连接时，梯度在深层堆叠中反向传播时逐层消失：前面几层得不到梯度，所以整个堆叠学不会",
    kind="mechanism",
    cite_zh="教程的解释（梯度高速公路）",
    tutorial=True,
    label="why a deep stack without skips fails",
)
NOCI_SHAPED = R.Anchor(
    "Noci et al. 2023 (the shaped Transformer); He & Hofmann 2024, shaped attention",
    "attention shaped to start as the identity, (αI + βA − γC)V with W_Q from 0, keeps a deep stack's tokens apart and "
    "lets it train without skip connections",
    "把注意力整形成初始时为恒等映射（(αI + βA − γC)V，W_Q 从 0 开始），能让深层堆叠的词元保持区分，没有残差连接也能训练",
    kind="mechanism",
    wording="shaped attention ... to prevent rank collapse",
)
HE_SKIPINIT = R.Anchor(
    "He et al. 2023 (deep Transformers without shortcuts), Value-SkipInit",
    "a Transformer without skip connections trains when its attention starts by keeping each token's own value, "
    "(αI + βA)V from α = 1, β = 0: what the skips spare a deep stack is attention's collapse of the tokens",
    "没有残差连接的 Transformer，只要注意力一开始保留每个词元自己的值（(αI + βA)V，从 α = 1、β = 0 开始学），就能训练："
    "残差连接替深层堆叠免去的，是注意力把词元搅成同一个向量（坍缩）",
    kind="mechanism",
    wording="our approaches enable ... deep vanilla transformers to reach the same performance as standard ones after "
            "about 5 times more iterations",
)
Q = R.question("q4", anchors=[DONG, HE_IDENTITY, HE_PLAIN, HE_DEPTH, TUTORIAL_VANISH, HE_SKIPINIT, NOCI_SHAPED])
INIT, AROUND = R.sweep("residual_init"), R.sweep("residual_init_around")  # at initialisation, 120 seeds
SHALLOW, EIGHT, DEEP_SWEEP = R.sweep("residual"), R.sweep("residual_8"), R.sweep("residual_deep")
PARTS = [s.name for s in (SHALLOW, EIGHT, DEEP_SWEEP) if s.ready]
S = R.sweeps(*PARTS) if PARTS else DEEP_SWEEP  # every depth there is; a missing table says so below
SGD, NORM = R.sweep("residual_sgd"), R.sweep("residual_norm")
SKIPS = "model.residual"
display(Q)


# %%
def training_probes(sweep, df):
    """Per run, from the periodic probes after step 0 (the curves file): `grad_ratio_training`, the first layer's
    gradient norm over the last layer's (geometric mean over the probes: the ratio spans orders of magnitude);
    `starved`, whether at most probes the first layer got under 1/100 of the last layer's gradient; and
    `grad_first_training`, the first layer's own gradient (geometric mean). NaN for one-layer runs."""
    curves = sweep.probe_curves()
    if curves is None:
        return df.assign(grad_ratio_training=np.nan, starved=np.nan, grad_first_training=np.nan)
    curves = curves[(curves["step"] > 0) & curves["run_id"].isin(df["run_id"])]
    last = curves.groupby("run_id")["layer"].transform("max")
    first = curves[curves["layer"] == 0].set_index(["run_id", "step"])["grad"]
    final = curves[(curves["layer"] == last) & (last > 0)].set_index(["run_id", "step"])["grad"]
    log_ratio = np.log10(first / final).replace([np.inf, -np.inf], np.nan).dropna()
    ratio = 10 ** log_ratio.groupby("run_id").mean()
    starved = (log_ratio < -2).groupby("run_id").mean() > 0.5
    first_mean = np.exp(np.log(first[first > 0]).groupby("run_id").mean())
    return df.assign(grad_ratio_training=df["run_id"].map(ratio), starved=df["run_id"].map(starved),
                     grad_first_training=df["run_id"].map(first_mean))


def last_layer(sweep, df, probe):
    """df with `<probe>_last`: the probe's value after each run's last layer."""
    layers = sweep.per_layer(probe)
    layers = layers[layers["last"] & layers["run_id"].isin(df["run_id"])]
    return df.merge(layers[["run_id", probe]].rename(columns={probe: probe + "_last"}), on="run_id", how="left")


def prepare(sweep, tuned=True):
    df = R.at_best_lr(sweep.df) if tuned else sweep.df.copy()
    df["model.n_layers"] = df["model.n_layers"].astype(int)
    df = training_probes(sweep, df)
    for probe in (COLLAPSE, "probe/final/cosine", "probe/final/erank", "probe/init/erank"):
        df = last_layer(sweep, df, probe)
    return df


def prepare_init(sweep):
    """An initialisation-only sweep (trainer.max_steps=0, every run): with `<probe>_last` for the collapse probe."""
    df = sweep.df.copy()
    df["model.n_layers"] = df["model.n_layers"].astype(int)
    return last_layer(sweep, df, COLLAPSE)


def at(residual, depth):
    return {SKIPS: residual, "model.n_layers": depth}


def layers_word(d, zh=False):
    return f"{d} 层" if zh else f"{d} layer{'s' if d != 1 else ''}"


if S.ready:
    best = prepare(S)
    depths = sorted(int(d) for d in best["model.n_layers"].unique())
    deep = DEEP if DEEP in depths else None
    summary = best.groupby([SKIPS, "model.n_layers", "optim.lr"], as_index=False).agg(
        runs=("seed", "count"), val_acc=("val/acc_best", "mean"), test_acc=(OUTCOME, "mean"),
        first_last_init=(RATIO, "mean"), first_grad_init=(FIRST, "mean"), cosine_init_last=(COLLAPSE + "_last", "mean"))
    print(R.lr_phrase(S.df))
    R.show_table(summary)
else:
    print(S.missing)
if not DEEP_SWEEP.ready:
    print(f"residual_deep (the 16-layer primary comparison): {DEEP_SWEEP.missing}")
sgd = prepare(SGD) if SGD.ready else None
norm = prepare(NORM, tuned=False) if NORM.ready else None
# the mechanism, decided (issue 37): the first 100 steps with Adam and SGD, and the plain stack whose attention starts as
# the identity (Value-SkipInit; shaped attention)
DYN, DYN_SGD, SKIPINIT = R.sweep("residual_dynamics"), R.sweep("residual_dynamics_sgd"), R.sweep("residual_skipinit")
SHAPED = R.sweep("residual_shaped")  # added after residual_skipinit's outcome (see the deviation above)
dyn = prepare(DYN, tuned=False) if DYN.ready else None
dyn_sgd = prepare(DYN_SGD, tuned=False) if DYN_SGD.ready else None
skipinit = prepare(SKIPINIT) if SKIPINIT.ready else None
shaped = prepare(SHAPED) if SHAPED.ready else None

# %% [markdown]
# ## What it costs: accuracy against depth
# Each variant at its chosen learning rate; bars: 95 % bootstrap intervals over seeds. Adam (primary),
# plain SGD, and Post-LN / no LayerNorm at Adam's 1e-3.

# %%
SKIP_NAMES = F.LABELS[SKIPS]  # True -> "with skips", False -> "no skips": one colour each in every figure
HUE = {"hue": "skips", "hue_order": F.order(SKIPS, None, SKIP_NAMES), "palette": F.palette(SKIPS, None, SKIP_NAMES)}


def named(df):
    return df.assign(skips=df[SKIPS].map(lambda v: F.label(SKIPS, v)))


if S.ready:
    panels = [("Pre-LN, Adam", best, S)] + ([("Pre-LN, SGD", sgd, SGD)] if sgd is not None else [])
    if norm is not None:
        panels += [(f"{F.label('model.norm', n)}, Adam 1e-3", norm[norm["model.norm"] == n], NORM)
                   for n in F.order("model.norm", norm["model.norm"]) if n != "pre"]
    fig, axes = F.subplots(1, len(panels), figsize=(3.9 * len(panels) + 1.5, 3.8), squeeze=False, sharey=True)
    for ax, (name, df, _) in zip(axes[0], panels):
        sns.pointplot(named(df), x="model.n_layers", y=OUTCOME, order=F.order("model.n_layers", df["model.n_layers"]),
                      errorbar=R.errorbar, dodge=0.2, ax=ax, **HUE)
        F.reference_lines(ax, df, split="test")
        ax.set(xlabel="layers", ylabel="test accuracy", title=name, ylim=(0, 1.02))
        if ax is axes[0][-1]:
            F.legend(ax, outside=True)
        elif ax.get_legend() is not None:
            ax.get_legend().remove()
    F.stamp(fig, *(s for _, _, s in panels))
    fig_acc = R.savefig(fig, "q4_accuracy")

# %% [markdown]
# ## The gradient each layer gets
# Left: every layer's gradient norm at initialisation in the deepest stacks (geometric mean over seeds,
# 95 % interval on the log scale). Right: the first and the last layer's gradient during training
# (periodic probes). With skips, x + f(x) has Jacobian I + ∂f/∂x: the identity term carries the gradient
# past every layer.

# %%
if S.ready and deep:
    fig, axes = F.subplots(1, 2, figsize=(12.5, 3.8))
    grads = S.per_layer("probe/init/grad")
    grads = named(grads[grads["run_id"].isin(best["run_id"]) & (grads["model.n_layers"] == deep)])
    sns.lineplot(grads, x="layer", y="probe/init/grad", estimator=R.geomean, errorbar=R.log_errorbar, marker="o",
                 ax=axes[0], legend=False, **HUE)
    axes[0].set(yscale="log", xlabel="layer (0 = first)", ylabel="gradient norm at initialisation",
                title=f"{deep} layers, Pre-LN: gradient per layer")
    F.integer_ticks(axes[0], "x")
    curves = S.probe_curves()
    if curves is not None:
        curves = curves[curves["run_id"].isin(best["run_id"]) & (curves["model.n_layers"] == deep)]
        curves = named(curves[curves["layer"].isin([0, deep - 1])])
        curves["layer "] = curves["layer"].map({0: "first layer", deep - 1: "last layer"})
        sns.lineplot(curves, x="step", y="grad", style="layer ", style_order=["first layer", "last layer"],
                     estimator=R.geomean, errorbar=R.log_errorbar, ax=axes[1], **HUE)
        axes[1].set(yscale="log", xlabel="optimiser step", ylabel="gradient norm during training",
                    title=f"{deep} layers: first and last layer during training")
        F.legend(axes[1], outside=True)
    F.stamp(fig, S)
    fig_grad = R.savefig(fig, "q4_gradients")
else:
    fig_grad = None

# %% [markdown]
# ## Token collapse over depth
# Mean pairwise cosine between the token representations after each layer (1 = every token the same
# vector) and their effective rank, at initialisation and after training, in the deepest stacks.

# %%
if S.ready and deep:
    fig, axes = F.subplots(1, 2, figsize=(12.5, 3.8))
    for ax, probe, what in zip(axes, ("cosine", "erank"), ("token cosine", "effective rank")):
        parts = []
        for point in ("init", "final"):
            layers = S.per_layer(f"probe/{point}/{probe}").rename(columns={f"probe/{point}/{probe}": probe})
            layers = layers[layers["run_id"].isin(best["run_id"]) & (layers["model.n_layers"] == deep)]
            parts.append(layers.assign(when="at initialisation" if point == "init" else "after training"))
        layers = named(pd.concat(parts, ignore_index=True))
        sns.lineplot(layers, x="layer", y=probe, style="when", style_order=["at initialisation", "after training"],
                     marker="o", errorbar=R.errorbar, ax=ax, legend=ax is axes[-1], **HUE)
        F.integer_ticks(ax, "x")
        ax.set(xlabel="layer (0 = first)", ylabel=what, title=f"{deep} layers: {what} after each layer")
    F.hline(axes[0], 1.0, "every token the same vector", ls=":")
    F.legend(axes[-1], outside=True)
    F.stamp(fig, S)
    fig_collapse = R.savefig(fig, "q4_collapse")
else:
    fig_collapse = None

# %% [markdown]
# ## Learning curves of the primary comparison
# Validation accuracy over training at 16 layers, mean over seeds with its 95 % band.

# %%
if S.ready and deep:
    fig, ax = F.subplots(figsize=(7, 3.6))
    F.learning_curves(S, "val/acc", hue=SKIPS, runs=best[best["model.n_layers"] == deep], ax=ax, outside=True,
                      title=f"{deep} layers, Pre-LN, Adam")
    F.stamp(fig, S)
    R.savefig(fig, "q4_curves")


# %% tags=["answer"]

if not S.ready or not deep:
    Q.not_run_yet(DEEP_SWEEP if not DEEP_SWEEP.ready else S)
else:
    lvl = R.level(best, split="test")
    # the three mechanism tests at initialisation: 120 seeds of residual_init where it is there (issue 24)
    init = prepare_init(INIT) if INIT.ready else best
    init_what = f"{len(R.rows(init, at(True, deep)))} seeds at initialisation" if INIT.ready else "at initialisation"
    init_what_zh = (f"初始化时 {len(R.rows(init, at(True, deep)))} 个种子" if INIT.ready else "初始化时")
    collapse = R.compare(init, COLLAPSE + "_last", at(False, deep), at(True, deep))
    ratio = R.compare(init, RATIO, at(True, deep), at(False, deep))
    first = R.compare(init, FIRST, at(False, deep), at(True, deep))
    outcome = R.compare(best, OUTCOME, at(True, deep), at(False, deep))
    checks = [
        DONG.greater(collapse, f"token cosine after the last of {deep} layers, {init_what}, no skips vs skips",
                     primary=True, reason="the architecture's own effect, before any optimiser can counter it",
                     what_zh=f"{init_what_zh}，{deep} 层中最后一层之后词元表示的余弦相似度，无残差连接对有残差连接",
                     reason_zh="结构本身的效应，在任何优化器能抵消它之前"),
        HE_IDENTITY.greater(ratio, f"{deep} layers, first / last layer gradient, {init_what}, skips vs none",
                            primary=True, reason="the highway is about where the gradient arrives; at initialisation "
                                                 "neither arm's loss has moved",
                            what_zh=f"{deep} 层，{init_what_zh}，第一层与最后一层的梯度之比，有残差连接对无残差连接",
                            reason_zh="「高速公路」说的是梯度到达哪里；初始化时两组的损失都还没有变化"),
        HE_PLAIN.same(first, f"{deep} layers, the first layer's gradient, {init_what}, no skips vs skips",
                      margin=HEALTHY_FACTOR, primary=True,
                      reason="a starved first layer lacks gradient of its own; its ratio to the last layer can fall "
                             "because the last layer gets more",
                      what_zh=f"{deep} 层，{init_what_zh}，第一层的梯度，无残差连接对有残差连接",
                      reason_zh="梯度不足的第一层缺的是它自己的梯度；它与最后一层之比下降，也可能只是因为最后一层得到的更多"),
        HE_DEPTH.greater(outcome, f"{deep} layers, test accuracy, skips vs none", level=lvl, primary=True,
                         reason="held-out test set, each arm at its own learning rate",
                         what_zh=f"{deep} 层，测试准确率，有残差连接对无残差连接",
                         reason_zh="留出的测试集，每组用它自己的学习率"),
    ]
    # supporting: one skip at a time (residual_init_around), against both and against none, at initialisation
    if AROUND.ready and INIT.ready:
        both_init, none_init = R.rows(init, at(True, deep)), R.rows(init, at(False, deep))
        for around, name, name_zh in (("attention", "a skip around the attention only", "只在注意力外加残差"),
                                      ("ffn", "a skip around the FFN only", "只在前馈网络外加残差")):
            one = R.rows(prepare_init(AROUND), {"model.residual_around": around, "model.n_layers": deep})
            if one.empty:
                continue
            pooled = pd.concat([one.assign(arm="one"), both_init.assign(arm="both"), none_init.assign(arm="none")])
            for anchor, metric, a, b, vs, vs_zh in (
                    (HE_IDENTITY, RATIO, "one", "none", "first / last layer gradient, vs no skips",
                     "第一层与最后一层的梯度之比，对无残差连接"),
                    (HE_IDENTITY, RATIO, "both", "one", "first / last layer gradient, skips around both vs this one",
                     "第一层与最后一层的梯度之比，两处都有残差对只有这一处"),
                    (DONG, COLLAPSE + "_last", "none", "one", "token cosine after the last layer, no skips vs this one",
                     "最后一层之后词元表示的余弦相似度，无残差连接对只有这一处")):
                checks.append(anchor.greater(
                    R.compare(pooled, metric, {"arm": a}, {"arm": b}),
                    f"{deep} layers at initialisation, {name}: {vs}", primary=False,
                    what_zh=f"{deep} 层，初始化时，{name_zh}：{vs_zh}"))
    # supporting: the same quantities during and after training, other optimisers and norms
    cos_final = R.compare(best, "probe/final/cosine_last", at(False, deep), at(True, deep))
    rank_final = R.compare(best, "probe/final/erank_last", at(False, deep), at(True, deep))
    ratio_train = R.compare(best, "grad_ratio_training", at(True, deep), at(False, deep))
    first_train = R.compare(best, "grad_first_training", at(False, deep), at(True, deep))
    checks += [
        DONG.greater(cos_final, f"token cosine after the last of {deep} layers after training, no skips vs skips",
                     primary=False, reason="whether training undoes the collapse",
                     what_zh=f"训练后 {deep} 层中最后一层之后词元表示的余弦相似度，无残差连接对有残差连接",
                     reason_zh="训练能否消除坍缩"),
        DONG.less(rank_final, f"effective rank after the last of {deep} layers after training, no skips vs skips",
                  primary=False, reason="rank itself, the quantity the claim names",
                  what_zh=f"训练后 {deep} 层中最后一层之后的有效秩，无残差连接对有残差连接",
                  reason_zh="秩本身，即论断所说的量"),
        HE_IDENTITY.greater(ratio_train, f"{deep} layers, first / last layer gradient during training (geometric mean "
                                         "over the probes), skips vs none", primary=False,
                            reason="during training; confounded by each arm's loss",
                            what_zh=f"{deep} 层，训练中第一层与最后一层的梯度之比（各次探针的几何平均），有残差连接对无残差连接",
                            reason_zh="训练过程中；混杂了每组自己的损失"),
    ]
    sgd_first = None
    if sgd is not None and DEEP in set(sgd["model.n_layers"]):
        sgd_acc = R.compare(sgd, OUTCOME, at(True, deep), at(False, deep))
        sgd_first = R.compare(sgd, "grad_first_training", at(False, deep), at(True, deep))
        checks += [
            HE_DEPTH.greater(sgd_acc, f"plain SGD, {deep} layers, test accuracy, skips vs none",
                             level=R.level(sgd, split="test"), primary=False, reason="another optimiser",
                             what_zh=f"不带动量的 SGD，{deep} 层，测试准确率，有残差连接对无残差连接", reason_zh="另一种优化器"),
            HE_PLAIN.same(sgd_first, f"plain SGD, {deep} layers, the first layer's gradient during training, no skips "
                                     "vs skips", margin=HEALTHY_FACTOR, primary=False,
                          reason="SGD's step is the gradient itself; confounded by each arm's loss",
                          what_zh=f"不带动量的 SGD，{deep} 层，训练中第一层的梯度，无残差连接对有残差连接",
                          reason_zh="SGD 的步长就是梯度本身；混杂了每组自己的损失"),
        ]
    if norm is not None:
        for n in [n for n in F.order("model.norm", norm["model.norm"]) if n != "pre"]:
            sub = norm[norm["model.norm"] == n]
            if DEEP in set(sub["model.n_layers"]):
                checks.append(HE_DEPTH.greater(
                    R.compare(sub, OUTCOME, at(True, deep), at(False, deep)),
                    f"{F.label('model.norm', n)}, {deep} layers, test accuracy, skips vs none",
                    level=R.level(sub, split="test"), primary=False, reason="another norm placement, Adam 1e-3, 2 seeds",
                    what_zh=f"{NORM_ZH.get(n, n)}，{deep} 层，测试准确率，有残差连接对无残差连接",
                    reason_zh="另一种层归一化位置，Adam 1e-3，2 个种子"))

    learned = {(r, d): R.learned(best, at(r, d), metric=OUTCOME) for r in (True, False) for d in depths}
    f_skip, f_none = learned[True, deep], learned[False, deep]
    cos_none, cos_skip = collapse.a, collapse.b
    first_none, first_skip = first.a, first.b
    last_grad = R.compare(best, f"probe/init/grad_l{deep - 1}", at(False, deep), at(True, deep))

    # the mechanism, decided (issue 37; registered before residual_dynamics(_sgd) and residual_skipinit ran)
    def fails(d):
        """The plain stack fails at d layers: fewer than half of its runs learned copy (Adam, its chosen rate)."""
        return 2 * learned[False, d].k < learned[False, d].n

    failing = [d for d in depths if fails(d)]
    arms = [(name, df) for name, df in (("skipinit", skipinit), ("shaped", shaped)) if df is not None]
    mixing = (pd.concat([R.rows(best, {SKIPS: False}).assign(mixing="softmax")]
                        + [df.assign(mixing=name) for name, df in arms], ignore_index=True) if arms else None)
    ARM = {"skipinit": (HE_SKIPINIT, "Value-SkipInit", " Value-SkipInit "),  # the Chinese with its spaces
           "shaped": (NOCI_SHAPED, "shaped attention", "整形注意力")}
    decided = {}  # depth -> (index of the gradient check, its effect; indices of the collapse checks)
    for d in failing:
        grad_i = grad_e = None
        collapse_i = []
        if dyn is not None and d in set(dyn["model.n_layers"]):
            grad_e = R.compare(dyn, "grad_first_training", at(False, d), at(True, d))
            grad_i = len(checks)
            checks.append(TUTORIAL_VANISH.below(
                grad_e, VANISH, f"{d} layers, Adam, the first layer's gradient over the first {EARLY} steps, no skips / "
                "skips", primary=True, reason="where the plain stack fails: a starved first layer gets under half of "
                "what the residual one gets while training starts",
                what_zh=f"{d} 层，Adam，前 {EARLY} 步中第一层的梯度，无残差连接 / 有残差连接",
                reason_zh="在普通堆叠学不会的深度：第一层若「饿着」，训练开始时得到的梯度不到残差堆叠第一层的一半"))
        for name, df in arms:
            if d not in set(df["model.n_layers"]):
                continue
            anchor, label, label_zh = ARM[name]
            collapse_i.append(len(checks))
            checks.append(anchor.greater(
                R.compare(mixing, OUTCOME, {"mixing": name, "model.n_layers": d}, {"mixing": "softmax", "model.n_layers": d}),
                f"{d} layers, test accuracy, no skips with {label} vs no skips", level=lvl,
                primary=True, reason="the same plain stack with no token mixing at initialisation: if it learns, "
                "attention's collapse of the tokens is what stopped it", what_zh=f"{d} 层，测试准确率，无残差连接但用"
                f"{label_zh}对无残差连接", reason_zh="同一个无残差堆叠，只是初始化时不混合词元：它若学会了，拦住普通堆叠的就是"
                "注意力造成的词元坍缩"))
        decided[d] = (grad_i, grad_e, collapse_i)
    if dyn_sgd is not None:
        for d in failing:
            if d in set(dyn_sgd["model.n_layers"]):
                checks.append(TUTORIAL_VANISH.below(
                    R.compare(dyn_sgd, "grad_first_training", at(False, d), at(True, d)), VANISH,
                    f"{d} layers, plain SGD, the first layer's gradient over the first {EARLY} steps, no skips / skips",
                    primary=False, what_zh=f"{d} 层，不带动量的 SGD，前 {EARLY} 步中第一层的梯度，无残差连接 / 有残差连接"))
    corrected = correct(checks)[0]
    final = {c.anchor: c.verdict for c in corrected if c.primary}  # after Holm, as the Answer shows them

    def search(d):
        """(rates tried, learned at none of them, the chosen rate was the smallest tried) for no skips at d layers."""
        tried = R.rows(S.df, at(False, d))
        rates = sorted(float(x) for x in tried["optim.lr"].unique())
        chosen = sorted(float(x) for x in R.rows(best, at(False, d))["optim.lr"].unique())
        return rates, R.learned(tried, metric=OUTCOME).k == 0, bool(rates) and chosen == rates[:1]

    rates, nowhere, at_edge = search(deep)
    edge = rates[0] if at_edge else None
    def agrees(i):
        return i is not None and corrected[i].verdict == R.AGREES

    groups = {"collapse": [], "gradient": [], "both": [], "neither": [], "untested": []}
    for d, (gi, _, ci) in decided.items():
        if gi is None or not ci:
            groups["untested"].append(d)
        else:
            groups[{(True, False): "collapse", (False, True): "gradient", (True, True): "both",
                    (False, False): "neither"}[any(agrees(i) for i in ci), agrees(gi)]].append(d)

    absent = next((x for x in (DYN, SHAPED, SKIPINIT) if not x.ready), None)
    covered = (sorted({int(d) for _, df in arms for d in df["model.n_layers"]} & set(dyn["model.n_layers"]))
               if groups["untested"] and absent is None else [])
    why = [{"kind": kind, "depths": ds, "numbers": [
                {"layers": d, "first_grad": decided[d][1],
                 "arms": [{"name": ARM[name][1], "name_zh": ARM[name][2].strip(),
                           "learned": R.learned(df, {"model.n_layers": d}, metric=OUTCOME)} for name, df in arms]}
                for d in ds if kind != "untested"]}
           for kind, ds in groups.items() if ds]
    one = [d for d in depths if d == 1]
    said = dict(depth_agrees=final[HE_DEPTH] == R.AGREES, nowhere=nowhere, rates_tried=len(rates), edge_lr=edge,
                one_learns=bool(one) and not fails(1), shallow_skips=learned[True, 1] if one else None, why=why,
                missing={"en": absent.missing, "zh": R.missing_zh(absent.missing)} if absent is not None else None,
                covered=covered)

    per_layer_cos = S.per_layer(COLLAPSE)
    per_layer_cos = per_layer_cos[per_layer_cos["run_id"].isin(R.rows(best, at(False, deep))["run_id"])]
    flat = per_layer_cos.groupby("layer")[COLLAPSE].mean()
    flat = flat[flat >= ALIKE]

    def starved(skips):
        """How many runs' first layer got under 1/100 of the last layer's gradient at most probes."""
        return int(R.rows(best, at(skips, deep))["starved"].fillna(False).astype(bool).sum())

    def by_depth(df, ds):
        return [{"layers": d, "skips": R.learned(df, at(True, d), metric=OUTCOME),
                 "plain": R.learned(df, at(False, d), metric=OUTCOME)} for d in ds]

    mechanism_record = dict(
        cos_final_plain=cos_final.a, cos_final_skips=cos_final.b, rank_plain=rank_final.a, rank_skips=rank_final.b,
        alike=ALIKE, alike_after=int(flat.index.min()) + 1 if len(flat) else None,  # layers counted from 1
        last_grad=last_grad, first_plain=first_none, first_skips=first_skip, first=first, ratio=ratio,
        ratio_train_skips=ratio_train.a, ratio_train_plain=ratio_train.b, ratio_train=ratio_train,
        starved_plain=starved(False), starved_skips=starved(True), runs_plain=len(R.rows(best, at(False, deep))),
        runs_skips=len(R.rows(best, at(True, deep))), first_train_plain=first_train.a, first_train_skips=first_train.b,
        first_train=first_train)
    norms = [{"name": F.label("model.norm", n), "name_zh": {"none": "无层归一化"}.get(n, F.label("model.norm", n)),
              "rate": float(sub["optim.lr"].iloc[0]),
              "depths": by_depth(sub, sorted(int(d) for d in sub["model.n_layers"].unique()))}
             for n in (F.order("model.norm", norm["model.norm"]) if norm is not None else []) if n != "pre"
             for sub in [norm[norm["model.norm"] == n]]]
    outcome_record = dict(
        by_depth=[{"layers": d, "skips": learned[True, d], "plain": learned[False, d]} for d in depths],
        acc_skips=outcome.a, acc_plain=outcome.b, acc_diff=outcome,
        edges=[d for d in depths if search(d)[1] and search(d)[2]],
        sgd=by_depth(sgd, sorted(int(d) for d in sgd["model.n_layers"].unique())) if sgd is not None else None,
        norms=norms, healthy=HEALTHY_FACTOR)

    def details(lang):
        z = lang == "zh"
        out = [("Primary comparison, copy, Pre-LN, Adam: ", "主要比较，复制任务，Pre-LN，Adam：")[z]
               + R.lr_phrase(S.df, lang=lang) + R.full_stop(lang), R.convergence(best, lang=lang), R.caveat(best, lang=lang)]
        if sgd is not None:
            out += [("Plain SGD: ", "不带动量的 SGD：")[z] + R.lr_phrase(SGD.df, lang=lang) + R.full_stop(lang),
                    R.convergence(sgd, "SGD runs", lang=lang)]
        else:
            out.append(f"不带动量的 SGD：{R.missing_zh(SGD.missing)}。" if z else f"Plain SGD: {SGD.missing}.")
        if norm is None:
            out.append(f"Post-LN 与不用层归一化：{R.missing_zh(NORM.missing)}。" if z else
                       f"Post-LN and no LayerNorm: {NORM.missing}.")
        return out

    Q.answer(
        details=details,
        checks=checks,
        figure=fig_collapse or fig_acc,  # the headline: what happens to the tokens (issue 39)
        figures=[f for f in (fig_acc, fig_grad, fig_collapse) if f is not None],
        record=dict(**said, **mechanism_record, **outcome_record,
                    layers=deep, plain=learned[False, deep], skips=learned[True, deep], level=lvl,
                    shallow=1 if 1 in depths else None, shallow_plain=learned[False, 1] if 1 in depths else None,
                    plain_learns=[d for d in depths if not fails(d)],
                    ratio_skips=ratio.a, ratio_plain=ratio.b, cos_plain=cos_none, cos_skips=cos_skip,
                    first_grad=[{"layers": d, "ratio": ge, "fails": fails(d)} for d, (_, ge, _) in sorted(decided.items())
                                if ge is not None]),
        at_scale=("the mechanism: which of gradient flow and token collapse stops a deep plain stack is not settled "
                  "by 16 layers at this budget",
                  "机制：深层无残差堆叠学不会，究竟是梯度传不下去还是词元坍缩，16 层、这个预算下还没有定论"),
    )
