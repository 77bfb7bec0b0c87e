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
# **Primary comparison** (sweep `residual`, `sweeps/residual.yaml`): skip connections around both
# sub-layers on or off, at depth 1, 2, 4, 8, 16, on the **copy task** (it needs positions and two
# layers' worth of routing; a model blind to order sits at the order-blind level, 30 %), d_model 32,
# 2 heads, **Pre-LN**, each variant at its own learning rate. **Why Pre-LN:** with skips every depth is
# then trainable, and without them the stack is a plain deep network with a LayerNorm before each
# sub-layer; Post-LN adds a depth problem of its own (the norm sweep's question). Periodic probes
# record every layer's gradient norm, token cosine and effective rank every 50 steps during training
# (`residual_curves.csv`), not only at initialisation.
#
# **Secondary:** `residual_sgd` (depth 2 and 16 with plain SGD: whether gradients reach the first
# layers shows directly in what SGD learns, while Adam rescales each parameter's step) and
# `residual_norm` (depth 2, 8, 16 with Post-LN and without LayerNorm; Adam's 1e-3, 2 seeds).
#
# **Learning rates:** 4 values spanning 30× are tried on seed 0; each variant's best on validation
# (`val/acc_best`) is run on 5 seeds.

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from IPython.display import display

from ablate import report as R

R.setup()
DONG = R.Anchor(
    "Dong et al. 2021",
    "without skip connections, self-attention's token representations collapse to rank 1 as depth grows",
)
HE = R.Anchor(
    "He et al. 2016 (identity mappings)",
    "an identity skip passes the gradient to early layers undiminished; deep plain stacks train worse than residual ones",
)
Q = R.question(
    "q4",
    "Q4 · Residual connections and deep stacks",
    "With no residual connections, what concrete problem does a deep stack hit? Explain it with the \"gradient highway\".",
    anchors=[DONG, HE],
    sweeps=["residual", "residual_sgd", "residual_norm"],
)
S, SGD, NORM = R.sweep("residual"), R.sweep("residual_sgd"), R.sweep("residual_norm")
SKIPS = {True: "residual", False: "no residual"}
display(Q)


def training_ratio(sweep, df):
    """Per run, from the curves file (the periodic probes after step 0): `log10_ratio_training`, the mean
    over probes of log10(first layer's gradient norm / last layer's), a ratio that spans orders of
    magnitude between runs; `starved`, whether at most of those probes the first layer got under 1/100 of
    the last layer's gradient; and `grad_first_training`, the first layer's own gradient (geometric
    mean). NaN for one-layer runs."""
    curves = sweep.probe_curves()
    if curves is None:
        return df.assign(log10_ratio_training=np.nan, starved=np.nan, grad_first_training=np.nan)
    curves = curves[(curves["step"] > 0) & curves["run_id"].isin(df["run_id"])]
    last = curves.groupby("run_id")["layer"].transform("max")
    first = curves[curves["layer"] == 0].set_index(["run_id", "step"])["grad"]
    final = curves[(curves["layer"] == last) & (last > 0)].set_index(["run_id", "step"])["grad"]
    log_ratio = np.log10(first / final).replace([np.inf, -np.inf], np.nan).dropna()
    mean_log = log_ratio.groupby("run_id").mean()
    starved = (log_ratio < -2).groupby("run_id").mean() > 0.5
    first_mean = np.log(first[first > 0]).groupby("run_id").mean().map(np.exp)
    return df.assign(log10_ratio_training=df["run_id"].map(mean_log), starved=df["run_id"].map(starved),
                     grad_first_training=df["run_id"].map(first_mean))


def prepare(sweep):
    df = R.at_best_lr(sweep.df)
    df["skips"] = df["model.residual"].map(SKIPS)
    return training_ratio(sweep, df)


# %%
if S.ready:
    best = prepare(S)
    depths = sorted(int(d) for d in best["model.n_layers"].unique())
    deep, shallow = depths[-1], depths[0]
    print(R.lr_phrase(S.df))
    display(best.groupby(["model.residual", "model.n_layers", "optim.lr"])[
        ["val/acc_best", "test/acc", "probe/init/grad_ratio", "log10_ratio_training", "grad_first_training"]].mean())
else:
    print(S.missing)
if SGD.ready:
    sgd = prepare(SGD)
if NORM.ready:
    norm = NORM.df.copy()
    norm["skips"] = norm["model.residual"].map(SKIPS)

# %% [markdown]
# ## What it costs: accuracy against depth
# Each variant at its chosen learning rate (dashed: the order-blind level). Adam (primary), plain SGD,
# and Post-LN / no LayerNorm at Adam's 1e-3.

# %%
if S.ready:
    panels = [("Pre-LN, Adam", best)] + ([("Pre-LN, SGD", sgd)] if SGD.ready else [])
    if NORM.ready:
        panels += [("Post-LN, Adam 1e-3" if n == "post" else "no LayerNorm, Adam 1e-3", norm[norm["model.norm"] == n])
                   for n in ("post", "none")
                   if n in set(norm["model.norm"])]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False, sharey=True)
    for ax, (name, df) in zip(axes[0], panels):
        sns.pointplot(df, x="model.n_layers", y="val/acc_best", hue="skips", hue_order=list(SKIPS.values()),
                      errorbar=R.ci95_errorbar, dodge=0.2, ax=ax)
        ax.axhline(R.level(df), color="black", ls="--", lw=0.8)
        ax.set(xlabel="layers", ylabel="validation accuracy", title=name)
    fig_acc = R.savefig(fig, "q4_accuracy")

# %% [markdown]
# ## The gradient highway during training
# Gradient norm reaching the first and the last layer at every periodic probe, in the deepest stacks
# (one line per run, each at its variant's chosen learning rate). With skips, x + f(x) has Jacobian
# I + ∂f/∂x: the identity term carries the gradient past every layer.

# %%
if S.ready:
    curves = S.probe_curves()
    if curves is not None:
        curves = curves[curves["run_id"].isin(best["run_id"]) & (curves["model.n_layers"] == deep)]
        curves = curves[curves["layer"].isin([0, deep - 1])].copy()
        curves["skips"] = curves["model.residual"].map(SKIPS)
        curves["which"] = curves["layer"].map({0: "first layer", deep - 1: "last layer"})
        grid = sns.relplot(curves, x="step", y="grad", hue="which", col="skips", kind="line", units="run_id",
                           estimator=None, lw=0.8, height=3.4, aspect=1.3)
        grid.set(yscale="log")
        grid.set_axis_labels("optimiser step", "gradient norm")
        grid.figure.suptitle(f"{deep} layers, Pre-LN, Adam", y=1.03)
        fig_grad = R.savefig(grid.figure, "q4_gradients")
    else:
        fig_grad = None

# %% [markdown]
# ## Token collapse over depth
# Mean pairwise cosine between the token representations after each layer (1 = every token the same
# vector) and their effective rank, at initialisation and after training, in the deepest stacks.

# %%
if S.ready:
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, probe, label in zip(axes, ("cosine", "erank"), ("token cosine", "effective rank")):
        parts = []
        for point in ("init", "final"):
            layers = S.per_layer(f"probe/{point}/{probe}").rename(columns={f"probe/{point}/{probe}": probe})
            layers = layers[layers["run_id"].isin(best["run_id"]) & (layers["model.n_layers"] == deep)]
            parts.append(layers.assign(when=point))
        layers = pd.concat(parts, ignore_index=True)
        layers["skips"] = layers["model.residual"].map(SKIPS)
        sns.lineplot(layers, x="layer", y=probe, hue="skips", style="when", marker="o", errorbar=R.ci95_errorbar, ax=ax,
                     legend=ax is axes[-1])
        ax.set(ylabel=label, title=f"{deep} layers: {label} after each layer")
    sns.move_legend(axes[-1], "upper left", bbox_to_anchor=(1.02, 1))
    R.savefig(fig, "q4_collapse")

# %% tags=["answer"]
if not S.ready:
    Q.not_run_yet(S)
else:
    def at(residual, depth):
        return {"model.residual": residual, "model.n_layers": depth}

    def last_layer(df, probe):
        layers = S.per_layer(probe)
        layers = layers[layers["last"] & layers["run_id"].isin(df["run_id"])]
        return df.merge(layers[["run_id", probe]].rename(columns={probe: probe + "_last"}), on="run_id")

    def by_depth(df, name):
        return f"{name} ({R.lr_phrase(df)}; order-blind level {100 * R.level(df):.1f} %): " + "; ".join(
            f"{d} layer{'s' if d > 1 else ''} {R.estimate(df, 'val/acc_best', at(True, d))} with skips, "
            f"{R.estimate(df, 'val/acc_best', at(False, d))} without"
            for d in sorted(int(v) for v in df["model.n_layers"].unique())) + "."

    lvl = R.level(best)
    acc_deep = R.compare(best, "val/acc_best", at(True, deep), at(False, deep))
    ratio_init = R.compare(best, "probe/init/grad_ratio", at(True, deep), at(False, deep))
    ratio_train = R.compare(best, "log10_ratio_training", at(True, deep), at(False, deep))
    starved = {r: (int(R.rows(best, at(r, deep))["starved"].fillna(False).astype(bool).sum()), len(R.rows(best, at(r, deep))))
               for r in (True, False)}
    first_train = R.compare(best, "grad_first_training", at(True, deep), at(False, deep))
    cos_init = R.compare(last_layer(best, "probe/init/cosine"), "probe/init/cosine_last", at(False, deep), at(True, deep))
    cos_final = R.compare(last_layer(best, "probe/final/cosine"), "probe/final/cosine_last", at(False, deep), at(True, deep))
    rank_final = R.compare(last_layer(best, "probe/final/erank"), "probe/final/erank_last", at(False, deep), at(True, deep))
    stuck = best[R.at_level(best)]
    parts = [
        by_depth(best, "Primary comparison, copy, Pre-LN, Adam"),
        f"Runs at or below the order-blind level (they learned nothing about order): {len(stuck)} of {len(best)}"
        + (" — " + ", ".join(f"{s}, {int(d)} layer{'s' if d > 1 else ''}: {n}" for (s, d), n in
                             stuck.groupby(["skips", "model.n_layers"]).size().items()) if len(stuck) else "") + ".",
        f"At {deep} layers the first layer's gradient is {ratio_init.a} of the last layer's at initialisation with skips "
        f"and {ratio_init.b} without. During training the ratio spans orders of magnitude between runs, so its log10 "
        f"(mean over the periodic probes) is compared: {ratio_train.a} with skips, {ratio_train.b} without "
        f"({ratio_train}); the first layer got under 1/100 of the last layer's gradient at most probes in "
        f"{starved[False][0]} of {starved[False][1]} runs without skips and {starved[True][0]} of {starved[True][1]} "
        f"with them. The first layer's own gradient during training (geometric mean): {first_train.a} with skips, "
        f"{first_train.b} without ({first_train}).",
        f"Token cosine after the last of {deep} layers, without vs with skips: {cos_init.a} vs {cos_init.b} at "
        f"initialisation, {cos_final.a} vs {cos_final.b} after training (effective rank after training "
        f"{rank_final.a} vs {rank_final.b}).",
        R.convergence(best),
    ]
    checks = [
        DONG.expect_greater(cos_init, f"token cosine after the last of {deep} layers at initialisation, no skips vs skips"),
        HE.expect_greater(ratio_train, f"{deep} layers, log10 of first / last layer gradient during training, skips vs none"),
        HE.expect_greater(acc_deep, f"{deep} layers, validation accuracy, skips vs none", level=lvl),
    ]
    if SGD.ready:
        sgd_deep = int(sgd["model.n_layers"].max())
        sgd_acc = R.compare(sgd, "val/acc_best", at(True, sgd_deep), at(False, sgd_deep))
        checks.append(HE.expect_greater(sgd_acc, f"plain SGD, {sgd_deep} layers, validation accuracy, skips vs none",
                                        level=R.level(sgd)))
        sgd_ratio = R.compare(sgd, "log10_ratio_training", at(True, sgd_deep), at(False, sgd_deep))
        sgd_first = R.compare(sgd, "grad_first_training", at(True, sgd_deep), at(False, sgd_deep))
        checks.append(HE.expect_greater(sgd_ratio, f"plain SGD, {sgd_deep} layers, log10 of first / last layer gradient "
                                                   "during training, skips vs none"))
        parts += [by_depth(sgd, "Plain SGD"),
                  f"With SGD at {sgd_deep} layers, log10 of the first / last layer gradient during training: "
                  f"{sgd_ratio.a} with skips, {sgd_ratio.b} without ({sgd_ratio}); the first layer's own gradient "
                  f"{sgd_first.a} with skips, {sgd_first.b} without ({sgd_first}).",
                  R.convergence(sgd, "SGD runs")]
    else:
        parts.append(f"Plain SGD: {SGD.missing}.")
    if NORM.ready:
        for n in [n for n in ("post", "none") if n in set(norm["model.norm"])]:
            parts.append(by_depth(norm[norm["model.norm"] == n], "Post-LN" if n == "post" else "No LayerNorm"))
    else:
        parts.append(f"Post-LN and no LayerNorm: {NORM.missing}.")
    text = " ".join(parts) + " " + R.caveat(best)
    Q.answer(text.strip(), checks, figure=fig_acc)
