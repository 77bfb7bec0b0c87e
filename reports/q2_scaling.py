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
# # Q2 · Scaling the scores by √d_k
#
# **The question (the tutorial's):** without the √d_k scaling, at d_k = 512, how large can the
# dot-product scores get, what do the softmax weights turn into, and why does the model stop learning?
#
# **Experiments.** Sweep `scaling`: scores divided by √d_k or not, at d_k = 8, 64 and 512, on the
# **histogram task** (at each token, how many times it occurs in the sequence; Weiss et al. 2021), Adam,
# each variant at its own learning rate (4 values tried on seed 0, the best on validation run on 5 seeds).
# **Why histogram:** its answer needs attention spread evenly over the matching tokens, which a saturated,
# one-hot softmax cannot give. **Why the unit-variance init** (`model.init=unit`): the tutorial reasons
# from q and k components of unit variance, so that unscaled scores have a standard deviation of √d_k (2.8
# at 8, 22.6 at 512); PyTorch's default init does not realise that premise. One head of d_head = d_k at
# d_model 64, 2 layers, no positions, no dropout, cosine decay. Sweep `scaling_sgd`: the same at d_k 8 and
# 512 with plain SGD, where a step is the learning rate times the gradient itself, so a vanishing gradient
# shows as no learning (Adam's per-parameter normalisation can hide it). The probes measure layer 0: the
# scores' standard deviation, the variance of the q and k components, the share of one-hot softmax rows
# (largest weight > 0.99) and the gradients, at initialisation, after training and every 50 steps.
#
# **Mechanism and outcome are judged apart.** Vaswani et al. give the saturation argument as a
# suspicion ("We suspect that for large values of d_k ..."); it is a claim about the softmax's gradients,
# so it is judged from the probes. Whether the model then trains is the outcome, judged from accuracy.
#
# ## Primary tests, decided before reading the outcome
#
# *Provenance, said plainly:* these tests and margins were written when the answers were rebuilt for
# issue 14, after an earlier build of these findings had been read. Each reason below rests on the paper
# or on the task's design, not on an outcome, and none was changed to reach a verdict; a deviation made
# after reading an outcome is marked as such where there is one.
#
# | anchor | primary test (sweep · variants · quantity) | why this is the right experiment |
# | --- | --- | --- |
# | scores grow as √d_k (footnote 4) | `scaling` · unscaled, d_k 8 / 64 / 512 · slope of log score std against log d_k at initialisation, one fit per seed; **margin ±0.05 around 0.5** | the footnote is a statement about initial scores of unit-variance q, k; the slope is its exponent. ±0.05 on the exponent is a factor of 1.23 over the 64× range of d_k, smaller than the difference between √d_k and any other simple power |
# | softmax saturates, gradients become extremely small (§3.2.1, mechanism) | `scaling` · d_k = 512, unscaled vs scaled · layer-0 gradient to W_Q per unit of score at initialisation (the gradient divided by the factor the scores are multiplied by: what the softmax passes back), geometric mean, ratio | the claim is about the softmax's gradient at large d_k; at initialisation no optimiser has acted yet, so the measurement is the softmax's alone. One-hot rows and the same gradient after training are supporting |
# | scaling counteracts it: the model trains (§3.2.1, outcome) | `scaling` · d_k = 512, scaled vs unscaled, Adam · test accuracy | Adam is the paper's optimiser; SGD is supporting (it shows a vanishing gradient more directly, but is not how the model is trained) |
# | smaller d_k hurts quality (Table 3 (B)) | `scaling` · scaled, d_k 8 vs 64, Adam · test accuracy; not testable when both solve the task (≥ 99 %) | Table 3 (B) reduces d_k at a fixed d_model, as this sweep does from 64 to 8 (one head of d_k at d_model 64); a task both arms solve has no room to show lost quality |
#
# **Changed after the outcome was read** (issue 43): which runs "learned", i.e. sit above the task's reference
# level. A run 1.4 points above chance on 128 examples counted as learned: the rule was "more than 1 point
# above the order-blind level, else chance". It is now "more than 1 point above the highest reference level
# below 99 %, and more than a predictor at that level scores by luck on the evaluation set (the top of its
# 95 % binomial range)", one rule for the notebooks and `ablate compare` (`ablate.report.stats.above_level`).
# It moved supporting counts only, no primary test and no verdict: d_k = 64 unscaled above chance 4 → 3 of 5 runs. The change is marked because those
# outcomes were known when it was made.
#
# ## The learning-rate search and what the scale does, decided before the runs of `scaling_lr` (issue 24)
#
# Written and committed before any run of sweeps `scaling_lr`, `scaling_lr_512`, `scaling_reparam` and
# `scaling_default`; the git history shows the order. **Why:** Adam steps each weight by about the rate, and
# an unscaled score is √d_k times a scaled one, so one step moves it √d_k times as far: the rate at which an
# unscaled model at d_k = 512 moves its scores as the scaled one does at 1e-3 is about 4e-5. `scaling`'s grid
# (1e-4 … 3e-3) never reached it; all its stage-1 unscaled runs at 512 sat at chance, so the rate "chosen"
# for them was noise, and "the unscaled model does not learn" could have been a learning-rate artefact.
#
# | anchor | primary test (sweep · variants · quantity) | why this is the right experiment |
# | --- | --- | --- |
# | scaling counteracts it: the model trains (§3.2.1, outcome) — **its data change** | `scaling_lr_512` · d_k = 512, scaled vs unscaled, unit init, Adam, **each at its own best rate over 1e-6 … 3e-3** (8 half-decades, on validation) · test accuracy, paired by seed · greater | the same test on a grid that reaches the unscaled model's matched rate from above and below; `scaling`'s version becomes supporting. The test's form was fixed before; its data change because the old grid could not decide it (known when this was written) |
#
# Supporting, each written here before its runs: **what the scale does** — `scaling_reparam`: unscaled
# scores with `model.qk_reparam` (W_Q and W_K started d_k^¼ smaller and stepped at a d_k^¼ smaller rate:
# equal to the scaled model to float rounding with Adam, `tests/test_qk_reparam.py`) against the scaled
# model of `scaling`, test accuracy at d_k = 512, the same within ±2 points (TOST); **the default init** —
# `scaling_default`: scaled vs unscaled at PyTorch's default init, d_k 64 and 512, test accuracy;
# **saturation by another road** — the scaled d_k = 512 model at the highest rate tried (3e-3, stage 1 of
# `scaling_lr_512`): its share of one-hot rows after training and its accuracy; `scaling_lr` at d_k 8 and
# 64: scaled vs unscaled. The plain answer leads with the literal numbers the question asks for: the largest
# |score|, the scores' standard deviation, the mean largest softmax weight and the share of one-hot rows,
# at initialisation and after training, at d_k = 512.

# %%
import math

import seaborn as sns
from IPython.display import display

from ablate import report as R
from ablate.report.answers import correct  # the verdicts after Holm, for the plain answer's wording
from ablate.report.figures import (
    heatmap_grid,
    hline,
    integer_ticks,
    learning_curves,
    legend,
    order,
    palette,
    probe_curve,
    reference_curve,
    reference_lines,
    stamp,
    subplots,
)

R.setup()

# ---- the primary tests (fixed before the data are read) ----
DK_LARGE = 512  # the tutorial's d_k
SLOPE = 0.5  # footnote 4: std of q·k = √d_k
SLOPE_MARGIN = 0.05  # ±0.05 on the exponent (see the table above)
GRAD_AT_INIT = "softmax_grad_wq_l0"  # layer-0 gradient to W_Q per unit of score, at initialisation (computed below)
ACC = "test/acc"
DK_SMALL, DK_REF = 8, 64  # Table 3 (B): the smaller key size against the larger one, both scaled
REASON = {
    "variance": "the footnote's exponent, measured on the initial unscaled scores of unit-variance q and k, one fit "
                "per seed; margin ±0.05 fixed before reading the data",
    "saturation": "the softmax's own gradient (per unit of score) at d_k = 512 at initialisation, before any "
                  "optimiser acts: the mechanism the paper suspects",
    "trains": "test accuracy at d_k = 512, scaled vs unscaled, with the paper's optimiser (Adam)",
    "trains_wide": "test accuracy at d_k = 512, scaled vs unscaled, Adam, each at its own best rate on a grid that "
                   "reaches the unscaled model's matched rate (about 4e-5) from both sides; paired by seed on one test "
                   "set (written before the runs)",
    "3b": "d_k reduced at a fixed d_model (64 to 8, one head), as in Table 3 (B); a task both solve cannot show "
          "lost quality",
}
REASON_ZH = {
    "variance": "脚注中的指数，在初始化时从分量方差为 1 的 q 和 k 的不缩放分数上测得，每个种子拟合一次；±0.05 的等价"
                "界限在读取数据之前就已确定",
    "saturation": "d_k = 512 时、初始化时（任何优化器起作用之前）softmax 自身每单位分数传回的梯度：正是论文所怀疑的机制",
    "trains": "d_k = 512 时缩放对不缩放的测试准确率，使用论文的优化器（Adam）",
    "trains_wide": "d_k = 512 时缩放对不缩放的测试准确率，Adam，各自用最佳学习率，学习率网格从两侧覆盖不缩放模型的"
                   "匹配学习率（约 4e-5）；同一测试集上按种子配对（在运行之前写定）",
    "3b": "在固定的 d_model 下减小 d_k（从 64 到 8，单头），和 Table 3 (B) 一样；两者都能解决的任务显示不出质量的损失",
}

VARIANCE = R.Anchor(
    "Vaswani et al. 2017, §3.2.1 (footnote 4)",
    "q·k of unit-variance components has variance d_k, so unscaled scores grow as √d_k (a premise about q and k, "
    "which the unit-variance init realises here)",
    "分量方差为 1 的 q·k 的方差是 d_k，所以不缩放的分数按 √d_k 增长（这是关于 q 和 k 的前提，这里的单位方差初始化满足它）",
    kind="mechanism",
    wording="assume that the components of q and k are independent random variables with mean 0 and variance 1. "
            "Then their dot product ... has mean 0 and variance d_k",
    tutorial=True,
)
SATURATION = R.Anchor(
    "Vaswani et al. 2017, §3.2.1",
    "for large d_k the scores push the softmax into regions where it has extremely small gradients (the paper "
    "suspects this; it reports no measurement)",
    "d_k 很大时，分数把 softmax 推到梯度极小的区域（论文只是这样猜测，没有报告测量）",
    kind="mechanism",
    wording="We suspect that for large values of d_k, the dot products grow large in magnitude, pushing the "
            "softmax function into regions where it has extremely small gradients",
    tutorial=True,
)
TRAINS = R.Anchor(
    "Vaswani et al. 2017, §3.2.1",
    "scaling the scores by 1/√d_k counteracts it: at large d_k the scaled model trains (the paper reports no run "
    "without the scaling)",
    "把分数乘以 1/√d_k 可以抵消这一效应：d_k 很大时缩放后的模型能训练（论文没有报告不缩放的运行）",
    wording="To counteract this effect, we scale the dot products by 1/√d_k",
    tutorial=True,
)
TABLE_3B = R.Anchor(
    "Vaswani et al. 2017, Table 3 (B)",
    "reducing the attention key size d_k hurts model quality",
    "减小注意力的键维度 d_k 会降低模型质量",
)
Q = R.question("q2", anchors=[VARIANCE, SATURATION, TRAINS, TABLE_3B])
S, SGD = R.sweep("scaling"), R.sweep("scaling_sgd")
LR, LR512 = R.sweep("scaling_lr"), R.sweep("scaling_lr_512")  # the search down to 1e-6 (issue 24)
REPARAM, DEFAULT_INIT = R.sweep("scaling_reparam"), R.sweep("scaling_default")
REPARAM_MARGIN = 0.02  # ±2 points of test accuracy: the reparametrised model trains as the scaled one
SCALED = {True: "scores ÷ √d_k", False: "no scaling"}
SCALED_ZH = {True: "分数 ÷ √d_k", False: "不缩放"}
display(Q)


def prepare(sweep):
    """Each variant at its chosen learning rate, with the gradient per unit of score: W_Q's gradient
    divided by the factor the scores are multiplied by (1/√d_k or 1), i.e. what the softmax passes back."""
    best = R.at_best_lr(sweep.df)
    best["scaling"] = best["model.qk_scale"].map(lambda q: SCALED[bool(q)])
    best["score_scale"] = best["model.d_head"].astype(float).pow(-0.5).where(best["model.qk_scale"].astype(bool), 1.0)
    for point in ("init", "final"):
        best[f"softmax_grad_wq_l0{'' if point == 'init' else '_final'}"] = (
            best[f"probe/{point}/grad_wq_l0"] / best["score_scale"])
    return best


def hue(df):
    """seaborn's hue, palette and order for the scaling column: one colour per setting in every figure."""
    return {"hue": "scaling", "palette": palette("model.qk_scale", df["model.qk_scale"], SCALED),
            "hue_order": order("model.qk_scale", df["model.qk_scale"], SCALED)}


# %%
if S.ready:
    best = prepare(S)
    dks = sorted(int(v) for v in best["model.d_head"].unique())
    dk_max, dk_min = dks[-1], dks[0]
    print(R.lr_phrase(S.df))
    table = best.groupby(["model.d_head", "scaling", "optim.lr"], sort=False)[
        ["test/acc", "val/acc_best", "probe/init/logit_std_l0", "probe/final/logit_std_l0", "probe/init/q_var_l0",
         "probe/init/k_var_l0", "probe/init/onehot_frac_l0", "probe/final/onehot_frac_l0"]].mean()
    R.show_table(table.sort_index())
else:
    print(S.missing)
if SGD.ready:
    sgd = prepare(SGD)

# %% [markdown]
# ## How large do the scores get?
# Standard deviation of the layer-0 scores against d_k at initialisation (solid) and after training
# (dashed); dotted grey: √d_k, what the premise predicts at initialisation, and the measured variance of the q and k
# components at initialisation, which the premise takes to be 1. Bars: 95 % intervals over seeds.

# %%
if S.ready:
    fig, axes = subplots(1, 2, figsize=(12, 4))
    scores = best.melt(id_vars=["model.d_head", "model.qk_scale", "scaling", "seed"],
                       value_vars=["probe/init/logit_std_l0", "probe/final/logit_std_l0"], var_name="when",
                       value_name="std of the scores")
    scores["when"] = scores["when"].map({"probe/init/logit_std_l0": "at initialisation",
                                         "probe/final/logit_std_l0": "after training"})
    sns.lineplot(scores, x="model.d_head", y="std of the scores", style="when",
                 style_order=["at initialisation", "after training"], marker="o", errorbar=R.errorbar, seed=0,
                 ax=axes[0], **hue(best))
    reference_curve(axes[0], dks, [math.sqrt(d) for d in dks], "√d_k (the premise)", ls=":",
                    color="black")
    axes[0].set(xscale="log", yscale="log", xlabel="d_k", title="layer-0 scores")
    legend(axes[0])
    var = best.melt(id_vars=["model.d_head"], value_vars=["probe/init/q_var_l0", "probe/init/k_var_l0"],
                    var_name="vector", value_name="component variance")
    var["vector"] = var["vector"].map({"probe/init/q_var_l0": "q", "probe/init/k_var_l0": "k"})
    sns.lineplot(var, x="model.d_head", y="component variance", hue="vector", marker="o", errorbar=R.errorbar, seed=0,
                 ax=axes[1])
    hline(axes[1], 1.0, "1 (the premise)", ls=":")
    axes[1].set(xscale="log", xlabel="d_k", title="layer-0 q and k components at initialisation")
    legend(axes[1])
    for ax in axes:
        integer_ticks(ax, "x", dks)
    stamp(fig, S)
    fig_scores = R.savefig(fig, "q2_scores")

# %% [markdown]
# ## What do the softmax weights turn into, and what gradient do they pass back?
# Layer 0 during training at d_k = 512 (each variant at its chosen learning rate, mean over seeds with
# the 95 % band): the share of one-hot rows (largest weight > 0.99), the scores' standard deviation
# (dotted: √d_k, labelled in its panel) and the gradient norm of the layer.

# %%
figures = []
if S.ready:
    figures.append(fig_scores)
    fig, axes = subplots(1, 3, figsize=(15, 3.8))
    at_max = {"model.d_head": dk_max}
    for ax, quantity, log in zip(axes, ("onehot_frac", "logit_std", "grad"), (False, True, True)):
        probe_curve(S, quantity, hue="model.qk_scale", where=at_max, runs=best, ax=ax, labels=SCALED, log=log)
    root = hline(axes[1], math.sqrt(dk_max), f"√d_k = {math.sqrt(dk_max):.1f} (the premise, at initialisation)",
                 ls=":")
    for ax, what in zip(axes, ("one-hot rows", "std of the scores", "gradient norm")):
        ax.set(ylabel=what, title=f"{what}, d_k = {dk_max}")
        if ax is axes[-1]:
            legend(ax, "scaling", outside=True)
        elif ax is axes[1]:
            ax.legend([root], [root.get_label()], loc="upper left")  # the reference line's own label
        elif ax.get_legend() is not None:
            ax.get_legend().remove()
    stamp(fig, S, extra="layer 0")
    figures.append(R.savefig(fig, "q2_during_training"))
    fig_attention = None  # the headline figure: what the softmax weights turn into (issue 39)
    maps = {}  # "at initialisation" / "after training" -> [scaled, unscaled] (the lowest seed at the chosen rate)
    for point, name in (("init", "at initialisation"), ("final", "after training")):
        row = []
        for scaled in (True, False):
            run = next((r for r in R.rows(best, at_max | {"model.qk_scale": scaled}).sort_values("seed")["run_id"]
                        if f"{r}/{point}/attention" in S.arrays), None)
            if run is not None:
                row.append(S.attention(run, f"{point}/attention")[0, 0])
        if len(row) == 2:
            maps[name] = row
    if maps:
        fig = heatmap_grid(maps, [f"{SCALED[True]}, d_k = {dk_max}", f"{SCALED[False]}, d_k = {dk_max}"], shared=True)
        stamp(fig, S, extra="layer 0, head 0, first probe example")
        fig_attention = R.savefig(fig, "q2_attention")
        figures.append(fig_attention)

# %% [markdown]
# ## Does the model learn? Adam and SGD
# Test accuracy per d_k with and without scaling (dotted: chance, the most frequent count), and the
# validation accuracy over training at d_k = 512.

# %%
if S.ready:
    both = [("Adam", S, best)] + ([("SGD", SGD, sgd)] if SGD.ready else [])
    fig, axes = subplots(2, len(both), figsize=(6.5 * len(both), 7.2), squeeze=False)
    for col, (name, sweep, df) in enumerate(both):
        ax = axes[0, col]
        sns.pointplot(df, x="model.d_head", y=ACC, errorbar=R.errorbar, seed=0, dodge=0.2, ax=ax, **hue(df))
        reference_lines(ax, df, split="test")
        ax.set(xlabel="d_k", ylabel="test accuracy", title=f"histogram task, {name}")
        legend(ax, "scaling")
        top = int(df["model.d_head"].max())
        learning_curves(sweep, "val/acc", hue="model.qk_scale", where={"model.d_head": top}, runs=df, ax=axes[1, col],
                        labels=SCALED, title=f"{name}, d_k = {top}: validation accuracy during training")
        legend(axes[1, col], "scaling")
    stamp(fig, *[sweep for _, sweep, _ in both])
    fig_acc = R.savefig(fig, "q2_accuracy")
    figures.append(fig_acc)

# %% tags=["answer"]
if not S.ready:
    Q.not_run_yet(S)
else:
    def zh(x) -> str:
        """An Estimate / Effect / Fraction as the Chinese text writes it: the same numbers (the API's "zh")."""
        return format(x, "zh")

    def at(d, scaled):
        return {"model.d_head": d, "model.qk_scale": scaled}

    def est(metric, where, df=best, **kw):
        return R.estimate(df, metric, where, **kw)

    un, sc = at(dk_max, False), at(dk_max, True)
    chance = R.level(best, split="test")

    # ---- mechanism: the probes ----
    slope_un = R.slope_estimate(best, "model.d_head", "probe/init/logit_std_l0", {"model.qk_scale": False})
    slope_sc = R.slope_estimate(best, "model.d_head", "probe/init/logit_std_l0", {"model.qk_scale": True})
    premise = R.values_estimate("√d_k exponent", [SLOPE] * max(slope_un.n, 1), decimals=2)
    std_init = {d: est("probe/init/logit_std_l0", at(d, False)) for d in dks}
    std_final = est("probe/final/logit_std_l0", un), est("probe/final/logit_std_l0", sc)
    qv, kv = est("probe/init/q_var_l0", {}), est("probe/init/k_var_l0", {})
    onehot_init = {d: (est("probe/init/onehot_frac_l0", at(d, False)), est("probe/init/onehot_frac_l0", at(d, True)))
                   for d in dks}
    onehot_final = {d: (est("probe/final/onehot_frac_l0", at(d, False)), est("probe/final/onehot_frac_l0", at(d, True)))
                    for d in dks}
    grad_init = R.effect(est(GRAD_AT_INIT, un, scale="log"), est(GRAD_AT_INIT, sc, scale="log"))
    grad_final = R.effect(est("softmax_grad_wq_l0_final", un, scale="log"),
                          est("softmax_grad_wq_l0_final", sc, scale="log"))

    # ---- outcome: accuracy, runs that learned ----
    acc_un, acc_sc = est(ACC, un), est(ACC, sc)
    f_un, f_sc = R.learned(best, un, ACC), R.learned(best, sc, ACC)

    checks = [
        VARIANCE.same(R.effect(slope_un, premise), "slope of log score std against log d_k at initialisation, "
                      f"unscaled: {slope_un} (scaled: {slope_sc}) against √d_k's 0.5", margin=SLOPE_MARGIN,
                      primary=True, reason=REASON["variance"],
                      what_zh=f"初始化时 log 分数标准差对 log d_k 的斜率，不缩放：{slope_un:zh}（缩放：{slope_sc:zh}），"
                              "对照 √d_k 的 0.5", reason_zh=REASON_ZH["variance"]),
        SATURATION.less(grad_init, f"d_k = {dk_max}, first-layer gradient to W_Q per unit of score at initialisation, "
                        "unscaled vs scaled (geometric means)", primary=True, reason=REASON["saturation"],
                        what_zh=f"d_k = {dk_max}，初始化时第一层每单位分数传到 W_Q 的梯度，不缩放对缩放（几何平均）",
                        reason_zh=REASON_ZH["saturation"]),
        TRAINS.greater(R.effect(acc_sc, acc_un), f"Adam, test accuracy at d_k = {dk_max}, scaled vs unscaled, "
                       "learning rates 1e-4 … 3e-3", level=chance, primary=not LR512.ready, reason=REASON["trains"],
                       what_zh=f"Adam，d_k = {dk_max} 时的测试准确率，缩放对不缩放，学习率 1e-4 … 3e-3",
                       reason_zh=REASON_ZH["trains"]),
    ]
    lr512 = prepare(LR512) if LR512.ready else None
    if lr512 is not None:  # the primary test of TRAINS on the grid down to 1e-6 (issue 24)
        wide = (at(DK_LARGE, True), at(DK_LARGE, False))
        checks.append(TRAINS.greater(
            R.paired(lr512, ACC, *wide), f"Adam, test accuracy at d_k = {DK_LARGE}, scaled vs unscaled, each at its own "
            "best rate over 1e-6 … 3e-3, paired by seed", level=R.level(lr512, split="test"), primary=True,
            reason=REASON["trains_wide"], what_zh=f"Adam，d_k = {DK_LARGE} 时的测试准确率，缩放对不缩放，各自在 1e-6 … 3e-3 "
                                                  "中的最佳学习率上，按种子配对", reason_zh=REASON_ZH["trains_wide"]))
    if REPARAM.ready:  # what the scale does: the reparametrised unscaled model against the scaled one
        reparam = prepare(REPARAM)
        for d in sorted(int(v) for v in reparam["model.d_head"].unique()):
            if not R.rows(best, at(d, True)).empty:
                checks.append(TRAINS.same(
                    R.effect(est(ACC, {"model.d_head": d}, reparam), est(ACC, at(d, True))),
                    f"d_k = {d}: unscaled with W_Q, W_K started and stepped d_k^¼ smaller (qk_reparam) vs scaled, "
                    "test accuracy", margin=REPARAM_MARGIN, primary=False,
                    what_zh=f"d_k = {d}：不缩放、但 W_Q 和 W_K 的初始值与步长都缩小 d_k^¼ 倍（qk_reparam）对缩放，测试准确率"))
    arms = ((DEFAULT_INIT, "PyTorch's default init, d_k = {d}: scaled vs unscaled, test accuracy, paired by seed",
             "框架默认的初始化，d_k = {d}：缩放对不缩放，测试准确率，按种子配对"),
            (LR, "d_k = {d}: scaled vs unscaled, each at its own best rate over 1e-6 … 3e-3, test accuracy, paired by seed",
             "d_k = {d}：缩放对不缩放，各自在 1e-6 … 3e-3 中的最佳学习率上，测试准确率，按种子配对"))
    for sweep, what, what_zh in arms:  # supporting: scaled vs unscaled at each d_k of the sweep
        if not sweep.ready:
            continue
        arm = prepare(sweep)
        for d in sorted(int(v) for v in arm["model.d_head"].unique()):
            checks.append(TRAINS.greater(R.paired(arm, ACC, at(d, True), at(d, False)), what.format(d=d),
                                         level=R.level(arm, split="test"), primary=False,
                                         what_zh=what_zh.format(d=d)))
    if DK_SMALL in dks and DK_REF in dks:
        small, ref = est(ACC, at(DK_SMALL, True)), est(ACC, at(DK_REF, True))
        checks.append(TABLE_3B.less(R.effect(small, ref), f"Adam, scaled, test accuracy at d_k = {DK_SMALL} vs {DK_REF}",
                                    level=chance, premise=not min(small.mean, ref.mean) >= R.SOLVED,
                                    why="both solve the task (≥ 99 %): no room for a smaller d_k to lose quality",
                                    primary=True, reason=REASON["3b"],
                                    what_zh=f"Adam，缩放，d_k = {DK_SMALL} 对 {DK_REF} 的测试准确率",
                                    why_zh="两者都解决了任务（≥ 99%）：较小的 d_k 没有损失质量的余地",
                                    reason_zh=REASON_ZH["3b"]))
    else:
        checks.append(TABLE_3B.not_testable(f"d_k = {DK_SMALL} vs {DK_REF}", f"the table has d_k = {dks}",
                                            primary=True, reason=REASON["3b"], what_zh=f"d_k = {DK_SMALL} 对 {DK_REF}",
                                            why_zh=f"表中只有 d_k = {dks}", reason_zh=REASON_ZH["3b"]))
    # supporting
    checks.append(SATURATION.greater(R.effect(*onehot_init[dk_max]), f"d_k = {dk_max}, share of one-hot first-layer rows "
                                     "at initialisation, unscaled vs scaled", primary=False,
                                     what_zh=f"d_k = {dk_max}，初始化时第一层独热行的比例，不缩放对缩放"))
    checks.append(SATURATION.greater(R.effect(*onehot_final[dk_max]), f"d_k = {dk_max}, share of one-hot first-layer rows "
                                     "after training, unscaled vs scaled", primary=False,
                                     what_zh=f"d_k = {dk_max}，训练后第一层独热行的比例，不缩放对缩放"))
    checks.append(SATURATION.less(grad_final, f"d_k = {dk_max}, first-layer gradient to W_Q per unit of score after "
                                  "training, unscaled vs scaled", primary=False,
                                  what_zh=f"d_k = {dk_max}，训练后第一层每单位分数传到 W_Q 的梯度，不缩放对缩放"))
    if SGD.ready:
        sgd_max = int(sgd["model.d_head"].max())
        sgd_acc = R.effect(est(ACC, at(sgd_max, True), sgd), est(ACC, at(sgd_max, False), sgd))
        checks.append(TRAINS.greater(sgd_acc, f"plain SGD, test accuracy at d_k = {sgd_max}, scaled vs unscaled",
                                     level=R.level(sgd, split="test"), primary=False,
                                     what_zh=f"不带动量的 SGD，d_k = {sgd_max} 时的测试准确率，缩放对不缩放"))
        # (at initialisation the SGD runs are the Adam runs' models: the same seeds, the same init)
        sgd_grad = R.effect(est("softmax_grad_wq_l0_final", at(sgd_max, False), sgd, scale="log"),
                            est("softmax_grad_wq_l0_final", at(sgd_max, True), sgd, scale="log"))
        checks.append(SATURATION.less(sgd_grad, f"plain SGD, d_k = {sgd_max}, first-layer gradient to W_Q per unit of score "
                                      "after training, unscaled vs scaled", primary=False,
                                      what_zh=f"不带动量的 SGD，d_k = {sgd_max}，训练后第一层每单位分数传到 W_Q 的梯度，"
                                              "不缩放对缩放"))

    # ---- the text ----
    s512, oh_un, oh_sc = std_init[dk_max], onehot_init[dk_max][0], onehot_init[dk_max][1]
    final = correct(checks)[0]  # the verdicts after Holm, as the Answer shows them: the plain answer follows them
    grows = final[0].verdict == R.AGREES  # the exponent is 0.5 within its margin
    saturates = final[1].verdict == R.AGREES  # the unscaled softmax passes back measurably less gradient
    trains = next(c for c in final if c.anchor is TRAINS and c.primary)  # on scaling_lr_512 where it is there
    fails = trains.verdict == R.AGREES  # scaled measurably above unscaled at d_k = 512
    none_sc = oh_sc.n > 0 and oh_sc.mean == 0
    sc_en, sc_zh = ("none with the scaling", "缩放后没有") if none_sc else (f"{oh_sc} with the scaling", f"缩放后为 {zh(oh_sc)}")
    def literal(point, scaled):
        return {k: est(f"probe/{point}/{k}_l0", at(dk_max, scaled)) for k in ("logit_max", "logit_std", "rowmax")}

    lit_init, lit_final, lit_sc = literal("init", False), literal("final", False), literal("init", True)
    record = dict(d_k=dk_max, score_max=lit_init["logit_max"], score_std=lit_init["logit_std"],
                  rowmax=lit_init["rowmax"], scaled_score_max=lit_sc["logit_max"], scaled_rowmax=lit_sc["rowmax"],
                  one_hot=oh_un, one_hot_at=0.99, final_score_max=lit_final["logit_max"],
                  final_rowmax=lit_final["rowmax"], grows=grows, saturates=saturates,
                  scaled_one_hot=None if none_sc else oh_sc, fails=fails,
                  unscaled=None, scaled=None, lr_lo=None, lr_hi=None, matched_lr=None, reparam=None)
    if lr512 is not None:  # the search down to 1e-6: what each arm reached at its own best rate
        lr_un, lr_sc = R.learned(lr512, at(DK_LARGE, False), ACC), R.learned(lr512, at(DK_LARGE, True), ACC)
        acc_lr_un, acc_lr_sc = est(ACC, at(DK_LARGE, False), lr512), est(ACC, at(DK_LARGE, True), lr512)
        f_un, f_sc = lr_un, lr_sc
        rates = sorted(float(v) for v in LR512.df["optim.lr"].dropna().unique())
        default_lr = float(R.config_defaults(sweep="scaling_lr_512").get("optim.lr", 1e-3))
        record.update(unscaled=acc_lr_un, scaled=acc_lr_sc, lr_lo=rates[0], lr_hi=rates[-1],
                      matched_lr=default_lr / math.sqrt(DK_LARGE))  # Adam: the reparametrised model's rate
    if REPARAM.ready and not R.rows(prepare(REPARAM), {"model.d_head": DK_LARGE}).empty:  # what the scale does
        reparam_rates = sorted(float(v) for v in REPARAM.df["optim.lr"].dropna().unique())
        record.update(reparam=est(ACC, {"model.d_head": DK_LARGE}, prepare(REPARAM)), reparam_d_k=DK_LARGE,
                      reparam_scaled=est(ACC, at(DK_LARGE, True)), reparam_lr_lo=reparam_rates[0],
                      reparam_lr_hi=reparam_rates[-1])
    record.update(unscaled_learned=f_un, scaled_learned=f_sc)
    def accuracy(df):
        return [{"d_k": d, "scaled": est(ACC, at(d, True), df), "unscaled": est(ACC, at(d, False), df),
                 "diff": R.effect(est(ACC, at(d, True), df), est(ACC, at(d, False), df)),
                 "learned_scaled": R.learned(df, at(d, True), ACC), "learned_unscaled": R.learned(df, at(d, False), ACC)}
                for d in sorted(int(v) for v in df["model.d_head"].unique())]

    record.update(  # the mechanism, outcome and changes blocks of reports/prose/<lang>/q2.md
        q_var=qv, k_var=kv, slope_unscaled=slope_un, slope_scaled=slope_sc, d_k_max=dk_max, d_k_min=min(dks),
        by_d_k=[{"d_k": d, "root": math.sqrt(d), "std": std_init[d], "onehot_init_unscaled": onehot_init[d][0],
                 "onehot_init_scaled": onehot_init[d][1], "onehot_final_unscaled": onehot_final[d][0],
                 "onehot_final_scaled": onehot_final[d][1]} for d in dks],
        std_final_unscaled=std_final[0], std_final_scaled=std_final[1], grad_init=grad_init, grad_final=grad_final,
        chance_adam=chance, accuracy_adam=accuracy(best), accuracy_sgd=accuracy(sgd) if SGD.ready else None)
    stuck = best[R.at_level(best, ACC, split="test")]

    def details(lang):
        z = lang == "zh"
        out = [("Adam: ", "Adam：")[z] + R.lr_phrase(S.df, lang=lang) + R.full_stop(lang), R.convergence(best, lang=lang)]
        if not stuck.empty:
            groups = stuck.groupby(["model.d_head", "model.qk_scale"]).size().items()
            margin = f"{100 * R.LEVEL_MARGIN:g}"  # R.at_level: within this, or within a chance predictor's luck
            if z:
                out.append(f"测试集上没有明显高于随机水平的运行（相差不到 {margin} 个百分点，或在随机水平的预测器于测试样本上"
                           "可能碰上的波动以内）：" + "，".join(
                    f"d_k = {int(d)} {SCALED_ZH[bool(q)]}，{len(R.rows(best, at(d, q)))} 次中 {n} 次" for (d, q), n in groups) + "。")
            else:
                out.append(f"Runs not clearly above chance on the test set (within {margin} point of it, or within the luck "
                           "of a chance-level predictor on the test examples): " + ", ".join(
                    f"d_k = {int(d)} {SCALED[bool(q)]} {n} of {len(R.rows(best, at(d, q)))}" for (d, q), n in groups) + ".")
        if SGD.ready:
            out += [("Plain SGD: ", "不带动量的 SGD：")[z] + R.lr_phrase(SGD.df, lang=lang) + R.full_stop(lang),
                    R.convergence(sgd, "SGD runs", lang=lang)]
        else:
            out.append(f"Plain SGD: {SGD.missing}." if not z else f"不带动量的 SGD：{R.missing_zh(SGD.missing)}。")
        return [*out, R.caveat(best, lang=lang)]

    record["chance"] = R.level(lr512, split="test") if lr512 is not None else chance
    Q.answer(details=details,
             checks=checks, figure=fig_attention or fig_scores, figures=figures, record=record)
