"""The Chinese figures: every figure is saved twice, <name>.png in English and <name>.zh.png with each
title, axis label, legend entry, categorical tick label and stamp put into Chinese from ZH below (one
table of the figures' phrases, the longest phrase first; numbers, symbols and names such as LSTM, Pre-LN
or d_k stay as they are). FINDINGS.zh.md, the Chinese pages and index.zh.html show the .zh.png files.

    drawn_texts(fig)           every string the figure draws, in order (the PNG's Description)
    to_zh("copy, bidirectional")   -> "复制，双向"
    leftover("validation acc")     -> ["acc"]: English words no phrase of ZH covers (a test lists them)

A string that ZH does not cover keeps its English words; the test of the Chinese figures names them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from .figure_phrases import KEEP, PATTERNS, ZH

# longest phrase first, so "validation accuracy" wins over "accuracy"; whole words only
_PHRASES = sorted(ZH, key=len, reverse=True)
# a phrase is whole words: no letter, underscore or dotted name (model.dropout, data.task) on either side
_LEFT, _RIGHT = r"(?<![A-Za-z_.])", r"(?![A-Za-z_]|\.[A-Za-z_])"
_PATTERN = re.compile("|".join(rf"{_LEFT}{re.escape(p)}{_RIGHT}" for p in _PHRASES)) if _PHRASES else None
_COUNTED = [(re.compile(rf"{_LEFT}{p}{_RIGHT}"), r) for p, r in PATTERNS]
_WORD = re.compile(r"[A-Za-z][A-Za-z_'’]*")
_MATH = re.compile(r"\$[^$]*\$")  # mathtext ($10^{-1}$, $\mathdefault{...}$): drawn as symbols, never translated
_HAN = "\u4e00-\u9fff"


def to_zh(text: str) -> str:
    """`text` in Chinese: the text outside mathtext ($...$, which stays as it is) translated by `_words`."""
    if not text or "$" not in text:
        return _words(text) if text else text
    parts = re.split(r"(\$[^$]*\$)", text)
    return "".join(part if part.startswith("$") and part.endswith("$") and len(part) > 1 else _words(part)
                   for part in parts)


def _words(text: str) -> str:
    """First the counted phrases of PATTERNS ("8 heads" -> "8 个头"), then every phrase of ZH (one pass,
    longest first); then the English punctuation beside Chinese made Chinese (", " -> "，", ": " -> "："),
    and the spaces between two Chinese words dropped."""
    if not text.strip():
        return text
    out = text
    for pattern, repl in _COUNTED:
        out = pattern.sub(repl, out)
    if _PATTERN is not None:
        out = _PATTERN.sub(lambda m: ZH[m.group(0)], out)
    han = f"[{_HAN}“”]"
    out = re.sub(rf"\(((?:(?!\)).)*{han}(?:(?!\)).)*)\)", r"（\1）", out)  # parentheses around Chinese
    if _WORD.search(_MATH.sub("", out)) or re.search(han, out):  # a label: list commas Chinese, not N(0, 1)'s
        depth, chars = 0, []
        for i, c in enumerate(out):
            depth += (c == "(") - (c == ")")
            chars.append("，" if c == "," and depth == 0 and out[i + 1: i + 2] == " " else c)
        out = re.sub("， ", "，", "".join(chars))
    out = re.sub(rf"(?<={han}): |: (?={han})", "：", out)
    out = re.sub(rf"(?<={han}) (?={han})", "", out)
    out = re.sub(r" *([，：（）]) *", r"\1", out)  # no space beside Chinese punctuation
    return out


def leftover(text: str) -> list[str]:
    """The English words `text` still holds after to_zh, except the names KEEP lets stand and mathtext."""
    return [w for w in _WORD.findall(_MATH.sub("", to_zh(text))) if w not in KEEP and len(w) > 1]


def _tick_axes(fig) -> Iterator[Any]:
    for ax in fig.axes:
        yield ax.xaxis
        yield ax.yaxis


def drawn_texts(fig, draw: bool = True) -> list[str]:
    """Every non-empty string the figure draws (titles, labels, legends, ticks, annotations, the stamp),
    in the order matplotlib finds them, after a draw (so tick labels are the formatted ones): `draw=False`
    where the figure was just drawn (saved)."""
    from matplotlib.text import Text

    if draw:
        fig.draw_without_rendering()
    seen = [t.get_text() for t in fig.findobj(Text) if t.get_visible()]
    return [t for t in seen if t.strip()]


def translated(fig, draw: bool = True):
    """A context manager: inside it `fig` draws its Chinese texts; on exit every text, tick label and tick
    formatter is as before (the English figure can be saved again, byte for byte). `draw=False` where the
    figure was just drawn (saved), so its tick labels are formatted already."""
    from contextlib import contextmanager

    from matplotlib.text import Text

    @contextmanager
    def swap():
        if draw:
            fig.draw_without_rendering()  # tick labels exist and are formatted
        axes, tickers = [], set()
        for axis in _tick_axes(fig):
            labels = [t.get_text() for t in axis.get_ticklabels()]
            # categorical ticks: Chinese while inside; shared axes share one ticker, swapped (and restored) once
            if any(_WORD.search(_MATH.sub("", s)) for s in labels) and id(axis.major) not in tickers:
                tickers.add(id(axis.major))
                axes.append((axis, axis.get_major_locator(), axis.get_major_formatter(), axis.get_view_interval()))
                axis.set_ticks(list(axis.get_ticklocs()), labels=[to_zh(s) for s in labels])
                axis.set_view_interval(*axes[-1][3], ignore=True)  # set_ticks may widen the view to its ticks
        texts = [(t, t.get_text()) for t in fig.findobj(Text)]
        for t, s in texts:
            if s:
                t.set_text(to_zh(s))
        try:
            yield fig
        finally:
            for t, s in texts:
                t.set_text(s)
            for axis, locator, formatter, view in reversed(axes):
                axis.set_major_locator(locator)
                axis.set_major_formatter(formatter)
                axis.set_view_interval(*view, ignore=True)

    return swap()
