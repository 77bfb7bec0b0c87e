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
# # The article's claims, checked
#
# Four claims, each from its own sweep or benchmark, each with its own Answer:
#
# 1. **Pre-LN vs Post-LN in a deep stack** — sweep `norm`: LayerNorm pre / post at 12 layers, learning
#    rates 1e-4 … 1e-2 with a 10 % warm-up.
# 2. **Temperature τ moves attention between hard selection and uniform averaging** — sweep `temperature`;
#    and τ turned at inference (issue 37) — sweep `temperature_inference`.
# 3. **Attention costs O(n²) in sequence length** — `ablate bench attention` (reports/data/attention_cost.csv).
#
# The FFN's claim (its share of the parameters, and the facts it stores) was the second here until issue 27
# gave it a study of its own: `reports/ffn.py` and its manifest, with its tests moved word for word.
#
# ## The tests, fixed before the data are read
#
# *Provenance, said plainly:* these tests and margins were written when the answers were rebuilt for
# issue 14, after an earlier build of these findings had been read. Each reason below rests on the paper
# or on the task's design, not on an outcome, and none was changed to reach a verdict; a deviation made
# after reading an outcome is marked as such where there is one.
#
# | claim | anchor | kind | primary test | why this test |
# | --- | --- | --- | --- | --- |
# | norm | Xiong 2020: Post-LN's gradients near the output are large at initialisation | mechanism | the **last** layer's gradient norm at initialisation, Post-LN vs Pre-LN, greater (a ratio) | Xiong's Theorem 1 bounds exactly this (the last layer's FFN weights): O(d√(ln d)) for Post-LN against O(d√(ln d / L)) for Pre-LN. One learning rate's runs only: the initialisation does not depend on the rate, so the other rates' runs are copies of the same seeds |
# | norm | Xiong 2020: Post-LN needs the warm-up | outcome | Post-LN at the largest rate, with warm-up vs without, validation accuracy | the warm-up is the treatment; the largest rate is where it matters. Not testable when every run had warm-up |
# | norm | Liu 2020: deep Post-LN is less robust than Pre-LN | outcome | the largest rate (1e-2), Pre-LN vs Post-LN, validation accuracy with a diverged run counted at chance, greater | robustness to large rates is the claim; a diverged run learned nothing |
# | temperature | Hinton 2015: a higher temperature gives a softer distribution | mechanism | layer-0 attention entropy at initialisation, τ = 10 vs τ = 0.1, greater | the claim is about the softmax itself; at initialisation training has not reshaped the scores |
# | cost | Vaswani Table 1: O(n² · d) per layer | — | ~~the explicit path's forward+backward time slope in n (n ≥ fit_from_n), within `TIME_SLOPE`~~ **changed after reading the outcome (issue 37):** the explicit path's forward+backward operations, counted by torch's `FlopCounterMode`, log-log slope in n (n ≥ fit_from_n) within 2 ± `FLOPS_SLOPE_TOLERANCE`; the time slope, with its 95 % interval over the timing rounds, becomes supporting | Table 1 counts operations, so they are counted: a review found the time band [1.5, 2.5] wide enough to accept the fused kernel's 1.55 and a four-point fit too short to decide. The count is deterministic (its outcome follows from the shapes); it shows the layer does linear plus quadratic work and the n² term dominates from fit_from_n on. Time is what the operations cost on this machine |
#
# ## Pre-LN vs Post-LN against depth and warm-up, decided before the runs (issue 25)
#
# Written and committed before any run of sweeps `norm_6`, `norm_12_warm`, `norm_12_cold`, `norm_24_warm`
# and `norm_24_cold`; the git history shows the order. **The runs:** depth 6, 12 and 24 × warm-up 10 % or
# none × learning rate 1e-3, 3e-3, 1e-2, 3e-2, 1e-1 (an axis up to where Pre-LN should fail too, not tuned)
# × Pre-LN / Post-LN × 3 seeds, copy at 8 tokens, d_model 32, 2 heads, 252 steps (the sweeps' own quick
# profile, `ablate/budgets.py`). A run *learned* when its best validation accuracy is above the order-blind
# level; a diverged run enters at chance, as in `norm`.
# The 24-layer parts ran past 10 minutes and were split by placement (`norm_24_warm_pre`, `_post`,
# `norm_24_cold_pre`, `_post`) and rerun; the grid and the tests below are unchanged.
# **A test changed after its outcome was read**, and why: Liu's test on `norm` (12 layers, lr 1e-2, every run
# with warm-up) was read in earlier builds; all 24 runs of `norm` learned, so it could not decide whether
# Post-LN stops training. It stays, as supporting; the tests below replace it, and Xiong's warm-up test,
# not testable on `norm`, is tested here. Xiong's gradient test on `norm` stays primary.
#
# | claim | anchor | kind | primary test | why this test |
# | --- | --- | --- | --- | --- |
# | norm | Liu 2020: deep Post-LN is less robust than Pre-LN — **replaces the `norm` test above** | outcome | the deepest stack (`NORM_DEEPEST` = 24 layers) without warm-up: validation accuracy (diverged = chance), Pre-LN − Post-LN, paired by (learning rate, seed) over the whole rate axis (15 pairs), greater | Liu's Post-LN failed at 18 layers without warm-up; the claim is robustness over rates, so the whole axis enters, each rate's seeds paired |
# | norm | Xiong 2020: Post-LN needs the warm-up | outcome | Post-LN at 24 layers: warm-up 10 % − none, the same accuracy, paired by (learning rate, seed), greater | the warm-up is the treatment; the deepest stack is where Post-LN needs it most |
#
# Supporting (never moves a verdict): per depth, placement and warm-up, the runs that learned at each rate
# and the largest rate at which all 3 seeds learned (where each placement "stops training"); Pre-LN with
# vs without warm-up at 24 layers (Xiong: Pre-LN can do without it); the last layer's gradient at
# initialisation, Post-LN / Pre-LN, at each depth beside Xiong's Theorem 1 ratio √L (O(d√(ln d)) over
# O(d√(ln d / L))), and its log-log slope in depth against Xiong's 1/2.

# %%
import matplotlib.pyplot as plt  # noqa: F401 - the figures' backend, before seaborn
import numpy as np
import pandas as pd
import seaborn as sns
from IPython.display import display

from ablate import report as R
from ablate.report import figures as F
from ablate.report.answers import AGREES_IN_PART, AGREES_IN_PART_UNTESTED, correct, overall

TIME_SLOPE = (1.5, 2.5)  # supporting: the explicit path's time slope interval that counts as quadratic
FLOPS_SLOPE_TOLERANCE = 0.1  # primary (issue 37): the counted operations' slope within 2 ± this
MEMORY_SLOPE_TOLERANCE = 0.25  # supporting: the explicit path stores the n x n weights (slope 2 ± 0.25)
# Pre-LN vs Post-LN against depth and warm-up (issue 25): the parts of one grid, and the depth of its tests
NORM_DEPTH_SWEEPS = ("norm_6", "norm_12_warm", "norm_12_cold", "norm_24_warm_pre", "norm_24_warm_post",
                     "norm_24_cold_pre", "norm_24_cold_post")
NORM_DEEPEST = 24
LIU_LAYERS = 18  # Liu et al. 2020: the depth at which their Post-LN diverged (WMT14 En-De, no warm-up)
NORM_PAIRS = ("optim.lr", "seed")  # the tests pair runs by rate and seed: the whole rate axis enters

R.setup()

# %% [markdown]
# ## 1 · Pre-LN vs Post-LN at depth 12, at large learning rates
#
# Sweep `norm` (`sweeps/norm.yaml`): a 12-layer stack on the copy task (630 optimiser steps at quick),
# d_model 32, 2 heads, LayerNorm before (Pre-LN: x + f(LN(x))) or after (Post-LN: LN(x + f(x))) each
# sub-layer, learning rates 1e-4 … 1e-2 with a 10 % linear warm-up (63 steps), 3 seeds. **Why the
# learning rate is an axis here, not tuned:** the claim is about which placement survives large rates.
# Divergences (status `diverged`) are counted, and so are runs that never leave the order-blind level
# (30 %: a model blind to order can do that much). Diverged runs enter the accuracies at chance. Runs
# without warm-up would double the grid, so the sweep has none; whether warm-up rescues Post-LN is then
# not testable, and the Answer says so.
#
# **The tutorial's wording:** its code block titled "Post-LN" computes x + sublayer(norm(x)) — the norm
# inside the residual branch, which is Pre-LN (this harness's `model.norm=pre`); Post-LN normalises the
# sum, norm(x + sublayer(x)), as the original Transformer does.

# %%
XIONG = R.Anchor(
    "Xiong et al. 2020",
    "at initialisation Post-LN's gradients near the output are large, Pre-LN's are well-behaved (Theorem 1, the last "
    "layer; that they are small near the input is not their claim)",
    "初始化时 Post-LN 靠近输出层的梯度很大，而 Pre-LN 的梯度表现良好（定理 1，最后一层；靠近输入处梯度小并不是他们的论断）",
    kind="mechanism",
    wording="the expected gradients of the parameters near the output layer are large",
    tutorial=True,
)
XIONG_WARMUP = R.Anchor(
    "Xiong et al. 2020",
    "Post-LN needs the learning-rate warm-up at large rates; Pre-LN can do without it",
    "Post-LN 在大学习率下需要学习率预热，Pre-LN 可以不用",
    wording="The warm-up stage is practically helpful for avoiding this problem.",
)
LIU = R.Anchor(
    "Liu et al. 2020",
    f"deep Post-LN stacks are less robust than Pre-LN ones: they fail to train where Pre-LN trains ({LIU_LAYERS}-layer Post-LN "
    "diverged on WMT14 En-De; the cause they find is an amplification effect, not the gradients)",
    f"深层 Post-LN 堆叠不如 Pre-LN 稳健：在 Pre-LN 能训练的地方它会训练失败（{LIU_LAYERS} 层 Post-LN 在 WMT14 英德上发散；"
    "他们找到的原因是放大效应，而不是梯度）",
    wording="unbalanced gradients are not the root cause of the instability of training",
    tutorial=True,
)
Q_NORM = R.question("claim-norm", anchors=[XIONG, XIONG_WARMUP, LIU])
NORM = R.sweep("norm")
FAILED = "val/acc_best, diverged = chance"
display(Q_NORM)

# %%
if NORM.ready:
    norm = NORM.df.copy()
    norm["diverged"] = norm["status"] == "diverged"
    norm["at order-blind level"] = ~norm["diverged"] & R.at_level(norm)
    # a diverged run learned nothing: it enters the accuracies at chance, and is counted as a run
    norm[FAILED] = norm["val/acc_best"].where(~norm["diverged"], norm["ref/val/chance"])
    norm["status"] = norm["status"].where(~norm["diverged"], "completed")
    lrs = sorted(float(v) for v in norm["optim.lr"].unique())
    warmups = sorted(float(w) for w in norm["optim.warmup"].unique())
    depth = int(norm["model.n_layers"].max())
    norm["warm-up"] = norm["optim.warmup"].map(lambda w: f"warm-up {w:g}" if w else "no warm-up")
    counts = norm.groupby(["model.norm", "warm-up", "optim.lr"], as_index=False).agg(
        runs=("seed", "count"), diverged=("diverged", "sum"), at_order_blind=("at order-blind level", "sum"),
        val_acc=(FAILED, "mean"))
    R.show_table(counts)
    # the initialisation does not depend on the learning rate: one rate's runs, one per seed
    init = norm[np.isclose(norm["optim.lr"], lrs[0])]
    KINDS = F.order("model.norm", norm["model.norm"])
    NAMES = F.LABELS["model.norm"]  # pre -> Pre-LN, post -> Post-LN: one colour each in every figure
    HUE = {"hue": "LayerNorm", "hue_order": F.order("model.norm", KINDS, NAMES),
           "palette": F.palette("model.norm", KINDS, NAMES)}
    norm["LayerNorm"] = norm["model.norm"].map(lambda v: F.label("model.norm", v))

    grid = sns.catplot(norm, x="optim.lr", y=FAILED, col="warm-up", kind="point", errorbar=R.errorbar, seed=0,
                       dodge=0.25 if len(KINDS) > 1 else False, height=3.5, aspect=1.7 if len(warmups) == 1 else 1.2,
                       **HUE)
    grid.set_titles("{col_name}")
    for ax in grid.axes.flat:
        F.reference_lines(ax, norm)
        ax.set_ylim(0, 1.02)
    grid.set_axis_labels("learning rate", "val. accuracy (diverged: chance)")
    grid.figure.suptitle(f"{depth} layers, copy task", y=1.03)
    F.stamp(grid.figure, NORM)
    fig_norm = R.savefig(grid.figure, "claims_norm_accuracy")

    grads = NORM.per_layer("probe/init/grad")
    grads = grads[grads["run_id"].isin(init["run_id"])]
    grads["LayerNorm"] = grads["model.norm"].map(lambda v: F.label("model.norm", v))
    fig, ax = F.subplots(figsize=(6.5, 3.6))
    sns.lineplot(grads, x="layer", y="probe/init/grad", estimator=R.geomean, errorbar=R.log_errorbar, marker="o", ax=ax,
                 **HUE)
    ax.set(yscale="log", xlabel="layer (0 = first)", ylabel="gradient norm at initialisation",
           title=f"{depth} layers: gradient per layer at initialisation")
    F.integer_ticks(ax, "x")
    F.legend(ax, "LayerNorm")
    F.stamp(fig, init)
    fig_norm_grad = R.savefig(fig, "claims_norm_gradients")

    fig, ax = F.subplots(figsize=(7, 3.6))
    F.learning_curves(NORM, "val/acc", hue="model.norm", where={"optim.lr": lrs[-1]}, ax=ax, outside=True,
                      title=f"{depth} layers at the largest learning rate, {lrs[-1]:g}")
    ax.set(ylabel="validation accuracy")
    F.legend(ax, "LayerNorm", outside=True)
    F.stamp(fig, NORM)
    R.savefig(fig, "claims_norm_curves")
else:
    print(NORM.missing)

# %% [markdown]
# ### Against depth and warm-up (sweeps `norm_6` … `norm_24_cold_post`)
# Validation accuracy (diverged = chance) at each rate, per depth and warm-up; which runs learned; the
# last layer's gradient at initialisation, Post-LN / Pre-LN, at each depth beside Xiong's √L.

# %%
DEEP = R.sweeps(*NORM_DEPTH_SWEEPS)
if DEEP.ready:
    deep = DEEP.df.copy()
    deep["diverged"] = deep["status"] == "diverged"
    deep[FAILED] = deep["val/acc_best"].where(~deep["diverged"], deep["ref/val/chance"])
    deep["status"] = deep["status"].where(~deep["diverged"], "completed")
    deep["warm-up"] = deep["optim.warmup"].map(lambda w: f"warm-up {w:g}" if w else "no warm-up")
    deep["LayerNorm"] = deep["model.norm"].map(lambda v: F.label("model.norm", v))
    depths = sorted(int(d) for d in deep["model.n_layers"].unique())
    deep_lrs = sorted(float(v) for v in deep["optim.lr"].unique())
    deep_warmups = sorted(float(w) for w in deep["optim.warmup"].unique())
    deep_kinds = F.order("model.norm", deep["model.norm"])

    def deep_at(depth, warmup, kind, lr=None):
        where = {"model.n_layers": depth, "optim.warmup": warmup, "model.norm": kind}
        return where if lr is None else {**where, "optim.lr": lr}

    deep_learned = {(d, w, k, lr): R.learned(deep, deep_at(d, w, k, lr), metric=FAILED)
                    for d in depths for w in deep_warmups for k in deep_kinds for lr in deep_lrs}

    def top_rate(depth, warmup, kind):
        """The largest rate at which every run of (depth, warm-up, placement) learned; None if at none."""
        rates = [lr for lr in deep_lrs if (f := deep_learned[depth, warmup, kind, lr]).n and f.k == f.n]
        return max(rates) if rates else None

    R.show_table(pd.DataFrame([
        {"layers": d, "warm-up": w, "LayerNorm": F.label("model.norm", k),
         **{f"lr {lr:g}": f"{deep_learned[d, w, k, lr].k}/{deep_learned[d, w, k, lr].n}" for lr in deep_lrs},
         "largest rate all learned": top_rate(d, w, k)}
        for d in depths for w in deep_warmups for k in deep_kinds]))
    grid = sns.catplot(deep, x="optim.lr", y=FAILED, col="model.n_layers", row="warm-up", kind="point",
                       errorbar=R.errorbar, seed=0, dodge=0.25, height=2.8, aspect=1.25, hue="LayerNorm",
                       hue_order=F.order("model.norm", deep_kinds, F.LABELS["model.norm"]),
                       palette=F.palette("model.norm", deep_kinds, F.LABELS["model.norm"]))
    grid.set_titles("{row_name}, {col_name} layers")
    for ax in grid.axes.flat:
        F.reference_lines(ax, deep)
        ax.set_ylim(0, 1.02)
    grid.set_axis_labels("learning rate", "val. accuracy")
    grid.figure.suptitle("Pre-LN vs Post-LN on copy, by depth and warm-up (dashed: order-blind level; a diverged run "
                         "counts at chance)", y=1.03)
    F.stamp(grid.figure, DEEP)
    fig_norm_depth = R.savefig(grid.figure, "claims_norm_depth")

    # the initialisation depends on neither the rate nor the warm-up: one (rate, warm-up)'s runs per depth
    deep_init = deep[np.isclose(deep["optim.lr"], deep_lrs[0]) & np.isclose(deep["optim.warmup"], deep_warmups[0])]
    grad_ratio = {d: R.compare(R.rows(deep_init, {"model.n_layers": d}), f"probe/init/grad_l{d - 1}",
                               {"model.norm": "post"}, {"model.norm": "pre"}) for d in depths}
    grad_slope = R.loglog_slope(depths, [grad_ratio[d].diff for d in depths]) if len(depths) > 1 else float("nan")
    R.show_table(pd.DataFrame([{"layers": d, "Post-LN / Pre-LN, last layer": str(grad_ratio[d]),
                                "Xiong: √L": round(float(np.sqrt(d)), 2)} for d in depths]))
else:
    print(DEEP.missing)

# %% tags=["answer"]
if not NORM.ready:
    Q_NORM.not_run_yet(NORM)
else:
    cold, warm = warmups[0], warmups[-1]
    top = lrs[-1]
    lvl = R.level(norm)

    def at(kind, warmup, lr=top):
        return {"model.norm": kind, "optim.warmup": warmup, "optim.lr": lr}

    last = f"probe/init/grad_l{depth - 1}"
    near_output = R.compare(init, last, {"model.norm": "post"}, {"model.norm": "pre"})
    near_input = R.compare(init, "probe/init/grad_l0", {"model.norm": "post"}, {"model.norm": "pre"})
    ratio = R.compare(init, "probe/init/grad_ratio", {"model.norm": "post"}, {"model.norm": "pre"})
    robust = R.compare(norm, FAILED, at("pre", warm), at("post", warm))
    checks = [
        XIONG.greater(near_output, f"{depth} layers, the last layer's gradient at initialisation, Post-LN vs Pre-LN",
                      primary=True, reason="Theorem 1 bounds this gradient; one learning rate's runs, one per seed",
                      what_zh=f"{depth} 层，初始化时最后一层的梯度，Post-LN 对 Pre-LN",
                      reason_zh="论文的定理 1 给出的正是这个梯度的界；取一个学习率下的运行，每个种子一次"),
    ]
    if DEEP.ready:  # issue 25's grid: Liu's and Xiong's warm-up tests at NORM_DEEPEST layers, paired by (rate, seed)
        def deep_arm(kind, warmup):
            return {"model.n_layers": NORM_DEEPEST, "model.norm": kind, "optim.warmup": warmup}

        d_cold, d_warm = deep_warmups[0], deep_warmups[-1]
        robust_deep = R.paired(deep, FAILED, deep_arm("pre", d_cold), deep_arm("post", d_cold), on=NORM_PAIRS)
        rescue_deep = R.paired(deep, FAILED, deep_arm("post", d_warm), deep_arm("post", d_cold), on=NORM_PAIRS)
        pre_rescue = R.paired(deep, FAILED, deep_arm("pre", d_warm), deep_arm("pre", d_cold), on=NORM_PAIRS)
        span = f"{deep_lrs[0]:g}–{deep_lrs[-1]:g}"
        def any_learned(kind, warmup):
            return any(deep_learned[NORM_DEEPEST, warmup, kind, lr].k for lr in deep_lrs)

        # the arms average the whole rate axis, diverged runs at chance: a mean below the order-blind level does not
        # say the favoured arm learned nothing, so the gate is whether any of its runs learned
        checks.append(LIU.greater(
            robust_deep, f"{NORM_DEEPEST} layers, no warm-up, validation accuracy (diverged = chance) over the rates "
                         f"{span}, Pre-LN − Post-LN, paired by rate and seed", learned=any_learned("pre", d_cold),
            primary=True,
            reason=f"Liu's Post-LN failed at {LIU_LAYERS} layers without warm-up; robustness over the rates is the claim",
            what_zh=f"{NORM_DEEPEST} 层，不预热，学习率 {span} 范围内的验证准确率（发散记为随机水平），Pre-LN − Post-LN，按学习率和种子配对",
            reason_zh=f"Liu 等人的实验中，Post-LN 在 {LIU_LAYERS} 层、不预热时训练失败；论断说的是对学习率的稳健性，所以整个学习率范围都纳入检验"))
        checks.append(XIONG_WARMUP.greater(
            rescue_deep, f"Post-LN, {NORM_DEEPEST} layers, validation accuracy (diverged = chance), warm-up {d_warm:g} − "
                         "none, paired by rate "
                         "and seed", learned=any_learned("post", d_warm), primary=True,
            reason="the warm-up is the treatment; the deepest stack is where Post-LN needs it most",
            what_zh=f"Post-LN，{NORM_DEEPEST} 层，验证准确率（发散记为随机水平），预热比例 {d_warm:g} − 不预热，按学习率和种子配对",
            reason_zh="要检验的干预就是预热；堆叠越深 Post-LN 越需要预热，所以取最深的一档"))
        warmup_note = None
    elif cold == 0 and warm > 0:
        rescue = R.compare(norm, FAILED, at("post", warm), at("post", cold))
        checks.append(XIONG_WARMUP.greater(rescue, f"Post-LN, {depth} layers, lr {top:g}, validation accuracy, warm-up "
                                                   f"{warm:g} vs none", level=lvl, primary=True,
                                           reason="the warm-up is the treatment; the largest rate is where it matters",
                                           what_zh=f"Post-LN，{depth} 层，学习率 {top:g}，验证准确率，预热 {warm:g} 对不预热",
                                           reason_zh="预热就是所施加的处理；它在最大的学习率下才要紧"))
        warmup_note = None
    else:
        checks.append(XIONG_WARMUP.not_testable(
            "warm-up vs none", f"every run had {'no warm-up' if not warm else f'warm-up {warm:g}'}", primary=True,
            reason="the warm-up is the treatment; the sweep has one warm-up setting", what_zh="预热对不预热",
            why_zh=f"所有运行都{'没有预热' if not warm else f'用了 {warm:g} 的预热'}",
            reason_zh="预热就是所施加的处理；这个扫描只有一种预热设置"))
        steps = int(norm["global_step"].max())
        warmup_note = dict(warm=warm, steps=round(warm * steps), of=steps)  # warm-up is not tested: the Answer says so
    checks.append(LIU.greater(robust, f"{depth} layers, lr {top:g}, validation accuracy (diverged = chance), Pre-LN vs "
                                      "Post-LN", level=lvl, primary=not DEEP.ready,  # issue 25's grid replaces it
                              reason="robustness to a large rate is the claim; a diverged run learned nothing. Liu's "
                                     f"Post-LN failed at {LIU_LAYERS} layers without warm-up; this sweep has {depth} layers, every "
                                     f"run with warm-up {warm:g}",
                              what_zh=f"{depth} 层，学习率 {top:g}，验证准确率（发散的运行记为随机水平），Pre-LN 对 Post-LN",
                              reason_zh="论断说的正是对大学习率的稳健性；发散的运行什么也没学到。Liu 的 Post-LN 是在 "
                                        f"{LIU_LAYERS} 层、"
                                        f"没有预热时失败的；这个扫描是 {depth} 层，每个运行都用了 {warm:g} 的预热"))
    checks.append(XIONG.greater(ratio, f"{depth} layers, first / last layer gradient at initialisation, Post-LN vs "
                                       "Pre-LN", primary=False, reason="the gradient's profile over depth",
                                what_zh=f"{depth} 层，初始化时第一层与最后一层的梯度之比，Post-LN 对 Pre-LN",
                                reason_zh="梯度随深度的分布"))

    learned = {(k, lr): R.learned(norm, at(k, warm, lr), metric=FAILED) for k in KINDS for lr in lrs}
    post_top, pre_top = learned.get(("post", top)), learned.get(("pre", top))
    fails = post_top is not None and pre_top is not None and post_top.k < post_top.n and pre_top.k == pre_top.n
    every = all(f.n and f.k == f.n for f in learned.values())  # both placements learned at every rate
    final = {c.anchor: c.verdict for c in correct(checks)[0] if c.primary}  # the verdicts the summary reads
    part = overall([v for anchor, v in final.items() if anchor.tutorial]) in (AGREES_IN_PART, AGREES_IN_PART_UNTESTED)
    deep_rec = None  # issue 25's grid: where each placement stops training, by depth
    if DEEP.ready:
        deep_rec = dict(
            layers=depths, deepest=NORM_DEEPEST, lr_lo=deep_lrs[0], lr_hi=deep_lrs[-1],
            spacing=(deep_lrs[-1] / deep_lrs[0]) ** (1 / max(1, len(deep_lrs) - 1)),
            every=all(f.n and f.k == f.n for f in deep_learned.values()),
            arms=[dict(name=F.label("model.norm", k), cold=[top_rate(d, d_cold, k) for d in depths],
                       warm=[top_rate(d, d_warm, k) for d in depths]) for k in deep_kinds],
            robust=robust_deep, rescue=rescue_deep, pre_rescue=pre_rescue, steps=int(deep["global_step"].max()),
            top={f"{k}_{w}": top_rate(NORM_DEEPEST, warmup, k) for k in ("post", "pre")
                 for w, warmup in (("cold", d_cold), ("warm", d_warm))},
            grad=[dict(layers=d, ratio=grad_ratio[d], sqrt=float(np.sqrt(d))) for d in depths], slope=grad_slope,
            xiong_slope=0.5)  # Xiong's Theorem 1: the ratio grows as √L, a slope of 1/2 in log-log
    record = dict(  # the prose: reports/prose/<lang>/claim-norm.md
        grad_holds=final[XIONG] == R.AGREES, part=part, depth=depth,
        last=dict(post=near_output.a, pre=near_output.b, effect=near_output),
        first=dict(post=near_input.a, pre=near_input.b, effect=near_input),
        ratio=dict(post=ratio.a, pre=ratio.b, effect=ratio), seeds=len(init) // max(1, len(KINDS)), fails=fails, every=every, top=top, warm=warm,
        post_top=post_top, pre_top=pre_top, liu_layers=LIU_LAYERS, warmup_note=warmup_note, deep=deep_rec, level=lvl,
        learned=[dict(name=F.label("model.norm", k), rates=[dict(lr=lr, learned=learned[k, lr]) for lr in lrs])
                 for k in KINDS],
        robust=dict(pre=robust.a, post=robust.b, effect=robust), diverged=[dict(name=F.label("model.norm", k),
                                      k=int(R.rows(norm, {"model.norm": k})["diverged"].sum()),
                                      n=len(R.rows(norm, {"model.norm": k}))) for k in KINDS])

    def details(lang):
        said = [(f"The learning rate is an axis, not tuned; every run of `norm` had warm-up {warm:g}.",
                 f"学习率是一个扫描轴，不调参；`norm` 的每次运行都预热 {warm:g}。")[lang == "zh"],
                R.convergence(norm[~norm["diverged"]], "completed runs", lang=lang), R.caveat(NORM.df, lang=lang)]
        if DEEP.ready:
            diverged, n = int(deep["diverged"].sum()), len(deep)
            said += [(f"The depth grid ({', '.join(NORM_DEPTH_SWEEPS)}): {diverged} of {n} runs diverged.",
                      f"深度网格（{'、'.join(NORM_DEPTH_SWEEPS)}）：{n} 次运行中有 {diverged} 次发散。")[lang == "zh"],
                     R.convergence(deep[~deep["diverged"]], "completed runs", lang=lang), R.caveat(DEEP.df, lang=lang)]
        return said

    Q_NORM.answer(record=record, details=details, checks=checks, figure=fig_norm_depth if DEEP.ready else fig_norm,
                  figures=[fig_norm_depth, fig_norm, fig_norm_grad] if DEEP.ready else [fig_norm, fig_norm_grad])

# %% [markdown]
# ## 2 · Temperature: from hard selection to uniform averaging

# %%
HINTON = R.Anchor(
    "Hinton et al. 2015 (softmax temperature)",
    "raising the softmax temperature gives a softer distribution; lowering it approaches a hard maximum",
    "提高 softmax 温度得到更平缓的分布，降低温度则趋近于硬性取最大值",
    kind="mechanism",
    wording="Using a higher value for T produces a softer probability distribution over classes.",
    tutorial=True,
)
Q_TAU = R.question("claim-temperature", anchors=[HINTON])
TAU = R.sweep("temperature")
display(Q_TAU)

# %%
if TAU.ready:
    tau = R.at_best_lr(TAU.df)
    taus = sorted(float(t) for t in tau["model.temperature"].unique())
    long = tau.melt(id_vars=["model.temperature", "seed"],
                    value_vars=["probe/init/entropy_l0", "probe/final/entropy_l0", "probe/init/rowmax_l0",
                                "probe/final/rowmax_l0"], var_name="probe", value_name="value")
    long["when"] = long["probe"].str.split("/").str[1].map({"init": "at initialisation", "final": "after training"})
    long["measure"] = long["probe"].map(lambda p: "entropy / log T" if "entropy" in p else "largest weight per row")
    grid = sns.relplot(long, x="model.temperature", y="value", hue="when", col="measure", kind="line", marker="o",
                       hue_order=["at initialisation", "after training"], errorbar=R.errorbar, seed=0, height=3.4,
                       aspect=1.2, facet_kws={"sharey": False})
    grid.set(xscale="log", ylim=(0, 1.02))
    grid.set_titles("{col_name}")
    for ax in grid.axes.flat:
        F.integer_ticks(ax, "x", taus)
    grid.set_axis_labels("τ", "layer 0")
    F.stamp(grid.figure, TAU)
    fig_tau = R.savefig(grid.figure, "claims_temperature")
    maps = [(f"τ = {t:g}", m[0, 0]) for t in taus
            if (m := TAU.attention({"model.temperature": t}, "final/attention")) is not None]
    if maps:
        fig = R.heatmaps(maps, size=2.2)
        F.stamp(fig, TAU)
        R.savefig(fig, "claims_temperature_maps")
else:
    print(TAU.missing)

# %% tags=["answer"]
if not TAU.ready:
    Q_TAU.not_run_yet(TAU)
else:
    lo, hi = {"model.temperature": taus[0]}, {"model.temperature": taus[-1]}
    entropy = R.compare(tau, "probe/init/entropy_l0", hi, lo)
    final = R.compare(tau, "probe/final/entropy_l0", hi, lo)
    onehot_lo, onehot_hi = (R.estimate(tau, "probe/init/onehot_frac_l0", w) for w in (lo, hi))
    rowmax_lo, rowmax_hi = (R.estimate(tau, "probe/init/rowmax_l0", w) for w in (lo, hi))
    sharper = final.b.mean < entropy.b.mean and final.a.mean < entropy.a.mean
    accs = {t: R.estimate(tau, "test/acc", {"model.temperature": t}) for t in taus}
    best_tau = max(accs, key=lambda t: accs[t].mean if accs[t].n else -1)
    acc_gap = R.effect(accs[best_tau], accs[1.0]) if 1.0 in accs and best_tau != 1.0 else None
    checks = [
        HINTON.greater(entropy, f"first-layer attention entropy at initialisation, τ = {taus[-1]:g} vs {taus[0]:g}",
                       primary=True, reason="the softmax itself, before training reshapes the scores",
                       what_zh=f"初始化时第一层注意力的熵，温度 τ = {taus[-1]:g} 对 {taus[0]:g}",
                       reason_zh="softmax 本身，在训练改变分数之前"),
        HINTON.greater(final, f"first-layer attention entropy after training, τ = {taus[-1]:g} vs {taus[0]:g}",
                       primary=False, reason="whether training undoes it",
                       what_zh=f"训练后第一层注意力的熵，温度 τ = {taus[-1]:g} 对 {taus[0]:g}",
                       reason_zh="训练能否抵消它"),
    ]
    # each fixed τ at the start and the end of training (issue 25): training moves the entropy a fixed τ set
    start_end = {t: tuple(R.estimate(tau, f"probe/{when}/entropy_l0", {"model.temperature": t}) for when in ("init", "final"))
                 for t in taus}
    ends = [start_end[t][1].mean for t in taus]
    spread = (start_end[taus[-1]][0].mean - start_end[taus[0]][0].mean, ends[-1] - ends[0])

    def details(lang):
        return [R.lr_phrase(TAU.df, lang=lang) + R.full_stop(lang), TAU.still_learning(tau, lang=lang),
                R.caveat(tau, lang=lang)]

    Q_TAU.answer(
        record=dict(
            tau_lo=taus[0], tau_hi=taus[-1], trained_tau=1.0, entropy_init=entropy, entropy_final=final,
            entropy_lo=entropy.b, entropy_hi=entropy.a, final_lo=final.b, final_hi=final.a,
            rowmax_lo=rowmax_lo, rowmax_hi=rowmax_hi, onehot_lo=onehot_lo, onehot_hi=onehot_hi,
            sharper=sharper, best_tau=best_tau, best_acc=accs[best_tau], acc_gap=acc_gap,
            by_tau=[{"tau": t, "acc": accs[t]} for t in taus],
            start_end=[{"tau": t, "start": a, "end": b} for t, (a, b) in start_end.items()],
            sharpens=all(b.mean < a.mean for a, b in start_end.values()),
            kept=all(x < y for x, y in zip(ends, ends[1:])),  # a larger τ still the softer after training
            undone=spread[1] < spread[0] / 2, spread_start=spread[0], spread_end=spread[1]),
        details=details, checks=checks, figure=fig_tau)


# %% [markdown]
# ## 2b · τ at inference: "推理采样时调它"
#
# The tutorial turns τ when sampling, at inference. **Decided before the runs of `temperature_inference`
# (issue 37), committed first; the git history shows the order.** The tutorial's MNIST model trained at
# τ = 1 (5 seeds) is evaluated, nothing retrained, with every attention layer's τ at f times the trained
# one, f ∈ {0.1, 0.3, 1, 3, 10} (exactly the model built with τ × f and the same weights, tested), and with
# the output softmax's τ at the same f (the logits divided by f: what sampling a next token turns; it
# moves the loss and can never move the argmax). Validation accuracy on 2,048 examples.
#
# | anchor | kind | primary test | why this test |
# | --- | --- | --- | --- |
# | the tutorial: τ is turned at inference | outcome | the attention's τ × 0.3 and × 3 at inference against × 1, validation accuracy, **the same within 1 point** (TOST), one test each | a knob one turns at inference must leave the trained model working over a moderate range; ×0.3 … ×3 is one step each way of the grid the `temperature` sweep trains over; 1 point is more than the seeds' spread of this model on MNIST and less than any loss a user would accept from a sampling knob |
#
# Supporting: × 0.1 and × 10 the same way; the output's τ: the loss at × 0.3 and × 3 against × 1.
# **The answer's words, fixed now:** both tests agree → the attention's τ can be turned at inference here;
# either disagrees → it cannot: the τ a model samples with is the output softmax's, which moves the loss
# and not the prediction, while the attention's τ is part of what the weights were trained for; otherwise
# the numbers, without a verdict.

# %%
TUTORIAL_TAU = R.Anchor(
    "the tutorial (τ: 推理采样时调它)",
    "τ is turned at inference, when sampling: a model trained at τ = 1 keeps working with τ changed",
    "τ 在推理采样时调节：以 τ = 1 训练的模型，改变 τ 后仍能正常工作",
    tutorial=True,
)
Q_TAU_INF = R.question("claim-tau-inference", anchors=[TUTORIAL_TAU])
TAU_INF = R.sweep("temperature_inference")
# ablate.probes.FACTORS and the final probes' keys for them (inference_temperature: tau_acc_<f>, tau_loss_<f>,
# out_tau_loss_<f>, f written without a dot)
TAU_ACC = {0.1: "probe/final/tau_acc_0p1", 0.3: "probe/final/tau_acc_0p3", 1.0: "probe/final/tau_acc_1",
           3.0: "probe/final/tau_acc_3", 10.0: "probe/final/tau_acc_10"}
TAU_FACTORS = tuple(TAU_ACC)
TAU_MARGIN = 0.01  # 1 point: fixed before the runs (the table above)
display(Q_TAU_INF)


def at_factors(df):
    """One row per run and factor f: `tau/acc` (attention τ × f), `tau/loss`, `out/loss` (output τ × f)."""
    parts = []
    for f, acc in TAU_ACC.items():
        cols = {acc: "tau/acc", acc.replace("/tau_acc_", "/tau_loss_"): "tau/loss",
                acc.replace("/tau_acc_", "/out_tau_loss_"): "out/loss"}
        if not set(cols) <= set(df.columns):
            continue
        parts.append(df[["run_id", "seed", "status", *cols]].rename(columns=cols).assign(factor=f))
    return pd.concat(parts, ignore_index=True) if parts else None


tau_inf = at_factors(TAU_INF.df) if TAU_INF.ready else None
if tau_inf is not None:
    fig, axes = F.subplots(1, 2, figsize=(10.5, 3.6))
    sns.lineplot(tau_inf, x="factor", y="tau/acc", marker="o", errorbar=R.errorbar, ax=axes[0])
    axes[0].set(xscale="log", xlabel="attention τ at inference / trained τ", ylabel="validation accuracy",
                title="the attention's τ", ylim=(0, 1.02))
    turned = "τ turned at inference"
    long = tau_inf.melt(id_vars=["factor", "seed"], value_vars=["tau/loss", "out/loss"], var_name=turned,
                        value_name="loss")
    long[turned] = long[turned].map({"tau/loss": "attention's τ", "out/loss": "output's τ"})
    sns.lineplot(long, x="factor", y="loss", hue=turned, marker="o", errorbar=R.errorbar, ax=axes[1])
    axes[1].set(xscale="log", yscale="log", xlabel="τ at inference / trained τ", ylabel="validation loss",
                title="loss, by which τ is turned")
    for ax in axes:
        F.integer_ticks(ax, "x", TAU_FACTORS)
    F.legend(axes[1])
    F.stamp(fig, TAU_INF)
    fig_tau_inf = R.savefig(fig, "claims_tau_inference")
elif TAU_INF.ready:
    print("temperature_inference has no inference_temperature probes (run.expensive_probes was off)")
else:
    print(TAU_INF.missing)

# %% tags=["answer"]
if tau_inf is None:
    Q_TAU_INF.not_run_yet(TAU_INF)
else:
    one = {"factor": 1.0}
    checks = [TUTORIAL_TAU.same(
        R.compare(tau_inf, "tau/acc", {"factor": f}, one), f"attention τ × {f:g} at inference vs × 1, validation accuracy",
        margin=TAU_MARGIN, ceiling=False, primary=True,
        reason="a knob turned at inference must leave the trained model working; one step each way of the trained grid",
        what_zh=f"推理时注意力 τ × {f:g} 对 × 1，验证准确率", reason_zh="推理时调的旋钮必须让训练好的模型照常工作；训练网格上下各一步")
        for f in (0.3, 3.0)]
    checks += [TUTORIAL_TAU.same(
        R.compare(tau_inf, "tau/acc", {"factor": f}, one), f"attention τ × {f:g} at inference vs × 1, validation accuracy",
        margin=TAU_MARGIN, ceiling=False, primary=False, what_zh=f"推理时注意力 τ × {f:g} 对 × 1，验证准确率")
        for f in (0.1, 10.0)]
    out_loss = {f: R.compare(tau_inf, "out/loss", {"factor": f}, one) for f in (0.3, 3.0)}
    verdicts = [c.verdict for c in correct(checks)[0] if c.primary]
    acc = {f: R.estimate(tau_inf, "tau/acc", {"factor": f}) for f in TAU_FACTORS}
    drops = {f: R.compare(tau_inf, "tau/acc", {"factor": f}, one) for f in TAU_FACTORS if f != 1.0}
    Q_TAU_INF.answer(
        record=dict(all_agree=all(v == R.AGREES for v in verdicts), any_disagree=R.DISAGREES in verdicts,
                    margin=TAU_MARGIN, low=0.3, high=3.0, base=1.0, trained_tau=1.0, drop_low=drops[0.3],
                    drop_high=drops[3.0],
                    loss_low=out_loss[0.3], loss_high=out_loss[3.0],
                    by_factor=[{"factor": f, "acc": acc[f]} for f in TAU_FACTORS],
                    examples=2048),  # the probe's validation examples (ablate.probing.EXPENSIVE_EXAMPLES)
        details=lambda lang: [R.lr_phrase(TAU_INF.df, lang=lang) + R.full_stop(lang), R.caveat(TAU_INF.df, lang=lang)],
        checks=checks, figure=fig_tau_inf,
    )

# %% [markdown]
# ## 3 · The cost of attention in sequence length
# Slopes are fitted over the upper half of the lengths, where the n² terms dominate. The explicit path
# (scores, softmax, weights kept for backward) and the fused kernel (`scaled_dot_product_attention`)
# do the same n² arithmetic; the fused one does not keep the n × n weights.

# %%
VASWANI_T1 = R.Anchor(
    "Vaswani et al. 2017, Table 1",
    "a self-attention layer costs O(n² · d) operations in sequence length n (operations, not memory)",
    "自注意力层的运算量是序列长度 n 的 O(n² · d)（指运算量，而非内存）",
    wording="Complexity per Layer: O(n² · d)",
    tutorial=True,
)
Q_COST = R.question("claim-cost", anchors=[VASWANI_T1])
COST = R.sweep("attention_cost")
display(Q_COST)

# %%
if COST.ready:
    cost = COST.df
    PATHS = {"explicit": F.BLUE, "fused": F.ORANGE}
    fig, axes = F.subplots(1, 2, figsize=(12, 3.8))
    for ax, y, label in zip(axes, ("time_ms", "mem_mb"), ("forward+backward time (ms)", "memory (MB)")):
        sns.lineplot(cost, x="n", y=y, hue="path", hue_order=[p for p in PATHS if p in set(cost["path"])],
                     palette=PATHS, marker="o", ax=ax)
        for path, g in cost.groupby("path"):
            upper = g[g["n"] >= g["fit_from_n"].iloc[0]]
            slope = R.loglog_slope(upper["n"], upper[y])
            # rounded: LAPACK's last bits vary between runs, which must not move a pixel of the figure
            fit = np.exp(np.round(np.polyval(np.polyfit(np.log(upper["n"]), np.log(upper[y]), 1), np.log(upper["n"])), 9))
            ax.plot(upper["n"], fit, ls="--", lw=1, color="grey")
            ax.annotate(f"slope {slope:.2f}", (upper["n"].iloc[-1], upper[y].iloc[-1]), fontsize="small",
                        xytext=(-60, 6 if path == "explicit" else -14), textcoords="offset points")
        ns = np.array(sorted(cost["n"].unique()), dtype=float)
        anchor = cost.loc[(cost["path"] == "explicit") & (cost["n"] == ns[-1]), y]
        if len(anchor):
            F.reference_curve(ax, ns, float(anchor.iloc[0]) * (ns / ns[-1]) ** 2, "∝ n²", ls=":")
        ax.set(xscale="log", yscale="log", xlabel="sequence length n", ylabel=label)
        F.integer_ticks(ax, "x", ns)
        ax.tick_params(axis="x", labelrotation=45)
        F.legend(ax)
    axes[1].set_title(f"memory: {cost['mem_kind'].iloc[0].replace('_', ' ')}")
    first_row = cost.iloc[0]
    F.stamp(fig, extra=f"{first_row['device']}, {int(first_row['threads'])} threads, d_model {int(first_row['d_model'])}, "
                       f"{int(first_row['n_heads'])} heads")
    fig_cost = R.savefig(fig, "claims_attention_cost")
else:
    print(COST.missing)

# %% tags=["answer"]
if not COST.ready:
    Q_COST.not_run_yet(COST)
else:
    slopes = {p: {y: R.loglog_slope(g.loc[g["n"] >= g["fit_from_n"], "n"], g.loc[g["n"] >= g["fit_from_n"], y])
                  for y in ("time_ms", "mem_mb")} for p, g in cost.groupby("path")}
    first = cost.iloc[0]
    n_lo, n_hi, fit_from = int(cost["n"].min()), int(cost["n"].max()), int(first["fit_from_n"])
    ex = slopes.get("explicit", {})
    fused = slopes.get("fused", {})
    kind = first["mem_kind"].replace("_", " ")
    ex_time, ex_mem = ex.get("time_ms", np.nan), ex.get("mem_mb", np.nan)
    fu_time, fu_mem = fused.get("time_ms", np.nan), fused.get("mem_mb", np.nan)

    def mem_at(path):
        return float(cost.loc[(cost["path"] == path) & (cost["n"] == n_hi), "mem_mb"].iloc[0])

    explicit_rows = cost[cost["path"] == "explicit"]
    counted = "flops" in cost.columns and explicit_rows["flops"].notna().all()
    ex_flops = R.loglog_slope(explicit_rows.loc[explicit_rows["n"] >= fit_from, "n"],
                              explicit_rows.loc[explicit_rows["n"] >= fit_from, "flops"]) if counted else np.nan
    interval = "time_slope_lo" in cost.columns and explicit_rows["time_slope_lo"].notna().all()
    ex_lo, ex_hi = ((float(explicit_rows["time_slope_lo"].iloc[0]), float(explicit_rows["time_slope_hi"].iloc[0]))
                    if interval else (np.nan, np.nan))
    band = f" [{ex_lo:.2f}, {ex_hi:.2f}]" if interval else ""
    checks = [
        VASWANI_T1.judge(bool(abs(ex_flops - 2) <= FLOPS_SLOPE_TOLERANCE) if counted else None,
                         f"explicit path, forward+backward operations counted by torch's FlopCounterMode: slope "
                         f"{ex_flops:.2f} in n ≥ {fit_from} (quadratic: 2 ± {FLOPS_SLOPE_TOLERANCE:g})" if counted else
                         "no operation count in the table (a benchmark table written before issue 37)", primary=True,
                         reason="Table 1 counts operations, so they are counted (changed after the review read the "
                                "time band's outcome)",
                         evidence_zh=f"显式实现，用 `torch.utils.flop_counter.FlopCounterMode` 统计前向加反向的运算量：n ≥ {fit_from} 时斜率 "
                                     f"{ex_flops:.2f}（平方增长：2 ± {FLOPS_SLOPE_TOLERANCE:g}）" if counted else
                                     "表中没有运算量统计（第 37 号议题之前写出的基准测试表）",
                         reason_zh="Table 1 统计的是运算次数，所以这里直接统计运算次数（读过审阅者对时间区间的结论之后改定）"),
        VASWANI_T1.judge(bool(TIME_SLOPE[0] <= ex_lo and ex_hi <= TIME_SLOPE[1]) if interval
                         else bool(TIME_SLOPE[0] <= ex_time <= TIME_SLOPE[1]),
                         f"explicit path, forward+backward time slope {ex_time:.2f}{band} (n ≥ {fit_from}; quadratic: "
                         f"within {TIME_SLOPE[0]:g}–{TIME_SLOPE[1]:g})", primary=False,
                         reason="what the operations cost on this machine (the primary test until issue 37)",
                         evidence_zh=f"显式实现，前向加反向时间的斜率 {ex_time:.2f}{band}（n ≥ {fit_from}；平方增长："
                                     f"落在 {TIME_SLOPE[0]:g}–{TIME_SLOPE[1]:g} 之内）",
                         reason_zh="这些运算在这台机器上花的时间（第 37 号议题之前的主要检验）"),
        VASWANI_T1.judge(bool(abs(ex_mem - 2) <= MEMORY_SLOPE_TOLERANCE), f"explicit path, memory slope {ex_mem:.2f}",
                         primary=False, reason="the n × n weights kept for backward",
                         evidence_zh=f"显式实现，内存的斜率 {ex_mem:.2f}", reason_zh="为反向传播保存的 n × n 权重"),
    ]
    Q_COST.answer(
        record=dict(counted=counted, flops_slope=ex_flops if counted else None, time_slope=ex_time,
                    time_lo=ex_lo if interval else None, time_hi=ex_hi if interval else None,
                    fit_from=fit_from, n_lo=n_lo, n_hi=n_hi, memory_slope=ex_mem, fused_time_slope=fu_time,
                    fused_memory_slope=fu_mem, memory_explicit=mem_at("explicit"), memory_fused=mem_at("fused"),
                    keeps=mem_at("fused") < mem_at("explicit") / 2, memory_kind=kind, band=list(TIME_SLOPE),
                    device=str(first["device"]), threads=int(first["threads"]), d_model=int(first["d_model"]),
                    n_heads=int(first["n_heads"])),
        details="", checks=checks, figure=fig_cost)
