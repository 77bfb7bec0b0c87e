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
# **The question (the tutorial's):** reorder 猫坐在垫子上 ("the cat sits on the mat") into 垫子在猫坐上: how
# does the attention matrix change, and what does positional encoding do here?
#
# **Experiments.** Sweeps `pos_enc` (bidirectional) and `pos_enc_causal` (the same grid with a causal
# mask): the copy task (8 tokens from a vocabulary of 10, tested at 16 tokens), positional encoding
# none / sinusoidal / learned / RoPE / ALiBi, each variant at its own learning rate (4 values tried on
# seed 0, the best on validation run on 5 seeds). **Why copy:** every blank looks the same, so a model
# blind to order can only guess each sequence's most frequent token. Every run records that
# **order-blind level**, computed exactly on its own evaluation set (`ref/val/order_blind`, 30 % at 8
# tokens), beside chance: a run at it learned everything but order; a run above it used order.
# Secondary: `pos_enc_reverse` (emit the tokens last to first) and `pos_enc_rows` (MNIST rows in order or
# in one fixed permuted order; each model also tested on permuted rows), Adam's 1e-3, 3 seeds.
#
# ## Primary tests, decided before reading the outcome
#
# *Provenance, said plainly:* these tests and margins were written when the answers were rebuilt for
# issue 14, after an earlier build of these findings had been read. Each reason below rests on the paper
# or on the task's design, not on an outcome, and none was changed to reach a verdict; a deviation made
# after reading an outcome is marked as such where there is one.
#
# | anchor | primary test (sweep · variants · metric · split) | why this is the right experiment |
# | --- | --- | --- |
# | bag of tokens (Haviv et al. 2022) | `pos_enc` · no PE vs learned PE, both bidirectional · copy accuracy · validation, 8 tokens | the two differ only in the position signal; learned PE is BERT's and the tutorial's own scheme. One comparator, not every PE: the claim is about the absence of positions, and four comparisons of the same arm would only multiply tests |
# | causal mask (Haviv et al. 2022) | `pos_enc_causal` + `pos_enc` · no PE causal vs no PE bidirectional · copy accuracy · validation | the claim is that the mask alone breaks the symmetry: the same model without PE, with and without the mask |
# | Table 3 (E) learned ≈ sinusoidal (Vaswani et al. 2017) | `pos_enc_rows` · learned vs sinusoidal, rows in order · MNIST test accuracy · test; **margin ±2 points** | a claim of sameness needs a task where both learn and neither is pinned at a ceiling: on copy every working scheme scores 100 % at the training length, so sameness there is guaranteed by the ceiling and says nothing. MNIST rows leave room on both sides. Margin: Vaswani call 25.7 vs 25.8 BLEU "nearly identical" and treat 0.5–0.7 BLEU (2–3 % relative) as real effects in the same table; 2 points at ~90 % accuracy is that size. **Limitation:** `pos_enc_rows` runs every scheme at one untuned learning rate (Adam 1e-3) on 3 seeds, and at the quick budget its models are still learning: a verdict here is about models early in training, at a rate neither scheme was tuned for |
# | ALiBi extrapolates (Press et al. 2022) | `pos_enc_causal` · ALiBi vs sinusoidal, causal · copy accuracy · test, 16 tokens (2× the training length) | Press et al. train causal language models and test on longer inputs; sinusoidal is their baseline. The bidirectional arm is supporting. **Deviation, added after reading the outcome:** the test presumes that the favoured model (ALiBi) learned the task at the training length, since extrapolating means keeping at a longer length what was learned at the training one. When causal ALiBi does not solve copy at 8 tokens (≥ 99 % validation accuracy), the primary test is declared not testable, and ALiBi vs sinusoidal at 2× stays as supporting evidence |
#
# Reverse copy, MNIST rows (permuted test rows), the fraction of runs above the order-blind level and the
# attention matrices are supporting evidence: they are shown, and they do not move a verdict.
#
# ## Extrapolation, decided before the runs of `pos_enc_extrapolate` (issue 24)
#
# Written and committed before any run of sweeps `pos_enc_extrapolate` (causal) and
# `pos_enc_extrapolate_bi` (bidirectional); the git history shows the order. **Why a new task:** copying 8
# tokens after a separator needs attention at offset 9, copying 16 at offset 17, an offset never seen in
# training: a different function, not a longer context, so no relative scheme can extrapolate it and the
# copy test above could not decide ALiBi's claim. The one-lookup task (`lookup1`: y_i = t_{i−2}) asks the
# same rule at every position and every length. Trained at 8 tokens, tested at 64 (8×). **The model:**
# 2 layers, d_model 64, 8 heads of 8, FFN 2×, no dropout, each scheme at its own learning rate (4 values on
# seed 0, 5 after the deviation below; the best on `val/acc_mean` run on 5 seeds). It was chosen by pilot runs of causal ALiBi alone (seed
# 0, quick; design data, not results): one attention-only layer cannot single out offset 2 with a monotone
# recency bias (39 % at 8 tokens), 2 layers and 4 heads with dropout 0.1 reached 81 %, without dropout
# 97.9 %, with 8 heads 99.8 %. So every scheme can plausibly learn the task at the training length; one that
# does not (validation below 99 %) makes its extrapolation claim not testable, and that is reported as the
# finding. Bidirectional ALiBi sees only |i − j| and cannot tell t_{i−2} from t_{i+2}: its premise fails by
# construction, and it is run to show it. **Deviation, after reading the outcome:** causal sinusoidal and
# ALiBi chose 0.01, the top of the 4-value grid, which may not have reached their best rate; 0.03 was added
# to both sweeps' grids and both were run again whole, at one commit. The tests below are unchanged.
# **Deviation, after reading the outcome (issue 37):** a review found the premise read at the rate chosen on
# `val/acc_mean` — causal ALiBi at 0.01 reached 98.8 % at 8 tokens, not solved — while at 0.003 and 0.001
# the same model solves 8 tokens (99.8 %, 99.3 % on seed 0). The tests presume a model that learned the task,
# so the rate is now chosen only among the rates that solved it on seed 0 (`tune optim.lr on seeds 0 where
# val/acc_best >= 0.99`; every rate competes where none did), for every scheme alike, and both sweeps were
# run again whole at one commit. The comparisons, metric and premise below are unchanged.
#
# | anchor | primary test (sweep · variants · metric · split) | why this is the right experiment |
# | --- | --- | --- |
# | ALiBi extrapolates (Press et al. 2022) — **replaces the copy test above, which becomes supporting** | `pos_enc_extrapolate` · causal ALiBi vs causal sinusoidal · lookup1 accuracy · test, 64 tokens, paired by seed (one test set) · greater; not testable unless causal ALiBi solved the task at 8 tokens (validation ≥ 99 %) | Press et al.'s setting (causal, trained short, tested long) on a task whose function does not change with length; sinusoidal is their baseline |
# | sinusoidal "may allow the model to extrapolate" (Vaswani et al. 2017, §3.5) | `pos_enc_extrapolate` · causal sinusoidal vs causal learned · lookup1 accuracy · test, 64 tokens, paired by seed · greater; not testable unless sinusoidal solved the task at 8 tokens | the reason Vaswani give for choosing sinusoidal over learned positions: a learned table has no trained entry past position 8 |
#
# Supporting: RoPE and no PE against sinusoidal at 64 tokens (causal), every scheme's accuracy at 8 and at 64
# tokens, the bidirectional arm (`pos_enc_extrapolate_bi`) with the same comparisons.
#
# ## Table 3 (E) at convergence, decided before the runs of `pos_enc_3e` (issue 24)
#
# Written and committed before any run of sweeps `pos_enc_3e` and `pos_enc_3e_bert`; the git history shows
# the order. **A test changed after its outcome was read**, and why: the `pos_enc_rows` test above (±2
# points, quick budget) was read in earlier builds; it judged models still learning (376 optimiser steps,
# about 88 %) at one untuned rate on 3 seeds, which cannot decide a claim about trained models. It stays,
# as supporting evidence. **The runs:** MNIST rows in order, 12,000 training images for 6 epochs with a
# cosine decay (1,128 steps; one pilot of sinusoidal on seed 0 sized it: ablate/budgets.py), each scheme at
# its own learning rate (4 values on seed 0, the best on `val/acc_best` run on 10 seeds), tested on all
# 10,000 test images. The tutorial's learned table starts N(0, 1) (its `torch.randn`); BERT's N(0, 0.02²) is a
# supporting arm. **The margin, ±0.5 points:** at convergence (about 97 %) what is left to differ is the
# error rate, about 3 %; half a point is a sixth of it, an improvement an MNIST paper would report as one.
# The old ±2 points would call any two working schemes the same. Paired by seed: both arms are scored on the
# same 10,000 test images, with the same seed's data order. Whether the runs converged (their last epoch's
# validation gain) is reported beside the verdict.
#
# | anchor | primary test (sweep · variants · metric · split) | why this is the right experiment |
# | --- | --- | --- |
# | Table 3 (E) learned ≈ sinusoidal (Vaswani et al. 2017) — **replaces the `pos_enc_rows` test, which becomes supporting** | `pos_enc_3e` · learned (N(0, 1)) vs sinusoidal, rows in order · MNIST test accuracy · test (10,000 images), paired by seed · same within **±0.5 points** (TOST) | Vaswani et al. compare trained models; here both are trained until they stop learning, each at its own best rate, on 10 seeds, on a task with room above and below |
#
# Supporting: learned N(0, 0.02²) (`pos_enc_3e_bert`) against sinusoidal within the same margin, and against
# learned N(0, 1); each arm's accuracy and chosen rate.

# %%
import numpy as np
import pandas as pd
import seaborn as sns
from IPython.display import display

from ablate import report as R
from ablate.report.figures import (
    LABELS,
    heatmap_grid,
    label,
    learning_curves,
    legend,
    order,
    palette,
    reference_lines,
    stamp,
    subplots,
)

R.setup()

# ---- the primary tests (fixed before the data are read) ----
COPY_METRIC = "val/acc_best"  # copy at the training length: validation, best epoch
LONG_METRIC = "test/acc"  # copy at 2x the training length: the test split
ROWS_METRIC = "test/acc"  # MNIST rows: test accuracy
NO_PE_BI = {"model.pos_enc": "none", "model.causal": False}
LEARNED_BI = {"model.pos_enc": "learned", "model.causal": False}
SIN_BI = {"model.pos_enc": "sinusoidal", "model.causal": False}
NO_PE_CAUSAL = {"model.pos_enc": "none", "model.causal": True}
ALIBI_CAUSAL, SIN_CAUSAL = {"model.pos_enc": "alibi", "model.causal": True}, {"model.pos_enc": "sinusoidal", "model.causal": True}
ROWS_LEARNED = {"model.pos_enc": "learned", "data.permute": "none"}
ROWS_SIN = {"model.pos_enc": "sinusoidal", "data.permute": "none"}
MARGIN_3E = 0.02  # ±2 points of accuracy: "nearly identical" for Table 3 (E) (see the table above)
# Deviation from the declared ALiBi test, added after reading the outcome (see the table above): the favoured
# model must have solved copy at the training length (validation, ≥ SOLVED) before its accuracy at 2× can show
# extrapolation; otherwise the primary test is not testable.
EXTRAPOLATION_PREMISE = R.SOLVED
# Extrapolation (issue 24; fixed before the runs of pos_enc_extrapolate): lookup1 trained at 8, tested at 64 tokens
EXT_METRIC = "test/acc"  # lookup1 at data.test_length = 64 tokens
EXT_TRAIN = "val/acc_best"  # at the training length: the premise (solved: >= R.SOLVED)
EXT_LEARNED = {"model.pos_enc": "learned"}
EXT_SIN, EXT_ALIBI = {"model.pos_enc": "sinusoidal"}, {"model.pos_enc": "alibi"}
# Table 3 (E) at convergence (issue 24; fixed before the runs of pos_enc_3e): MNIST rows to convergence, 10 seeds
THREE_E_METRIC = "test/acc"  # all 10,000 test images
MARGIN_3E_CONVERGED = 0.005  # ±0.5 points (see the table above)
THREE_E_LEARNED = {"model.pos_enc": "learned", "model.learned_std": 1.0}  # the tutorial's torch.randn
THREE_E_BERT = {"model.pos_enc": "learned", "model.learned_std": 0.02}
THREE_E_SIN = {"model.pos_enc": "sinusoidal"}
EQUIVARIANT = 1e-4  # max |A(Px) - P·A(x)·Pᵀ| below this: reordering the input only reorders the matrix (float32)
REASON = {
    "bag": "no PE vs learned PE, bidirectional, copy at the training length: the pair differs only in the position "
           "signal, and copy above its order-blind level needs order",
    "causal": "the same model without PE with and without the causal mask: the claim is that the mask alone breaks "
              "the symmetry",
    "3e": "MNIST rows leave room above and below both schemes (copy pins every working scheme at 100 %, where "
          "sameness is guaranteed by the ceiling); margin ±2 points fixed before reading the data. Limitation: one "
          "untuned learning rate (Adam 1e-3), 3 seeds, models still learning at this budget",
    "3e_converged": "Vaswani et al. compare trained models: both trained to convergence (MNIST rows, 1,128 steps, "
                    "cosine decay), each at its best rate, 10 seeds, paired by seed on all 10,000 test images; margin "
                    "±0.5 points (written before the runs; it replaces the quick-budget test, whose models still learned)",
    "extrapolate": "Press et al.'s setting (causal, trained at 8 tokens, tested at 64) on lookup1, whose rule is the "
                   "same at every length; paired by seed on one test set; not testable unless the favoured scheme "
                   "solved the task at the training length (written before the runs)",
    "sin_extrapolate": "the reason Vaswani give for sinusoidal over learned positions, on lookup1 trained at 8 and "
                       "tested at 64 tokens (causal), paired by seed; not testable unless sinusoidal solved the task at "
                       "the training length (written before the runs)",
    "alibi": "Press et al. train causal models and test on longer inputs: causal ALiBi vs causal sinusoidal at 2× "
             "the training length. Deviation, added after reading the outcome: the test presumes that ALiBi solved the "
             "task at the training length (≥ 99 %), or there is nothing to extrapolate",
}
REASON_ZH = {
    "bag": "无位置编码对可学习位置编码，都是双向模型，在训练长度上做复制任务：两者只差位置信号，而复制准确率超过"
           "词袋基线就必须用到词序",
    "causal": "同一个无位置编码的模型，加与不加因果掩码：论断说的正是仅靠掩码就能打破对称性",
    "3e": "MNIST 按行输入时，两种编码的准确率上下都有余地（复制任务把每种可用的编码都钉在 100%，那里的「相同」"
          "是天花板造成的）；±2 个百分点的等价界限在读取数据之前就已确定。局限：只用一个未调过的学习率（Adam 1e-3）、"
          "3 个种子，而且在这个预算下模型仍在学习",
    "3e_converged": "Vaswani 等人比较的是训练好的模型：两种编码都训练到不再提升（MNIST 按行输入，1,128 步，余弦衰减），"
                    "各自用最佳学习率，10 个种子，在全部 10,000 张测试图像上按种子配对；±0.5 个百分点的等价界限在运行之前"
                    "写定（它取代了快速预算下的检验，那里的模型仍在学习）",
    "extrapolate": "Press 等人的设定（因果模型，在 8 个词元上训练，在 64 个词元上测试），用在单查找任务上——它的规则在任何长度"
                   "下都相同；同一测试集上按种子配对；若被看好的编码在训练长度上没有解决任务，则无法在此检验（在运行之前写定）",
    "sin_extrapolate": "Vaswani 等人选正弦而不选可学习位置编码的理由：单查找任务在 8 个词元上训练、在 64 个词元上测试（因果），"
                       "按种子配对；若正弦编码在训练长度上没有解决任务，则无法在此检验（在运行之前写定）",
    "alibi": "Press 等人训练因果模型，再在更长的输入上测试：在 2 倍训练长度上比较因果 ALiBi 与因果正弦位置编码。"
             "读取结果之后加上的偏离：这个检验的前提是 ALiBi 在训练长度上解决了任务（≥ 99%），否则没有东西可以外推",
}


BAG = R.Anchor(
    "Haviv et al. 2022; Kazemnejad et al. 2023",
    "a bidirectional encoder without positional encoding is a bag of tokens: it cannot tell orders apart "
    "(Haviv et al. find that masked, bidirectional language models without positional encoding fail, causal ones not)",
    "没有位置编码的双向编码器只看到词袋：它分不出词序（Haviv 等人发现没有位置编码的掩码（双向）语言模型会失败，因果模型不会）",
    tutorial=True,
)
CAUSAL = R.Anchor(
    "Haviv et al. 2022; Kazemnejad et al. 2023",
    "a causal model without positional encoding still learns position (the mask breaks the symmetry)",
    "带因果掩码、没有位置编码的模型仍能学到位置（掩码打破了对称性）",
)
TABLE_3E = R.Anchor(
    "Vaswani et al. 2017, Table 3 (E)",
    "learned and sinusoidal positional encodings perform nearly identically",
    "可学习的位置编码和正弦位置编码效果几乎相同",
    wording="\"We also experimented with using learned positional embeddings instead, and found that the two "
            "versions produced nearly identical results\" (§3.5; BLEU 25.7 vs 25.8 on newstest2013)",
)
ALIBI = R.Anchor(
    "Press et al. 2022",
    "ALiBi extrapolates to inputs longer than those seen in training, sinusoidal positions do not (shown on "
    "causal language models, by perplexity on inputs longer than the training length; here, a copy task at twice "
    "the training length)",
    "ALiBi 能外推到比训练时更长的输入，正弦位置编码不能（论文在因果语言模型上以超过训练长度的输入的困惑度证明；"
    "这里用 2 倍训练长度的复制任务）",
)
SIN_EXTRAPOLATES = R.Anchor(
    "Vaswani et al. 2017, §3.5",
    "sinusoidal positions may let a model extrapolate to sequences longer than those seen in training, learned "
    "ones not",
    "正弦位置编码可能让模型外推到比训练时更长的序列，可学习的位置编码不能",
    wording="\"We chose the sinusoidal version because it may allow the model to extrapolate to sequence lengths "
            "longer than the ones encountered during training.\"",
    label="Vaswani et al. 2017, §3.5 (sinusoidal extrapolates)",
)
Q = R.question("q1", anchors=[BAG, CAUSAL, TABLE_3E, ALIBI, SIN_EXTRAPOLATES])
S = R.sweeps("pos_enc", "pos_enc_causal")
CAUSAL_MISSING = None
if not S.ready:  # the causal arm not exported (yet): the bidirectional table alone (older tables held both masks)
    CAUSAL_MISSING = S.missing
    S = R.sweep("pos_enc")
REV, ROWS = R.sweep("pos_enc_reverse"), R.sweep("pos_enc_rows")
EXT, EXT_BI = R.sweep("pos_enc_extrapolate"), R.sweep("pos_enc_extrapolate_bi")
TE, TE_BERT = R.sweep("pos_enc_3e"), R.sweep("pos_enc_3e_bert")  # Table 3 (E) at convergence, read as one table
THREE_E = (pd.concat([R.at_best_lr(p.df) for p in (TE, TE_BERT) if p.ready], ignore_index=True)
           if TE.ready else None)  # each arm at its chosen rate
MASK = LABELS["model.causal"]  # False -> "bidirectional", True -> "causal"
PE = LABELS["model.pos_enc"]  # "none" -> "no PE", "rope" -> "RoPE", ...
PE_ZH = {"none": "无位置编码", "sinusoidal": "正弦", "learned": "可学习", "rope": "RoPE", "alibi": "ALiBi"}
display(Q)


# %%
def labelled(df):
    """A 'mask' column (bidirectional / causal) and a 'variant' column ('none, bidirectional', ...)."""
    df = df.copy()
    df["mask"] = df["model.causal"].map(lambda c: MASK[bool(c)])
    df["variant"] = df["model.pos_enc"] + ", " + df["mask"]
    return df


def has(df, where):
    return df is not None and not R.rows(df, where).empty


def summary(df, val="val/acc_best", test="test/acc"):
    """One row per variant: runs, mean accuracy at the training length and at the test length, and how many
    runs are above the order-blind level, with the steps they took to solve (≥ 99 %)."""
    out = []
    keys = ["model.pos_enc", "model.causal"]
    for pe in order("model.pos_enc", df["model.pos_enc"]):
        for causal in order("model.causal", df["model.causal"]):
            where = {"model.pos_enc": pe, "model.causal": causal}
            chosen = R.rows(df, where)
            if chosen.empty:
                continue
            f = R.learned(df, where, val)
            steps = f"{np.median(f.steps):.0f}" if f.steps else "—"
            out.append({"positional encoding": pe, "mask": MASK[bool(causal)],
                        **({"learning rate": ", ".join(f"{v:g}" for v in sorted(chosen["optim.lr"].unique()))}
                           if "optim.lr" in chosen else {}),
                        "runs": len(chosen), f"{val} (mean)": chosen[val].mean(), f"{test} (mean)": chosen[test].mean(),
                        "above the order-blind level": f"{f.k} of {f.n}",
                        "median steps to 99 %": steps})
    return pd.DataFrame(out, columns=None if out else keys)


if S.ready:
    best = labelled(R.at_best_lr(S.df))
    print(R.lr_phrase(S.df))
    R.show_table(summary(best))
    if CAUSAL_MISSING:
        print(f"causal arm (pos_enc_causal): {CAUSAL_MISSING}")
else:
    print(S.missing)

# %% [markdown]
# ## Copy: accuracy per scheme against the reference levels
# Each variant at its chosen learning rate; bars: 95 % bootstrap interval over seeds. Dashed: the
# order-blind level (the best a model blind to order can expect), dotted: chance, each computed on the
# evaluation set of that panel.


# %%
def copy_figure(sweep, df, name, title):
    long = df.melt(id_vars=["model.pos_enc", "model.causal", "mask", "seed"], value_vars=["val/acc_best", "test/acc"],
                   var_name="split", value_name="accuracy")
    long["split"] = long["split"].map({"val/acc_best": "val", "test/acc": "test"})
    long["positional encoding"] = long["model.pos_enc"].map(lambda v: label("model.pos_enc", v))
    fig, axes = subplots(1, 2, figsize=(12, 3.9), sharey=True)
    train_len = int(df["data.length"].iloc[0])
    test_len = int(df["data.test_length"].fillna(df["data.length"]).iloc[0])
    for ax, split, what in zip(axes, ("val", "test"), (f"{train_len} tokens (training length)",
                                                       f"{test_len} tokens ({test_len / train_len:g}× longer)")):
        sns.barplot(long[long["split"] == split], x="positional encoding", y="accuracy", hue="mask",
                    order=order("model.pos_enc", df["model.pos_enc"], PE),
                    hue_order=order("model.causal", df["model.causal"], MASK),
                    palette=palette("model.causal", df["model.causal"], MASK),
                    errorbar=R.errorbar, ax=ax)
        reference_lines(ax, df, split=split)
        ax.set(xlabel="positional encoding", ylabel="accuracy per token", title=f"{title}, {what}", ylim=(0, 1.05))
        if ax is axes[-1]:
            legend(ax, "mask", outside=True)
        else:
            ax.get_legend().remove()
    stamp(fig, sweep)
    return R.savefig(fig, name)


figures = []
if S.ready:
    fig_copy = copy_figure(S, best, "q1_copy", "copy")
    figures.append(fig_copy)
if REV.ready:
    rev = labelled(REV.df)
    copy_figure(REV, rev, "q1_reverse", "reverse copy")
    R.show_table(summary(rev))

# %% [markdown]
# ## Learning curves of the primary comparisons
# Validation accuracy over training (mean over seeds, 95 % band), each variant at its chosen learning
# rate. Left: every scheme, bidirectional (no PE against learned: the bag-of-tokens test). Middle: no
# positional encoding, with and without the causal mask. Right: learned against sinusoidal on MNIST rows
# trained to convergence (the Table 3 (E) test; the quick budget's runs where those are not run yet).

# %%
if S.ready:
    fig, axes = subplots(1, 3 if ROWS.ready or TE.ready else 2, figsize=(17 if ROWS.ready or TE.ready else 12, 3.9))
    learning_curves(S, "val/acc", hue="model.pos_enc", where={"model.causal": False}, runs=best, ax=axes[0],
                    title="copy, bidirectional, by positional encoding")
    # the mask as line style (solid: bidirectional, dash-dotted: causal): colour means the encoding in every panel
    learning_curves(S, "val/acc", hue="model.pos_enc", style="model.causal", where={"model.pos_enc": "none"},
                    runs=best, ax=axes[1], title="copy, no positional encoding, by mask")
    legend(axes[0], "positional encoding")
    legend(axes[1], "no PE, by mask")
    axes[1].set_ylim(axes[0].get_ylim())
    rows_panel = TE if TE.ready else ROWS  # Table 3 (E): trained to convergence where run, else the quick budget
    if rows_panel.ready:  # the Table 3 (E) comparison: learned and sinusoidal on MNIST rows in order
        if TE.ready:
            runs_3e = R.at_best_lr(TE.df)
            title_3e = "MNIST rows to convergence: learned N(0, 1) vs sinusoidal"
        else:
            runs_3e = R.rows(ROWS.df, {"data.permute": "none"}).query("`model.pos_enc` in ['learned', 'sinusoidal']")
            title_3e = "MNIST rows in order (quick): learned vs sinusoidal"
        learning_curves(rows_panel, "val/acc", hue="model.pos_enc", runs=runs_3e, ax=axes[2], title=title_3e,
                        **({} if TE.ready else {"where": {"data.permute": "none"}}))
        legend(axes[2], "positional encoding")
    stamp(fig, S, *([rows_panel] if rows_panel.ready else []))
    figures.append(R.savefig(fig, "q1_curves"))

# %% [markdown]
# ## How the attention matrix changes when the input is reordered
# Layer 0, head 0 of trained copy models (the lowest seed at the chosen learning rate) on one validation
# sequence: A(x) on the tokens in order, A(Px) on the same tokens reordered (the tokens only; the
# separator and the blanks stay in place, as in 猫坐在垫子上 -> 垫子在猫坐上), and P·A(x)·Pᵀ, the original
# matrix with rows and columns moved to follow the tokens. Where A(Px) equals P·A(x)·Pᵀ, reordering the
# input only reorders the matrix: the model sees the same bag of tokens.


# %%
def first_run(df, where, *which):
    """The lowest-seed run of `where` among df's rows whose arrays `which` were all exported ('' if none)."""
    for run in R.rows(df, where).sort_values(["seed", "run_id"])["run_id"]:
        if all(f"{run}/{w}" in S.arrays for w in which):
            return run
    return ""


def seeds_shown(runs):
    """The stamp of a figure of single runs: 'seed 0' (or 'seeds 0, 1')."""
    seeds = sorted({int(S.df.loc[S.df["run_id"] == r, "seed"].iloc[0]) for r in runs})
    return f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"


def permutation_maps(df, where):
    run = first_run(df, where, "final/attention", "final/attention_perm", "perm")
    if not run:
        return None
    a, ap = S.attention(run, "final/attention")[0, 0], S.attention(run, "final/attention_perm")[0, 0]  # (T, T)
    perm = S.arrays[f"{run}/perm"]
    return run, (a, ap, a[perm][:, perm])


if S.ready:
    grid, shown = {}, []
    for where in (NO_PE_BI, LEARNED_BI, NO_PE_CAUSAL):
        m = permutation_maps(best, where)
        if m is not None:
            shown.append(m[0])
            grid[f"{label('model.pos_enc', where['model.pos_enc'])}, {MASK[where['model.causal']]}"] = list(m[1])
    if grid:
        fig = heatmap_grid(grid, ["A(x): in order", "A(Px): permuted", "P·A(x)·Pᵀ"])
        stamp(fig, S, seeds=seeds_shown(shown), extra="layer 0, head 0")
        figures.append(R.savefig(fig, "q1_attention"))
    else:
        print("no permuted attention maps were exported (they need the runs' checkpoints and data)")

# %% [markdown]
# ## The literal example: 猫坐在垫子上 → 垫子在猫坐上
# The tutorial's sentence ("the cat sits on the mat") and its reordering, by character: six distinct
# characters as token ids (猫=0 坐=1 在=2 垫=3 子=4 上=5), so the reordering is a permutation P. Each
# sentence is a copy input (the six characters, SEP, six blanks), fed through a trained model without
# positional encoding and a trained model with learned positions (both bidirectional, the lowest seed at
# the chosen learning rate): layer-0 attention, mean over heads; rows are queries, columns keys. The
# third column is the first matrix with its rows and columns moved to follow the characters, P·A(x)·Pᵀ:
# where it equals the second, reordering the sentence only reordered the attention.


# %%
def sentence_permutation(meta):
    """Where each token of the reordered sentence sits in the original (a repeated token would take its
    first unused place; a model without PE cannot tell the two apart anyway), the SEP and blanks in place."""
    used, perm = set(), []
    for token in meta["perm_tokens"]:
        i = next(j for j, t in enumerate(meta["tokens"]) if t == token and j not in used)
        used.add(i)
        perm.append(i)
    n = len(meta["labels"])
    return np.array(perm + list(range(len(perm), n)))


def head_mean(m):
    """Layer 0's attention averaged over heads: (T, T) from (H, T, T) or (1, H, T, T)."""
    return m.reshape(-1, *m.shape[-2:]).mean(axis=0)


SENTENCE = S.sentence if S.ready else None  # meta.json `sentence`: words, token ids, axis labels


def sentence_text(words):
    """The sentence as a reader writes it: characters run together (猫坐在垫子上), words spaced."""
    return ("" if all(len(w) == 1 for w in words) else " ").join(words)


# what the answer calls the sentence and its reordering: what export fed the models (meta.json), the
# tutorial's own where nothing is exported yet
ORIGINAL, REORDERED = ((sentence_text(SENTENCE["words"]), sentence_text(SENTENCE["perm_words"])) if SENTENCE
                       else ("猫坐在垫子上", "垫子在猫坐上"))
fig_sentence = None  # the headline figure: how the attention matrix changes (issue 39)
sentence, sentence_runs = {}, []  # variant -> (A(x), A(Px), max |A(Px) - P·A(x)·Pᵀ|); the runs drawn
if SENTENCE:
    P = sentence_permutation(SENTENCE)
    perm_labels = [*SENTENCE["perm_words"], *SENTENCE["labels"][len(SENTENCE["perm_words"]):]]
    for name, where in (("no PE", NO_PE_BI), ("learned PE", LEARNED_BI)):
        run = first_run(best, where, "final/sentence", "final/sentence_perm")
        if run:
            a, ap = head_mean(S.attention(run, "final/sentence")), head_mean(S.attention(run, "final/sentence_perm"))
            sentence[name] = (a, ap, float(np.abs(ap - a[P][:, P]).max()))
            sentence_runs.append(run)
    if sentence:
        fig = heatmap_grid({f"{k}, bidirectional": [v[0], v[1], v[0][P][:, P]] for k, v in sentence.items()},
                           ["A(x): “" + ORIGINAL + "”", "A(Px): “" + REORDERED + "”",
                            "P·A(x)·Pᵀ: A(x) reordered"],
                           size=3.2, ticks=[SENTENCE["labels"], perm_labels, perm_labels], shared=True)
        stamp(fig, S, seeds=seeds_shown(sentence_runs), extra="layer 0, mean over heads")
        fig_sentence = R.savefig(fig, "q1_sentence")
        figures.append(fig_sentence)
if not sentence:
    print("The sentence's attention maps are not in this data folder yet (`ablate report export` writes "
          "{run}/final/sentence and /sentence_perm for runs with a checkpoint); the maps above, on a validation "
          "sequence, show the same thing.")

# %% [markdown]
# ## MNIST rows: trained in order or permuted, tested on permuted rows
# Dotted: chance. The Table 3 (E) test reads the left panel's "as trained" bars of learned and sinusoidal.

# %%
if ROWS.ready:
    rows = ROWS.df.copy()
    long = rows.melt(id_vars=["model.pos_enc", "data.permute", "seed"], value_vars=["test/acc", "test/acc_perm"],
                     var_name="test rows", value_name="accuracy")
    long["test rows"] = long["test rows"].map({"test/acc": "as trained", "test/acc_perm": "permuted"})
    long["trained on"] = long["data.permute"].map(lambda p: "rows in order" if p == "none" else "permuted rows")
    long["positional encoding"] = long["model.pos_enc"].map(lambda v: label("model.pos_enc", v))
    grid = sns.catplot(long, x="positional encoding", y="accuracy", hue="test rows", col="trained on", kind="bar",
                       order=order("model.pos_enc", rows["model.pos_enc"], PE),
                       col_order=["rows in order", "permuted rows"],
                       hue_order=["as trained", "permuted"], palette=palette("test rows"),
                       errorbar=R.errorbar, height=3.5, aspect=1.3)
    for ax in grid.axes.flat:
        reference_lines(ax, rows, split="test")
    grid.set_axis_labels("positional encoding", "MNIST test accuracy")
    stamp(grid.figure, ROWS)
    figures.append(R.savefig(grid.figure, "q1_mnist_permuted"))
else:
    print(ROWS.missing)

# %% tags=["answer"]
if not S.ready:
    Q.not_run_yet(S)
else:
    def zh(x) -> str:
        """An Estimate / Effect / Fraction as the Chinese text writes it: the same numbers (the API's "zh")."""
        return format(x, "zh")

    def acc(df, where, metric=COPY_METRIC):
        return R.estimate(df, metric, where)

    def steps_text(f, zh_=False):
        if not f.steps:
            return ""
        low, mid, high = np.min(f.steps), np.median(f.steps), np.max(f.steps)
        span = f"{low:.0f}–{high:.0f}" if high > low else f"{mid:.0f}"
        return f"，{span} 步达到 99%" if zh_ else f", solved (≥ 99 %) in {span} steps"

    val_level, test_level = R.level(best), R.level(best, split="test")
    train_len = int(best["data.length"].iloc[0])
    test_len = int(best["data.test_length"].fillna(best["data.length"]).iloc[0])
    pes = order("model.pos_enc", best["model.pos_enc"])
    masks = order("model.causal", best["model.causal"])
    causal_ready = has(best, NO_PE_CAUSAL)
    why_missing = CAUSAL_MISSING or "the table has no causal run"
    why_missing_zh = R.missing_zh(CAUSAL_MISSING) if CAUSAL_MISSING else "表中没有带因果掩码的运行"

    none_bi, learned_bi, sin_bi = acc(best, NO_PE_BI), acc(best, LEARNED_BI), acc(best, SIN_BI)
    f_none_bi, f_learned_bi = R.learned(best, NO_PE_BI), R.learned(best, LEARNED_BI)

    # ---- primary checks ----
    checks = [BAG.less(R.effect(none_bi, learned_bi), f"copy, {train_len} tokens, validation: no PE vs learned PE "
                       "(bidirectional)", level=val_level, primary=True, reason=REASON["bag"],
                       what_zh=f"复制任务，{train_len} 个词元，验证集：无位置编码对可学习位置编码（双向）",
                       reason_zh=REASON_ZH["bag"])]
    if causal_ready:
        none_causal = acc(best, NO_PE_CAUSAL)
        f_none_causal = R.learned(best, NO_PE_CAUSAL)
        checks.append(CAUSAL.greater(R.effect(none_causal, none_bi), f"copy, {train_len} tokens, validation, no PE: "
                                     "causal vs bidirectional", level=val_level, primary=True, reason=REASON["causal"],
                                     what_zh=f"复制任务，{train_len} 个词元，验证集，无位置编码：因果对双向",
                                     reason_zh=REASON_ZH["causal"]))
    else:
        checks.append(CAUSAL.not_testable("copy, no PE: causal vs bidirectional", f"no causal arm: {why_missing}",
                                          primary=True, reason=REASON["causal"], what_zh="复制任务，无位置编码：因果对双向",
                                          why_zh=f"没有因果分支：{why_missing_zh}", reason_zh=REASON_ZH["causal"]))
    if ROWS.ready and has(rows, ROWS_LEARNED) and has(rows, ROWS_SIN):
        rows_learned, rows_sin = acc(rows, ROWS_LEARNED, ROWS_METRIC), acc(rows, ROWS_SIN, ROWS_METRIC)
        rows_diff = R.effect(rows_learned, rows_sin)
        checks.append(TABLE_3E.same(rows_diff, "MNIST rows in order, quick budget (still learning), test accuracy: "
                                    "learned vs sinusoidal", margin=MARGIN_3E, level=R.level(rows, split="test"), primary=False,
                                    reason=REASON["3e"],
                                    what_zh="MNIST 按行输入（行顺序不变），快速预算（仍在学习），测试准确率：可学习对正弦",
                                    reason_zh=REASON_ZH["3e"]))
    else:
        rows_diff = None
    # ---- Table 3 (E) at convergence (issue 24): the primary test of TABLE_3E
    three_e = {}  # arm -> Estimate of test accuracy, for the answer
    if THREE_E is not None and has(THREE_E, THREE_E_LEARNED) and has(THREE_E, THREE_E_SIN):
        te_level = R.level(THREE_E, split="test")
        for name, where in (("learned", THREE_E_LEARNED), ("bert", THREE_E_BERT), ("sinusoidal", THREE_E_SIN)):
            if has(THREE_E, where):
                three_e[name] = acc(THREE_E, where, THREE_E_METRIC)
        te_diff = R.paired(THREE_E, THREE_E_METRIC, THREE_E_LEARNED, THREE_E_SIN)
        checks.append(TABLE_3E.same(te_diff, "MNIST rows in order, trained to convergence, test accuracy: learned "
                                    "(N(0, 1)) vs sinusoidal, paired by seed", margin=MARGIN_3E_CONVERGED,
                                    level=te_level, primary=True, reason=REASON["3e_converged"],
                                    what_zh="MNIST 按行输入（行顺序不变），训练到收敛，测试准确率：可学习（N(0, 1)）对正弦，按种子配对",
                                    reason_zh=REASON_ZH["3e_converged"]))
        if "bert" in three_e:
            for other, name_en, name_zh in ((THREE_E_SIN, "sinusoidal", "正弦"), (THREE_E_LEARNED, "learned N(0, 1)",
                                                                                 "可学习 N(0, 1)")):
                checks.append(TABLE_3E.same(R.paired(THREE_E, THREE_E_METRIC, THREE_E_BERT, other),
                                            f"MNIST rows to convergence, test accuracy: learned N(0, 0.02²) vs {name_en}, "
                                            "paired by seed", margin=MARGIN_3E_CONVERGED, level=te_level, primary=False,
                                            what_zh=f"MNIST 按行输入，训练到收敛，测试准确率：可学习 N(0, 0.02²) 对 {name_zh}，按种子配对"))
    else:
        te_missing = TE.missing or "no learned or sinusoidal run"
        checks.append(TABLE_3E.not_testable("MNIST rows to convergence: learned vs sinusoidal", te_missing, primary=True,
                                            reason=REASON["3e_converged"],
                                            what_zh="MNIST 按行输入，训练到收敛：可学习对正弦",
                                            why_zh=R.missing_zh(te_missing) if TE.missing else "没有可学习或正弦位置编码的运行",
                                            reason_zh=REASON_ZH["3e_converged"]))
    # ---- extrapolation (issue 24): lookup1 at 8x the training length; the primary tests of ALIBI and SIN_EXTRAPOLATES
    ext_rows, ext_lengths = {}, None  # arm -> (accuracy at the training length, at the test length), for the answer
    for sweep, causal in ((EXT, True), (EXT_BI, False)):
        if not sweep.ready:
            continue
        ext = R.at_best_lr(sweep.df)
        ext_len, ext_train = int(ext["data.test_length"].iloc[0]), int(ext["data.length"].iloc[0])
        if causal:
            ext_lengths = (ext_train, ext_len)  # for the answer: trained on ext_train tokens, tested on ext_len
        ext_level, mask, mask_zh = R.level(ext, split="test"), MASK[causal], "因果" if causal else "双向"
        for pe in order("model.pos_enc", ext["model.pos_enc"]):
            where = {"model.pos_enc": pe}
            ext_rows[(pe, causal)] = (acc(ext, where, EXT_TRAIN), acc(ext, where, EXT_METRIC))
        pairs = [(ALIBI, EXT_ALIBI, EXT_SIN, "extrapolate"), (SIN_EXTRAPOLATES, EXT_SIN, EXT_LEARNED, "sin_extrapolate"),
                 (SIN_EXTRAPOLATES, {"model.pos_enc": "rope"}, EXT_SIN, None),
                 (ALIBI, EXT_SIN, {"model.pos_enc": "none"}, None)]
        for anchor, favoured, other, reason in pairs:
            if not (has(ext, favoured) and has(ext, other)):
                continue
            at_train = acc(ext, favoured, EXT_TRAIN)
            a, b = favoured["model.pos_enc"], other["model.pos_enc"]
            what = (f"one-lookup task at {ext_len} tokens (test), trained at {ext_train}, {mask}: {PE[a]} vs {PE[b]}, paired by seed",
                    f"单查找任务，{ext_len} 个词元（测试集），训练长度 {ext_train}，{mask_zh}：{PE_ZH[a]} 对 {PE_ZH[b]}，按种子配对")
            primary = causal and reason is not None
            checks.append(anchor.greater(
                R.paired(ext, EXT_METRIC, favoured, other), what[0], level=ext_level,
                learned=at_train.n > 0 and at_train.mean >= R.SOLVED,
                why=f"{PE[a]} ({mask}) reached {at_train} at {ext_train} tokens (solved: ≥ {100 * R.SOLVED:g} %), "
                    "so it has nothing to extrapolate",
                why_zh=f"{PE_ZH[a]}（{mask_zh}）在 {ext_train} 个词元上只达到 {zh(at_train)}（解决指 ≥ "
                       f"{100 * R.SOLVED:g}%），谈不上外推",
                primary=primary, reason=REASON[reason] if primary else "", what_zh=what[1],
                reason_zh=REASON_ZH[reason] if primary else ""))
    if not EXT.ready:
        for anchor, key in ((ALIBI, "extrapolate"), (SIN_EXTRAPOLATES, "sin_extrapolate")):
            checks.append(anchor.not_testable("one-lookup task at 64 tokens, causal", EXT.missing, primary=True,
                                              reason=REASON[key], what_zh="单查找任务，64 个词元，因果",
                                              why_zh=R.missing_zh(EXT.missing), reason_zh=REASON_ZH[key]))
    # the copy test at 2x, the primary test before issue 24: supporting (copy at 2x asks an offset never trained)
    if has(best, ALIBI_CAUSAL) and has(best, SIN_CAUSAL):
        alibi_long, sin_long = acc(best, ALIBI_CAUSAL, LONG_METRIC), acc(best, SIN_CAUSAL, LONG_METRIC)
        alibi_train, sin_train = acc(best, ALIBI_CAUSAL), acc(best, SIN_CAUSAL)
        alibi_solved = alibi_train.n > 0 and alibi_train.mean >= EXTRAPOLATION_PREMISE
        long_what = (f"copy at {test_len} tokens (test), causal: ALiBi vs sinusoidal",
                     f"{test_len} 个词元的复制任务（测试集），因果：ALiBi 对正弦")
        checks.append(ALIBI.greater(
            R.effect(alibi_long, sin_long), long_what[0], level=test_level, learned=alibi_solved,
            why=f"causal ALiBi reached {alibi_train} at {train_len} tokens (sinusoidal {sin_train}; solved: ≥ "
                f"{100 * EXTRAPOLATION_PREMISE:g} %), so it has nothing to extrapolate",
            why_zh=f"因果 ALiBi 在 {train_len} 个词元上只达到 {zh(alibi_train)}（正弦 {zh(sin_train)}；解决指 ≥ "
                   f"{100 * EXTRAPOLATION_PREMISE:g}%），谈不上外推",
            primary=False, what_zh=long_what[1]))
        if has(best, NO_PE_CAUSAL):  # ALiBi's edge at 2× against what the causal mask alone gives
            checks.append(ALIBI.greater(R.effect(alibi_long, acc(best, NO_PE_CAUSAL, LONG_METRIC)),
                                        f"copy at {test_len} tokens (test), causal: ALiBi vs no PE", level=test_level,
                                        primary=False, what_zh=f"{test_len} 个词元的复制任务（测试集），因果：ALiBi 对无位置编码"))
    else:
        alibi_long = sin_long = None

    # ---- supporting checks ----
    eq = {name: acc(best, where, "probe/final/equiv_error") for name, where in
          (("none_bi", NO_PE_BI), ("learned_bi", LEARNED_BI), ("none_causal", NO_PE_CAUSAL)) if has(best, where)}
    if "none_bi" in eq and eq["none_bi"].n:
        checks.append(BAG.judge(
            eq["none_bi"].mean < EQUIVARIANT,
            f"mechanism: first-layer attention of the trained no-PE bidirectional models on a reordered validation "
            f"sequence, max |A(Px) − P·A(x)·Pᵀ| = {eq['none_bi']} (equivariant below {EQUIVARIANT:g})",
            evidence_zh=f"机制：训练后的无位置编码双向模型在一个重新排列的验证序列上的第一层注意力，"
                        f"max |A(Px) − P·A(x)·Pᵀ| = {eq['none_bi']:zh}（低于 {EQUIVARIANT:g} 即为等变）",
            primary=False))
    checks.append(BAG.judge(f_none_bi.k == 0 if f_none_bi.n else None,
                            f"no-PE bidirectional runs above the order-blind level: {f_none_bi}",
                            evidence_zh=f"无位置编码的双向运行超过词袋基线的次数：{f_none_bi:zh}", primary=False))
    if has(best, ALIBI_CAUSAL) or has(best, {"model.pos_enc": "alibi", "model.causal": False}):
        alibi_bi = {"model.pos_enc": "alibi", "model.causal": False}
        if has(best, alibi_bi) and has(best, SIN_BI):
            checks.append(ALIBI.greater(R.effect(acc(best, alibi_bi, LONG_METRIC), acc(best, SIN_BI, LONG_METRIC)),
                                        f"copy at {test_len} tokens (test), bidirectional: ALiBi vs sinusoidal",
                                        level=test_level, primary=False,
                                        what_zh=f"{test_len} 个词元的复制任务（测试集），双向：ALiBi 对正弦"))
    copy_diff = R.effect(learned_bi, sin_bi)
    checks.append(TABLE_3E.same(copy_diff, f"copy, {train_len} tokens, validation, bidirectional: learned vs sinusoidal",
                                margin=MARGIN_3E, level=val_level, primary=False,
                                what_zh=f"复制任务，{train_len} 个词元，验证集，双向：可学习对正弦"))
    if REV.ready and has(rev, NO_PE_BI) and has(rev, LEARNED_BI):
        checks.append(BAG.less(R.effect(acc(rev, NO_PE_BI), acc(rev, LEARNED_BI)), "reverse copy, validation: no PE vs "
                               "learned PE (bidirectional)", level=R.level(rev), primary=False,
                               what_zh="反向复制，验证集：无位置编码对可学习位置编码（双向）"))
    if ROWS.ready and has(rows, {"model.pos_enc": "none", "data.permute": "none"}):
        inorder_none = {"model.pos_enc": "none", "data.permute": "none"}
        gap = R.estimate(R.rows(rows, inorder_none).assign(
            **{"test/acc_gap": lambda d: (d["test/acc"] - d["test/acc_perm"]).abs()}), "test/acc_gap", scale="linear")
        checks.append(BAG.judge(gap.mean < 0.005 if gap.n else None,
                                "MNIST rows without PE: |accuracy on rows in order − on permuted rows| per run = "
                                f"{gap.mean * 100:.2f} points (a bag of rows: the same)",
                                evidence_zh="无位置编码的 MNIST 按行输入：每个运行在原顺序的行与打乱顺序的行上准确率之差的"
                                            f"绝对值 = {gap.mean * 100:.2f} 个百分点（一袋行：两者相同）", primary=False))

    # ---- the text: every statement follows the numbers ----
    order_level = f"{100 * val_level:.1f} %"
    sent = sentence.get("no PE"), sentence.get("learned PE")
    # the no-PE matrix only reordered: from the sentence itself where exported (maps rounded to 1/255), else the probe
    if sent[0] is not None:
        bag = sent[0][2] <= 2 / 255
    else:
        bag = eq["none_bi"].mean < EQUIVARIANT if "none_bi" in eq and eq["none_bi"].n else None
    changed = [k for k in ("learned_bi", "none_causal") if k in eq and eq[k].n and eq[k].mean >= EQUIVARIANT]
    mechanism_record = dict(  # the mechanism block of reports/prose/<lang>/q1.md
        eq_plain=eq.get("none_bi"), eq_learned=eq.get("learned_bi"), eq_causal=eq.get("none_causal"),
        eq_changed=bool(changed), sent_plain=sent[0][2] if sent[0] is not None else None,
        sent_learned=sent[1][2] if sent[1] is not None else None, map_levels=255)

    ranked = sorted((pe for pe, c in ext_rows if c), key=lambda pe: -ext_rows[(pe, True)][1].mean)
    extrapolates = ("alibi", True) in ext_rows and ("sinusoidal", True) in ext_rows and ext_lengths is not None
    said = dict(bag=bag, original=ORIGINAL, reordered=REORDERED, no_pe_runs=f_none_bi, learned_runs=f_learned_bi,
                 solved=R.SOLVED, causal_runs=f_none_causal if causal_ready else None,
                 ext=[{"name": PE[pe], "name_zh": PE_ZH[pe], "acc": ext_rows[(pe, True)][1]} for pe in ranked]
                 if extrapolates else [],
                 ext_train=ext_lengths[0] if extrapolates else None, ext_test=ext_lengths[1] if extrapolates else None)

    def per_variant(df, metric):
        rows = []
        for pe in pes:
            for m in masks:
                where = {"model.pos_enc": pe, "model.causal": m}
                if has(df, where):
                    f = R.learned(df, where)
                    steps = ({"lo": float(np.min(f.steps)), "hi": float(np.max(f.steps))}
                             if metric == COPY_METRIC and f.steps else None)
                    rows.append({"pe": {"en": label("model.pos_enc", pe), "zh": PE_ZH.get(pe, pe)}, "causal": bool(m),
                                 "acc": acc(df, where, metric), "learned": f if metric == COPY_METRIC else None,
                                 "steps": steps})
        return rows

    unsolved = None
    if alibi_long is not None and not alibi_solved:
        nc_long = acc(best, NO_PE_CAUSAL, LONG_METRIC) if has(best, NO_PE_CAUSAL) else None
        solved_causal = [{"model.pos_enc": pe, "model.causal": True} for pe in pes
                         if has(best, {"model.pos_enc": pe, "model.causal": True})
                         and acc(best, {"model.pos_enc": pe, "model.causal": True}).mean >= R.SOLVED]
        unsolved = dict(train=alibi_train, long=alibi_long, no_pe=nc_long,
                        below=bool(solved_causal) and all(acc(best, w, LONG_METRIC).mean < test_level for w in solved_causal))
    outcome_record = dict(  # the outcome and changes blocks of reports/prose/<lang>/q1.md
        copy_rows=per_variant(best, COPY_METRIC), long_rows=per_variant(best, LONG_METRIC), long_len=test_len,
        long_level=test_level, longer=test_len / train_len,
        alibi_vs_sin=R.effect(alibi_long, sin_long) if alibi_long is not None else None, alibi_unsolved=unsolved,
        lookup_lengths=list(ext_lengths) if ext_lengths is not None else None,
        lookup_arms=[{"causal": c, "rows": [{"pe": {"en": PE[pe], "zh": PE_ZH[pe]}, "val": ext_rows[(pe, c)][0],
                                             "test": ext_rows[(pe, c)][1]} for pe in pes if (pe, c) in ext_rows]}
                     for c in (True, False) if any((pe, c) in ext_rows for pe in pes)],
        three_e=dict(learned=three_e["learned"], sinusoidal=three_e["sinusoidal"], bert=three_e.get("bert"),
                     diff=te_diff, init="N(0, 1)", init_bert="N(0, 0.02²)") if "learned" in three_e else None,
        rows_quick=dict(learned=rows_learned, sinusoidal=rows_sin, diff=rows_diff) if rows_diff is not None else None,
        margin_converged=MARGIN_3E_CONVERGED, margin_quick=MARGIN_3E)

    def details(lang):
        z = lang == "zh"

        def say(en, zh):
            return zh if z else en

        def shown(x):
            return format(x, "zh") if z else str(x)

        chosen = R.chosen_lrs(best, lambda r: r['variant'], lang=lang)
        out = [say(f"Primary comparison: {R.lr_phrase(S.df)} ({chosen}).",
                   f"主要比较：{R.lr_phrase(S.df, lang=lang)}（{chosen}）。"),
               R.convergence(best, lang=lang)]
        for sweep, name, name_zh in ((EXT, "causal", "因果"), (EXT_BI, "bidirectional", "双向")):
            if sweep.ready:
                ext_best = R.at_best_lr(sweep.df)
                chosen = R.chosen_lrs(ext_best, lambda r: PE[r['model.pos_enc']], lang=lang)
                out += [say(f"Extrapolation, {name} (lookup1, {sweep.name}): "
                            f"{R.lr_phrase(sweep.df, metric='val/acc_mean')} ({chosen}).",
                            f"外推，{name_zh}（lookup1，{sweep.name}）：{R.lr_phrase(sweep.df, metric='val/acc_mean', lang=lang)}"
                            f"（{chosen}）。"), R.convergence(ext_best, lang=lang)]
        if THREE_E is not None:
            chosen = R.chosen_lrs(THREE_E, lambda r: PE[r['model.pos_enc']] + ' N(0, ' + format(r['model.learned_std'], 'g')
                                  + '²)' if r['model.pos_enc'] == 'learned' else PE[r['model.pos_enc']], lang=lang)
            bert = (say(f"; N(0, 0.02²): {R.lr_phrase(TE_BERT.df)}", f"；N(0, 0.02²)：{R.lr_phrase(TE_BERT.df, lang=lang)}")
                    if TE_BERT.ready else "")
            out += [say(f"Table 3 (E) at convergence ({TE.name}, {TE_BERT.name}): {R.lr_phrase(TE.df)}{bert} ({chosen}).",
                        f"训练到收敛时的 Table 3 (E)（{TE.name}、{TE_BERT.name}）：{R.lr_phrase(TE.df, lang=lang)}{bert}"
                        f"（{chosen}）。"), R.convergence(THREE_E, lang=lang)]
        if CAUSAL_MISSING:
            out.append(say(f"Causal arm (pos_enc_causal): {CAUSAL_MISSING}.",
                           f"因果组（pos_enc_causal）：{R.missing_zh(CAUSAL_MISSING)}。"))
        if REV.ready:
            rpes = order("model.pos_enc", rev["model.pos_enc"])
            pairs = say("; ", "；").join(
                f"{pe} {shown(acc(rev, {'model.pos_enc': pe, 'model.causal': False}))} / "
                f"{shown(acc(rev, {'model.pos_enc': pe, 'model.causal': True}))}" for pe in rpes)
            at, n, level = int(R.at_level(rev).sum()), len(rev), 100 * R.level(rev)
            out += [say(f"Reverse copy ({R.lr_phrase(REV.df)}; order-blind level {level:.1f} %): {pairs} "
                        f"(bidirectional / causal); {at} of {n} runs at the order-blind level.",
                        f"倒序复制（{R.lr_phrase(REV.df, lang=lang)}；词袋基线 {level:.1f}%）：{pairs}（双向 / 因果）；"
                        f"{n} 次运行中有 {at} 次停在词袋基线。"), R.convergence(rev, "runs", lang=lang)]
        else:
            out.append(say(f"Reverse copy: {REV.missing}.", f"倒序复制：{R.missing_zh(REV.missing)}。"))
        if ROWS.ready:
            inorder = rows[rows["data.permute"] == "none"]
            rpes = order("model.pos_enc", inorder["model.pos_enc"])
            pairs = say("; ", "；").join(
                f"{pe} {shown(R.estimate(inorder, 'test/acc', {'model.pos_enc': pe}))} / "
                f"{shown(R.estimate(inorder, 'test/acc_perm', {'model.pos_enc': pe}))}" for pe in rpes)
            out.append(say(f"MNIST rows ({R.lr_phrase(ROWS.df)}), trained on rows in order, test accuracy on rows in "
                           f"order / permuted: {pairs}.",
                           f"MNIST 按行输入（{R.lr_phrase(ROWS.df, lang=lang)}），按原顺序训练，测试准确率（原顺序 / 打乱行序）："
                           f"{pairs}。"))
            permuted = rows[rows["data.permute"] != "none"]
            if not permuted.empty:
                pairs = say("; ", "；").join(
                    f"{pe} {shown(R.estimate(permuted, 'test/acc', {'model.pos_enc': pe}))}" for pe in rpes)
                out.append(say(f"Trained and tested on permuted rows: {pairs}.", f"用打乱行序的数据训练和测试：{pairs}。"))
            out.append(R.convergence(rows, "MNIST runs", lang=lang))
        else:
            out.append(say(f"MNIST rows: {ROWS.missing}.", f"MNIST 按行输入：{R.missing_zh(ROWS.missing)}。"))
        out.append(R.caveat(best, lang=lang))
        return out

    Q.answer(details=details, checks=checks, figure=fig_sentence or fig_copy,
             figures=figures,
             record=dict(no_pe=none_bi, learned_pe=learned_bi, level=val_level, length=train_len,
                         causal=none_causal if causal_ready else None, **said, **mechanism_record, **outcome_record))
