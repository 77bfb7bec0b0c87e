"""Reading a run's record files strictly: each is either good, absent, or a `RunFileError` naming
the file and the problem in a few words ("is not valid JSON at line 1 column 38 (truncated?)").

The trainer writes every one of these files atomically (temp file + rename), so a file that does
not parse was damaged afterwards (a full disk, a copy cut short, an editor): the table lists its run
with status `corrupt` instead of trusting it, dropping it, or stopping at it, and `ablate train` sets
it aside (ablate.rundir). A leaf module: both layers read the files through it.

    summary.json   a JSON object (absent: the run has not started)
    config.yaml    a YAML mapping of config sections (read with ablate.yamlfile.read_yaml)
    probes.json    a JSON object of probe scalars (absent: probes were off)
    metrics.csv    csv.DictWriter output: a header starting with `step`, every row as wide as the
                   header, every cell a number or empty, a line ending at the end (absent: nothing
                   logged yet)

A run that says `completed` has finite numbers in both (`nonfinite_metric`, `nonfinite_cell`): a
NaN or inf there was not measured by a run that finished (a diverged run stops at its first
non-finite loss and says `diverged`), so such a run is not trusted as completed, by the table
(`corrupt`) nor by the sweep runner's tuned choice.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from .yamlfile import YamlFileError, read_yaml

METRIC_PREFIXES = ("test/", "val/", "train/")  # the metrics statistics and tuned choices read
MAX_BYTES = 64 << 20  # far above any file a run writes (a summary is a few KB, metrics.csv < 1 MB)


class RunFileError(ValueError):
    """One of a run's files cannot be used: `file` (its name) `problem` (a phrase)."""

    def __init__(self, file: str, problem: str):
        self.file, self.problem = file, problem
        super().__init__(f"{file} {problem}")


def _text(path: Path) -> str | None:
    """The file's text; None when it does not exist."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return None
    if size > MAX_BYTES:
        raise RunFileError(path.name, f"is {size:,} bytes, far more than a run writes")
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise RunFileError(path.name, f"cannot be read ({err.strerror or err})") from None
    if not raw.strip():
        raise RunFileError(path.name, "is empty")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RunFileError(path.name, "is not UTF-8 text (binary garbage?)") from None
    if "\x00" in text:
        raise RunFileError(path.name, "contains NUL bytes (binary garbage?)")
    return text


def read_json_object(path: Path) -> dict[str, Any] | None:
    """summary.json, probes.json: the object, None when absent, else RunFileError."""
    text = _text(path)
    if text is None:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise RunFileError(path.name, f"is not valid JSON at line {err.lineno} column {err.colno} "
                           f"({err.msg}; truncated?)") from None
    except RecursionError:
        raise RunFileError(path.name, "is nested too deeply to be a run's record") from None
    if not isinstance(data, dict):
        raise RunFileError(path.name, f"holds a JSON {type(data).__name__}, not an object")
    return data


def read_config_mapping(path: Path) -> dict[str, Any] | None:
    """config.yaml: the nested mapping, None when absent, else RunFileError."""
    if not path.exists():
        return None
    try:
        data = read_yaml(path, path.name)
    except YamlFileError as err:
        # read_yaml's line is "<name> '<path>' <problem>; <fix>": keep the problem
        text = str(err)
        prefix = f"{path.name} {str(path)!r} "
        problem = text[len(prefix):] if text.startswith(prefix) else text
        raise RunFileError(path.name, problem.split("; ")[0]) from None
    if data is None:
        raise RunFileError(path.name, "is empty")
    if not isinstance(data, dict):
        raise RunFileError(path.name, f"holds a YAML {type(data).__name__}, not a mapping of config keys")
    return data


def read_metrics_rows(path: Path) -> list[dict[str, str]] | None:
    """metrics.csv as rows of strings, None when absent, else RunFileError (truncated, garbage)."""
    text = _text(path)
    if text is None:
        return None
    if not text.endswith("\n"):
        raise RunFileError(path.name, "ends in the middle of a line (truncated?)")
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as err:
        raise RunFileError(path.name, f"is not valid CSV ({err})") from None
    header = rows[0]
    if not header or header[0] != "step":
        raise RunFileError(path.name, f"has no `step` column first (header {','.join(header)[:60]!r})")
    out = []
    last: tuple[float, str] | None = None  # the latest step so far: rows go forward (a resume drops what follows)
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise RunFileError(path.name, f"line {number} has {len(row)} of {len(header)} fields (truncated?)")
        for name, cell in zip(header, row):
            if cell:
                try:
                    float(cell)
                except ValueError:
                    raise RunFileError(path.name, f"line {number}: {name} = {cell[:20]!r} is not a number") from None
        if row[0]:
            if last is not None and float(row[0]) < last[0]:
                raise RunFileError(path.name, f"line {number}: step {row[0]} comes after step {last[1]} (rows out of "
                                              "order: written by something else, or edited)")
            last = (float(row[0]), row[0])
        out.append(dict(zip(header, row)))
    return out


def nonfinite_metric(metrics: Any) -> str | None:
    """Why a completed run's summary metrics cannot be trusted: the first test/, val/ or train/ metric
    that is not a finite number, as a phrase ("has val/acc_best = inf, not a finite number"); None if
    every one is."""
    for key, value in (metrics.items() if isinstance(metrics, dict) else ()):
        if not str(key).startswith(METRIC_PREFIXES):
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"has {key} = {value!r}, not a number"
        if not math.isfinite(value):
            return f"has {key} = {value}, not a finite number"
    return None


def nonfinite_cell(rows: list[dict[str, str]]) -> str | None:
    """Why a completed run's metrics.csv rows (read_metrics_rows) cannot be trusted: the first cell
    holding NaN or inf, as a phrase ("line 3: val/acc = 'nan' is not a finite number"); None if none."""
    for number, row in enumerate(rows, start=2):
        for name, cell in row.items():
            if cell and not math.isfinite(float(cell)):
                return f"line {number}: {name} = {cell!r} is not a finite number"
    return None
