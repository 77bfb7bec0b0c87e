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
# # Q3 · Several small heads or one big one
#
# **Primary comparison** (sweep `heads`, `sweeps/heads.yaml`): 1, 2, 4, 8, 16 heads at a fixed d_model
# = 64 (d_k = 64 / heads: the same parameters and compute for every head count), on the **lookup task**
# and its **one-lookup control**, with a 1-layer, attention-only model, each variant at its own learning
# rate. **Why lookup:** each position's target is the ordered pair of the two tokens before it — two
# relations at once. One softmax that puts weight on both positions mixes their values and can keep
# which is which only through unequal weights; two heads can each fetch one. The control (`lookup1`:
# the token two back) needs one relation, so any head effect seen on lookup but not on the control is
# about the number of relations. **Why one attention-only layer:** a second layer could fetch the two
# tokens one after the other.
#
# **Secondary:** `heads_tutorial`, the tutorial's 2-layer model (FFN, learned positions) on lookup,
# 1–16 heads, Adam's 1e-3, 3 seeds.
#
# **Learning rates:** 4 values spanning 33× are tried on seed 0; each variant's best on validation is
# run on 5 seeds. The choice is made on `val/acc_mean`, the mean of every epoch's validation accuracy
# (the area under the learning curve), not on `val/acc_best`: every rate that solves the task ties
# at 100 % on the best, and the rule then takes the smallest rate, not the fastest.

# %% [markdown]
# ## The tests, fixed before the data are read
#
# *Provenance, said plainly:* these tests and margins were written when the answers were rebuilt for
# issue 14, after an earlier build of these findings had been read. Each reason below rests on the paper
# or on the task's design, not on an outcome, and none was changed to reach a verdict; a deviation made
# after reading an outcome is marked as such where there is one.
#
# Each published anchor has **one primary test**; the other comparisons are supporting evidence and
# do not move the verdict.
#
# | anchor | kind | primary test | why this test |
# | --- | --- | --- | --- |
# | Vaswani §3.2.2: one head averages (**the tutorial's claim**) | outcome | lookup, **2 heads vs 1**, optimiser steps until validation first reaches 99 % (a run that never does censored at its budget, ranked last), fewer: exact Mann–Whitney | the tutorial's claim, read as the data can decide it: the solved one-head runs spread their weight evenly and still reach 100 %, so one head *can* do both lookups; what averaging costs it is speed and reliability, which time to solve measures, a failed run included |
# | Vaswani Table 3 (A): 1 head worse than 8 (side anchor) | outcome | lookup, **8 heads vs 1**, steps to 99 % (censored), fewer: exact Mann–Whitney | Table 3 (A) compares 1 head with the base model's 8 at equal compute; here too. Most runs reach 100 %, so final accuracy cannot separate them |
# | Vaswani Table 3 (A): too many heads worse again (side anchor) | outcome | lookup, **16 heads vs 8**, steps to 99 % (censored), more: exact Mann–Whitney | the most heads this width allows (d_k = 4) against the base model's 8 |
#
# **Changed after the outcome was read** (issue 24): the three primary tests above were Welch's t on
# `val/acc_mean` for the two Table 3 (A) rows and the largest attention weight per row (2 heads vs 1)
# for §3.2.2. A review of the quick tables found that one failed one-head seed swamps a mean of
# accuracies (and inflates the mean largest weight: 0.935 at 10 % accuracy), while a rank test on time
# to solve, the failed run censored, separates 1 from 2 and 8 heads (p ≈ 0.008 each, computed by the
# review before these tests were written). The rank test on time to solve is the right test for a
# speed claim whatever the data; the change is marked because its outcome was known when it was made.
# The old tests are kept as supporting evidence.
#
# ## Two relations of different kinds, decided before the runs of `heads_poshist` (issue 24)
#
# Written and committed before any run of sweeps `heads_poshist` and `heads_poshist_16`; the git history
# shows the order. **Why a new task:** `lookup` asks for two relations of the same, positional kind; the
# tutorial's story is that one head must average *different* relations (syntax and meaning). `poshist`
# (docs/tasks/poshist.md) asks at every token for the token two back (a positional relation: a head at
# offset −2) and whether the current token occurs again (a content relation: a head on the equal tokens
# and BOS, read by the FFN), as one of 20 classes. A model that serves only the positional relation sits
# at its `position_only` level (57.8 % at quick), one that serves only the count at `order_blind` (31.9 %).
# One attention layer with its FFN (the count needs the FFN; one layer cannot compose two attention steps),
# d_model 64, d_k = 64 / heads, 10 seeds, each head count at its own learning rate. **Pilot runs** (sizing
# the task, 2 seeds, Adam 1e-3 untuned; design data, not results): 1 and 2 heads stayed at the
# position-only level, 4 heads reached 74–84 %, 8 heads 99 %. The tests below were fixed from the claims,
# not from those numbers: the smallest split that gives each relation a head of its own is 2.
#
# | anchor | primary test (sweep · variants · metric) | why this test |
# | --- | --- | --- |
# | Vaswani §3.2.2: one head averages (**the tutorial's claim**) | `heads_poshist` · **2 heads vs 1** · test accuracy, paired by seed · greater | two relations of different kinds, the smallest split that gives each a head; the position-only level as the floor (changed after reading, below) |
# | Vaswani Table 3 (A): 1 head worse than 8 (side) | `heads_poshist` · **8 heads vs 1** · test accuracy, paired · greater | the paper's comparison at equal compute |
# | Vaswani Table 3 (A): too many heads worse again (side) | `heads_poshist_16` d_k 4 vs `heads_poshist` 8 heads · test accuracy, paired · less | the most heads this width allows against the base model's 8 |
# | Bhojanapalli et al. 2020: a head narrower than the sequence is a low-rank bottleneck (side, new) | `heads_poshist_16` · 16 heads at d_k 16 vs at d_k 4 (the sequence is 9 long) · test accuracy, paired · greater | their fix: the head size set by the sequence length, not by d_model / heads |
#
# **Changed after the outcome was read** (issue 37): the floor of these tests was chance, with the note that
# "a run at the position-only level has learned one relation, not nothing". Both arms of the 2-vs-1 test
# then sat at the position-only level (56.1 % and 56.0 % against 57.5 %; five times the steps did not move
# them), and the findings' own rule says two arms that both failed are no evidence: for a claim about
# serving two relations, a run that serves one has failed. The floor is now the position-only level, as
# the rule asks; the change is marked because the outcome was known when it was made.
#
# The `lookup` tests above become supporting once `heads_poshist` is there (the same-kind control).
# Supporting on `poshist`: 4 vs 1 and 4 vs 2 heads; the accuracy lost when one head alone is masked after
# training (`probe/final/head_drop_l0_h*`, validation): a head count whose heads specialise loses the
# count with one head and the position with another.
#
# Supporting: the largest attention weight per row (2 heads vs 1) on the runs that solved the task and
# on all runs, both labelled; `val/acc_mean` 2 vs 1, 8 vs 1 and 16 vs 8 (the earlier primary tests); the
# same comparisons on the one-lookup control, where the averaging argument predicts no head effect — a
# claim of sameness, tested with an equivalence margin (TOST) of `CONTROL_MARGIN`; the tutorial's
# 2-layer model.

# %%
import math

import matplotlib.pyplot as plt  # noqa: F401 - the figures' backend, before seaborn
import numpy as np
import pandas as pd
import seaborn as sns
from IPython.display import display

from ablate import report as R
from ablate.report import figures as F

PRIMARY_TASK, CONTROL_TASK = "lookup", "lookup1"
MECHANISM = "probe/final/rowmax_l0"  # layer 0's largest attention weight per query row, after training
OUTCOME = "val/acc_mean"  # the mean of every epoch's validation accuracy: the area under the learning curve
ONE, TWO, BASE, MANY = 1, 2, 8, 16  # heads: the single head, the smallest split, Vaswani's base, the most
# Sameness on the control: 2 points of val/acc_mean. At quick a run has 20 validation checks, so one check
# earlier or later in reaching 100 % moves the mean by at most 1/20 of the gap at that check; a smaller
# difference than 2 points is below what the check schedule resolves.
CONTROL_MARGIN = 0.02

R.setup()
AVERAGING = R.Anchor(
    "Vaswani et al. 2017, §3.2.2",
    "with a single attention head, averaging inhibits attending to information at different positions at once",
    "只有一个注意力头时，加权平均会妨碍同时关注不同位置的信息",
    tutorial=True,
    wording="Multi-head attention allows the model to jointly attend to information from different representation "
            "subspaces at different positions. With a single attention head, averaging inhibits this.",
)
ONE_HEAD = R.Anchor(
    "Vaswani et al. 2017, Table 3 (A)",
    "at equal compute, one head is worse than eight (1 head 24.9 BLEU against 25.8 for 8, newstest2013, one run each)",
    "在计算量相同的情况下，一个头比八个头差（newstest2013 上 1 个头 24.9 BLEU，8 个头 25.8，各一次运行）",
    wording="While single-head attention is 0.9 BLEU worse than the best setting, quality also drops off with too many "
            "heads.",
    label="Vaswani et al. 2017, Table 3 (A), one head",
    label_zh="Vaswani et al. 2017, Table 3 (A)，一个头",
)
TOO_MANY = R.Anchor(
    "Vaswani et al. 2017, Table 3 (A)",
    "too many heads are worse again (32 heads, d_k = 16: 25.4 BLEU against 25.8 for 8, one run each)",
    "头太多又会变差（32 个头、d_k = 16 时 25.4 BLEU，8 个头 25.8，各一次运行）",
    wording="While single-head attention is 0.9 BLEU worse than the best setting, quality also drops off with too many "
            "heads.",
    label="Vaswani et al. 2017, Table 3 (A), too many heads",
    label_zh="Vaswani et al. 2017, Table 3 (A)，头太多",
)
BOTTLENECK = R.Anchor(
    "Bhojanapalli et al. 2020",
    "a head whose size d_k is below the sequence length cannot express every attention pattern over it (a low-rank "
    "bottleneck); setting d_k by the length instead of by d_model / heads removes it",
    "头的维度 d_k 小于序列长度时，它无法表达序列上所有的注意力模式（低秩瓶颈）；按序列长度而不是 d_model / 头数来定 d_k 可以消除它",
    wording="\"We identify one of the important factors contributing to the large embedding size requirement ... the "
            "low-rank bottleneck in attention heads\"",
)
Q = R.question("q3", anchors=[AVERAGING, ONE_HEAD, TOO_MANY, BOTTLENECK])
S, TUT = R.sweep("heads"), R.sweep("heads_tutorial")
PH, PH16 = R.sweep("heads_poshist"), R.sweep("heads_poshist_16")  # two relations of different kinds (issue 24)
PH_METRIC = "test/acc"
display(Q)


# %%
def prepare(df):
    """The table with d_k, the task's name, whether each run solved its task (>= 99 % validation), and the
    columns the answer reads even where no run produced them (no run solved: no val/step_solved)."""
    df = df.copy()
    df["model.n_heads"] = df["model.n_heads"].astype(int)
    df["d_k"] = (df["model.d_model"] // df["model.n_heads"]).astype(int)
    df["task"] = df["data.task"].map(lambda t: R.TASKS.get(t, t))
    df["solved"] = df["val/acc_best"] >= R.SOLVED
    for column in ("val/step_solved", OUTCOME, MECHANISM):
        if column not in df:
            df[column] = np.nan
    return df


def at(task, heads):
    return {"data.task": task, "model.n_heads": heads}


def heads_word(h, zh=False):
    return f"{h} 个头" if zh else f"{h} head{'s' if h != 1 else ''}"


if S.ready:
    best = prepare(R.at_best_lr(S.df))
    tasks = [t for t in (PRIMARY_TASK, CONTROL_TASK) if t in set(best["data.task"])] or sorted(best["data.task"].unique())
    heads = sorted(int(h) for h in best["model.n_heads"].unique())
    HEADS = F.order("model.n_heads", heads)
    summary = best.groupby(["task", "model.n_heads", "d_k", "optim.lr"], as_index=False).agg(
        runs=("seed", "count"), solved=("solved", "sum"), val_acc_mean=(OUTCOME, "mean"),
        test_acc=("test/acc", "mean"), median_steps_to_99=("val/step_solved", "median"),
        rowmax_after_training=(MECHANISM, "mean"))
    print(R.lr_phrase(S.df))
    R.show_table(summary)
else:
    print(S.missing)
if TUT.ready:
    tut = prepare(TUT.df)

# %% [markdown]
# ## What one head does with two relations: its attention weights
# The largest attention weight per query row after training, by head count (each head's rows counted).
# A head that fetches one token puts nearly all its weight on it (near 1); one that must fetch two
# splits it (near 1/2 for an even split).

# %%
if S.ready:
    fig, ax = F.subplots(figsize=(6.5, 3.8))
    sns.pointplot(best, x="model.n_heads", y=MECHANISM, hue="task", order=HEADS,
                  hue_order=F.order("data.task", tasks, R.TASKS), palette=F.palette("data.task", tasks, R.TASKS),
                  errorbar=R.errorbar, dodge=0.2 if len(tasks) > 1 else False, ax=ax)
    F.hline(ax, 0.5, "even split over two positions", ls=":")
    ax.set(xlabel="heads (d_k = 64 / heads)", ylabel="largest weight per row", ylim=(0, 1.02),
           title="layer-0 attention after training")
    F.legend(ax, "task", outside=True)
    F.stamp(fig, S)
    fig_mech = R.savefig(fig, "q3_attention")

# %% [markdown]
# ## How fast each head count learns
# Left: the area under the validation curve (`val/acc_mean`, the primary outcome). Right: the optimiser
# steps until validation first reached 99 %, for the runs that got there (the table above says how
# many did). Bars: 95 % bootstrap intervals over seeds.

# %%
if S.ready:
    fig, axes = F.subplots(1, 2, figsize=(12, 3.8))
    for ax, y, label in zip(axes, (OUTCOME, "val/step_solved"),
                            ("mean validation accuracy over training", "optimiser steps to 99 %")):
        sns.pointplot(best, x="model.n_heads", y=y, hue="task", order=HEADS,
                      hue_order=F.order("data.task", tasks, R.TASKS), palette=F.palette("data.task", tasks, R.TASKS),
                      errorbar=R.errorbar, dodge=0.2 if len(tasks) > 1 else False, ax=ax)
        ax.set(xlabel="heads (d_k = 64 / heads)", ylabel=label)
    F.reference_lines(axes[0], R.rows(best, {"data.task": tasks[0]}))
    axes[0].set(title=f"area under the learning curve ({R.TASKS.get(tasks[0], tasks[0])}: its reference levels)")
    axes[1].set(title="steps until validation reaches 99 % (the runs that got there)")
    # a run that never reached 99 % has no step to draw: say so at its head count, so no run drops out unseen
    for i, n_heads in enumerate(HEADS):
        for j, on in enumerate(tasks):
            runs = R.rows(best, {"model.n_heads": n_heads, "data.task": on})
            n_solved = int(pd.to_numeric(runs["val/step_solved"], errors="coerce").notna().sum())
            if len(runs) and n_solved < len(runs):
                axes[1].annotate(f"{n_solved}/{len(runs)} solved", (i, 0), xycoords=("data", "axes fraction"),
                                 xytext=(0, 4 + 11 * j), textcoords="offset points", ha="center", va="bottom",
                                 fontsize="small",
                                 color=F.palette("data.task", tasks, R.TASKS)[R.TASKS.get(on, on)])
    for ax in axes:
        F.legend(ax, "task")
    F.stamp(fig, S)
    fig_acc = R.savefig(fig, "q3_accuracy")

# %% [markdown]
# ## Learning curves of the primary comparison
# Validation accuracy over training on each task, mean over seeds with its 95 % band, each head count
# at its chosen learning rate.

# %%
if S.ready:
    fig, axes = F.subplots(1, len(tasks), figsize=(6 * len(tasks), 3.6), squeeze=False, sharey=True)
    for ax, t in zip(axes[0], tasks):
        F.learning_curves(S, "val/acc", hue="model.n_heads", where={"data.task": t}, runs=best, ax=ax,
                          outside=t == tasks[-1], title=R.TASKS.get(t, t))
        ax.set(xlabel="optimiser step", ylabel="validation accuracy")
        if t != tasks[-1] and ax.get_legend() is not None:
            ax.get_legend().remove()
    F.stamp(fig, S)
    R.savefig(fig, "q3_curves")

# %% [markdown]
# ## Which heads matter: masking one head after training (poshist)
# Michel et al. (2019) mask one head at a time in a trained model: most heads can go at little cost, a few
# cannot. `probe/final/head_drop_l0_h*` is the validation accuracy lost when that head alone is masked. Per head
# count (its chosen learning rate, every seed): the largest and the smallest loss among its heads (mean over
# seeds), and how many heads cost more than 5 points each. Two heads that specialised (one on the position,
# one on the count) would each cost a large part of the accuracy; two heads that learned the same relation
# cost nothing each, since the other still serves it.


# %%
def masking(df):
    """Per head count: runs, test accuracy, mean largest / smallest head_drop over its heads, heads > 5 points."""
    out = []
    for h in sorted(int(x) for x in df["model.n_heads"].unique()):
        g = df[df["model.n_heads"] == h]
        cols = [f"probe/final/head_drop_l0_h{i}" for i in range(h)]
        if not all(c in g for c in cols):
            continue
        drops = g[cols].to_numpy(dtype=float)
        out.append({"heads": h, "runs": len(g), "test/acc (mean)": g[PH_METRIC].mean(),
                    "largest loss (mean)": np.nanmean(np.nanmax(drops, axis=1)),
                    "smallest loss (mean)": np.nanmean(np.nanmin(drops, axis=1)),
                    "heads costing > 5 points (mean)": float(np.mean((drops > 0.05).sum(axis=1)))})
    return pd.DataFrame(out)


head_masking = masking(R.at_best_lr(PH.df)) if PH.ready else pd.DataFrame()
if len(head_masking):
    R.show_table(head_masking)
else:
    print(PH.missing or "no head-masking probes in heads_poshist (run.expensive_probes off)")

# %% [markdown]
# ## Do the heads specialise? Each head's weight on the two relations (poshist)
# Export computes, from each trained model, where every head of its one layer puts its weight (the mean
# over query positions of 256 validation sequences): on the token two back (the positional relation) and on
# the positions holding the query's own token plus BOS (the content relation: a counting head spreads its
# weight over the equal tokens and BOS alike). One dot per head and seed, one panel per head count. A
# head count whose heads specialise has dots near both axes' ends: a head near (1, 0) and another high on
# the content axis. *A descriptive readout, defined after the runs had been read, not a test:* a head serves
# the positional relation when it puts more than half its weight on the token two back; it serves the
# content relation when it puts more than half on its own token and BOS together **and** more than
# `MIN_PART` on each (a head parked on BOS alone, or on itself alone, does not count: it cannot read a count).

# %%
SPECIALISED = 0.5  # a head serves a relation when it puts more than half its weight on it
MIN_PART = 0.1  # ... and a content head more than this on its own token and on BOS each (see above)


def relation_table(df, sweep):
    """One row per run and head: heads, seed, weight on the token two back, on its own token + BOS."""
    out = []
    for _, r in df.iterrows():
        w = sweep.arrays.get(f"{r['run_id']}/final/relation_weights")
        if w is None:
            continue
        for h, (back, own, bos) in enumerate(w[0]):  # layer 0
            out.append({"model.n_heads": int(r["model.n_heads"]), "seed": int(r["seed"]), "head": h,
                        "token two back": float(back), "own token + BOS": float(own + bos),
                        "own token": float(own), "BOS": float(bos)})
    return pd.DataFrame(out)


def specialisation(rel):
    """Per head count: runs, mean of the largest positional and content weight over heads, and the share of
    runs where one head serves the positional relation and another the content one (> SPECIALISED each)."""
    out = []
    for h, g in rel.groupby("model.n_heads"):
        per_run = []
        for _, run in g.groupby("seed"):
            pos, con = run["token two back"].to_numpy(), run["own token + BOS"].to_numpy()
            counting = (run["own token"].to_numpy() > MIN_PART) & (run["BOS"].to_numpy() > MIN_PART)
            con = np.where(counting, con, 0.0)  # a head on BOS alone or on itself alone reads no count
            i, j = int(pos.argmax()), int(con.argmax())
            per_run.append((pos.max(), con.max(), i != j and pos[i] > SPECIALISED and con[j] > SPECIALISED))
        a = np.array(per_run, dtype=float)
        out.append({"heads": int(h), "runs": len(a), "largest weight on the token two back (mean)": a[:, 0].mean(),
                    "largest weight on own token + BOS (mean)": a[:, 1].mean(), "runs with one head per relation": int(a[:, 2].sum())})
    return pd.DataFrame(out)


relations = relation_table(R.at_best_lr(PH.df), PH) if PH.ready else pd.DataFrame()
heads_split = specialisation(relations) if len(relations) else pd.DataFrame()
fig_rel = None
if len(relations):
    R.show_table(heads_split)
    counts = sorted(relations["model.n_heads"].unique())
    fig, axes = F.subplots(1, len(counts), figsize=(3.1 * len(counts), 3.3), sharex=True, sharey=True)
    for ax, h in zip(np.atleast_1d(axes), counts):
        g = relations[relations["model.n_heads"] == h]
        ax.scatter(g["token two back"], g["own token + BOS"], s=14, alpha=0.6, color=F.palette("model.n_heads", [h])[h])
        ax.axvline(SPECIALISED, color="grey", lw=0.6, ls=":")
        ax.axhline(SPECIALISED, color="grey", lw=0.6, ls=":")
        ax.set(xlim=(-0.03, 1.03), ylim=(-0.03, 1.03), title=heads_word(int(h)), xlabel="weight on the token two back")
    np.atleast_1d(axes)[0].set_ylabel("weight on own token + BOS")
    F.stamp(fig, PH, extra="one dot per head and seed, layer 0, 256 validation sequences")
    fig_rel = R.savefig(fig, "q3_relations")
else:
    print(PH.missing or "no relation weights exported for heads_poshist (`ablate report export` computes them "
          "from the runs' checkpoints)")

# %% [markdown]
# ## The tutorial's 2-layer model on lookup

# %%
if TUT.ready:
    fig, ax = F.subplots(figsize=(6.5, 3.6))
    sns.pointplot(tut, x="model.n_heads", y="val/step_solved", order=F.order("model.n_heads", tut["model.n_heads"]),
                  errorbar=R.errorbar, color=F.palette("data.task", ["lookup"])["lookup"], ax=ax)
    ax.set(xlabel="heads", ylabel="optimiser steps to 99 %", title="tutorial's 2-layer model on lookup")
    F.stamp(fig, TUT)
    R.savefig(fig, "q3_tutorial")
else:
    print(TUT.missing)


# %% tags=["answer"]
from ablate.report.answers import correct  # noqa: E402 - the verdicts after Holm, for the plain answer's wording

TASK_ZH = {"lookup": "查找任务", "lookup1": "单查找对照任务", "poshist": "位置与计数任务"}
VASWANI_HEADS, VASWANI_D_K = 32, 16  # Vaswani et al. 2017, Table 3 (A): the most heads they tried, and their d_k


def solved(df, task, h):
    """(en, zh): how many runs of `h` heads solved `task` (>= 99 % validation), with the exact interval and
    the median steps they took to 99 %."""
    f = R.learned(df, at(task, h), threshold=R.SOLVED)
    steps = [s for s in f.steps if s == s]
    median = float(np.median(steps)) if steps else None
    en = f"{f}" + (f", median {median:.0f} steps" if median is not None else "")
    cn = f"{f:zh}" + (f"，中位数 {median:.0f} 步" if median is not None else "")
    return en, cn


if not S.ready:
    Q.not_run_yet(S)
else:
    task, control = tasks[0], (CONTROL_TASK if CONTROL_TASK in tasks else None)
    one, two = (ONE if ONE in heads else heads[0]), (TWO if TWO in heads else heads[min(1, len(heads) - 1)])
    base, many = (BASE if BASE in heads else heads[len(heads) // 2]), (MANY if MANY in heads else heads[-1])
    name, name_zh = R.TASKS.get(task, task), TASK_ZH.get(task, task)

    mech = R.compare(best, MECHANISM, at(task, two), at(task, one))
    solved_only = best[best["solved"]]
    mech_solved = R.compare(solved_only, MECHANISM, at(task, two), at(task, one))
    eight_one = R.compare(best, OUTCOME, at(task, base), at(task, one))
    many_base = R.compare(best, OUTCOME, at(task, many), at(task, base))
    speed = {h: R.time_to_solve(best, at(task, h)) for h in heads}
    fast_two, fast_base = R.solve_test(speed[two], speed[one]), R.solve_test(speed[base], speed[one])
    slow_many = R.solve_test(speed[base], speed[many])  # the claim: 16 heads slower than 8, i.e. 8 faster
    lvl = R.level(best, {"data.task": task})
    steps_en, steps_zh = "steps until validation first reaches 99 %", "验证准确率首次达到 99% 所需的步数"
    checks = [
        AVERAGING.faster(fast_two, f"{name}, {steps_en}, {two} heads vs {one}", primary=not PH.ready,
                         reason="what averaging costs one head that can still do both lookups: speed and reliability; "
                                "a failed run counts as the slowest (changed after the outcome was read: see the tests' "
                                "header)",
                         what_zh=f"{name_zh}，{steps_zh}，{two} 个头对 {one} 个头",
                         reason_zh="能完成两次查找的单头因平均而付出的代价：速度和可靠性；失败的运行算作最慢"
                                   "（在读到结果之后改定：见检验说明）"),
        ONE_HEAD.faster(fast_base, f"{name}, {steps_en}, {base} heads vs {one}", primary=not PH.ready,
                        reason="Table 3 (A)'s comparison at equal compute, on time to solve (changed after the outcome "
                               "was read: see the tests' header)",
                        what_zh=f"{name_zh}，{steps_zh}，{base} 个头对 {one} 个头",
                        reason_zh="Table 3 (A) 在计算量相同时所做的比较，比较解决任务所需的步数（在读到结果之后改定）"),
        TOO_MANY.faster(slow_many, f"{name}, {steps_en}, {base} heads vs {many}", primary=not PH.ready,
                        reason=f"the most heads this width allows (d_k = {64 // many}) against the base model's {base}: "
                               f"the claim says {many} are slower (changed after the outcome was read)",
                        what_zh=f"{name_zh}，{steps_zh}，{base} 个头对 {many} 个头",
                        reason_zh=f"这个宽度所允许的最多的头（d_k = {64 // many}）对基础模型的 {base} 个头："
                                  f"论断认为 {many} 个头更慢（在读到结果之后改定）"),
    ]
    ph = prepare(R.at_best_lr(PH.df)) if PH.ready else None
    ph16 = prepare(R.at_best_lr(PH16.df)) if PH16.ready else None
    if ph is not None:  # the primary tests on two relations of different kinds (issue 24, written before the runs)
        pname, pname_zh = R.TASKS.get("poshist", "poshist"), TASK_ZH.get("poshist", "poshist")
        # the floor: the position-only level. A run there has learned one relation of the two, and the claim is
        # about serving both, so two arms at that level are no evidence on it (the findings' rule). Changed after
        # the outcome was read (issue 37): the floor was chance (both arms sat at the position-only level).
        floor = float(ph["ref/test/position_only"].mean())

        def ph_at(h):
            return {"model.n_heads": h}

        def vs(a, b):
            return (f"{pname}, test accuracy, {heads_word(a)} vs {b if isinstance(b, str) else heads_word(b)}, paired by seed",
                    f"{pname_zh}，测试准确率，{heads_word(a, True)} 对 {b if isinstance(b, str) else heads_word(b, True)}，按种子配对")

        w = vs(2, 1)
        checks.append(AVERAGING.greater(R.paired(ph, PH_METRIC, ph_at(2), ph_at(1)), w[0], level=floor, primary=True,
                                        reason="two relations of different kinds; 2 heads is the smallest split that gives "
                                               "each a head (written before the runs)", what_zh=w[1],
                                        reason_zh="两种不同类型的关系；2 个头是让每种关系各有一个头的最小拆分（在运行之前写定）"))
        w = vs(8, 1)
        checks.append(ONE_HEAD.greater(R.paired(ph, PH_METRIC, ph_at(8), ph_at(1)), w[0], level=floor, primary=True,
                                       reason="Table 3 (A)'s comparison at equal compute (written before the runs)",
                                       what_zh=w[1], reason_zh="Table 3 (A) 在计算量相同时的比较（在运行之前写定）"))
        for a, b in ((4, 1), (4, 2)):
            w = vs(a, b)
            checks.append(AVERAGING.greater(R.paired(ph, PH_METRIC, ph_at(a), ph_at(b)), w[0], level=floor,
                                            primary=False, what_zh=w[1]))
        if ph16 is not None:
            thin, wide = {"model.d_head": 4}, {"model.d_head": 16}
            pooled = pd.concat([ph16.assign(arm=ph16["model.d_head"].map(lambda d: f"16x{int(d)}")),
                                R.rows(ph, ph_at(8)).assign(arm="8x8")])
            w = (f"{pname}, test accuracy, 16 heads of d_k 4 vs 8 heads of 8, paired by seed",
                 f"{pname_zh}，测试准确率，16 个 d_k = 4 的头对 8 个 d_k = 8 的头，按种子配对")
            checks.append(TOO_MANY.less(R.paired(pooled, PH_METRIC, {"arm": "16x4"}, {"arm": "8x8"}), w[0], level=floor,
                                        primary=True, reason="the most heads this width allows against the base model's "
                                                             "8 (written before the runs)", what_zh=w[1],
                                        reason_zh="这个宽度所允许的最多的头对基础模型的 8 个头（在运行之前写定）"))
            w = (f"{pname}, test accuracy, 16 heads at d_k 16 vs at d_k 4 (sequence length 9), paired by seed",
                 f"{pname_zh}，测试准确率，16 个头，d_k = 16 对 d_k = 4（序列长度为 9），按种子配对")
            checks.append(BOTTLENECK.greater(R.paired(ph16, PH_METRIC, wide, thin), w[0], level=floor, primary=True,
                                             reason="the paper's fix, the head size set by the sequence length (written "
                                                    "before the runs)", what_zh=w[1],
                                             reason_zh="论文的做法：头的维度按序列长度来定（在运行之前写定）"))
        else:
            for anchor, key in ((TOO_MANY, "16 heads of d_k 4 vs 8 heads"), (BOTTLENECK, "16 heads, d_k 16 vs 4")):
                checks.append(anchor.not_testable(f"{pname}, {key}", PH16.missing, primary=True,
                                                  reason="written before the runs", reason_zh="在运行之前写定"))
    two_one = R.compare(best, OUTCOME, at(task, two), at(task, one))
    checks += [
        AVERAGING.greater(mech, f"{name}, {two} heads vs {one}, largest attention weight per row after training, all runs",
                          primary=False, reason="", what_zh=f"{name_zh}，{two} 个头对 {one} 个头，训练后每行最大的注意力权重，全部运行"),
        AVERAGING.greater(mech_solved, f"{name}, {two} heads vs {one}, largest attention weight per row after training, "
                          "runs that solved the task", primary=False, reason="",
                          what_zh=f"{name_zh}，{two} 个头对 {one} 个头，训练后每行最大的注意力权重，仅解决了任务的运行"),
        AVERAGING.greater(two_one, f"{name}, {two} heads vs {one}, {OUTCOME}", level=lvl, primary=False,
                          reason="the outcome side of the same comparison",
                          what_zh=f"{name_zh}，{two} 个头对 {one} 个头，`{OUTCOME}`（验证准确率曲线下的面积）",
                          reason_zh="同一比较在训练结果上的一面"),
        ONE_HEAD.greater(eight_one, f"{name}, {base} heads vs {one}, {OUTCOME} (the earlier primary test)", level=lvl,
                         primary=False, what_zh=f"{name_zh}，{base} 个头对 {one} 个头，`{OUTCOME}`（此前的主要检验）"),
        TOO_MANY.less(many_base, f"{name}, {many} heads vs {base}, {OUTCOME} (the earlier primary test)", level=lvl,
                      primary=False, what_zh=f"{name_zh}，{many} 个头对 {base} 个头，`{OUTCOME}`（此前的主要检验）"),
    ]
    if control:
        cname, cname_zh = R.TASKS.get(control, control), TASK_ZH.get(control, control)
        c_mech = R.compare(best, MECHANISM, at(control, two), at(control, one))
        c_out = R.compare(best, OUTCOME, at(control, two), at(control, one))
        checks.append(AVERAGING.same(c_out, f"{cname}, {two} heads vs {one}, {OUTCOME}", margin=CONTROL_MARGIN,
                                     level=R.level(best, {"data.task": control}), primary=False,
                                     reason="one relation per answer: the averaging argument predicts no head effect",
                                     what_zh=f"{cname_zh}，{two} 个头对 {one} 个头，`{OUTCOME}`（验证准确率曲线下的面积）",
                                     reason_zh="每个答案只需一种关系：按加权平均的论证，头数不应有影响"))
    corrected = {c.anchor: c for c in correct(checks)[0] if c.primary}  # after Holm, as the Answer shows them
    final = {a: c.verdict for a, c in corrected.items()}
    p_mech = corrected[AVERAGING].p_holm
    family = sum(c.p is not None for c in corrected.values())  # the primary tests Holm corrects over (with a p-value)
    held = (f"Holm-adjusted p = {p_mech:.2g} over the {family} primary tests with a p-value" if p_mech is not None
            else "no interval")
    held_zh = (f"经 {family} 个带 p 值的主要检验的 Holm 校正后 p = {p_mech:.2g}" if p_mech is not None else "无区间")

    m1, m2 = R.estimate(best, MECHANISM, at(task, one)), R.estimate(best, MECHANISM, at(task, two))
    # the control in accuracy: every run of one head and of `two` heads solved it (>= SOLVED)
    both_solve = bool(control) and all(
        f.n and f.k == f.n for f in (R.learned(best, at(control, h), threshold=R.SOLVED) for h in (one, two)))
    said = dict(name={"en": name, "zh": name_zh}, one_heads=one, two_heads=TWO, two=None, pair_heads=two, base=base,
                averaging_agrees=final[AVERAGING] == R.AGREES, solved=R.SOLVED,
                speed_two={"en": format(speed[two]), "zh": format(speed[two], "zh")},
                speed_one={"en": format(speed[one]), "zh": format(speed[one], "zh")},
                fast_two={"en": format(fast_two), "zh": format(fast_two, "zh")}, held={"en": held, "zh": held_zh},
                width=int(best["model.d_model"].iloc[0]), one_solved=R.estimate(solved_only, MECHANISM, at(task, one)),
                pair_weight=m2, control=({"en": cname, "zh": cname_zh} if both_solve else None),
                ladder=[], sixteen=None, sixteen_heads=16, sixteen_d_k=4, position_only=None, two_one=None,
                many_one=None, pname=None, heads=BASE, one=None, many=None, split=None,
                split_runs=None, stuck=None, two_vs=None, many_vs=None)
    if ph is not None:  # the answer leads with the task built for the tutorial's story (issue 24)
        ph_acc = {h: R.estimate(ph, PH_METRIC, {"model.n_heads": h})
                  for h in sorted(int(v) for v in ph["model.n_heads"].unique())}
        pos_only = float(ph["ref/test/position_only"].mean()) if "ref/test/position_only" in ph else math.nan
        two_one_ph = R.paired(ph, PH_METRIC, {"model.n_heads": 2}, {"model.n_heads": 1})
        eight_one_ph = R.paired(ph, PH_METRIC, {"model.n_heads": 8}, {"model.n_heads": 1})
        said.update(pname={"en": pname, "zh": pname_zh}, ladder=[{"heads": h, "acc": e} for h, e in ph_acc.items()],
                    sixteen=(R.estimate(ph16, PH_METRIC, {"model.d_head": 4}) if ph16 is not None
                             and not R.rows(ph16, {"model.d_head": 4}).empty else None),
                    position_only=pos_only, two_one=two_one_ph, many_one=eight_one_ph)

    def solved_row(df, t, h):
        f = R.learned(df, at(t, h), threshold=R.SOLVED)
        steps = [x for x in f.steps if x == x]
        return {"heads": h, "solved": f, "median_steps": float(np.median(steps)) if steps else None}

    def mask_row(h):
        r = head_masking[head_masking["heads"] == h]
        return None if r.empty else r.iloc[0]

    def split_row(h):
        r = heads_split[heads_split["heads"] == h]
        return None if r.empty else r.iloc[0]

    two_masked = mask_row(TWO) if len(head_masking) else None
    said.update(  # the mechanism, outcome and changes blocks of reports/prose/<lang>/q3.md
        head_counts=heads,
        max_weight=[{"heads": h, "w": R.estimate(best, MECHANISM, at(task, h))} for h in heads],
        control_task={"en": cname, "zh": cname_zh} if control else None,
        control_weight=[{"heads": h, "w": R.estimate(best, MECHANISM, at(control, h))} for h in heads] if control else [],
        control_mech=c_mech if control else None,
        masking=[{"heads": int(h), "loss": float(mask_row(h)["largest loss (mean)"]),
                  "many": float(mask_row(h)["heads costing > 5 points (mean)"] or 0.0)} for h in head_masking["heads"]]
        if len(head_masking) else [],
        mask_cost=0.05, two_alone_unneeded=bool(two_masked is not None and two_masked["largest loss (mean)"] < 0.05),
        specialise=[{"heads": int(h), "positional": float(split_row(h).iloc[2]), "content": float(split_row(h).iloc[3]),
                     "split": int(split_row(h).iloc[4]), "runs": int(split_row(h).iloc[1])} for h in heads_split["heads"]]
        if len(heads_split) else [],
        metric=OUTCOME, by_task=[{"name": {"en": R.TASKS.get(t, t), "zh": TASK_ZH.get(t, t)},
                                  "rows": [{**solved_row(best, t, h), "mean_acc": R.estimate(best, OUTCOME, at(t, h)),
                                            "test": R.estimate(best, "test/acc", at(t, h))} for h in heads]}
                                 for t in tasks],
        many_heads=many, eight_one=eight_one, many_base=many_base,
        tutorial_rows=[solved_row(tut, "lookup", h) for h in sorted(int(h) for h in tut["model.n_heads"].unique())]
        if TUT.ready else None,
        vaswani_heads=VASWANI_HEADS, vaswani_d_k=VASWANI_D_K)
    every = S.curves("val/acc").sort_values(["run_id", "step"]).groupby("run_id")["step"].diff().median()

    def details(lang):
        z = lang == "zh"
        chosen = R.chosen_lrs(best, lambda r: f"{R.TASKS.get(r['data.task'], r['data.task'])}, "
                                              f"{heads_word(int(r['model.n_heads']))}", lang=lang)
        out = [f"主要比较，单层、只有注意力的模型：{R.lr_phrase(S.df, lang=lang)}（{chosen}）。" if z else
               f"Primary comparison, 1-layer attention-only model, {R.lr_phrase(S.df)} ({chosen})."]
        if every == every:
            out.append(f"验证每 {every:.0f} 个优化步检查一次，所以达到 99% 所需步数相差不到这个数时分辨不出。" if z else
                       f"Validation is checked every {every:.0f} optimiser steps, so steps to 99 % differing by less "
                       "than that are not resolved.")
        out += [R.convergence(best, lang=lang), R.caveat(best, lang=lang)]
        if TUT.ready:
            out += [("The tutorial's model: ", "教程的模型：")[z] + R.lr_phrase(TUT.df, lang=lang) + R.full_stop(lang),
                    R.convergence(tut, "runs", lang=lang)]
        else:
            out.append(f"教程的两层模型：{R.missing_zh(TUT.missing)}。" if z else
                       f"The tutorial's 2-layer model: {TUT.missing}.")
        return out

    if ph is not None and ONE in ph_acc and TWO in ph_acc and BASE in ph_acc:  # the answers table's sentence
        split = split_row(BASE) if len(heads_split) else None

        def side(e):  # how 2 heads compare with 1 and 8 with 1: by the intervals of the paired differences
            return 0 if not (e.lo > 0 or e.hi < 0) else (1 if e.lo > 0 else -1)

        said.update(one=ph_acc[ONE], many=ph_acc[BASE], two=ph_acc[TWO], two_vs=side(two_one_ph),
                    many_vs=side(eight_one_ph),
                    stuck=max(ph_acc[ONE].mean, ph_acc[TWO].mean) <= pos_only + R.LEVEL_MARGIN,
                    split=int(split.iloc[4]) if split is not None else None,
                    split_runs=int(split.iloc[1]) if split is not None else None)
    Q.answer(
        record=said,
        details=details,
        checks=checks,
        figure=fig_acc,
        figures=[fig_acc, fig_mech, *([fig_rel] if fig_rel else [])],
        at_scale=("the reason: whether two heads, one per relation, beat one needs runs that leave the positional "
                  "relation's level, with more steps or width than here",
                  "原因：两个头（每种关系一个）是否胜过一个头，需要能越过只学会位置关系水平的运行，即比这里更多的步数或更宽的模型"),
    )
