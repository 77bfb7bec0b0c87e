"""Sentences an Answer builds from a sweep's table: how the learning rate was chosen (each variant at the
value its stage 1 chose, or its best of an untuned grid), whether the runs had converged, and the caveat
for too few seeds. The numbers themselves and their intervals: stats.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..results.stats import best_lr, swept_keys
from .figure_zh import to_zh
from .stats import PLATEAU, SOLVED


def at_best_lr(df: pd.DataFrame, metric: str = "val/acc_best", lr_key: str = "optim.lr") -> pd.DataFrame:
    """Each variant's runs at its best learning rate, selected on `metric` (validation):
    ablate.results.best_lr. A sweep with one learning rate is returned as it is."""
    out = best_lr(df, metric=metric, lr_key=lr_key)
    out.attrs = dict(df.attrs)
    return out


def tune_info(df: pd.DataFrame) -> dict[str, Any] | None:
    """A tuned sweep's search ({key, seeds, values, metric, goal}, from meta.json) when the table has its
    `tuned.<key>` column; None for an untuned one."""
    info = df.attrs.get("tune") or {}
    key = info.get("key")
    return dict(info) if key and f"tuned.{key}" in df.columns else None


def lr_phrase(df: pd.DataFrame, lr_key: str = "optim.lr", metric: str = "val/acc_best", lang: str = "en") -> str:
    """How learning rates were chosen, for a sentence, in `lang` ("en" or "zh"). A tuned sweep: 'each variant
    at its own learning rate, chosen on val/acc_best (validation) of seed 0 from 4 values (0.0003 to 0.01, 33×),
    then 5 seeds at the chosen value'; an untuned one: 'each variant at its best of 2 learning rates (0.001,
    0.0003) on val/acc_best' or 'every variant at the one learning rate 0.001'."""
    zh = language(lang) == "zh"
    info = tune_info(df)
    if info is not None and info.get("key") == lr_key:
        values = sorted(float(v) for v in info.get("values") or df[lr_key].dropna().unique())
        seeds = [int(s) for s in info.get("seeds") or []]
        on = info.get("metric", metric)
        best = best_lr(df, metric=on, lr_key=lr_key)
        n = seeds_per_variant(best)
        gate = info["gate"].replace(">=", "≥").replace("<=", "≤") if info.get("gate") else ""
        span = values[-1] / values[0] if values and values[0] > 0 else None
        edges = _edge_choices(df, best, values, lr_key, on, info.get("goal", "maximize"))
        n_variants, counts = edges if edges else (0, (0, 0))
        if zh:
            tuned_on = f"种子 {'、'.join(map(str, seeds))} " if seeds else "调参种子"
            text = (f"每个变体使用各自的学习率：在{tuned_on}上，从 {len(values)} 个取值（{values[0]:g} 到 {values[-1]:g}"
                    f"{f'，相差 {span:.0f}×' if span else ''}）中按 {on}（验证集）选出"
                    f"{f'（只在满足 {gate} 的取值中选，都不满足时在全部取值中选）' if gate else ''}，再在选定的值上跑 {n} 个种子")
            said = [f"{k} 个选中了所试的{word}" for k, word in zip(counts, ("最小值", "最大值")) if k]
            if said:
                text += f"；{n_variants} 个变体中，{'，'.join(said)}，而且在那里严格优于相邻的取值：最佳值可能在范围之外"
            return text
        tuned_on = f"seed{'s' if len(seeds) != 1 else ''} {', '.join(map(str, seeds))}" if seeds else "the tune seeds"
        text = (f"each variant at its own learning rate, chosen on {on} (validation) of "
                f"{tuned_on}{f' among the rates with {gate} (all where none had)' if gate else ''} from {len(values)} "
                f"values ({values[0]:g} to {values[-1]:g}{f', {span:.0f}×' if span else ''}), then {n} seed"
                f"{'s' if n != 1 else ''} at the chosen value")
        said = [f"{k} the {word}" for k, word in zip(counts, ("smallest", "largest")) if k]
        if said:
            text += (f"; of the {n_variants} variants, {' and '.join(said)} value tried, strictly better there "
                     "than at its neighbour: the best may lie outside the range")
        return text
    if lr_key not in df.columns:
        return "所有变体使用默认学习率" if zh else "every variant at the default learning rate"
    lrs = sorted({float(v) for v in df[lr_key].dropna()}, reverse=True)
    listed = ", ".join(f"{v:g}" for v in lrs)
    if lr_key in swept_keys(df) and len(lrs) > 1:
        if zh:
            return f"每个变体取 {len(lrs)} 个学习率（{listed}）中按 {metric} 最好的一个"
        return f"each variant at its best of {len(lrs)} learning rates ({listed}) on {metric}"
    return f"所有变体使用同一个学习率 {listed}" if zh else f"every variant at the one learning rate {listed}"


def language(lang: str) -> str:
    if lang not in ("en", "zh"):
        raise ValueError(f"lang={lang!r}: the sentences are written in en and zh")
    return lang


# What a sentence calls the runs it speaks of, in Chinese (convergence, still_learning).
RUNS_ZH = {"runs": "运行", "primary runs": "主要比较的运行", "MNIST runs": "MNIST 运行", "SGD runs": "SGD 运行",
           "completed runs": "完成的运行", "recall runs": "回忆任务的运行", "converged MNIST runs": "训练到收敛的 MNIST 运行"}


def full_stop(lang: str) -> str:
    """The sentence's end in `lang`: '.' or '。'."""
    return "。" if language(lang) == "zh" else "."


def runs_zh(what: str) -> str:
    """What a sentence calls the runs in Chinese, with the space a Latin word needs after 「次」 (「20 次 SGD 运行」)."""
    if what not in RUNS_ZH:
        raise ValueError(f"what={what!r} has no Chinese name; add it to ablate/report/sentences.py RUNS_ZH")
    name = RUNS_ZH[what]
    return f" {name}" if name[:1].isascii() else name


def _edge_choices(df, best, values, lr_key, metric, goal) -> tuple[int, tuple[int, int]] | None:
    """How many variants chose the smallest / the largest value tried while doing strictly better there (on the
    stage-1 mean of `metric`) than at the next value in: their best may lie outside the range. A variant that
    ties (every value solves the task: the rule takes the smaller) is not counted."""
    if len(values) < 2 or metric not in df.columns:
        return None
    variant = [k for k in swept_keys(df) if k not in ("seed", lr_key)]
    stage1 = df[df["stage"] == 1] if "stage" in df.columns else df
    sign = 1.0 if goal == "maximize" else -1.0
    # each stage-1 row's variant (its values by repr, as a group key of `best` prints them), rate and metric
    names = zip(*(stage1[k].astype(object).map(repr) for k in variant)) if variant else ((),) * len(stage1)
    rows: dict[tuple, list[int]] = {}
    for i, name in enumerate(names):
        rows.setdefault(tuple(name), []).append(i)
    rates = stage1[lr_key].to_numpy(dtype=float)
    scores = sign * pd.to_numeric(stage1[metric], errors="coerce").to_numpy(dtype=float)
    counts, n = [0, 0], 0
    groups = best.groupby(variant, dropna=False, sort=False) if variant else [((), best)]
    for key, rows_ in groups:
        n += 1
        key = key if isinstance(key, tuple) else (key,)
        mine = np.asarray(rows.get(tuple(repr(v) for v in key), []), dtype=int)
        chosen = float(rows_[lr_key].iloc[0])
        means = {v: pd.Series(scores[mine][np.isclose(rates[mine], v)]).mean() for v in values}
        for side, (edge, inner) in enumerate(((values[0], values[1]), (values[-1], values[-2]))):
            if np.isclose(chosen, edge) and means[edge] > means[inner]:
                counts[side] += 1
    return n, (counts[0], counts[1])


def chosen_lrs(df: pd.DataFrame, label, lr_key: str = "optim.lr", lang: str = "en") -> str:
    """The learning rate each variant was compared at, for a sentence: 'none, causal 0.003; ...'.
    `label(row) -> str` names a variant (in English: with lang="zh" the name is put into Chinese by the
    figures' phrase table, figure_zh.to_zh); df: rows at the chosen values (at_best_lr)."""
    zh = language(lang) == "zh"
    seen: dict[str, set[float]] = {}
    for _, row in df.iterrows():
        name = label(row)
        seen.setdefault(to_zh(name) if zh else name, set()).add(float(row[lr_key]))
    return ("；" if zh else "; ").join(f"{name} {', '.join(f'{v:g}' for v in sorted(values))}"
                                      for name, values in seen.items())


def _last_gains(df: pd.DataFrame, gain: str, acc: str) -> tuple[pd.DataFrame, pd.Series, pd.Series] | None:
    """The completed runs, their validation gain over the last epoch, and which solved the task; None without."""
    if gain not in df.columns:
        return None
    done = df[df["status"] == "completed"]
    gains = pd.to_numeric(done[gain], errors="coerce")
    if gains.notna().sum() == 0:
        return None
    solved = pd.to_numeric(done[acc], errors="coerce") >= SOLVED if acc in done else pd.Series(False, index=done.index)
    return done, gains, solved


def converged(df: pd.DataFrame, gain: str = "val/gain_last_epoch", acc: str = "val/acc_best") -> bool | None:
    """Whether the runs of df had converged, as `convergence` says it: the median run gained at most PLATEAU over
    its last epoch, or most runs solved the task; None where the table has no gains."""
    found = _last_gains(df, gain, acc)
    if found is None:
        return None
    _, gains, solved = found
    return bool(float(gains.median()) <= PLATEAU or solved.mean() > 0.5)


def convergence(df: pd.DataFrame, what: str = "primary runs", gain: str = "val/gain_last_epoch",
                acc: str = "val/acc_best", lang: str = "en") -> str:
    """A sentence on whether the runs of df had converged (`converged`): the median run's validation gain over its
    last epoch, and how many gained at most 1 point or had solved the task (>= 99 %). '' without the column."""
    zh = language(lang) == "zh"
    found = _last_gains(df, gain, acc)
    if found is None:
        return ""
    done, gains, solved = found
    flat = (gains <= PLATEAU) | solved
    median = float(gains.median())
    settled = converged(df, gain, acc)
    if zh:
        state = "已收敛或进入平台期" if settled else "仍在学习：比较的是训练早期的模型"
        return (f"最后一轮训练中，{len(done)} 次{runs_zh(what)}的验证准确率中位数变化了 {100 * median:+.1f} 个百分点；"
                f"其中 {int(flat.sum())} 次的变化不超过 {100 * PLATEAU:g} 个百分点，或已解决任务（≥ {100 * SOLVED:g}%）："
                f"{state}。")
    state = "converged or plateaued" if settled else "still learning: the comparison is of models early in training"
    return (f"Over its last epoch the median of the {len(done)} {what} gained {100 * median:+.1f} points of validation "
            f"accuracy; {int(flat.sum())} of {len(done)} gained at most {100 * PLATEAU:g} point or had solved the task "
            f"(≥ {100 * SOLVED:g} %): {state}.")


def seeds_per_variant(df: pd.DataFrame) -> int:
    """The fewest completed seeds any variant has (0 if none)."""
    keys = [k for k in swept_keys(df) if k != "seed"]
    done = df[df["status"] == "completed"]
    if done.empty:
        return 0
    return int(done.groupby(keys, dropna=False).size().min()) if keys else len(done)


def caveat(df: pd.DataFrame, lang: str = "en") -> str:
    """A sentence for Answers built on too few seeds to give intervals ('' when there are enough)."""
    zh = language(lang) == "zh"
    n = seeds_per_variant(df)
    if n >= 2:
        return ""
    budgets = sorted({str(b) for b in df["budget"].dropna()}) if "budget" in df.columns else []
    if zh:
        budget = f"（预算 {'、'.join(budgets)}）" if budgets else ""
        return (f"每个变体只有{'一个种子' if n == 1 else '零次完成的运行'}{budget}，没有 95% 区间，所以不把变体之间的任何差异"
                "称为可测的：这样的比较都算证据不足。")
    budget = f" (budget {', '.join(budgets)})" if budgets else ""
    return (f"With {'one seed' if n == 1 else 'no completed run'} per variant{budget} there is no 95 % interval, so no "
            "difference between variants is called measurable: such comparisons are inconclusive.")
