"""The exported data folder (reports/data): its file names and how each file is read and checked.

Export (ablate.results.export) writes it; the reports (ablate.report) read it through these
functions only, so the format has one home and the reports import nothing below the results layer.

    <sweep>.csv        one row per run        <sweep>.npz   small arrays per run
    attention_cost.csv `ablate bench attention --csv`      meta.json     provenance per sweep
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pandas as pd

META = "meta.json"
# Tables that are not sweeps, and the make target that produces each.
TARGETS = {"attention_cost": "bench-attention"}


def make_target(name: str) -> str:
    return TARGETS.get(name, f"sweep-{name}")


class DataFileError(ValueError):
    """A file of the data folder that cannot be read; str() is one line naming it and the fix."""

    def __init__(self, path: Path, problem: str):
        self.path = path
        super().__init__(f"{path} {problem}; restore it (`git checkout -- {path}`) or export it again "
                         "(`make report-export`)")



def read_meta(data: Path | str) -> dict[str, Any]:
    """meta.json ({} when there is none); DataFileError when it is not what export writes."""
    path = Path(data) / META
    try:
        meta = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError:
        raise DataFileError(path, "is not UTF-8 text (binary garbage?)") from None
    except json.JSONDecodeError as err:
        raise DataFileError(path, f"is not valid JSON ({err.msg} at line {err.lineno} column {err.colno}, "
                            "truncated?)") from None
    sweeps = meta.get("sweeps", {}) if isinstance(meta, dict) else None
    if not isinstance(sweeps, dict) or not all(isinstance(v, dict) for v in sweeps.values()):
        raise DataFileError(path, "is not an export's meta.json (an object whose `sweeps` maps names to objects)")
    return meta


def read_csv(path: Path, columns: tuple[str, ...] = ()) -> pd.DataFrame:
    """An exported table; DataFileError when it is empty, cut short, not a CSV, or lacks `columns`."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise DataFileError(path, f"cannot be read ({err.strerror or err})") from None
    if raw and not raw.endswith(b"\n"):
        raise DataFileError(path, "ends in the middle of a line (truncated?)")
    try:
        df = pd.read_csv(io.BytesIO(raw))
    except UnicodeDecodeError:
        raise DataFileError(path, "is not UTF-8 text (binary garbage?)") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as err:
        first = next((line for line in str(err).splitlines() if line.strip()), type(err).__name__)
        raise DataFileError(path, f"is not a readable CSV table ({first.strip()})") from None
    missing = [c for c in columns if c not in df.columns]
    if missing or df.empty:
        what = f"has no {', '.join(missing)} column" if missing else "has no rows"
        raise DataFileError(path, f"{what} (truncated?)")
    return df


def check_folder(data: Path | str) -> None:
    """Read every file a build uses from `data` (meta.json, the tables, the arrays), so a damaged one
    stops the build with one line before any notebook runs (DataFileError)."""
    import zipfile

    data = Path(data)
    read_meta(data)
    for path in sorted(data.glob("*.csv")):
        read_csv(path, ("n",) if path.stem in TARGETS else ("run_id", "status"))
    for path in sorted(data.glob("*.npz")):
        try:
            with zipfile.ZipFile(path) as z:
                bad = z.testzip()
        except (zipfile.BadZipFile, OSError, EOFError) as err:
            raise DataFileError(path, f"is not a readable NPZ archive ({err})") from None
        if bad is not None:
            raise DataFileError(path, f"is damaged (entry {bad} fails its checksum)")
