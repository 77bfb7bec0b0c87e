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
# # LayerNorm or RMSNorm: does the norm need its centring?
#
# One claim, from sweep `norm_type`. Its title, question and sweep are in its study manifest,
# `reports/norm_type.yaml`; the model's `model.norm_type=rms` is torch's `nn.RMSNorm` in the place of every
# LayerNorm (`ablate/models/block.py`, eps 1e-5 for both). This study is issue 38's check that a question
# takes three files and its data: this notebook, its manifest and its sweep file, nothing under `ablate/`.
#
# ## The test, fixed before the runs
#
# Written and committed before any run of sweep `norm_type`; the git history shows the order. LayerNorm
# takes each token's mean away, divides by the standard deviation, then scales and shifts (a gain and a bias);
# RMSNorm (Zhang & Sennrich 2019) only divides by the root mean square and scales. Both erase a token's length,
# which is the part of the tutorial's 「抹掉长度/尺度，只保留方向」 both keep; only LayerNorm also erases the
# mean. The paper's claim: the re-centring is dispensable, accuracy comparable. **The runs:** the tutorial's
# MNIST model at the quick budget, LayerNorm or RMSNorm at Post-LN (the tutorial's) and at Pre-LN, each of the
# four at its own learning rate (4 values on seed 0, the best on `val/acc_best`), then 5 seeds.
#
# | claim | anchor | kind | primary test | why this test |
# | --- | --- | --- | --- | --- |
# | RMSNorm | Zhang & Sennrich 2019: re-centring is dispensable | outcome | **Post-LN**, test accuracy, RMSNorm − LayerNorm, paired by seed, the same within `MARGIN` (1 point) | the tutorial's placement; a point is less than the spread between MNIST models the findings call different, and a 5-seed paired interval at the quick budget is about as wide |
#
# Supporting (never moves a verdict): the same comparison at Pre-LN; each arm's parameters (an RMSNorm has no
# bias: d_model fewer per norm).
#
# The answer's words were fixed with the test: *agrees*, "yes: without its centring the model learns as well";
# *disagrees*, "no: the centring matters here"; otherwise "these runs do not decide it".

# %%
import matplotlib.pyplot as plt  # noqa: F401 - the figures' backend, before seaborn
import seaborn as sns
from IPython.display import display

from ablate import report as R
from ablate.report import figures as F

MARGIN = 0.01  # the primary test: RMSNorm within 1 point of LayerNorm at Post-LN is "the same"
ARMS = {"layer": "LayerNorm", "rms": "RMSNorm"}

R.setup()

ZHANG = R.Anchor(
    "Zhang & Sennrich 2019",
    "re-centring is dispensable: a norm that only divides by the root mean square (RMSNorm) learns as well as "
    "LayerNorm",
    "减均值这一步可有可无：只除以均方根的归一化（RMSNorm）和层归一化学得一样好",
    wording="re-centering invariance in LayerNorm is dispensable",
)
Q = R.question("claim-norm-type", anchors=[ZHANG])
NORMS = R.sweep("norm_type")
display(Q)

# %%
if NORMS.ready:
    best = R.at_best_lr(NORMS.df)
    best["norm layer"] = best["model.norm_type"].map(ARMS)
    best["norm placement"] = best["model.norm"].map({"post": "Post-LN", "pre": "Pre-LN"})
    fig, ax = F.subplots(figsize=(6, 3.8))
    sns.pointplot(best, x="norm placement", y="test/acc", hue="norm layer", order=["Post-LN", "Pre-LN"],
                  hue_order=list(ARMS.values()), errorbar=R.errorbar, seed=0, dodge=0.3, linestyle="none", ax=ax)
    F.reference_lines(ax, best, split="test")
    ax.set(xlabel="norm placement", ylabel="test accuracy", title="MNIST rows: LayerNorm or RMSNorm")
    F.legend(ax)
    F.stamp(fig, NORMS)
    fig_norms = R.savefig(fig, "norm_type")
else:
    best = None
    print(NORMS.missing)

# %% tags=["answer"]
if best is None:
    Q.not_run_yet(NORMS)
else:
    post = R.paired(best, "test/acc", {"model.norm_type": "rms", "model.norm": "post"},
                    {"model.norm_type": "layer", "model.norm": "post"})
    pre = R.paired(best, "test/acc", {"model.norm_type": "rms", "model.norm": "pre"},
                   {"model.norm_type": "layer", "model.norm": "pre"})
    level = float(best["ref/test/chance"].max())
    acc = {(t, n): R.estimate(best, "test/acc", {"model.norm_type": t, "model.norm": n})
           for t in ARMS for n in ("post", "pre")}
    params = {t: int(R.rows(best, {"model.norm_type": t, "model.norm": "post"})["params/total"].iloc[0]) for t in ARMS}
    checks = [
        ZHANG.same(post, "Post-LN, test accuracy, RMSNorm − LayerNorm, paired by seed", margin=MARGIN, level=level,
                   primary=True, reason="the tutorial's placement; the paper's claim is comparable accuracy",
                   what_zh="Post-LN，测试准确率，RMSNorm − 层归一化，按种子配对",
                   reason_zh="这是教程的放置方式；论文的说法是准确率相当"),
        ZHANG.same(pre, "Pre-LN, test accuracy, RMSNorm − LayerNorm, paired by seed", margin=MARGIN, level=level,
                   primary=False, reason="the other placement",
                   what_zh="Pre-LN，测试准确率，RMSNorm − 层归一化，按种子配对", reason_zh="另一种放置方式"),
    ]
    Q.answer(
        record=dict(post=post, pre=pre, params_layer=params["layer"], params_rms=params["rms"],
                    **{f"acc_{t}_{n}": acc[t, n] for t, n in acc}),
        details=lambda lang: [R.lr_phrase(NORMS.df, lang=lang) + R.full_stop(lang), NORMS.still_learning(best, lang=lang),
                              R.caveat(best, lang=lang)],
        checks=checks, figure=fig_norms,
    )
