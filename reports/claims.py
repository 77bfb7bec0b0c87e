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
#    rates 1e-4 … 1e-2, with and without learning-rate warm-up.
# 2. **The FFN holds about 2/3 of the parameters** — sweep `ffn`: FFN width 0 (removed), 1, 2, 4, 8 × d_model.
# 3. **Temperature τ moves attention between hard selection and uniform averaging** — sweep `temperature`.
# 4. **Attention costs O(n²) in sequence length** — `ablate bench attention` (reports/data/attention_cost.csv).

# %%
import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from IPython.display import display

from ablate import report as R

R.setup()

# %% [markdown]
# ## 1 · Pre-LN vs Post-LN at depth 12, at large learning rates, with and without warm-up
#
# Sweep `norm` (`sweeps/norm.yaml`): a 12-layer stack on the copy task (630 optimiser steps at quick),
# d_model 32, 2 heads, LayerNorm before (Pre-LN) or after (Post-LN) each sub-layer, learning rates
# 1e-4 … 1e-2 with a 10 % linear warm-up (63 steps), 3 seeds. **Why the learning rate is an axis
# here, not tuned:** the claim is about which placement survives large rates. Divergences (status
# `diverged`) are counted, and so are runs that never leave the order-blind level (30 %: a model blind
# to order can do that much). Diverged runs enter the accuracies at chance (they learned nothing), and
# the text says how many there were. Runs without warm-up would double the grid (12-layer runs take
# about 34 s here), so the sweep has none; whether warm-up rescues Post-LN is then not tested, and the
# Answer says so.

# %%
XIONG = R.Anchor(
    "Xiong et al. 2020",
    "at initialisation Post-LN has large gradients near the output (small ones near the input) and needs warm-up",
)
LIU = R.Anchor(
    "Liu et al. 2020",
    "deep Post-LN stacks fail to train without care where Pre-LN ones train",
)
Q_NORM = R.question(
    "claim-norm",
    "Claim · Pre-LN vs Post-LN as depth grows",
    "Does a deep Post-LN stack stop training at learning rates where Pre-LN still trains, and does warm-up rescue it?",
    anchors=[XIONG, LIU],
    sweeps=["norm"],
)
NORM = R.sweep("norm")
FAILED = "val/acc_best, diverged = chance"
display(Q_NORM)

# %%
if NORM.ready:
    norm = NORM.df.copy()
    norm["warm-up"] = norm["optim.warmup"].map(lambda w: f"warm-up {w:g}" if w else "no warm-up")
    norm["diverged"] = norm["status"] == "diverged"
    norm["at order-blind level"] = ~norm["diverged"] & R.at_level(norm)
    # a diverged run learned nothing: it enters the accuracies at chance, and is counted as a run
    norm[FAILED] = norm["val/acc_best"].where(~norm["diverged"], norm["ref/val/chance"])
    norm["status"] = norm["status"].where(~norm["diverged"], "completed")
    lrs = sorted(float(v) for v in norm["optim.lr"].unique())
    warmups = sorted(float(w) for w in norm["optim.warmup"].unique())
    depth = int(norm["model.n_layers"].max())
    counts = norm.groupby(["model.norm", "warm-up", "optim.lr"]).agg(
        runs=("seed", "count"), diverged=("diverged", "sum"), at_order_blind=("at order-blind level", "sum"),
        val_acc=(FAILED, "mean"))
    display(counts)
    grid = sns.catplot(norm, x="optim.lr", y=FAILED, hue="model.norm", col="warm-up", kind="point",
                       errorbar=R.ci95_errorbar, dodge=0.25 if norm["model.norm"].nunique() > 1 else False,
                       height=3.5, aspect=1.7 if len(warmups) == 1 else 1.2)
    for ax in grid.axes.flat:
        ax.axhline(R.level(norm), color="black", ls="--", lw=0.8)
    grid.set_axis_labels("learning rate", "val. accuracy (diverged: chance)")
    grid.figure.suptitle(f"{depth} layers, copy task (dashed: order-blind level)", y=1.03)
    fig_norm = R.savefig(grid.figure, "claims_norm_accuracy")

    grads = NORM.per_layer("probe/init/grad")
    grads = grads[grads["optim.lr"] == lrs[0]]
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    sns.lineplot(grads, x="layer", y="probe/init/grad", hue="model.norm", marker="o", errorbar=R.ci95_errorbar, ax=ax)
    ax.set(yscale="log", ylabel="gradient norm at initialisation", title=f"{depth} layers: gradient per layer")
    R.savefig(fig, "claims_norm_gradients")
else:
    print(NORM.missing)

# %% tags=["answer"]
if not NORM.ready:
    Q_NORM.not_run_yet(NORM)
else:
    cold, warm = warmups[0], warmups[-1]
    top = lrs[-1]
    lvl = R.level(norm)

    def at(kind, warmup, lr=top):
        return {"model.norm": kind, "optim.warmup": warmup, "optim.lr": lr}

    def row(kind, warmup):
        cells = []
        for lr in lrs:
            r = R.rows(norm, at(kind, warmup, lr))
            cells.append(f"{lr:g}: {R.estimate(norm, FAILED, at(kind, warmup, lr))}"
                         + (f" ({int(r['diverged'].sum())} of {len(r)} diverged)" if r["diverged"].any() else "")
                         + (f" ({int(r['at order-blind level'].sum())} of {len(r)} at the order-blind level)"
                            if r["at order-blind level"].any() else ""))
        return f"{'Pre' if kind == 'pre' else 'Post'}-LN, {'no warm-up' if not warmup else f'warm-up {warmup:g}'} — " + "; ".join(cells)

    ratio = R.compare(NORM.df, "probe/init/grad_ratio", {"model.norm": "pre"}, {"model.norm": "post"})
    pre_post = R.compare(norm, FAILED, at("pre", cold), at("post", cold))
    failed = {(k, w): int((R.rows(norm, {"model.norm": k, "optim.warmup": w})[["diverged", "at order-blind level"]]
                           .any(axis=1)).sum()) for k in ("pre", "post") for w in warmups}
    total = {(k, w): len(R.rows(norm, {"model.norm": k, "optim.warmup": w})) for k in ("pre", "post") for w in warmups}
    warm_name = "no warm-up" if not cold else f"warm-up {cold:g}"
    checks = [
        XIONG.expect_greater(ratio, f"{depth} layers, first / last layer gradient at initialisation, Pre-LN vs Post-LN"),
        LIU.expect_greater(pre_post, f"{depth} layers, lr {top:g}, {warm_name}, validation accuracy, Pre-LN vs Post-LN",
                           level=lvl),
    ]
    if cold == 0 and warm > 0:
        rescue = R.compare(norm, FAILED, at("post", warm), at("post", cold))
        checks.append(XIONG.expect_greater(rescue, f"Post-LN, {depth} layers, lr {top:g}, validation accuracy with warm-up "
                                                   f"{warm:g} vs none", level=lvl))
        warmup_text = ""
    else:
        warmup_text = (f"Every run had {warm_name}, so whether warm-up rescues Post-LN is not tested here "
                       "(no run without it). ")
    text = (
        f"{depth} layers on the copy task (order-blind level {100 * lvl:.1f} %), validation accuracy by learning rate "
        "(diverged runs counted at chance): " + ". ".join(row(k, w) for k in ("pre", "post") for w in warmups) + ". "
        "Runs that diverged or stayed at the order-blind level: " + ", ".join(
            f"{'Pre' if k == 'pre' else 'Post'}-LN {'no warm-up' if not w else f'warm-up {w:g}'} {failed[k, w]} of {total[k, w]}"
            for k in ("pre", "post") for w in warmups) + f". At initialisation the first layer's gradient is {ratio.a} of "
        f"the last layer's with Pre-LN and {ratio.b} with Post-LN. Warm-up {warm:g} is "
        f"{round(warm * int(norm['global_step'].max()))} of {int(norm['global_step'].max())} optimiser steps here; the "
        f"learning rate is an axis, not tuned. " + warmup_text + R.convergence(norm[~norm["diverged"]], "completed runs") + " "
        + R.caveat(NORM.df)
    )
    Q_NORM.answer(text.strip(), checks, figure=fig_norm)

# %% [markdown]
# ## 2 · The FFN's share of the parameters, and what removing or widening it does

# %%
GEVA = R.Anchor("Geva et al. 2021", "the feed-forward layers hold about two thirds of a Transformer's parameters")
Q_FFN = R.question(
    "claim-ffn",
    "Claim · The FFN holds about 2/3 of the parameters",
    "How much of the model is the FFN, and what do removing it or widening it cost?",
    anchors=[GEVA],
    sweeps=["ffn"],
)
FFN = R.sweep("ffn")
display(Q_FFN)

# %%
if FFN.ready:
    ffn = R.at_best_lr(FFN.df)
    mults = sorted(int(m) for m in ffn["model.ffn_mult"].unique())
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    shares = ffn.melt(id_vars=["model.ffn_mult"], value_vars=["probe/init/share_ffn_l0", "probe/init/share_ffn"],
                      var_name="of", value_name="FFN share")
    shares["of"] = shares["of"].map({"probe/init/share_ffn_l0": "one layer's weights", "probe/init/share_ffn": "whole model"})
    sns.lineplot(shares, x="model.ffn_mult", y="FFN share", hue="of", marker="o", errorbar=None, ax=axes[0])
    axes[0].axhline(2 / 3, color="grey", lw=0.8, ls="--")
    axes[0].set(xlabel="FFN width / d_model", title="share of the parameters in the FFN (dashed: 2/3)")
    sns.pointplot(ffn, x="model.ffn_mult", y="test/acc", errorbar=R.ci95_errorbar, ax=axes[1])
    axes[1].set(xlabel="FFN width / d_model", ylabel="test accuracy", title="accuracy")
    fig_ffn = R.savefig(fig, "claims_ffn")
else:
    print(FFN.missing)

# %% tags=["answer"]
if not FFN.ready:
    Q_FFN.not_run_yet(FFN)
else:
    harness = R.config_defaults()["model.ffn_mult"]  # the harness's default width
    default = harness if harness in mults else mults[len(mults) // 2]
    share4 = R.estimate(ffn, "probe/init/share_ffn_l0", {"model.ffn_mult": 4}) if 4 in mults else None
    share_default = R.estimate(ffn, "probe/init/share_ffn_l0", {"model.ffn_mult": default})
    whole = R.estimate(ffn, "probe/init/share_ffn", {"model.ffn_mult": default})
    removed = R.compare(ffn, "test/acc", {"model.ffn_mult": 0}, {"model.ffn_mult": default}) if 0 in mults else None
    widest = R.compare(ffn, "test/acc", {"model.ffn_mult": mults[-1]}, {"model.ffn_mult": default})
    params = {m: int(R.rows(ffn, {"model.ffn_mult": m})["params/total"].iloc[0]) for m in mults}
    parts = []
    if share4 is not None:
        parts.append(f"At the usual width of 4 × d_model the FFN holds {share4} of each layer's weights")
    parts.append(f"at this harness's default {default} × d_model, {share_default} of each layer and {whole} of the whole "
                 f"model (embedding and head included)")
    text = ", ".join(parts) + ". "
    if removed is not None:
        text += (f"Removing it ({params[0]:,} parameters instead of {params[default]:,}) gives {removed.a} test "
                 f"accuracy against {removed.b} ({removed}); ")
    text += (f"widening it to {mults[-1]} × d_model ({params[mults[-1]]:,} parameters) gives {widest.a} ({widest}). "
             + FFN.still_learning(ffn) + " " + R.caveat(ffn))
    checks = []
    if share4 is not None:
        checks.append(GEVA.judge(abs(share4.mean - 2 / 3) < 0.01, f"one layer at 4 × d_model: {share4}"))
    else:
        checks.append(GEVA.judge(None, "no run at 4 × d_model"))
    Q_FFN.answer(text.strip(), checks, figure=fig_ffn)

# %% [markdown]
# ## 3 · Temperature: from hard selection to uniform averaging

# %%
HINTON = R.Anchor(
    "Hinton et al. 2015 (softmax temperature)",
    "raising the softmax temperature gives a softer distribution; lowering it approaches a hard maximum",
)
Q_TAU = R.question(
    "claim-temperature",
    "Claim · Temperature τ moves attention between selection and averaging",
    "Does dividing the scores by τ move attention from hard selection (small τ) to uniform averaging (large τ)?",
    anchors=[HINTON],
    sweeps=["temperature"],
)
TAU = R.sweep("temperature")
display(Q_TAU)

# %%
if TAU.ready:
    tau = R.at_best_lr(TAU.df)
    taus = sorted(float(t) for t in tau["model.temperature"].unique())
    long = tau.melt(id_vars=["model.temperature", "seed"],
                    value_vars=["probe/init/entropy_l0", "probe/final/entropy_l0", "probe/init/rowmax_l0",
                                "probe/final/rowmax_l0"], var_name="probe", value_name="value")
    long["when"] = long["probe"].str.split("/").str[1]
    long["measure"] = long["probe"].map(lambda p: "entropy / log T" if "entropy" in p else "largest weight per row")
    grid = sns.relplot(long, x="model.temperature", y="value", hue="when", col="measure", kind="line", marker="o",
                       errorbar=R.ci95_errorbar, height=3.4, aspect=1.2, facet_kws={"sharey": False})
    grid.set(xscale="log")
    grid.set_axis_labels("τ", "layer 0")
    fig_tau = R.savefig(grid.figure, "claims_temperature")
    maps = [(f"τ = {t:g}", m[0, 0]) for t in taus
            if (m := TAU.attention({"model.temperature": t}, "final/attention")) is not None]
    if maps:
        R.savefig(R.heatmaps(maps, size=2.2), "claims_temperature_maps")
else:
    print(TAU.missing)

# %% tags=["answer"]
if not TAU.ready:
    Q_TAU.not_run_yet(TAU)
else:
    lo, hi = {"model.temperature": taus[0]}, {"model.temperature": taus[-1]}
    entropy = R.compare(tau, "probe/init/entropy_l0", hi, lo)
    onehot_lo, onehot_hi = (R.estimate(tau, "probe/init/onehot_frac_l0", w) for w in (lo, hi))
    rowmax_lo, rowmax_hi = (R.estimate(tau, "probe/init/rowmax_l0", w) for w in (lo, hi))
    final = R.compare(tau, "probe/final/entropy_l0", hi, lo)
    accs = {t: R.estimate(tau, "test/acc", {"model.temperature": t}) for t in taus}
    best_tau = max(accs, key=lambda t: accs[t].mean if accs[t].n else -1)
    acc_gap = R.effect(accs[best_tau], accs[1.0]) if 1.0 in accs else None
    text = (
        f"At initialisation, layer 0's attention entropy is {entropy.b} of the uniform maximum at τ = {taus[0]:g} "
        f"(largest weight per row {rowmax_lo}, {onehot_lo} of rows one-hot) and {entropy.a} at τ = {taus[-1]:g} "
        f"(largest weight {rowmax_hi}, {onehot_hi} one-hot); after training "
        f"{final.b} and {final.a}. Test accuracy is highest at τ = {best_tau:g} ({accs[best_tau]})"
        + (f" (against τ = 1: {acc_gap})" if acc_gap is not None and best_tau != 1.0 else "")
        + "; by τ: " + ", ".join(f"{t:g}: {accs[t]}" for t in taus) + ". " + TAU.still_learning(tau) + " " + R.caveat(tau)
    )
    checks = [HINTON.expect_greater(entropy, f"layer-0 entropy at initialisation, τ = {taus[-1]:g} vs {taus[0]:g}")]
    Q_TAU.answer(text.strip(), checks, figure=fig_tau)

# %% [markdown]
# ## 4 · The cost of attention in sequence length
# Slopes are fitted over the upper half of the lengths, where the n² terms dominate. The explicit
# path counts as quadratic when its memory slope is within 0.25 of 2 and its time slope between 1.5
# and 2.5 (timings on a shared CPU are noisy, and caches bend them at large n).

# %%
VASWANI_T1 = R.Anchor("Vaswani et al. 2017, Table 1", "a self-attention layer costs O(n² · d) in sequence length n")
Q_COST = R.question(
    "claim-cost",
    "Claim · Attention costs O(n²) in sequence length",
    "How do the time and memory of one attention layer grow with the sequence length n?",
    anchors=[VASWANI_T1],
    sweeps=["attention_cost"],
)
COST = R.sweep("attention_cost")
display(Q_COST)

# %%
if COST.ready:
    cost = COST.df
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, y, label in zip(axes, ("time_ms", "mem_mb"), ("forward+backward time (ms)", "memory (MB)")):
        sns.lineplot(cost, x="n", y=y, hue="path", marker="o", ax=ax)
        for path, g in cost.groupby("path"):
            upper = g[g["n"] >= g["fit_from_n"].iloc[0]]
            slope = R.loglog_slope(upper["n"], upper[y])
            # rounded: LAPACK's last bits vary between runs, which must not move a pixel of the figure
            fit = np.exp(np.round(np.polyval(np.polyfit(np.log(upper["n"]), np.log(upper[y]), 1), np.log(upper["n"])), 9))
            ax.plot(upper["n"], fit, ls="--", lw=1, color="grey")
            ax.annotate(f"slope {slope:.2f}", (upper["n"].iloc[-1], upper[y].iloc[-1]), fontsize="small",
                        xytext=(-60, 6 if path == "explicit" else -14), textcoords="offset points")
        ax.set(xscale="log", yscale="log", xlabel="sequence length n", ylabel=label)
    axes[1].set_title(f"memory: {cost['mem_kind'].iloc[0].replace('_', ' ')}")
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
    quadratic = abs(ex.get("mem_mb", np.nan) - 2) <= 0.25 and 1.5 <= ex.get("time_ms", np.nan) <= 2.5

    def mem_at(path):
        return float(cost.loc[(cost["path"] == path) & (cost["n"] == n_hi), "mem_mb"].iloc[0])

    keeps = "without keeping them" if mem_at("fused") < mem_at("explicit") / 2 else "and keeps about as much"
    text = (
        f"On {first['device']} (d_model {int(first['d_model'])}, {int(first['n_heads'])} heads, n = {n_lo} … {n_hi}, "
        f"slopes fitted for n ≥ {fit_from}), forward+backward time grows as n^{ex.get('time_ms', np.nan):.2f} on the "
        f"explicit path and n^{fused.get('time_ms', np.nan):.2f} on the fused kernel; memory ({kind}) grows as "
        f"n^{ex.get('mem_mb', np.nan):.2f} and n^{fused.get('mem_mb', np.nan):.2f}. The explicit path stores the n × n "
        f"weights ({mem_at('explicit'):.1f} MB at n = {n_hi}); the fused kernel does the same n² arithmetic {keeps} "
        f"({mem_at('fused'):.1f} MB)."
    )
    checks = [VASWANI_T1.judge(bool(quadratic), f"explicit path: time slope {ex.get('time_ms', np.nan):.2f}, memory "
                                                f"slope {ex.get('mem_mb', np.nan):.2f}")]
    Q_COST.answer(text, checks, figure=fig_cost)
