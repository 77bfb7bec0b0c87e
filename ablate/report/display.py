"""Tables in a report: shown as a reader reads them, without pandas' row index.

    R.show_table(df)     display `df` (HTML and plain text) without its index: a meaningful index
                         (a groupby's keys, any named level) becomes ordinary columns, a positional
                         one (0, 1, 2 ... or the row numbers left by a filter) is dropped
    hide_index()         make every DataFrame the running kernel displays look like that, including
                         one a cell shows as its last expression; `ablate report build` calls it in
                         each kernel before the notebook's first cell

Neither prints a warning: a notebook's HTML carries what it computed, not library chatter.
"""

from __future__ import annotations

import warnings

import pandas as pd


def _limits() -> dict[str, int | None]:
    """pandas' display limits (a long table is cut in the middle, as pandas' own display does)."""
    return {"max_rows": pd.get_option("display.max_rows"), "max_cols": pd.get_option("display.max_columns")}


def without_index(df: pd.DataFrame) -> pd.DataFrame:
    """`df` with its index as columns when any level is named, else without it."""
    if any(name is not None for name in df.index.names):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return df.reset_index()
    return df.reset_index(drop=True)


def table_html(df: pd.DataFrame) -> str:
    """The HTML of `df` without its index (pandas' own table markup, so notebook styles apply)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return without_index(df).to_html(index=False, border=0, **_limits())


def table_text(df: pd.DataFrame) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return without_index(df).to_string(index=False, **_limits())


def show_table(df: pd.DataFrame) -> None:
    """Display `df` without its index (see the module docstring)."""
    from IPython.display import display

    display({"text/html": table_html(df), "text/plain": table_text(df)}, raw=True)


def hide_index(shell=None) -> bool:
    """Register `table_html` / `table_text` as the running IPython shell's formatters for DataFrames,
    so that a DataFrame displayed directly shows no index either. False outside IPython."""
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    if shell is None:
        return False
    formatters = shell.display_formatter.formatters
    formatters["text/html"].for_type(pd.DataFrame, table_html)
    formatters["text/plain"].for_type(pd.DataFrame, lambda df, printer, cycle: printer.text(table_text(df)))
    return True
