"""The exported data folder (reports/data): its file names and how each file is read and checked.

Export (ablate.results.export) writes it; the reports (ablate.report) read it through these
functions only, so the format has one home and the reports import nothing below the results layer.

    <sweep>.csv        one row per run        <sweep>.npz   small arrays per run
    <sweep>_curves.csv probes during training (long: run_id, swept keys, step, layer, quantities);
                       only for sweeps with periodic probes, listed in meta.json under `curves`
    attention_cost.csv `ablate bench attention --csv`      meta.json     provenance per sweep

meta.json's `files` maps every file export wrote (the sweeps' CSVs, NPZs and curves) to its SHA-256.
Export renames meta.json into place last, so a folder in which an export stopped part way (a kill -9
between its renames) holds files that meta.json does not record: the readers here refuse such a folder
in one line (`check_files`) instead of reading a new table beside old arrays. A meta.json without
`files` (written before export recorded them, as tests/data/reports) is read as before; export adds
`files` the first time it writes into the folder.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import pandas as pd

META = "meta.json"
CURVES = "_curves"  # <sweep>_curves.csv: a sweep's probe curves
CURVE_COLUMNS = ("run_id", "step", "layer")  # what every curves file has, before its quantities
# Tables that are not sweeps, and the make target that produces each.
TARGETS = {"attention_cost": "bench-attention", "rnn_cost": "bench-rnn"}


def make_target(name: str) -> str:
    return TARGETS.get(name, f"sweep-{name}")


def curves_file(name: str) -> str:
    """The file name of sweep `name`'s probe curves."""
    return f"{name}{CURVES}.csv"


def read_curves(name: str, data: Path | str) -> pd.DataFrame | None:
    """Sweep `name`'s probe curves (long: run_id, the swept keys, step, layer, one column per quantity),
    None when it has none; DataFileError when the file is damaged. The key columns' dtypes are the
    table's: meta.json's `dtypes` for the sweep apply to them too."""
    path = Path(data) / curves_file(name)
    check_files(data, read_meta(data), [path.name])
    if not path.is_file():
        return None
    return read_csv(path, CURVE_COLUMNS)


class DataFileError(ValueError):
    """A file of the data folder that cannot be read; str() is one line naming it and the fix."""

    def __init__(self, path: Path, problem: str, fix: str | None = None):
        self.path = path
        fix = fix or f"restore it (`git checkout -- {path}`) or export it again (`make report-export`)"
        super().__init__(f"{path} {problem}; {fix}")


FILES = "files"  # meta.json's record of the files export wrote: name -> SHA-256


def digest(content: bytes, name: str) -> str:
    """The SHA-256 meta.json records for file `name` holding `content`. A CSV's line ends count as `\n`,
    so a checkout that turns them into CRLF (git's core.autocrlf) still matches."""
    if name.endswith(".csv"):
        content = content.replace(b"\r\n", b"\n")
    return hashlib.sha256(content).hexdigest()


def exported_sweep(name: str) -> str | None:
    """The sweep a file of export's kinds belongs to (`heads.csv`, `heads.npz`, `heads_curves.csv` ->
    heads), None for any other file (meta.json, the benchmarks' CSVs, a hidden staging file)."""
    if name.startswith("."):
        return None
    stem, dot, ext = name.rpartition(".")
    if not dot or ext not in ("csv", "npz") or stem in TARGETS:
        return None
    return stem.removesuffix(CURVES) if ext == "csv" and stem.endswith(CURVES) else stem


def check_files(data: Path | str, meta: dict[str, Any], names: list[str] | None = None) -> None:
    """The files `names` of `data` (default: every file of export's kinds there or in meta.json's `files`)
    are the ones meta.json records, byte for byte; DataFileError, one line, for the first that is not (an
    export that stopped part way: a new table beside old arrays). A file that is not there and not
    recorded is fine (a sweep not exported); a meta.json without `files` (written before export recorded
    them) checks nothing."""
    recorded = meta.get(FILES)
    if recorded is None:
        return
    data = Path(data)
    if names is None:
        present = [p.name for p in data.iterdir() if exported_sweep(p.name)] if data.is_dir() else []
        names = sorted({*recorded, *present})
    fix = ("it and meta.json are not of the same export (one stopped part way?); run the export again "
           f"(`make report-export`) or restore the folder (`git checkout -- {data}`)")
    for name in names:
        path = data / name
        try:
            content = path.read_bytes()
        except FileNotFoundError:
            if name in recorded:
                raise DataFileError(path, "is missing though meta.json records it", fix) from None
            continue
        except OSError as err:
            raise DataFileError(path, f"cannot be read ({err.strerror or err})") from None
        if name not in recorded:
            if exported_sweep(name) is None:  # not export's (a benchmark's CSV beside the tables): not its to check
                continue
            raise DataFileError(path, "is not a file meta.json records", fix)
        if digest(content, name) != recorded[name]:
            raise DataFileError(path, "is not the file meta.json records (its SHA-256 differs)", fix)



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
    files = meta.get(FILES, {})
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise DataFileError(path, f"is not an export's meta.json (its `{FILES}` maps file names to SHA-256 digests)")
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


def restore_dtypes(df: pd.DataFrame, dtypes: dict[str, str]) -> pd.DataFrame:
    """Columns whose dtype a CSV does not keep (nullable ints such as model.d_head, strings that
    look like numbers such as trainer.devices) get back the dtype export recorded."""
    for column, dtype in dtypes.items():
        if column not in df.columns:
            continue
        if dtype == "str":
            df[column] = df[column].map(lambda v: v if pd.isna(v) else str(v)).astype(object)
        elif dtype == "bool":
            df[column] = df[column].map(lambda v: v if pd.isna(v) else str(v) == "True").astype(object)
        else:
            df[column] = df[column].astype(dtype)
    return df


def check_folder(data: Path | str) -> None:
    """Read every file a build uses from `data` (meta.json, the tables, the arrays), so a damaged one, or
    one that meta.json does not record (an export stopped part way), stops the build with one line before
    any notebook runs (DataFileError)."""
    import zipfile

    data = Path(data)
    meta = read_meta(data)
    for path in sorted(data.glob("*.csv")):
        if path.stem in TARGETS:
            read_csv(path, ("n",))
        elif path.stem.endswith(CURVES):
            read_csv(path, CURVE_COLUMNS)
        else:
            read_csv(path, ("run_id", "status"))
    for path in sorted(data.glob("*.npz")):
        try:
            with zipfile.ZipFile(path) as z:
                bad = z.testzip()
        except (zipfile.BadZipFile, OSError, EOFError) as err:
            raise DataFileError(path, f"is not a readable NPZ archive ({err})") from None
        if bad is not None:
            raise DataFileError(path, f"is damaged (entry {bad} fails its checksum)")
    check_files(data, meta)  # each file whole, but are they of one export?
