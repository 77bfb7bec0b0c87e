"""Figures: one fixed style, one fixed colour and order per variant, reference lines, a stamp that says
what was run, PNGs without timestamps or version strings, attention heatmaps, learning curves.

    R.setup()                               fixed theme, dpi, font; seeded numpy (reproducible PNGs)
    fig, axes = R.subplots(1, 2)            plt.subplots with constrained layout (no colliding titles)
    sns.barplot(..., hue="model.pos_enc", palette=R.palette("model.pos_enc", df["model.pos_enc"]),
                hue_order=R.order("model.pos_enc", df["model.pos_enc"]))
    R.reference_lines(ax, df, split="val")  chance (dotted) and the order-blind level (dashed)
    R.hline(ax, 2 / 3, "2/3"), R.reference_curve(ax, dks, sqrt(dks), "√d_k")
    R.integer_ticks(ax, "x", [1, 2, 4, 8, 16])
    R.stamp(fig, S)                         footer "copy task · quick budget · 5 seeds"
    R.legend(ax, "positional encoding", outside=True)   the legend redrawn with the reference lines
    R.learning_curves(S, "val/acc", hue="model.pos_enc", runs=best)   mean over seeds, 95 % band
    R.probe_curve(S, "onehot_frac", hue="model.qk_scale", runs=best)  the periodic probes, layer 0
    R.savefig(fig, "q1_copy")               reports/figures/q1_copy.png

A variant value has ONE colour in every figure of every report: `palette(key, values)` looks it up in
PALETTES (the standard setting blue, the ablated one vermillion; ordered numbers along viridis), and
`order(key, values)` gives the meaningful order (none before any encoding; 1, 2, 4 ... heads). A value
the tables here do not know gets a colour from the spare list, in sorted order.

`setup()` fixes seaborn's theme and the matplotlib settings that change pixels (dpi, font, hatch
and path handling), so a rebuild from the same data draws the same figures; `savefig` writes them
to $ABLATE_REPORT_FIGURES (reports/figures) with the PNG's Software/date metadata removed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np

from ..registry import TASKS as REGISTRY
from ..results.stats import same
from .data import SHOW_SAVED_ENV, figures_dir

DPI = 110
TASKS = {name: task.title for name, task in REGISTRY.items()}  # data.task -> how a sentence or a legend names it

# ---- one colour and one order per variant value ----

BLUE, ORANGE, GREEN, VERMILLION, PINK, BROWN, GREY, SKY = (
    "#0173b2", "#de8f05", "#029e73", "#d55e00", "#cc78bc", "#ca9161", "#949494", "#56b4e9")
SPARE = ["#fbafe4", "#ece133", "#56b4e9", "#ca9161", "#000000", "#7f7f7f"]  # values no table below knows


def _ramp(values: list[Any], cmap: str = "viridis") -> dict[Any, str]:
    """Ordered numbers along a sequential colour map, each at its fixed place in `values`."""
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    ramp = colormaps[cmap]
    n = len(values)
    return {v: to_hex(ramp(0.9 * i / max(1, n - 1))) for i, v in enumerate(values)}


# key -> {value: colour}, in the meaningful order. The standard setting is blue, its ablation vermillion.
PALETTES: dict[str, dict[Any, str]] = {
    "model.pos_enc": {"none": GREY, "sinusoidal": BLUE, "learned": ORANGE, "rope": GREEN, "alibi": PINK},
    "model.causal": {False: BLUE, True: VERMILLION},
    "model.residual": {True: BLUE, False: VERMILLION},
    "model.qk_scale": {True: BLUE, False: VERMILLION},
    "model.norm": {"pre": BLUE, "post": ORANGE, "none": VERMILLION},
    "optim.name": {"adam": BLUE, "adamw": SKY, "sgd": GREEN},
    "data.permute": {"none": BLUE, "train": ORANGE, "test": PINK, "both": VERMILLION},
    "data.task": {"copy": BLUE, "lookup": ORANGE, "lookup1": GREEN, "histogram": PINK, "mnist": BROWN},
    "test rows": {"as trained": BLUE, "permuted": VERMILLION},  # MNIST rows tested as trained / permuted
    "model.n_heads": _ramp([1, 2, 4, 8, 16, 32]),
    "model.n_layers": _ramp([1, 2, 4, 6, 8, 12, 16, 24, 32]),
    "model.d_head": _ramp([4, 8, 16, 32, 64, 128, 256, 512]),
    "model.temperature": _ramp([0.1, 0.3, 1.0, 3.0, 10.0], "magma"),
    "model.ffn_mult": _ramp([0, 1, 2, 4, 8]),
}
# key -> {value: how a legend names it}; learning_curves and probe_curve use these
LABELS: dict[str, dict[Any, str]] = {
    "model.causal": {False: "bidirectional", True: "causal"},
    "model.residual": {True: "with skips", False: "no skips"},
    "model.qk_scale": {True: "scores ÷ √d_k", False: "no scaling"},
    "model.norm": {"pre": "Pre-LN", "post": "Post-LN", "none": "no LayerNorm"},
    "model.pos_enc": {"none": "no PE", "sinusoidal": "sinusoidal", "learned": "learned", "rope": "RoPE",
                      "alibi": "ALiBi"},
}

# key -> {value: seaborn dash spec} for a key drawn as line styles (style=) beside a colour key; "" is solid.
# A causal mask is dash-dotted, so that it cannot be read as the order-blind level's dashed reference line.
DASHES: dict[str, dict[Any, Any]] = {"model.causal": {False: "", True: (5, 2, 1, 2)}}


def _present(values: Iterable[Any] | None) -> list[Any]:
    """The distinct values of `values` (a column, a list), in first-seen order, missing values dropped."""
    out: list[Any] = []
    for v in values if values is not None else []:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        if not any(same(v, seen) for seen in out):
            out.append(v)
    return out


def _sort_key(v: Any) -> tuple:
    return (0, float(v), "") if isinstance(v, (int, float, np.number)) and not isinstance(v, bool) else (1, 0.0, str(v))


def order(key: str, values: Iterable[Any] | None = None, labels: Mapping[Any, str] | None = None) -> list[Any]:
    """The values of `key` in their meaningful order (PALETTES' order, then unknown ones sorted): all the
    known ones when `values` is None, else those of `values` (as they appear there, so they match the
    column). With `labels` ({value: name}), the names in that order (for a column of names)."""
    known = list(PALETTES.get(key, {}))
    if values is None:
        out = known
    else:
        present = _present(values)
        ranked = [v for k in known for v in present if same(v, k)]
        out = ranked + sorted((v for v in present if not any(same(v, r) for r in ranked)), key=_sort_key)
        if all(_sort_key(v)[0] == 0 for v in out):  # numbers (heads, layers, d_k): by value
            out = sorted(out, key=_sort_key)
    return [_label(labels, v) for v in out] if labels is not None else out


def _label(labels: Mapping[Any, str] | None, value: Any) -> Any:
    if labels is None:
        return value
    for k, name in labels.items():
        if same(k, value):
            return name
    return value


def palette(key: str, values: Iterable[Any] | None = None, labels: Mapping[Any, str] | None = None) -> dict[Any, str]:
    """{value: colour} for seaborn's `palette=`: the fixed colour of each value of `key` (every known one
    when `values` is None), in `order`. Values no table knows get the spare colours in sorted order.
    With `labels` ({value: name}), keyed by the names (for a column of names such as "bidirectional")."""
    table = PALETTES.get(key, {})
    out: dict[Any, str] = {}
    spare = iter(SPARE * 4)
    for v in order(key, values):
        colour = next((c for k, c in table.items() if same(k, v)), None)
        out[_label(labels, v)] = colour if colour is not None else next(spare)
    return out


def label(key: str, value: Any) -> Any:
    """How a legend names `value` of `key` (LABELS), else the value itself."""
    return _label(LABELS.get(key), value)


# ---- style, layout, saving ----

# Fonts for CJK glyphs (Q1's sentence 猫坐在垫子上, Chinese labels), tried after DejaVu Sans glyph by glyph
# (matplotlib's font fallback). Debian's fonts-noto-cjk gives the first; .ci/run installs it. Without one
# the characters render as empty boxes, and cjk_font() says so.
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Source Han Sans SC", "WenQuanYi Zen Hei", "Droid Sans Fallback")


def cjk_font() -> str | None:
    """The first of CJK_FONTS matplotlib can use, registering the system's CJK font files once if its font
    cache predates them (a font installed after matplotlib first ran); None if the machine has none."""
    from matplotlib import font_manager

    def known() -> str | None:
        names = {f.name for f in font_manager.fontManager.ttflist}
        return next((n for n in CJK_FONTS if n in names), None)

    if (name := known()) is None:
        for path in font_manager.findSystemFonts():
            if "cjk" in Path(path).name.lower() or "wqy" in Path(path).name.lower():
                font_manager.fontManager.addfont(path)
        name = known()
    return name


def setup() -> None:
    """Seaborn whitegrid theme, fixed dpi and font; pandas shows wide tables whole; numpy's global
    generator seeded, since seaborn's strip plots jitter with it (a rebuild gives the same PNGs); warnings
    silenced, so that a report shows its answer and figures, not library chatter (a notebook's own
    sanity checks are in its text)."""
    import warnings

    import pandas as pd
    import seaborn as sns

    np.random.seed(0)
    warnings.simplefilter("ignore")

    sns.set_theme(style="whitegrid", context="notebook", palette="colorblind")
    matplotlib.rcParams.update(
        {
            "figure.dpi": DPI,
            "savefig.dpi": DPI,
            "figure.figsize": (7.0, 4.0),
            "font.family": ["DejaVu Sans", *([cjk] if (cjk := cjk_font()) else [])],
            "svg.hashsalt": "ablate",
            "axes.titlesize": "medium",
            "legend.fontsize": "small",
        }
    )
    pd.set_option("display.max_columns", 40)
    pd.set_option("display.width", 160)
    pd.set_option("display.precision", 4)


def subplots(nrows: int = 1, ncols: int = 1, **kwargs):
    """plt.subplots with constrained layout, so titles, tick labels and legends outside the axes do not
    collide (seaborn's FacetGrid lays itself out; do not use this for it)."""
    import matplotlib.pyplot as plt

    kwargs.setdefault("layout", "constrained")
    return plt.subplots(nrows, ncols, **kwargs)


def savefig(fig, name: str) -> Path:
    """Save `fig` as <figures>/<name>.png and, with its texts in Chinese (figure_zh), <name>.zh.png; no
    metadata that changes between builds, and every string the figure draws as the PNG's Description (its
    text for a screen reader, and what the test of the Chinese figures reads). Returns the English path.
    By convention a notebook's figures start with its prefix (q2_..., claims_...)."""
    from .figure_zh import translated

    folder = figures_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    save_png(fig, path)
    with translated(fig, draw=False):  # the English save drew it: its tick labels are formatted
        save_png(fig, folder / f"{name}.zh.png")
    show_saved(fig, path)
    return path


def show_saved(fig, path: Path) -> None:
    """In the report build's kernels (SHOW_SAVED_ENV, inline backend), the saved PNG is shown as the figure's
    output, its Description as the page's alt text, and the figure closed: the inline backend drew each figure
    a third time at its cell's end (Q1's notebook: 29 s -> about 20 s). In a notebook of one's own, or a
    script, nothing changes: the figure stays open, drawn by one's own backend in one's own format."""
    import os
    import sys

    if os.environ.get(SHOW_SAVED_ENV) != "1" or "matplotlib_inline" not in sys.modules \
            or "inline" not in matplotlib.get_backend():
        return
    import matplotlib.pyplot as plt
    from IPython.display import Image, display
    from PIL import Image as PNG

    with PNG.open(path) as png:  # the page's alt text: what save_png wrote as the Description
        alt = png.text.get("Description", "")
    display(Image(data=path.read_bytes(), format="png", metadata={"alt": alt}))
    plt.close(fig)


def save_png(fig, to: Path) -> None:
    """`fig` as a PNG at DPI, cropped to what it draws, with every string it draws as the Description and no
    other metadata. The texts are read after the save's own draw (which formats the tick labels), and the
    PNG is then written as matplotlib writes one with that Description (PIL, the same pixels and options).
    Reading them first took a draw of its own: with the swap's, three of the seven draws of a figure's two
    files (Q1's notebook: 19 s of CPU before, 12 s after)."""
    import io

    from PIL import Image, PngImagePlugin

    from .figure_zh import drawn_texts

    drawn = io.BytesIO()
    fig.savefig(drawn, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    info = PngImagePlugin.PngInfo()
    info.add_text("Description", "\n".join(drawn_texts(fig, draw=False)))
    drawn.seek(0)
    with Image.open(drawn) as image:
        image.save(to, format="png", dpi=(DPI, DPI), pnginfo=info)


# ---- reference lines, ticks, the stamp ----

REFERENCE_STYLE = {"chance": (":", "chance"), "order_blind": ("--", "order-blind level")}


def reference_lines(ax, df, split: str = "val", axis: str = "y", scale: float = 1.0) -> dict[str, float]:
    """Chance (dotted) and the order-blind level (dashed) of `split`, as the table records them
    (`ref/<split>/chance`, `ref/<split>/order_blind`, mean over df's rows), with legend labels. An
    order-blind level at or above 99 % (histogram: a count needs no order) is not drawn. `scale`: 100
    for an axis in percent. Returns {name: level} of the lines drawn."""
    from .stats import SOLVED

    drawn: dict[str, float] = {}
    for ref, (style, name) in REFERENCE_STYLE.items():
        column = f"ref/{split}/{ref}"
        if df is None or column not in df.columns:
            continue
        values = np.asarray(df[column], dtype=float)
        values = values[np.isfinite(values)]
        if not len(values) or (ref == "order_blind" and values.mean() >= SOLVED):
            continue
        drawn[ref] = float(values.mean())
        line = ax.axhline if axis == "y" else ax.axvline
        line(scale * drawn[ref], color="black", ls=style, lw=1, label=name, zorder=0.5)
    return drawn


def hline(ax, y: float, label: str, ls: str = "--", color: str = "dimgrey"):
    """A labelled horizontal reference line (2/3 of the parameters, a 1.0 variance, ...)."""
    return ax.axhline(y, color=color, ls=ls, lw=1, label=label, zorder=0.5)


def reference_curve(ax, x, y, label: str, ls: str = "--", color: str = "dimgrey"):
    """A labelled reference curve through (x, y): the √d_k the premise predicts, an n² cost, ..."""
    return ax.plot(list(x), list(y), color=color, ls=ls, lw=1, label=label, zorder=0.5)[0]


def integer_ticks(ax, axis: str = "x", values: Iterable[float] | None = None) -> None:
    """Integer ticks for layers, depth, heads, d_k: exactly `values` when given (also on a log axis:
    1, 2, 4, 8, 16 written out, no minor ticks), else whole numbers only."""
    from matplotlib.ticker import MaxNLocator, NullLocator

    target = ax.xaxis if axis == "x" else ax.yaxis
    if values is None:
        target.set_major_locator(MaxNLocator(integer=True))
        return
    ticks = sorted({float(v) for v in values})
    (ax.set_xticks if axis == "x" else ax.set_yticks)(ticks, [f"{v:g}" for v in ticks])
    target.set_minor_locator(NullLocator())


def _frame(source):
    """A DataFrame from a Sweep (its table), a DataFrame, or None."""
    return getattr(source, "df", source)


def stamp_text(*sources, extra: str | None = None, seeds: str | None = None) -> str:
    """'copy task · quick budget · 5 seeds': the tasks, budgets and seeds per variant of the tables
    behind a figure (Sweeps or DataFrames); missing tables are skipped. `seeds`: what the figure shows
    instead of the seed count, when it draws single runs ("seed 0")."""
    tasks, budgets, counts, shown = [], [], [], seeds
    for source in sources:
        df = _frame(source)
        if df is None or len(df) == 0:
            continue
        if "data.task" in df.columns:
            tasks += [TASKS.get(t, str(t)) for t in _present(df["data.task"])]
        if "budget" in df.columns:
            budgets += [str(b) for b in _present(df["budget"])]
        elif getattr(source, "meta", {}).get("budget"):
            budgets.append(str(source.meta["budget"]))
        if "seed" in df.columns:
            counts.append(int(df["seed"].nunique()))
    parts = [", ".join(dict.fromkeys(tasks))] if tasks else []
    if budgets:
        parts.append(f"{', '.join(dict.fromkeys(budgets))} budget")
    if shown:
        parts.append(shown)
    elif counts:
        low, high = min(counts), max(counts)
        parts.append(f"{low}{f'–{high}' if high != low else ''} seed{'s' if high != 1 else ''}")
    if extra:
        parts.append(extra)
    return " · ".join(parts)


def stamp(fig, *sources, extra: str | None = None, seeds: str | None = None):
    """Write what the figure shows at its foot (bottom right, small grey): the task, the budget and the
    seeds per variant, or `seeds` for a figure of single runs (`stamp_text`). Returns the Text artist
    (savefig's tight box includes it)."""
    text = stamp_text(*sources, extra=extra, seeds=seeds)
    return fig.text(0.995, 0.0, text, ha="right", va="top", fontsize="x-small", color="dimgrey")


def legend(ax, title: str | None = None, outside: bool = False):
    """Redraw the legend of `ax` from every labelled artist (seaborn's hues and the reference lines drawn
    after them), with `title`; `outside`: beside the axes on the right, where it cannot cover data."""
    handles, names = ax.get_legend_handles_labels()
    # seaborn titles each group of a hue + style legend with its column's name (an invisible handle): drop those
    kept = [(h, n) for h, n in zip(handles, names) if n not in PALETTES and n not in LABELS]
    handles, names = [h for h, _ in kept], [n for _, n in kept]
    if not handles:
        return None
    old = ax.get_legend()
    if title is None and old is not None:
        title = old.get_title().get_text() or None
    kwargs: dict[str, Any] = {"loc": "upper left", "bbox_to_anchor": (1.02, 1), "borderaxespad": 0} if outside else {}
    return ax.legend(handles, names, title=title, **kwargs)


# ---- curves over training ----

def default_errorbar():
    """The interval figures draw: ablate.report.stats.errorbar (a percentile bootstrap over seeds) where
    it exists, else the t-interval `ci95_errorbar`."""
    from . import stats

    return getattr(stats, "errorbar", None) or stats.ci95_errorbar


METRIC_NAMES = {"val/acc": "validation accuracy", "val/loss": "validation loss", "train/loss": "training loss"}


def _select(df, where: Mapping[str, Any] | None, runs) -> Any:
    from .stats import rows

    df = rows(df, where) if where else df
    if runs is not None:
        ids = set(runs["run_id"]) if hasattr(runs, "columns") else set(runs)
        df = df[df["run_id"].isin(ids)]
    return df


def _hue_key(S, hue: str | None) -> str | None:
    if hue is not None:
        return hue
    keys = [k for k in S.keys() if k not in ("optim.lr", "seed")]
    return keys[0] if keys else None


def _draw(long, x: str, y: str, hue: str | None, style: str | None, ax, errorbar, labels, legend=True):
    import seaborn as sns

    kwargs: dict[str, Any] = {}
    if hue is not None:
        names = labels if labels is not None else LABELS.get(hue)
        if names is not None:
            long = long.assign(**{hue: long[hue].map(lambda v: _label(names, v))})
        kwargs.update(hue=hue, palette=palette(hue, long[hue], names) if names is None else
                      palette(hue, _unlabel(long[hue], names), names),
                      hue_order=order(hue, _unlabel(long[hue], names), names) if names else order(hue, long[hue]))
    if style is not None:
        names = LABELS.get(style)
        values = order(style, long[style])
        if names is not None:
            long = long.assign(**{style: long[style].map(lambda v: _label(names, v))})
        styled = [_label(names, v) for v in values]
        kwargs.update(style=style, style_order=styled)
        if style in DASHES:
            kwargs["dashes"] = {_label(names, v): DASHES[style].get(v, "") for v in values}
    sns.lineplot(long, x=x, y=y, errorbar=errorbar, ax=ax, legend=legend, seed=0, **kwargs)
    return long


def _unlabel(column, names: Mapping[Any, str]) -> list[Any]:
    """The values behind a column of legend names (inverse of `labels`)."""
    back = {name: value for value, name in names.items()}
    return [back.get(v, v) for v in _present(column)]


def learning_curves(S, metric: str = "val/acc", hue: str | None = None, where: Mapping[str, Any] | None = None,
                    ax=None, *, runs=None, style: str | None = None, labels: Mapping[Any, str] | None = None,
                    errorbar: Any = "default", references: bool = True, title: str | None = None,
                    outside: bool = False):
    """`metric` over optimiser steps from the exported curves (S.curves), one line per value of `hue`
    (default: the sweep's first swept key), mean over seeds with the 95 % band of `errorbar`. `runs`: the
    runs to draw (a table such as R.at_best_lr(S.df), or run ids); `where`: a filter on the swept keys.
    Accuracies get the reference lines of their split; `outside`: the legend beside the axes. Returns
    the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(layout="constrained")
    long = _select(S.curves(metric), where, runs)
    errorbar = default_errorbar() if errorbar == "default" else errorbar
    if long.empty:
        ax.text(0.5, 0.5, "no curves exported", ha="center", va="center", transform=ax.transAxes)
        return ax
    _draw(long, "step", metric, _hue_key(S, hue), style, ax, errorbar, labels)
    if references and "acc" in metric.rsplit("/", 1)[-1]:
        reference_lines(ax, _select(S.df, where, runs), split=metric.split("/")[0])
    legend(ax, outside=outside)
    ax.set(xlabel="optimiser step", ylabel=METRIC_NAMES.get(metric, metric))
    if title:
        ax.set_title(title)
    return ax


def probe_curve(S, quantity: str, hue: str | None = None, where: Mapping[str, Any] | None = None, ax=None, *,
                runs=None, layer: int | str = 0, style: str | None = None, labels: Mapping[Any, str] | None = None,
                errorbar: Any = "default", log: bool = False, title: str | None = None, outside: bool = False):
    """A periodic probe during training (S.probe_curves(): grad, logit_std, rowmax, onehot_frac, entropy,
    cosine, erank) of one `layer` (an index, or "last": each run's last layer) over optimiser steps, one
    line per value of `hue`, mean over seeds with the 95 % band. `log`: a log y axis. Returns the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(layout="constrained")
    curves = S.probe_curves()
    if curves is None or quantity not in curves.columns:
        ax.text(0.5, 0.5, f"no probe curves ({quantity}) exported", ha="center", va="center", transform=ax.transAxes)
        return ax
    curves = _select(curves, where, runs)
    if layer == "last":
        curves = curves[curves["layer"] == curves.groupby("run_id")["layer"].transform("max")]
    else:
        curves = curves[curves["layer"] == int(layer)]
    errorbar = default_errorbar() if errorbar == "default" else errorbar
    if not curves.empty:
        _draw(curves, "step", quantity, _hue_key(S, hue), style, ax, errorbar, labels)
        legend(ax, outside=outside)
    which = "last layer" if layer == "last" else f"layer {layer}"
    ax.set(xlabel="optimiser step", ylabel=f"{quantity} ({which})")
    if log:
        ax.set_yscale("log")
    if title:
        ax.set_title(title)
    return ax


# ---- attention maps ----

def heatmaps(maps: list[tuple[str, np.ndarray]], ncols: int | None = None, size: float = 2.6, vmax: float | None = None):
    """A row (or grid) of T x T attention maps, each with its title; rows are queries, columns keys.
    One colour scale for all, so maps compare directly."""
    import textwrap

    import matplotlib.pyplot as plt
    import seaborn as sns  # noqa: F401  (registers the colormap)

    n = len(maps)
    ncols = ncols or n
    nrows = (n + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(size * ncols + 1.0, size * nrows + 0.6), squeeze=False,
                             layout="constrained")
    top = vmax if vmax is not None else max(float(np.nanmax(m)) for _, m in maps)
    image = None
    for ax, (title, m) in zip(axes.flat, maps):
        image = ax.imshow(m, cmap="rocket_r", vmin=0.0, vmax=top, interpolation="nearest")
        ax.set_title(textwrap.fill(title, max(12, int(size * 9))), fontsize="small")  # wrapped: no collisions
        ax.set_xticks([])
        ax.set_yticks([])
        ax.grid(False)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    ax0 = axes.flat[0]
    ax0.set_ylabel("query position")
    ax0.set_xlabel("key position")
    if image is not None:
        fig.colorbar(image, ax=list(axes.flat), shrink=0.8, label="attention weight")
    return fig


def _upright(word: str) -> bool:
    """A tick label read upright: one or two Chinese characters (a character on its side is not read)."""
    return 0 < len(word) <= 2 and all("\u3400" <= ch <= "\u9fff" for ch in word)


def heatmap_grid(grid: dict[str, list[np.ndarray]], columns: list[str], size: float = 2.4,
                 ticks: list[list[str]] | None = None, shared: bool = False):
    """Rows of T x T attention maps: one row per entry of `grid` (its key labels the row), one column
    per name in `columns`. Each row has its own colour scale and colour bar, or one 0..max scale for
    every map with `shared`. `ticks`: the axis labels (the words of the sentence) of each column's maps,
    keys along x, queries along y."""
    import matplotlib.pyplot as plt
    import seaborn as sns  # noqa: F401  (registers the colormap)

    nrows, ncols = len(grid), len(columns)
    extra = 0.6 if ticks else 0.0
    fig, axes = plt.subplots(nrows, ncols, figsize=(size * ncols + 1.2 + extra, size * nrows + 0.3 + extra),
                             squeeze=False, layout="constrained")
    top_all = max(float(np.nanmax(m)) for maps in grid.values() for m in maps)
    for r, (name, maps) in enumerate(grid.items()):
        low, top = (0.0, top_all) if shared else (min(float(np.nanmin(m)) for m in maps),
                                                    max(float(np.nanmax(m)) for m in maps))
        image = None
        for c, m in enumerate(maps):
            ax = axes[r, c]
            image = ax.imshow(m, cmap="rocket_r", vmin=low, vmax=top, interpolation="nearest")
            ax.grid(False)
            if ticks is not None and ticks[c] is not None:
                words = ticks[c]
                ax.set_xticks(range(len(words)), words, fontsize="x-small")
                for label in ax.get_xticklabels():  # Chinese characters stand upright; Latin tokens turn
                    label.set_rotation(0 if _upright(label.get_text()) else 90)
                ax.set_yticks(range(len(words)), words, fontsize="x-small")
            else:
                ax.set_xticks([])
                ax.set_yticks([])
            if r == 0:
                ax.set_title(columns[c], fontsize="medium")
        axes[r, 0].set_ylabel(name, fontsize="medium")
        if not shared:
            fig.colorbar(image, ax=list(axes[r]), shrink=0.85, label="weight")
    if shared and image is not None:
        fig.colorbar(image, ax=list(axes.flat), shrink=0.85, label="attention weight")
    return fig
