"""Figures: one fixed style, PNGs without timestamps or version strings, attention heatmaps.

`setup()` fixes seaborn's theme and the matplotlib settings that change pixels (dpi, font, hatch
and path handling), so a rebuild from the same data draws the same figures; `savefig` writes them
to $ABLATE_REPORT_FIGURES (reports/figures) with the PNG's Software/date metadata removed.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np

from ..registry import TASKS as REGISTRY
from .data import figures_dir

DPI = 110
TASKS = {name: task.title for name, task in REGISTRY.items()}  # data.task -> how a sentence or a legend names it


def setup() -> None:
    """Seaborn whitegrid theme, fixed dpi and font; pandas shows wide tables whole; numpy's global
    generator seeded, since seaborn's strip plots jitter with it (a rebuild gives the same PNGs)."""
    import numpy as np
    import pandas as pd
    import seaborn as sns

    np.random.seed(0)

    sns.set_theme(style="whitegrid", context="notebook", palette="colorblind")
    matplotlib.rcParams.update(
        {
            "figure.dpi": DPI,
            "savefig.dpi": DPI,
            "figure.figsize": (7.0, 4.0),
            "font.family": "DejaVu Sans",
            "svg.hashsalt": "ablate",
            "axes.titlesize": "medium",
        }
    )
    pd.set_option("display.max_columns", 40)
    pd.set_option("display.width", 160)
    pd.set_option("display.precision", 4)


def savefig(fig, name: str) -> Path:
    """Save `fig` as <figures>/<name>.png (no metadata that changes between builds); returns the path.
    By convention a notebook's figures start with its prefix (q2_..., claims_...)."""
    folder = figures_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    fig.savefig(path, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    return path


def heatmaps(maps: list[tuple[str, np.ndarray]], ncols: int | None = None, size: float = 2.6, vmax: float | None = None):
    """A row (or grid) of T x T attention maps, each with its title; rows are queries, columns keys.
    One colour scale for all, so maps compare directly."""
    import matplotlib.pyplot as plt

    n = len(maps)
    ncols = ncols or n
    nrows = (n + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(size * ncols, size * nrows + 0.4), squeeze=False)
    top = vmax if vmax is not None else max(float(np.nanmax(m)) for _, m in maps)
    image = None
    for ax, (title, m) in zip(axes.flat, maps):
        image = ax.imshow(m, cmap="rocket_r", vmin=0.0, vmax=top, interpolation="nearest")
        ax.set_title(title, fontsize="small")
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


def heatmap_grid(grid: dict[str, list[np.ndarray]], columns: list[str], size: float = 2.4):
    """Rows of T x T attention maps: one row per entry of `grid` (its key labels the row, and the row
    has its own colour scale and colour bar), one column per name in `columns`."""
    import matplotlib.pyplot as plt
    import seaborn as sns  # noqa: F401  (registers the colormap)

    nrows, ncols = len(grid), len(columns)
    fig, axes = plt.subplots(nrows, ncols, figsize=(size * ncols + 1.2, size * nrows + 0.3), squeeze=False)
    for r, (label, maps) in enumerate(grid.items()):
        low, top = min(float(np.nanmin(m)) for m in maps), max(float(np.nanmax(m)) for m in maps)
        image = None
        for c, m in enumerate(maps):
            ax = axes[r, c]
            image = ax.imshow(m, cmap="rocket_r", vmin=low, vmax=top, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.grid(False)
            if r == 0:
                ax.set_title(columns[c], fontsize="medium")
        axes[r, 0].set_ylabel(label, fontsize="medium")
        fig.colorbar(image, ax=list(axes[r]), shrink=0.85, label="weight")
    return fig
