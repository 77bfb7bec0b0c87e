"""Text cells a spreadsheet would run as a formula, made inert: one rule for every CSV ablate writes.

A run name, a group or an error line that starts with `=`, `+`, `-`, `@`, a tab or a carriage return
is read by Excel, LibreOffice and Google Sheets as a formula (CSV injection, OWASP). Such a *text*
cell gets a leading `'`, which those tools show as the text itself; numbers are never touched, so a
negative accuracy stays a number. A leaf module (pandas is imported by the callers that have frames).
"""

from __future__ import annotations

from typing import Any

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: Any) -> Any:
    """`value` unchanged unless it is text a spreadsheet would evaluate; then `'` + value."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def safe_frame(df):
    """A copy of the DataFrame `df` whose text cells (and column names) are `safe_cell`-ed."""
    out = df.copy()
    for column in out.columns:
        if out[column].dtype == object or str(out[column].dtype) in ("string", "str"):
            out[column] = out[column].map(safe_cell)
    out.columns = [safe_cell(c) for c in out.columns]
    return out
