"""Text cells a spreadsheet would run as a formula, made inert: one rule for every CSV ablate writes.

A run name, a group or an error line that starts with `=`, `+`, `-`, `@`, a tab or a carriage return
is read by Excel, LibreOffice and Google Sheets as a formula (CSV injection, OWASP). Such a *text*
cell gets a leading `'`, which those tools show as the text itself; numbers are never touched, so a
negative accuracy stays a number, and neither is text that spells a plain number (`-1`, `+3`,
`-1e-3`: a spreadsheet reads it as that number, not a formula; a config value a table holds as text).
A leaf module (pandas is imported by the callers that have frames).
"""

from __future__ import annotations

import re
from typing import Any

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")  # not -inf, -1+2, -0x10


def safe_cell(value: Any) -> Any:
    """`value` unchanged unless it is text a spreadsheet would evaluate; then `'` + value."""
    if isinstance(value, str) and value.startswith(FORMULA_START) and not PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def safe_frame(df):
    """A copy of the DataFrame `df` whose text cells (and column names) are `safe_cell`-ed (the index is
    left alone: write it with index=False). `df` itself is not changed."""
    out = df.copy()
    for column in out.columns:
        dtype = str(out[column].dtype)
        if dtype == "category":  # its categories may be text; a plain column of them is written the same
            out[column] = out[column].astype(object).map(safe_cell)
        elif dtype in ("object", "string", "str"):
            out[column] = out[column].map(safe_cell)
    out.columns = [safe_cell(c) for c in out.columns]
    return out
