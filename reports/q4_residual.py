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
# Sweep `residual` (`sweeps/residual.yaml`): 1 … 16 layers with and without the skip connections
# around both sub-layers, two learning rates, MNIST rows. The probes measure at initialisation and
# after training the gradient norm reaching every layer (`grad_l<i>`, and `grad_ratio` = first /
# last layer) and how alike the token representations become after every layer (`cosine_l<i>`,
# the mean pairwise cosine between tokens, and `erank_l<i>`, the effective rank).

# %%
import matplotlib.pyplot as plt
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
    sweeps=["residual"],
)
S = R.sweep("residual")
display(Q)

# %%
if S.ready:
    best = R.at_best_lr(S.df)
    best["skips"] = best["model.residual"].map({True: "residual", False: "no residual"})
    depths = sorted(int(d) for d in best["model.n_layers"].unique())
    deep, shallow = depths[-1], depths[0]
    print(R.lr_phrase(S.df))
    display(best[["model.residual", "model.n_layers", "optim.lr", "seed", "status", "test/acc",
                  "probe/init/grad_ratio", "probe/final/grad_ratio"]])
else:
    print(S.missing)

# %% [markdown]
# ## The gradient highway
# Gradient norm reaching each layer at initialisation, in the deepest stacks (left), and the ratio
# first / last layer against depth (right). With skips, x + f(x) has Jacobian I + ∂f/∂x: the identity
# term carries the gradient past every layer.

# %%
if S.ready:
    grads = S.per_layer("probe/init/grad")
    grads = grads[grads["run_id"].isin(best["run_id"])]
    grads["skips"] = grads["model.residual"].map({True: "residual", False: "no residual"})
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    sns.lineplot(grads[grads["model.n_layers"] == deep], x="layer", y="probe/init/grad", hue="skips", marker="o",
                 errorbar=R.ci95_errorbar, ax=axes[0])
    axes[0].set(yscale="log", ylabel="gradient norm at initialisation", title=f"{deep} layers: gradient per layer")
    sns.lineplot(best, x="model.n_layers", y="probe/init/grad_ratio", hue="skips", marker="o",
                 errorbar=R.ci95_errorbar, ax=axes[1])
    axes[1].axhline(1.0, color="grey", lw=0.8)
    axes[1].set(xscale="log", yscale="log", xlabel="layers", ylabel="first / last layer gradient",
                title="gradient ratio at initialisation")
    axes[1].set_xticks(depths, [str(d) for d in depths])
    fig_grad = R.savefig(fig, "q4_gradients")

# %% [markdown]
# ## Token collapse
# Mean pairwise cosine between the token representations after each layer (1 = every token the
# same vector) and the effective rank, at initialisation.

# %%
if S.ready:
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, probe, label in zip(axes, ("probe/init/cosine", "probe/init/erank"), ("token cosine", "effective rank")):
        layers = S.per_layer(probe)
        layers = layers[layers["run_id"].isin(best["run_id"]) & (layers["model.n_layers"] == deep)]
        layers["skips"] = layers["model.residual"].map({True: "residual", False: "no residual"})
        sns.lineplot(layers, x="layer", y=probe, hue="skips", marker="o", errorbar=R.ci95_errorbar, ax=ax)
        ax.set(ylabel=label, title=f"{deep} layers at initialisation: {label} after each layer")
    R.savefig(fig, "q4_collapse")

# %% [markdown]
# ## What it costs

# %%
if S.ready:
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    sns.pointplot(best, x="model.n_layers", y="test/acc", hue="skips", errorbar=R.ci95_errorbar, dodge=0.2, ax=ax)
    ax.set(xlabel="layers", ylabel="test accuracy", title="each variant at its best learning rate")
    fig_acc = R.savefig(fig, "q4_accuracy")

# %% tags=["answer"]
if not S.ready:
    Q.not_run_yet(S)
else:
    last = {}
    for probe in ("probe/init/cosine", "probe/init/erank"):
        layers = S.per_layer(probe)
        layers = layers[layers["last"] & layers["run_id"].isin(best["run_id"])]
        last[probe] = best.merge(layers[["run_id", probe]].rename(columns={probe: probe + "_last"}), on="run_id")

    def at(residual, depth):
        return {"model.residual": residual, "model.n_layers": depth}

    cos = R.compare(last["probe/init/cosine"], "probe/init/cosine_last", at(False, deep), at(True, deep))
    rank = R.compare(last["probe/init/erank"], "probe/init/erank_last", at(False, deep), at(True, deep))
    ratio = R.compare(best, "probe/init/grad_ratio", at(True, deep), at(False, deep))
    acc_deep = R.compare(best, "test/acc", at(True, deep), at(False, deep))
    acc_shallow = R.compare(best, "test/acc", at(True, shallow), at(False, shallow))
    collapse = ("attention keeps averaging the tokens toward one vector" if cos.a.mean > cos.b.mean
                else "no collapse beyond the residual model's shows here")
    fades = ("so the early layers of a plain stack receive little of the signal" if ratio.b.mean < ratio.a.mean
             else "though here the plain stack's early layers are not starved")
    text = (
        f"Without residual connections, at {deep} layers the tokens' mean pairwise cosine after the last layer at "
        f"initialisation is {cos.a} against {cos.b} with skips (effective rank {rank.a} against {rank.b}): {collapse}. "
        f"The gradient reaching the first layer is {ratio.b} of the last layer's without skips and {ratio.a} with "
        f"them. x + f(x) has Jacobian I + ∂f/∂x: the identity term is a path (the gradient highway) that carries the "
        f"gradient past every layer whatever f does, which a plain stack lacks, {fades}. After training, "
        f"{R.lr_phrase(S.df)}, test accuracy at {deep} layers is {acc_deep.a} with skips against {acc_deep.b} without "
        f"({acc_deep}); at {shallow} layer{'s' if shallow != 1 else ''}: {acc_shallow.a} against {acc_shallow.b} "
        f"({acc_shallow}). " + S.still_learning(best) + " " + R.caveat(best)
    )
    checks = [
        DONG.expect_greater(cos, f"token cosine after the last of {deep} layers at initialisation, no skips vs skips"),
        HE.expect_greater(ratio, f"{deep} layers, first / last layer gradient at initialisation, skips vs none"),
        HE.expect_greater(acc_deep, f"{deep} layers, test accuracy, skips vs none"),
    ]
    Q.answer(text.strip(), checks, figure=fig_grad)
