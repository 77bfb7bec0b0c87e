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
# # Q1 · Word order and positional encoding
#
# **Primary comparison** (sweep `pos_enc`, `sweeps/pos_enc.yaml`): the copy task (8 tokens from a
# vocabulary of 10, tested at 16 tokens: length generalisation), positional encoding none / sinusoidal
# / learned / RoPE / ALiBi, bidirectional and causal, each variant at its own learning rate. **Why
# copy:** every blank looks the same, so a model blind to order can only guess each sequence's most
# frequent token — 30.0 % at 8 tokens, 23.6 % at 16. Every run records that **order-blind level**
# computed exactly on its own evaluation set (`ref/val/order_blind`, `ref/test/order_blind`) beside
# chance: a run at the order-blind level has learned everything but order; anything above it used
# order. A causal mask lets a model without positional encoding recover order (Haviv et al. 2022);
# ALiBi (Press et al. 2022) is built to extrapolate to longer inputs.
#
# **Secondary:** `pos_enc_reverse` (emit the tokens last to first; Adam's 1e-3, 3 seeds) and
# `pos_enc_rows` (MNIST rows in their order and in one fixed permuted order, each model also tested on
# permuted rows, `test/acc_perm`; Adam's 1e-3, 3 seeds).
#
# **Learning rates:** in the primary sweep 4 values spanning 33× are tried on seed 0 and each variant's
# best on validation (`val/acc_best`) is run on 5 seeds; the comparisons below use those runs.

# %%
import matplotlib.pyplot as plt
import seaborn as sns
from IPython.display import display

from ablate import report as R

R.setup()
BAG = R.Anchor(
    "Haviv et al. 2022; Kazemnejad et al. 2023",
    "a bidirectional encoder without positional encoding is a bag of tokens: it cannot tell orders apart",
)
CAUSAL = R.Anchor(
    "Haviv et al. 2022; Kazemnejad et al. 2023",
    "a causal model without positional encoding still learns position (the mask breaks the symmetry)",
)
TABLE_3E = R.Anchor("Vaswani et al. 2017, Table 3 (E)", "learned and sinusoidal positional encodings perform nearly identically")
ALIBI = R.Anchor("Press et al. 2022", "ALiBi extrapolates to inputs longer than those seen in training, sinusoidal positions do not")
Q = R.question(
    "q1",
    "Q1 · Word order and positional encoding",
    "Reorder \"the cat sat on the mat\" into \"the mat on the cat sat\": how does the attention matrix "
    "change, and what does positional encoding do here?",
    anchors=[BAG, CAUSAL, TABLE_3E, ALIBI],
    sweeps=["pos_enc", "pos_enc_reverse", "pos_enc_rows"],
)
S, REV, ROWS = R.sweep("pos_enc"), R.sweep("pos_enc_reverse"), R.sweep("pos_enc_rows")
PE_ORDER = ["none", "sinusoidal", "learned", "rope", "alibi"]
display(Q)


def label(df):
    """variant names: 'none, bidirectional', ..."""
    df = df.copy()
    df["mask"] = df["model.causal"].map({False: "bidirectional", True: "causal"})
    df["variant"] = df["model.pos_enc"] + ", " + df["mask"]
    return df


def summary(df, val="val/acc_best", test="test/acc"):
    """One row per variant: runs, mean accuracy at the training length and at the test length, the
    reference levels, and how many runs sit at the order-blind level."""
    df = df.assign(at_level=R.at_level(df, val))
    cols = {val: "mean", test: "mean", "ref/val/order_blind": "mean", "ref/test/order_blind": "mean",
            "at_level": "sum", "seed": "count"}
    cols = {k: v for k, v in cols.items() if k in df.columns}
    keys = ["model.pos_enc", "model.causal", *(["optim.lr"] if "optim.lr" in df else [])]
    out = df.groupby(keys, sort=False).agg(cols).rename(columns={"seed": "runs", "at_level": "runs at order-blind level"})
    return out.reindex(sorted(out.index, key=lambda k: (PE_ORDER.index(k[0]) if k[0] in PE_ORDER else 9, k[1:])))


# %%
if S.ready:
    best = label(R.at_best_lr(S.df))
    print(R.lr_phrase(S.df))
    display(summary(best))
else:
    print(S.missing)

# %% [markdown]
# ## Copy: accuracy per scheme against the reference levels
# Each variant at its chosen learning rate; bars: 95 % interval over seeds. Dashed: the order-blind
# level (the best a model blind to order can expect), dotted: chance, each computed on the evaluation
# set of that panel.


# %%
def copy_figure(df, name, title):
    long = df.melt(id_vars=["model.pos_enc", "mask", "seed"], value_vars=["val/acc_best", "test/acc"],
                   var_name="split", value_name="accuracy")
    long["split"] = long["split"].map({"val/acc_best": "val", "test/acc": "test"})
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8), sharey=True)
    train_len, test_len = int(df["data.length"].iloc[0]), int(df["data.test_length"].fillna(df["data.length"]).iloc[0])
    for ax, split, what in zip(axes, ("val", "test"), (f"{train_len} tokens (training length)", f"{test_len} tokens")):
        sns.barplot(long[long["split"] == split], x="model.pos_enc", y="accuracy", hue="mask", order=[
            p for p in PE_ORDER if p in set(df["model.pos_enc"])], errorbar=R.ci95_errorbar, ax=ax)
        for ref, style in (("order_blind", "--"), ("chance", ":")):
            column = f"ref/{split}/{ref}"
            if column in df:
                ax.axhline(float(df[column].mean()), color="black", ls=style, lw=1,
                           label="order-blind level" if ref == "order_blind" else "chance")
        ax.set(xlabel="positional encoding", ylabel="accuracy per token", title=f"{title}, {what}")
        if ax is axes[-1]:
            ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1))
        else:
            ax.get_legend().remove()
    return R.savefig(fig, name)


if S.ready:
    fig_copy = copy_figure(best, "q1_copy", "copy")
if REV.ready:
    rev = label(REV.df)
    copy_figure(rev, "q1_reverse", "reverse copy")
    display(summary(rev))

# %% [markdown]
# ## How the attention matrix changes when the input is reordered
# Layer 0, head 0 of trained copy models (seed 0 at the chosen learning rate) on one validation
# sequence: A(x) on the tokens in order, A(Px) on the same tokens permuted, and P·A(x)·Pᵀ, the
# original matrix with rows and columns moved to follow the tokens. Where A(Px) equals P·A(x)·Pᵀ,
# reordering the input only reorders the matrix: the model sees the same bag of tokens.


# %%
def permutation_maps(df, where):
    for run in R.rows(df, where).sort_values("seed")["run_id"]:
        a, ap = S.attention(run, "final/attention"), S.attention(run, "final/attention_perm")
        perm = S.arrays.get(f"{run}/perm")
        if a is not None and ap is not None and perm is not None:
            a, ap = a[0, 0], ap[0, 0]  # layer 0, head 0: (T, T)
            return a, ap, a[perm][:, perm]
    return None


if S.ready:
    grid = {}
    for pe, causal in [("none", False), ("learned", False), ("none", True)]:
        m = permutation_maps(best, {"model.pos_enc": pe, "model.causal": causal})
        if m is not None:
            grid[f"PE {pe}, {'causal' if causal else 'bidirectional'}"] = list(m)
    if grid:
        R.savefig(R.heatmap_grid(grid, ["A(x): in order", "A(Px): permuted", "P·A(x)·Pᵀ"]), "q1_attention")
    else:
        print("no permuted attention maps were exported (they need the runs' checkpoints and data)")

# %% [markdown]
# ## MNIST rows: trained in order or permuted, tested on permuted rows

# %%
if ROWS.ready:
    rows = ROWS.df.copy()
    long = rows.melt(id_vars=["model.pos_enc", "data.permute", "seed"], value_vars=["test/acc", "test/acc_perm"],
                     var_name="test rows", value_name="accuracy")
    long["test rows"] = long["test rows"].map({"test/acc": "as trained", "test/acc_perm": "permuted"})
    long["trained on"] = long["data.permute"].map(lambda p: "rows in order" if p == "none" else "permuted rows")
    grid = sns.catplot(long, x="model.pos_enc", y="accuracy", hue="test rows", col="trained on", kind="bar",
                       order=[p for p in PE_ORDER if p in set(rows["model.pos_enc"])], errorbar=R.ci95_errorbar,
                       height=3.5, aspect=1.3)
    grid.set_axis_labels("positional encoding", "MNIST test accuracy")
    R.savefig(grid.figure, "q1_mnist_permuted")
else:
    print(ROWS.missing)

# %% tags=["answer"]
if not S.ready:
    Q.not_run_yet(S)
else:
    def at(pe, causal):
        return {"model.pos_enc": pe, "model.causal": causal}

    def acc(df, pe, causal, metric="val/acc_best"):
        return R.estimate(df, metric, at(pe, causal))

    def level_text(df, split):
        blind, chance = R.level(df, split=split), float(df[f"ref/{split}/chance"].mean())
        return f"order-blind level {100 * blind:.1f} %, chance {100 * chance:.1f} %"

    pes = [p for p in PE_ORDER if p in set(best["model.pos_enc"])]
    val_level, test_level = R.level(best), R.level(best, split="test")
    train_len, test_len = int(best["data.length"].iloc[0]), int(best["data.test_length"].fillna(best["data.length"]).iloc[0])
    stuck = best.assign(at_level=R.at_level(best)).groupby("variant", sort=False)["at_level"].agg(["sum", "count"])
    parts = [
        f"Primary comparison, copy task at {train_len} tokens ({level_text(best, 'val')}), "
        f"{R.lr_phrase(S.df)} ({R.chosen_lrs(best, lambda r: r['variant'])}). Validation accuracy at the chosen "
        "learning rate: " + "; ".join(
            f"{pe}: {acc(best, pe, False)} bidirectional, {acc(best, pe, True)} causal" for pe in pes) + ".",
    ]
    at_level = [f"{v} ({int(s)} of {int(n)})" for v, (s, n) in stuck.iterrows() if s > 0]
    if at_level:
        parts.append("Runs at (or below) the order-blind level — a run at it learned everything about the copy "
                     "except order, which is what a model that cannot see order can do: " + ", ".join(at_level) + ".")
    else:
        parts.append("No run sits at or below the order-blind level.")
    if "probe/final/equiv_error" in best:
        eq = {v: R.estimate(best, "probe/final/equiv_error", at(*v)) for v in
              [("none", False), ("learned", False), ("none", True)]}
        parts.append("Reordering the input changes layer 0's attention matrix by max |A(Px) − P·A(x)·Pᵀ| = "
                     f"{eq['none', False]} without positional encoding or mask ("
                     + ("the matrix is only reordered: the model sees a bag of tokens" if eq["none", False].mean < 1e-4
                        else "the matrix itself changes") + f"), {eq['learned', False]} with learned positions and "
                     f"{eq['none', True]} with a causal mask and no positional encoding.")
    parts.append(f"Tested at {test_len} tokens ({test_len / train_len:g}× the training length; "
                 f"{level_text(best, 'test')}): " + "; ".join(
                     f"{pe} {acc(best, pe, False, 'test/acc')} / {acc(best, pe, True, 'test/acc')}" for pe in pes)
                 + " (bidirectional / causal).")
    above = [f"{pe}, {'causal' if c else 'bidirectional'}" for pe in pes for c in (False, True)
             if acc(best, pe, c, "test/acc").mean > test_level + R.LEVEL_MARGIN]
    parts.append(("Above the order-blind level at that length: " + ", ".join(above) + ".") if above else
                 "No variant is above the order-blind level at that length: none of the schemes carried the copy "
                 "to positions it was not trained on.")
    parts.append(R.convergence(best))

    none_bi, none_causal = acc(best, "none", False), acc(best, "none", True)
    learned_bi, sin_bi = acc(best, "learned", False), acc(best, "sinusoidal", False)
    checks = [
        BAG.expect_less(R.effect(none_bi, learned_bi), "copy, validation, no PE vs learned PE (bidirectional)",
                        level=val_level),
        CAUSAL.expect_greater(R.effect(none_causal, none_bi), "copy, validation, no PE: causal vs bidirectional",
                              level=val_level),
        TABLE_3E.expect_same(R.effect(learned_bi, sin_bi), "copy, validation, learned vs sinusoidal (bidirectional)",
                             level=val_level),
    ]
    if "alibi" in pes:  # Press et al. train causal language models; both masks are reported
        for causal in (True, False):
            checks.append(ALIBI.expect_greater(
                R.effect(acc(best, "alibi", causal, "test/acc"), acc(best, "sinusoidal", causal, "test/acc")),
                f"copy at {test_len} tokens, ALiBi vs sinusoidal ({'causal' if causal else 'bidirectional'})",
                level=test_level))

    if REV.ready:
        rpes = [p for p in PE_ORDER if p in set(rev["model.pos_enc"])]
        parts.append(f"Reverse copy ({R.lr_phrase(REV.df)}; {level_text(rev, 'val')}): " + "; ".join(
            f"{pe} {acc(rev, pe, False)} / {acc(rev, pe, True)}" for pe in rpes) + " (bidirectional / causal); "
            f"{int(R.at_level(rev).sum())} of {len(rev)} runs at the order-blind level. " + R.convergence(rev, "runs"))
    else:
        parts.append(f"Reverse copy: {REV.missing}.")
    if ROWS.ready:
        inorder = rows[rows["data.permute"] == "none"]
        rpes = [p for p in PE_ORDER if p in set(inorder["model.pos_enc"])]
        parts.append(f"MNIST rows ({R.lr_phrase(ROWS.df)}), trained on rows in order, test accuracy on rows in "
                     "order / permuted: " + "; ".join(
                         f"{pe} {R.estimate(inorder, 'test/acc', {'model.pos_enc': pe})} / "
                         f"{R.estimate(inorder, 'test/acc_perm', {'model.pos_enc': pe})}" for pe in rpes) + ".")
        permuted = rows[rows["data.permute"] != "none"]
        if not permuted.empty:
            parts.append("Trained and tested on permuted rows: " + "; ".join(
                f"{pe} {R.estimate(permuted, 'test/acc', {'model.pos_enc': pe})}" for pe in rpes) + ".")
        learned_sin = R.compare(inorder, "test/acc", {"model.pos_enc": "learned"}, {"model.pos_enc": "sinusoidal"})
        checks.append(TABLE_3E.expect_same(learned_sin, "MNIST rows in order, learned vs sinusoidal"))
        parts.append(R.convergence(rows, "MNIST runs"))
    else:
        parts.append(f"MNIST rows: {ROWS.missing}.")
    text = " ".join(parts) + " " + R.caveat(best)
    Q.answer(text.strip(), checks, figure=fig_copy)
