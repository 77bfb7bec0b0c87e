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
# **Primary comparison** (sweep `scaling`, `sweeps/scaling.yaml`): scores divided by √d_k or not, at
# d_k = 8, 64 and 512, on the **histogram task** (at each token, how many times it occurs in the
# sequence; Weiss et al. 2021), Adam, each variant at its own learning rate. **Why histogram:** its
# answer needs attention spread evenly over the matching tokens, which a saturated, one-hot softmax
# cannot give. **Why the unit-variance init** (`model.init=unit`): the tutorial reasons from q and k
# components of unit variance, so that unscaled scores have a standard deviation of √d_k (2.8 at 8,
# 22.6 at 512); PyTorch's default init does not realise that premise. One head of d_head = d_k at
# d_model 64, 2 layers, no positions (counting ignores order), no dropout, cosine decay.
#
# **Secondary:** `scaling_sgd`, the same at d_k 8 and 512 with plain SGD (no momentum): a step is the
# learning rate times the gradient itself, so a softmax whose gradient vanishes shows as no learning,
# which Adam's per-parameter normalisation would hide.
#
# **Learning rates:** 4 values spanning 30× (Adam) or 33× (SGD) are tried on seed 0; each variant's best
# on validation (`val/acc_best`) is run on 5 seeds. The probes measure the layer-0 scores (standard
# deviation, component variance of q and k), the softmax weights (one-hot fraction: rows whose largest
# weight exceeds 0.99) and the gradients, at initialisation, after training, and every 50 steps during
# training (`scaling_curves.csv`).

# %%
import math

import matplotlib.pyplot as plt
import seaborn as sns
from IPython.display import display

from ablate import report as R

R.setup()
VARIANCE = R.Anchor(
    "Vaswani et al. 2017, §3.2.1 (footnote 4)",
    "q·k of unit-variance components has variance d_k, so unscaled scores grow as √d_k",
)
SATURATION = R.Anchor(
    "Vaswani et al. 2017, §3.2.1",
    "large scores push the softmax into regions with extremely small gradients; scaling by 1/√d_k counteracts it",
)
TABLE_3B = R.Anchor("Vaswani et al. 2017, Table 3 (B)", "reducing the attention key size d_k hurts model quality")
Q = R.question(
    "q2",
    "Q2 · Scaling the scores by √d_k",
    "Without the √d_k scaling, at d_k = 512, how large can the dot-product scores get, what do the "
    "softmax weights turn into, and why does the model stop learning?",
    anchors=[VARIANCE, SATURATION, TABLE_3B],
    sweeps=["scaling", "scaling_sgd"],
)
S, SGD = R.sweep("scaling"), R.sweep("scaling_sgd")
SCALED = {True: "scores ÷ √d_k", False: "no scaling"}
display(Q)


def prepare(sweep):
    """Each variant at its chosen learning rate, with the gradient per unit of score: W_Q's gradient
    divided by the factor the scores are multiplied by (1/√d_k or 1), i.e. what the softmax passes back."""
    best = R.at_best_lr(sweep.df)
    best["scaling"] = best["model.qk_scale"].map(SCALED)
    best["score_scale"] = best["model.d_head"].astype(float).pow(-0.5).where(best["model.qk_scale"], 1.0)
    best["softmax_grad_wq_l0"] = best["probe/init/grad_wq_l0"] / best["score_scale"]
    best["sqrt_dk"] = best["model.d_head"].astype(float).pow(0.5)
    return best


# %%
if S.ready:
    best = prepare(S)
    dks = sorted(int(v) for v in best["model.d_head"].unique())
    dk_max, dk_min = dks[-1], dks[0]
    print(R.lr_phrase(S.df))
    display(best.groupby(["model.d_head", "scaling", "optim.lr"])[
        ["test/acc", "val/acc_best", "probe/init/logit_std_l0", "probe/init/q_var_l0", "probe/init/k_var_l0",
         "probe/init/onehot_frac_l0", "probe/final/onehot_frac_l0"]].mean())
else:
    print(S.missing)
if SGD.ready:
    sgd = prepare(SGD)

# %% [markdown]
# ## How large do the scores get at initialisation?
# Standard deviation of the layer-0 scores against d_k (dashed: √d_k, the premise), and the measured
# variance of the q and k components, which the premise takes to be 1.

# %%
if S.ready:
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    sns.lineplot(best, x="model.d_head", y="probe/init/logit_std_l0", hue="scaling", marker="o",
                 errorbar=R.ci95_errorbar, ax=axes[0])
    axes[0].plot(dks, [math.sqrt(d) for d in dks], ls="--", color="grey", lw=1, label="√d_k")
    axes[0].legend(fontsize="small")
    axes[0].set(xscale="log", yscale="log", xlabel="d_k", ylabel="std of the scores", title="layer-0 scores at initialisation")
    var = best.melt(id_vars=["model.d_head"], value_vars=["probe/init/q_var_l0", "probe/init/k_var_l0"],
                    var_name="of", value_name="component variance")
    var["of"] = var["of"].map({"probe/init/q_var_l0": "q", "probe/init/k_var_l0": "k"})
    sns.lineplot(var, x="model.d_head", y="component variance", hue="of", marker="o", errorbar=R.ci95_errorbar, ax=axes[1])
    axes[1].axhline(1.0, color="grey", lw=0.8, ls="--")
    axes[1].set(xscale="log", xlabel="d_k", title="layer-0 q and k component variance at initialisation")
    for ax in axes:
        ax.set_xticks(dks, [str(d) for d in dks])
    fig_scores = R.savefig(fig, "q2_scores")

# %% [markdown]
# ## What do the softmax weights turn into, at initialisation and during training?
# Fraction of layer-0 attention rows that are one-hot (largest weight > 0.99) and the score standard
# deviation over training, at the largest d_k (each variant at its chosen learning rate, mean over seeds).

# %%
if S.ready:
    curves = S.probe_curves()
    if curves is not None:
        curves = curves[curves["run_id"].isin(best["run_id"]) & (curves["layer"] == 0)]
        curves["scaling"] = curves["model.qk_scale"].map(SCALED)
        curves["d_k"] = curves["model.d_head"].astype(int)
        fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
        for ax, y, what in zip(axes, ("onehot_frac", "logit_std"), ("one-hot rows", "std of the scores")):
            sns.lineplot(curves, x="step", y=y, hue="scaling", style="d_k", errorbar=None, ax=ax, legend=ax is axes[-1])
            ax.set(ylabel=what, title=f"layer 0 during training: {what}")
        axes[1].set_yscale("log")
        sns.move_legend(axes[-1], "upper left", bbox_to_anchor=(1.02, 1))
        R.savefig(fig, "q2_during_training")
    maps = []
    for point in ("init", "final"):
        for scaled in (True, False):
            m = S.attention({"model.d_head": dk_max, "model.qk_scale": scaled}, f"{point}/attention")
            if m is not None:
                maps.append((f"{point}, {'÷√d_k' if scaled else 'no scaling'}", m[0, 0]))
    if maps:
        fig = R.heatmaps(maps)
        fig.suptitle(f"layer-0 attention, d_k = {dk_max}, first probe example", y=1.02)
        R.savefig(fig, "q2_attention")

# %% [markdown]
# ## Does the model learn? Adam and SGD
# Test accuracy per d_k with and without scaling, each variant at its chosen learning rate (dotted:
# chance, the most frequent count).

# %%
if S.ready:
    both = [("Adam", best)] + ([("SGD", sgd)] if SGD.ready else [])
    fig, axes = plt.subplots(1, len(both), figsize=(6 * len(both), 3.8), squeeze=False)
    for ax, (name, df) in zip(axes[0], both):
        sns.pointplot(df, x="model.d_head", y="test/acc", hue="scaling", hue_order=list(SCALED.values()),
                      errorbar=R.ci95_errorbar, dodge=0.2, ax=ax)
        ax.axhline(float(df["ref/test/chance"].mean()), color="black", ls=":", lw=1)
        ax.set(xlabel="d_k", ylabel="test accuracy", title=f"histogram task, {name}")
    fig_acc = R.savefig(fig, "q2_accuracy")

# %% tags=["answer"]
if not S.ready:
    Q.not_run_yet(S)
else:
    un, sc = {"model.d_head": dk_max, "model.qk_scale": False}, {"model.d_head": dk_max, "model.qk_scale": True}

    def est(probe, where, df=best):
        return R.estimate(df, probe, where)

    slope_un = R.slope_estimate(best, "model.d_head", "probe/init/logit_std_l0", {"model.qk_scale": False})
    slope_sc = R.slope_estimate(best, "model.d_head", "probe/init/logit_std_l0", {"model.qk_scale": True})
    stds = "; ".join(f"d_k = {d}: {est('probe/init/logit_std_l0', {'model.d_head': d, 'model.qk_scale': False})} "
                     f"(√d_k = {math.sqrt(d):.1f})" for d in dks)
    qv, kv = est("probe/init/q_var_l0", {}), est("probe/init/k_var_l0", {})
    onehot = "; ".join(f"d_k = {d}: {est('probe/init/onehot_frac_l0', {'model.d_head': d, 'model.qk_scale': False})} "
                       f"unscaled, {est('probe/init/onehot_frac_l0', {'model.d_head': d, 'model.qk_scale': True})} "
                       "scaled" for d in dks)
    onehot_final = "; ".join(
        f"d_k = {d}: {est('probe/final/onehot_frac_l0', {'model.d_head': d, 'model.qk_scale': False})} / "
        f"{est('probe/final/onehot_frac_l0', {'model.d_head': d, 'model.qk_scale': True})}" for d in dks)
    soft = R.compare(best, "softmax_grad_wq_l0", un, sc)
    chance = R.level(best, split="test")

    def accuracy(df, name):
        out = []
        for d in sorted(int(v) for v in df["model.d_head"].unique()):
            e = R.compare(df, "test/acc", {"model.d_head": d, "model.qk_scale": True},
                          {"model.d_head": d, "model.qk_scale": False})
            out.append(f"d_k = {d}: {e.a} scaled, {e.b} unscaled ({e})")
        return f"{name} ({R.lr_phrase(df)}): " + "; ".join(out) + "."

    def at_chance(df):
        stuck = df[R.at_level(df)]
        if stuck.empty:
            return "No run stayed at chance."
        return ("Runs that stayed within 1 point of chance on validation, i.e. learned nothing: " + ", ".join(
            f"d_k = {int(d)} {SCALED[bool(q)]} {n} of {len(R.rows(df, {'model.d_head': d, 'model.qk_scale': q}))}"
            for (d, q), n in stuck.groupby(["model.d_head", "model.qk_scale"]).size().items()) + ".")

    ok = None if not slope_un.n else abs(slope_un.mean - 0.5) <= 0.05 or (
        False if slope_un.n > 1 and abs(slope_un.mean - 0.5) > slope_un.ci95 else None)
    checks = [VARIANCE.judge(ok, f"slope of log score std against log d_k at initialisation, unscaled: {slope_un} "
                                 f"(√d_k: 0.50; scaled {slope_sc})")]
    checks.append(SATURATION.expect_less(soft, f"d_k = {dk_max}, gradient to W_Q per unit of score at initialisation, "
                                               "unscaled vs scaled"))
    adam_acc = R.compare(best, "test/acc", sc, un)
    checks.append(SATURATION.expect_greater(adam_acc, f"Adam, test accuracy at d_k = {dk_max}, scaled vs unscaled",
                                            level=chance))
    parts = [
        f"With the unit-variance init the layer-0 q and k components have variance {qv} and {kv}, and the unscaled "
        f"scores' standard deviation at initialisation is {stds}: it grows as d_k^{slope_un} (scaled: d_k^{slope_sc}).",
        f"Rows of the layer-0 softmax that are one-hot at initialisation: {onehot}; after training (unscaled / "
        f"scaled): {onehot_final}. Training moves the scores too: after it, the layer-0 score standard deviation "
        f"at d_k = {dk_max} is {est('probe/final/logit_std_l0', un)} unscaled and {est('probe/final/logit_std_l0', sc)} "
        "scaled.",
        f"Per unit of score the unscaled softmax at d_k = {dk_max} passes back {R.number(soft.a.mean / soft.b.mean)}× "
        f"the gradient of the scaled one ({soft}).",
        f"Test accuracy (chance {100 * chance:.1f} %: always the most frequent count) — " + accuracy(best, "Adam"),
        at_chance(best),
        R.convergence(best),
    ]
    if SGD.ready:
        sgd_acc = R.compare(sgd, "test/acc", {"model.d_head": int(sgd["model.d_head"].max()), "model.qk_scale": True},
                            {"model.d_head": int(sgd["model.d_head"].max()), "model.qk_scale": False})
        checks.append(SATURATION.expect_greater(sgd_acc, f"SGD, test accuracy at d_k = {int(sgd['model.d_head'].max())}, "
                                                "scaled vs unscaled", level=R.level(sgd, split="test")))
        parts += [accuracy(sgd, "Plain SGD"), at_chance(sgd), R.convergence(sgd, "SGD runs")]
    else:
        parts.append(f"Plain SGD: {SGD.missing}.")
    if len(dks) > 1:
        small = R.compare(best, "test/acc", {"model.d_head": dks[1], "model.qk_scale": True},
                          {"model.d_head": dk_min, "model.qk_scale": True})
        checks.append(TABLE_3B.expect_greater(small, f"Adam, scaled, test accuracy at d_k = {dks[1]} vs {dk_min}",
                                              level=chance))
    text = " ".join(parts) + " " + R.caveat(best)
    Q.answer(text.strip(), checks, figure=fig_scores)
