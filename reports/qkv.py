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
# # Q, K and V: three cards, or could two be one?
#
# One claim, from sweeps `qkv_tie` and `qkv_tie_matched`. Its title, question and sweeps are in its study
# manifest, `reports/qkv.yaml`; the model's `model.qkv_tie` (`ablate/models/attention.py`) makes two of the
# projections one matrix: `kv`, W_V = W_K (a token is fetched by what it is found by); `qk`, W_Q = W_K (the
# scores before the softmax are symmetric, q_i·k_j = q_j·k_i).
#
# ## The test, fixed before the runs
#
# Written and committed before any run of sweeps `qkv_tie` and `qkv_tie_matched`; the git history shows the
# order. The tutorial gives each token three cards, a query, a key and a value, and says that keeping the key
# and the value apart (拆开 K 和 V) makes attention more expressive. **The task:** `poshist`
# (docs/tasks/poshist.md), Q3's, because on it what a query finds and what it fetches differ: the token two
# back is found by its position and fetched as a token; a token's own repeat is found by its identity and
# read as a count. **The model:** Q3's one attention layer with its FFN, d_model 64, 4 heads: in
# `heads_poshist` 4 heads sit between the position-only level (57.8 %) and the ceiling (75.7 % mean, 55–91 %
# over 10 seeds), where 8 heads reach 99 % and leave no room. **The arms:** separate W_Q, W_K, W_V (d_k 16);
# K = V tied and Q = K tied at the same width (one d_model × d_model projection fewer), and both tied arms at
# the separate arm's parameter count, each head widened to d_k 21 (`qkv_tie_matched`: 35,772 parameters
# against 36,052). Each arm at its own learning rate (4 values on seed 0, 5 after the pilot below; chosen on `val/acc_mean`, as Q3),
# then 10 seeds.
#
# | claim | anchor | kind | primary test | why this test |
# | --- | --- | --- | --- | --- |
# | K and V apart are more expressive | the tutorial (拆开 K 和 V) | outcome | **separate − K = V tied at matched parameters**, test accuracy, paired by seed, greater; the position-only level as the floor | at equal parameters only the tie differs; poshist finds by position and fetches a token, which one matrix must do at once |
# | a shared Q = K costs nothing | Kitaev et al. 2020 (Reformer, sec. 3) | outcome | **separate − Q = K tied at matched parameters**, test accuracy, paired by seed, the same within `MARGIN` (2 points); *changed after the pilot (below): separate − tied wholly below `MARGIN`* | the paper's claim is no loss; its shared-QK attention also stops a token attending to itself, which ours does not, so this is the tie alone |
#
# Supporting (never moves a verdict): both ties at equal width (fewer parameters); each arm's parameters.
# What we expect, and why it is not the test: a Q = K head scores with a positive semi-definite form
# (W W^T), so a token's score with itself bounds its scores with others of the same projected length
# (Cauchy–Schwarz), and a pure offset (the token two back, not two ahead) has to be built from unequal
# lengths along the positions.
#
# The answer's words were fixed with the test: *agrees*, "yes: with one matrix for finding and fetching the
# model learns less, at the same size"; *disagrees*, "no: one matrix does as well here"; otherwise "these runs
# do not decide it".
#
# **Changed after the first runs were read** (the same day, before the runs these tables come from). A first
# run of both sweeps, from the commit that fixed the tests above, chose for the Q = K arm the largest rate tried
# (0.01), strictly better there than at 0.003 on seed 0 (`val/acc_mean` 0.96 against 0.85; separate 0.64 at
# its chosen 0.001): its best rate may lie above the range, which the rule that every arm is tuned up to its
# own best forbids. Two changes, both marked here, and both sweeps run again from the commit that made them:
# (1) the learning-rate grid gains 0.03 for every arm; (2) the Reformer's test becomes the non-inferiority test
# its words ask for ("does not perform worse"): separate − Q = K tied wholly below `MARGIN` (the tied arm at
# most 2 points worse), where the sameness test written first would have called a tied arm that does *better*
# a disagreement with a claim of no loss. The tutorial's test is unchanged. The first run is kept as a pilot
# (design data, not results). The answer's mechanism paragraph on Q = K (a symmetric form makes "find the tokens
# equal to me", poshist's content relation, its default) was also written after the pilot; which way it concludes
# follows the data it is rendered from. The words of the *disagrees* answer were made precise after the runs were
# read (a native reader's note): "one matrix does as well" became "K and V as one matrix do as well", the tie the
# test is about.

# %%
import matplotlib.pyplot as plt  # noqa: F401 - the figures' backend, before seaborn
import pandas as pd
import seaborn as sns
from IPython.display import display

from ablate import report as R
from ablate.report import figures as F

MARGIN = 0.02  # the Reformer's test: Q = K tied at most 2 points below separate projections is "no worse"
METRIC = "test/acc"
ARMS = {"none": "separate", "kv": "K = V", "qk": "Q = K"}
SIZES = {"equal": "same width", "matched": "same parameters"}

R.setup()

TUTORIAL = R.Anchor(
    "the tutorial (拆开 K 和 V)",
    "keeping the key and the value as separate projections makes attention more expressive than one matrix for "
    "both",
    "把 K 和 V 拆成两个投影，注意力比一个矩阵兼任两者更有表达力",
    tutorial=True, cite_zh="教程（拆开 K 和 V）",
)
REFORMER = R.Anchor(
    "Kitaev et al. 2020",
    "sharing one projection for queries and keys (shared-QK attention) does not hurt",
    "查询和键共用一个投影（shared-QK 注意力）不会变差",
    wording="a shared query-key space does not perform worse than regular attention",
)
Q = R.question("claim-qkv", anchors=[TUTORIAL, REFORMER])
EQUAL = R.sweep("qkv_tie")
MATCHED = R.sweep("qkv_tie_matched")
display(Q)

# %%
if EQUAL.ready and MATCHED.ready:
    equal = R.at_best_lr(EQUAL.df, metric="val/acc_mean")
    matched = R.at_best_lr(MATCHED.df, metric="val/acc_mean")
    arms = pd.concat([equal.assign(size="equal"), R.rows(equal, {"model.qkv_tie": "none"}).assign(size="matched"),
                      matched.assign(size="matched")], ignore_index=True)
    arms["projections"] = arms["model.qkv_tie"].map(ARMS)
    arms["size"] = arms["size"].map(SIZES)
    fig, ax = F.subplots(figsize=(6, 3.8))
    sns.pointplot(arms, x="projections", y=METRIC, hue="size", order=list(ARMS.values()),
                  hue_order=list(SIZES.values()), errorbar=R.errorbar, seed=0, dodge=0.3, linestyle="none", ax=ax)
    F.reference_lines(ax, arms, split="test")
    ax.set(xlabel="W_Q, W_K, W_V", ylabel="test accuracy",
           title="position-and-count task, 1 layer, 4 heads")
    F.legend(ax)
    F.stamp(fig, EQUAL, MATCHED)
    fig_qkv = R.savefig(fig, "qkv_tie")
else:
    arms = None
    print(EQUAL.missing or MATCHED.missing)

# %% tags=["answer"]
if arms is None:
    Q.not_run_yet(EQUAL, MATCHED)
else:
    def arm(tie: str, size: str) -> dict:
        return {"model.qkv_tie": tie, "size": SIZES[size]}

    floor = float(arms["ref/test/position_only"].max())
    effects = {f"{tie}_{size}": R.paired(arms, METRIC, arm("none", size), arm(tie, size))
               for tie in ("kv", "qk") for size in SIZES}
    acc = {f"{tie}_{size}": R.estimate(arms, METRIC, arm(tie, size)) for tie in ("kv", "qk") for size in SIZES}
    params = {f"{tie}_{size}": int(R.rows(arms, arm(tie, size))["params/total"].iloc[0])
              for tie in ARMS for size in SIZES if not (tie == "none" and size == "matched")}
    checks = [
        TUTORIAL.greater(
            effects["kv_matched"], "poshist, test accuracy, separate − K = V tied, same parameters, paired by seed",
            level=floor, primary=True,
            reason="at equal parameters only the tie differs; poshist finds by position and fetches a token",
            what_zh="位置与计数任务，测试准确率，分开 − K = V 共用，参数量相同，按种子配对",
            reason_zh="参数量相同时，两组只差是否共用；位置与计数任务按位置找、取回的却是词元"),
        TUTORIAL.greater(
            effects["kv_equal"], "poshist, test accuracy, separate − K = V tied, same width, paired by seed",
            level=floor, primary=False, reason="the tie as a saving: one projection fewer",
            what_zh="位置与计数任务，测试准确率，分开 − K = V 共用，宽度相同，按种子配对", reason_zh="把共用当作节省：少一个投影"),
        REFORMER.below(
            effects["qk_matched"], MARGIN,
            "poshist, test accuracy, separate − Q = K tied, same parameters, paired by seed (non-inferiority, changed "
            "after the pilot)", primary=True,
            reason="the paper's claim is no loss; here without its ban on a token attending to itself",
            what_zh="位置与计数任务，测试准确率，分开 − Q = K 共用，参数量相同，按种子配对（非劣效检验，读过试跑后改定）",
            reason_zh="论文说不会变差；这里没有它「词元不许关注自己」的限制"),
        REFORMER.below(
            effects["qk_equal"], MARGIN, "poshist, test accuracy, separate − Q = K tied, same width, paired by seed",
            primary=False, reason="the tie as a saving: one projection fewer",
            what_zh="位置与计数任务，测试准确率，分开 − Q = K 共用，宽度相同，按种子配对", reason_zh="把共用当作节省：少一个投影"),
    ]
    Q.answer(
        record=dict(separate=R.estimate(arms, METRIC, arm("none", "equal")), floor=floor,
                    heads=int(arms["model.n_heads"].iloc[0]),
                    d_head=int(EQUAL.df["model.n_heads"].rdiv(EQUAL.df["model.d_model"]).iloc[0]),
                    d_head_matched=int(MATCHED.df["model.d_head"].iloc[0]),
                    **{f"acc_{k}": v for k, v in acc.items()}, **{f"diff_{k}": v for k, v in effects.items()},
                    **{f"params_{k}": v for k, v in params.items()}),
        details=lambda lang: [R.lr_phrase(pd.concat([EQUAL.df, MATCHED.df]), lang=lang) + R.full_stop(lang),
                              EQUAL.still_learning(arms, lang=lang), R.caveat(arms, lang=lang)],
        checks=checks, figure=fig_qkv,
    )
