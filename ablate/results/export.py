"""`ablate report export`: run directories -> reports/data/, small and stable enough to commit.

For each sweep with runs under $ABLATE_RUNS_DIR/<name>:

    <name>.csv   ablate.results.load(<name>) minus run_dir (a local path); floats rounded to 6
                 significant digits (integer-valued ones kept whole), so the file changes only
                 when the results do
    <name>.npz   per run: `<run_id>/train_loss`, `<run_id>/val_acc` ((k, 2) float32: step, value,
                 from metrics.csv); and what the sweep's study manifest (reports/<notebook>.yaml,
                 `sweeps.<name>.exports`, ablate.studies.EXPORTS) asks for: attention_init /
                 attention_final, the first seed of each variant
                 keeps the attention maps of its first layer on the first probe example
                 (`<run_id>/<point>/attention` (1, H, T, T), uint8: weight x 255, rounded);
                 permuted, also the maps on the same example with its
                 positions permuted (`final/attention_perm`, and `perm`), computed from the
                 run's checkpoint; sentence (Q1), every run with a checkpoint
                 keeps its first layer's attention (`final/sentence`, `final/sentence_perm`: (H, 13, 13)
                 uint8) on the tutorial's sentence 猫坐在垫子上 and its reordering 垫子在猫坐上, by
                 character (token ids 猫=0 坐=1 在=2 垫=3 子=4 上=5, each a copy input: the tokens,
                 SEP, six BLANKs);
                 by_position (the RNN table's copy sweeps), every run's test accuracy
                 at each emitted position (`final/acc_by_position` (K,) float32), from its
                 probes.npz, else computed from its checkpoint on its test set (meta.json's
                 `acc_by_position` names the runs it was computed for); relations
                 (Q3's two-relation task), every run's weight per head on the token two back, the
                 query's own token and BOS (`final/relation_weights` (L, H, 3) float32, from its
                 checkpoint on its first 256 validation sequences)
    <name>_curves.csv  the mechanisms during training, from every run with periodic probes
                 (`run.probe_every`, its probes.csv): long format, one row per run, probe step and
                 layer: run_id, the swept keys, step, layer, then one column per quantity of
                 CURVE_QUANTITIES (absolute gradient norm, score std, largest weight, one-hot
                 fraction, entropy, token cosine, effective rank); step 0 is the init probes.
                 Sorted by run_id, step, layer; floats rounded as in the table. Not written when no
                 run has periodic probes (and an older one is then removed with the rest)
    meta.json    per sweep: runs, statuses, budget, commit, dirty, machine, date, swept keys, the
                 dtypes a CSV does not keep, `curves` (file, runs, rows) when there are curves, and
                 what the reports would otherwise import the harness for: `config_defaults` (every
                 config key's default) and `cost_full` (the full budget's cost estimate, the fields of
                 ablate.results.cost.Cost, from the exported table); at the top, `sentence` (words,
                 token ids and the 13 axis labels of Q1's literal example) once a `sentence` sweep is exported

Which runs: those sweeps/<name>.yaml defines now, at one budget (the first of full, none, quick,
smoke that has runs, or --budget): runs of other budgets or of an older grid or budget profile that the
runs folder still holds are left out, and the log says how many. A run whose files cannot be read
(status `corrupt` in the results table) is left out with one line on stderr naming it, the file and
the problem; a run whose probes.npz, probes.csv or checkpoint cannot be read is exported without
those arrays or curves, with one such line.

Committed findings are never replaced by less: a table already exported is kept, with one line saying
which and why, unless --replace (`make report FORCE=1`), when the runs here are of a smaller budget
(smoke < quick < none < full; none, the defaults, trains 5 epochs on all of MNIST, more than quick), or
when they are fewer than the table's and fewer than the sweep file defines (a sweep stopped part way;
a sweep file cut to fewer runs, all of them run, does replace it).

Nothing else is copied: no checkpoints, no W&B folders. A sweep with no runs keeps the files that
are already there. One line per sweep says what happened. Files are written atomically and
byte-for-byte reproducibly (the NPZ's zip entries carry a fixed date), so exporting the same runs
twice changes nothing, and an export that changes nothing leaves meta.json untouched. A sweep's CSV,
NPZ, curves and meta.json are written together: all are first written whole beside their targets,
then moved into place, meta.json last, so a full or read-only disk (OSError, naming the file) leaves
each sweep's files all old or all new. meta.json's `files` records every file's SHA-256, so a kill
-9 between the renames leaves files that meta.json does not record: the readers (ablate.report, the
build) refuse the folder in one line until an export runs again, which removes the staged files left
behind and writes such a sweep again from its runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import io
import json
import math
import os
import sys
import zipfile
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..budgets import BY_TRAINING
from ..csvcells import safe_frame
from ..fileio import atomic_write
from ..runfiles import RunFileError, read_json_object, read_metrics_rows
from .exported import (
    FILES,
    META,
    DataFileError,
    check_files,
    curves_file,
    digest,
    exported_sweep,
    read_meta,
    restore_dtypes,
)

CURVES = ("train/loss", "val/acc")
# Which sweep keeps which extra arrays is said by its study's manifest (ablate.studies.EXPORTS): the names
# below are what each export computes.
ATTENTION_LAYERS = 1  # layer 0: where the input order (and PE) enters directly
# Q1's literal example (issues 14, 24): the tutorial's sentence 猫坐在垫子上 ("the cat sits on the mat") and
# its reordering 垫子在猫坐上, by character, through every trained model of these sweeps (copy task). Six
# distinct characters, so the reordering is a permutation; each character is a token id, each sentence
# is fed as a copy input.
WORDS = ("猫", "坐", "在", "垫", "子", "上")  # token id = index: 猫=0 坐=1 在=2 垫=3 子=4 上=5
SENTENCE_WORDS = ("猫", "坐", "在", "垫", "子", "上")
SENTENCE_PERM_WORDS = ("垫", "子", "在", "猫", "坐", "上")
# Q3's two-relation sweep (issue 24): every run with a checkpoint keeps where each head of its final model
# puts its weight, by relation (ablate.probes.relation_weights on the first RELATION_BATCH validation
# sequences): `<run_id>/final/relation_weights` (L, H, 3) float32, on the token two back, on the query's
# own token, on BOS.
RELATION_KEY, RELATION_BATCH = "final/relation_weights", 256
# The RNN table's copy sweeps (issue 17): every run keeps its test accuracy at each emitted position,
# `<run_id>/final/acc_by_position` (K,) float32, from probes.npz, else computed from its checkpoint.
BY_POSITION = "final/acc_by_position"
DROP = ("run_dir",)
SIGNIFICANT = 6
PROBE_CURVE = "probes.csv"  # a run's periodic probes (ablate.probing writes it)
# The mechanisms exported as curves, by their per-layer probe names (`grad_l0`, `logit_std_l1`, ...; see
# docs/probes.md's table): absolute gradient norm of the block, score std, largest attention weight (row
# max, mean over rows), one-hot fraction, entropy, token cosine, effective rank. Every other periodic
# probe stays in the run's probes.csv.
CURVE_QUANTITIES = ("grad", "logit_std", "rowmax", "onehot_frac", "entropy", "cosine", "erank")
ZIP_DATE = (1980, 1, 1, 0, 0, 0)
EARLIEST = datetime(2000, 1, 1, tzinfo=timezone.utc).timestamp()  # no run of this harness is older


def sweep_names(sweeps: Path | str = "sweeps") -> list[str]:
    return sorted(p.stem for p in Path(sweeps).glob("*.yaml"))


def config_keys() -> list[str]:
    """Every config key, as the results table spells its columns (model.n_heads, ..., seed)."""
    from ..config import all_keys

    return all_keys()


def config_defaults() -> dict[str, Any]:
    """Every config key with its default ({'model.ffn_mult': 2, ...}), as export records it in meta.json
    for the reports (ablate.report.config_defaults reads it there, without importing the harness)."""
    from ..config import Config, flat

    return flat(Config())


# ------------------------------------------------------------------ the table


def _round(x: Any) -> Any:
    if isinstance(x, float) and math.isfinite(x) and not x.is_integer():
        return float(f"{x:.{SIGNIFICANT}g}")
    return x


def _missing(v: Any) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def _identical(a: Any, b: Any) -> bool:
    """Equal value and type, or both missing: what a CSV round trip must keep."""
    if _missing(a) or _missing(b):
        return _missing(a) and _missing(b)
    return type(a) is type(b) and a == b


def _kind(values: list[Any]) -> str | None:
    present = [v for v in values if not _missing(v)]
    if present and all(isinstance(v, bool) for v in present):
        return "bool"
    if present and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in present):
        return "Int64"
    if present and all(isinstance(v, str) for v in present):
        return "str"
    return None


def tidy(df: pd.DataFrame) -> tuple[str, dict[str, str]]:
    """The table as CSV text, and the dtypes of the columns the CSV would not give back. A text cell a
    spreadsheet would run as a formula (`=...`, `@...`) starts with `'` (ablate.csvcells)."""
    out = df.drop(columns=[c for c in DROP if c in df.columns]).copy()
    for column in out.columns:
        if out[column].dtype == float:
            out[column] = out[column].map(_round)
    out = safe_frame(out)  # a run name `=1+2` is text to a spreadsheet, not a formula
    text = out.to_csv(index=False, lineterminator="\n")
    back = pd.read_csv(io.StringIO(text))
    dtypes = {}
    for column in out.columns:
        original = [v.item() if isinstance(v, np.generic) else v for v in out[column].tolist()]
        read = [v.item() if isinstance(v, np.generic) else v for v in back[column].tolist()]
        if not all(_identical(a, b) for a, b in zip(original, read)):
            kind = _kind(original)
            if kind:
                dtypes[column] = kind
    return text, dtypes


# ------------------------------------------------------------------ the arrays


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """np.savez_compressed's file, but reproducible: sorted keys, fixed entry dates."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for key in sorted(arrays):
            info = zipfile.ZipInfo(f"{key}.npy", date_time=ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            with z.open(info, "w") as f:
                np.lib.format.write_array(f, np.ascontiguousarray(arrays[key]), allow_pickle=False)
    return buffer.getvalue()


STAGED = ".export"  # `.<name>.export`: a file written whole beside its target, not yet moved into place


def write_together(files: dict[Path, str | bytes | None]) -> None:
    """Write every file or none: each is first written whole beside its target (`.<name>.export`, by
    atomic_write), then all are moved into place, which takes no space; a target whose content is
    None is removed after them; meta.json, when among them, is moved last: it records every other
    file's SHA-256, so until it is in place a reader finds the files it records changed and refuses the
    folder (exported.check_files), and a kill -9 at any point leaves the folder all old, all new or
    refused. A write that fails (ENOSPC, EROFS) leaves every target as it was and no staged file behind,
    and raises the OSError naming the target."""
    staged: list[tuple[Path, Path]] = []
    order = sorted(files, key=lambda path: path.name == META)  # meta.json last
    removed = [path for path in order if files[path] is None]
    try:
        for path in order:
            content = files[path]
            if content is None:
                continue
            tmp = path.with_name(f".{path.name}{STAGED}")
            try:
                atomic_write(tmp, content)
            except OSError as err:
                raise OSError(err.errno, err.strerror or str(err), str(path)) from err
            staged.append((tmp, path))
        while staged and staged[0][1].name != META:
            tmp, path = staged[0]
            os.replace(tmp, path)
            staged.pop(0)
        for path in removed:
            path.unlink(missing_ok=True)
        if staged:
            os.replace(*staged[0])
            staged.pop(0)
    finally:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)


def clean_staging(data: Path) -> list[str]:
    """Remove what an export killed part way left in `data`: its staged files (`.<name>.export`) and
    atomic_write's temp files (`.<name>.<random>.tmp`) of the folder's files; returns their names."""
    left = [p for p in data.iterdir() if p.name.startswith(".") and p.is_file()
            and (p.name.endswith(STAGED) or (p.name.endswith(".tmp") and
                                             any(f".{ext}." in p.name for ext in ("csv", "npz", "json"))))]
    for path in left:
        path.unlink(missing_ok=True)
    return sorted(p.name for p in left)


def out_of_step(data: Path, meta: dict[str, Any]) -> set[str]:
    """The sweeps whose files are not the ones meta.json records (an export stopped part way; a file
    edited or deleted by hand): export writes them again whatever the exported table was."""
    if meta.get(FILES) is None:
        return set()
    names = {*meta[FILES], *(p.name for p in data.iterdir() if exported_sweep(p.name))}
    broken = set()
    for name in names:
        try:
            check_files(data, meta, [name])
        except DataFileError:
            broken.add(exported_sweep(name))
    return broken - {None}


def recorded_files(data: Path, meta: dict[str, Any]) -> dict[str, str]:
    """meta.json's `files` for a folder exported before they were recorded: the files of its sweeps as
    they are now."""
    names = [n for n in sorted(p.name for p in data.iterdir()) if exported_sweep(n) in meta.get("sweeps", {})]
    return {n: digest((data / n).read_bytes(), n) for n in names}


def curves(run_dir: Path) -> dict[str, np.ndarray]:
    """(k, 2) float32 arrays of (step, value) for each of CURVES that the run logged (its metrics.csv
    was checked when the table was loaded: a broken one made the run corrupt)."""
    rows = read_metrics_rows(run_dir / "metrics.csv") or []
    out = {}
    for metric in CURVES:
        points = [(float(r["step"]), float(r[metric])) for r in rows if r.get(metric) not in (None, "")]
        if points:
            out[metric.replace("/", "_")] = np.asarray(points, dtype=np.float32)
    return out


def first_seeds(df: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """One run per variant: the lowest seed."""
    order = df.sort_values([c for c in ("seed", "run_id") if c in df.columns], kind="stable")
    keys = [k for k in keys if k != "seed"]
    if not keys:
        return order.head(1)
    return order.groupby(keys, dropna=False, sort=False).head(1)


def quantise(weights: np.ndarray) -> np.ndarray:
    """Attention weights in [0, 1] as uint8 (x 255): enough for a heatmap, a quarter of float32."""
    return np.clip(np.rint(np.asarray(weights, dtype=np.float64) * 255), 0, 255).astype(np.uint8)


def probe_maps(run_dir: Path, points: Sequence[str]) -> dict[str, np.ndarray]:
    """The first layer's attention maps at `points` from probes.npz; {} without one (probes off).
    A damaged probes.npz raises RunFileError."""
    path = run_dir / "probes.npz"
    if not path.is_file():
        return {}
    try:
        with np.load(path, allow_pickle=False) as f:
            return {
                f"{p}/attention": quantise(f[f"{p}/attention"][:ATTENTION_LAYERS])
                for p in points
                if f"{p}/attention" in f.files
            }
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as err:
        raise RunFileError(path.name, f"cannot be read ({type(err).__name__}: {_first_line(err)})") from None


def _first_line(err: BaseException) -> str:
    lines = [line for line in str(err).splitlines() if line.strip()]
    return lines[0].strip() if lines else type(err).__name__


def sentence() -> dict[str, list]:
    """meta.json's `sentence`: the words, their token ids, and the labels of the 13 positions of each
    copy input (the words, SEP, a blank `_` per word)."""
    ids = {w: i for i, w in enumerate(WORDS)}
    return {"words": list(SENTENCE_WORDS), "perm_words": list(SENTENCE_PERM_WORDS),
            "tokens": [ids[w] for w in SENTENCE_WORDS], "perm_tokens": [ids[w] for w in SENTENCE_PERM_WORDS],
            "labels": [*SENTENCE_WORDS, "SEP", *["_"] * len(SENTENCE_WORDS)]}


def copy_input(tokens: Sequence[int], vocab: int) -> list[int]:
    """A copy task's input: the tokens, SEP (= vocab), then a BLANK (= vocab + 1) per token."""
    return [*tokens, vocab, *[vocab + 1] * len(tokens)]


def word_permutation(seq_len: int):
    """The copy task's reordering as the tutorial's example makes it (猫坐在垫子上 -> 垫子在猫坐上): the L
    tokens' positions permuted (a fixed permutation, seed 0), the separator and the L blanks left in place,
    of a sequence of 2L + 1."""
    import torch

    n = (seq_len - 1) // 2
    words = torch.randperm(n, generator=torch.Generator().manual_seed(0))
    return torch.cat((words, torch.arange(n, seq_len)))


def _permuted(task, datamodule) -> dict[str, np.ndarray]:
    """Layer 0's maps on the probe example reordered: the copy task's tokens only (word_permutation; moving
    the separator and the blanks too would change the task, not only the order of its words), MNIST's rows by
    the task's own permutation."""
    from ..probes import attention_maps  # pure-torch measurements
    from ..probing import probe_batch, probe_permutation

    datamodule.setup("fit")
    x, _ = probe_batch(datamodule, 1)
    copy = task.cfg.data.task == "copy"
    perm = word_permutation(x.shape[1]) if copy else probe_permutation(datamodule, x.shape[1])
    permuted = attention_maps(task.model, x[:, perm])[0][:ATTENTION_LAYERS]
    return {"final/attention_perm": quantise(permuted.numpy()), "perm": perm.numpy().astype(np.int16)}


def _sentence(task) -> dict[str, np.ndarray]:
    import torch

    from ..probes import attention_maps
    from ..registry import spec

    data = task.cfg.data
    words = sentence()
    need = len(copy_input(words["tokens"], 0))
    if data.task != "copy" or data.vocab < len(WORDS):
        raise ValueError(f"the sentence is a copy input over {len(WORDS)} tokens; the run is "
                         f"data.task={data.task} with data.vocab={data.vocab}")
    if spec(data.task).seq_len(data) < need:
        raise ValueError(f"the sentence needs {need} positions; the model takes {spec(data.task).seq_len(data)}")
    out = {}
    for key, tokens in (("final/sentence", words["tokens"]), ("final/sentence_perm", words["perm_tokens"])):
        x = torch.tensor([copy_input(tokens, data.vocab)], dtype=torch.long)  # (1, 13)
        out[key] = quantise(attention_maps(task.model, x)[0, 0].numpy())  # layer 0: (H, 13, 13)
    return out


def checkpoint_maps(run_dir: Path, permuted: bool = True, sentence: bool = False,
                    note: Callable[[str], None] | None = None) -> dict[str, np.ndarray]:
    """Maps computed from the run's final model (last.ckpt, loaded once, rebuilt as `ablate probe` does);
    {} without a checkpoint. `permuted`: the first layer's maps on the probe example with its positions
    reordered (MNIST: the run's fixed row order; copy: its tokens only, word_permutation),
    `final/attention_perm` (1, H, T, T) and `perm`. `sentence`: its first layer's attention
    (H, 13, 13) on Q1's sentence and on its reordering, `final/sentence` and `final/sentence_perm`; a
    model that cannot read them (not the copy task, fewer than 6 tokens, sequences shorter than 13)
    goes without, said in one line to `note` (raised as ValueError without one); so does a model without
    attention (model.arch=lstm/gru: no maps of either kind). A checkpoint that cannot be loaded raises
    CheckpointError (one line)."""
    ckpt = run_dir / "last.ckpt"
    if not ckpt.is_file():
        return {}
    from ..probes import has_attention
    from ..tasks import load_task  # harness side: export only, never a notebook

    task, datamodule = load_task(ckpt)
    if not has_attention(task.model):
        line = f"no attention maps (model.arch={task.cfg.model.arch} has no attention: not applicable)"
        if note is None:
            raise ValueError(line)
        note(line)
        return {}
    out = _permuted(task, datamodule) if permuted else {}
    if sentence:
        try:
            out.update(_sentence(task))
        except ValueError as err:
            if note is None:
                raise
            note(f"no sentence maps ({err})")
    return out


def relation_maps(run_dir: Path) -> dict[str, np.ndarray]:
    """{RELATION_KEY: (L, H, 3) float32}: the final model's weight per head on the token two back, the query's
    own token and BOS (see RELATIONS), on its first RELATION_BATCH validation sequences; {} without a
    checkpoint or for a model without attention. A checkpoint that cannot be loaded raises CheckpointError."""
    ckpt = run_dir / "last.ckpt"
    if not ckpt.is_file():
        return {}
    from ..probes import has_attention, relation_weights
    from ..probing import probe_batch
    from ..tasks import load_task  # harness side: export only, never a notebook

    task, datamodule = load_task(ckpt)
    if not has_attention(task.model):
        return {}
    datamodule.setup("fit")
    x, _ = probe_batch(datamodule, RELATION_BATCH)
    return {RELATION_KEY: relation_weights(task.model, x).numpy().astype(np.float32)}


def permuted_maps(run_dir: Path) -> dict[str, np.ndarray]:
    """The final model's maps on the permuted probe example (see checkpoint_maps); {} without a checkpoint."""
    return checkpoint_maps(run_dir, permuted=True)


def position_accuracy(run_dir: Path) -> tuple[dict[str, np.ndarray], bool]:
    """({BY_POSITION: (K,) float32}, computed): the run's test accuracy at each emitted position
    (ablate.probes.accuracy_by_position), from probes.npz where the run recorded it (computed False),
    else computed from its last.ckpt (loaded weights-only, as checkpoint_maps loads it) on its own test
    set (computed True); ({}, False) with neither. A damaged probes.npz raises RunFileError, a
    checkpoint that cannot be loaded CheckpointError."""
    path = run_dir / "probes.npz"
    if path.is_file():
        try:
            with np.load(path, allow_pickle=False) as f:
                if BY_POSITION in f.files:
                    return {BY_POSITION: np.asarray(f[BY_POSITION], dtype=np.float32)}, False
        except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as err:
            raise RunFileError(path.name, f"cannot be read ({type(err).__name__}: {_first_line(err)})") from None
    ckpt = run_dir / "last.ckpt"
    if not ckpt.is_file():
        return {}, False
    from ..probes import accuracy_by_position
    from ..tasks import load_task  # harness side: export only, never a notebook

    task, datamodule = load_task(ckpt)
    datamodule.setup("test")
    x, y = datamodule.test_set.tensors()
    chunks = [(x[i : i + 1000], y[i : i + 1000]) for i in range(0, len(x), 1000)]
    return {BY_POSITION: accuracy_by_position(task.model, chunks).astype(np.float32)}, True


def run_arrays(df: pd.DataFrame, name: str, keys: Sequence[str], warn: Callable[[str], None],
               computed: list[str] | None = None, extras: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """The arrays of `df`'s runs. A run whose file cannot be read (a probes.npz cut short, a crafted or
    corrupt checkpoint) loses those arrays only, with one line naming the run and the file. `extras`: the
    names of ablate.studies.EXPORTS the sweep's manifest asks for. With by_position, every run's accuracy by position (position_accuracy); the ids of the runs it
    was computed for from the checkpoint (not recorded by the run) are appended to `computed`."""
    out: dict[str, np.ndarray] = {}

    def get(run_id: str, what: Callable[[], dict[str, np.ndarray]], wanted: str) -> None:
        try:
            out.update({f"{run_id}/{k}": v for k, v in what().items()})
        except RunFileError as err:
            warn(f"{PREFIX}{name}: run {run_id}: {err}; exported without its {wanted}")
        except Exception as err:  # load_task: a missing dataset, an old, corrupt or crafted checkpoint
            warn(f"{PREFIX}{name}: run {run_id}: no {wanted} ({type(err).__name__}: {_first_line(err)})")

    for run_id, run_dir in zip(df["run_id"], df["run_dir"]):
        get(run_id, lambda d=Path(run_dir): curves(d), "curves")
    points = tuple(p for p in ("init", "final") if f"attention_{p}" in extras)
    firsts = first_seeds(df, keys) if points or "permuted" in extras else df.iloc[0:0]
    for run_id, run_dir in zip(firsts["run_id"], firsts["run_dir"]) if points else ():
        get(run_id, lambda d=Path(run_dir): probe_maps(d, points), "attention maps")
    # from the checkpoint, loaded once per run: the permuted maps of the first seeds, the sentence's of all
    permute = set(firsts["run_id"]) if "permuted" in extras else set()
    every = "sentence" in extras
    for run_id, run_dir in zip(df["run_id"], df["run_dir"]):
        if run_id not in permute and not every:
            continue
        said = " or ".join([*(["permuted attention maps"] if run_id in permute else []), *(["sentence maps"] if every else [])])

        def note(line: str, run_id: str = run_id) -> None:
            warn(f"{PREFIX}{name}: run {run_id}: {line}")

        get(run_id, lambda d=Path(run_dir), p=run_id in permute: checkpoint_maps(d, p, every, note), said)
    if "relations" in extras:
        for run_id, run_dir in zip(df["run_id"], df["run_dir"]):
            get(run_id, lambda d=Path(run_dir): relation_maps(d), "relation weights")
    if "by_position" in extras:
        for run_id, run_dir in zip(df["run_id"], df["run_dir"]):

            def by_position(d: Path = Path(run_dir), run_id: str = run_id) -> dict[str, np.ndarray]:
                arrays, from_checkpoint = position_accuracy(d)
                if from_checkpoint and computed is not None:
                    computed.append(run_id)
                return arrays

            get(run_id, by_position, "accuracy by position")
    return out


# ------------------------------------------------------------------ the mechanisms during training


def probe_curve(run_dir: Path) -> list[dict[str, Any]]:
    """The run's periodic probes in long format: one record {step, layer, <quantity>: value} per probe
    step and layer, for the CURVE_QUANTITIES it measured (`grad_l3` -> layer 3's `grad`); [] without
    a probes.csv (periodic probes off). A damaged probes.csv raises RunFileError."""
    rows = read_metrics_rows(run_dir / PROBE_CURVE)  # the same format as metrics.csv: step, numbers
    if not rows:
        return []
    from ..probes.run import PER_LAYER  # the probes' one rule for per-layer names

    columns: list[tuple[str, str, int]] = []  # (column, quantity, layer)
    for column in rows[0]:
        m = PER_LAYER.match(column)
        if m and not m["slot"] and m["name"] in CURVE_QUANTITIES:
            columns.append((column, m["name"], int(m["layer"])))
    layers = sorted({layer for _, _, layer in columns})
    out = []
    for row in rows:
        records = {layer: {"step": int(float(row["step"])), "layer": layer} for layer in layers}
        for column, quantity, layer in columns:
            records[layer][quantity] = float(row[column]) if row[column] else math.nan
        out.extend(records.values())
    return out


def curves_table(df: pd.DataFrame, keys: Sequence[str], name: str, warn: Callable[[str], None]) -> tuple[str | None, int]:
    """<name>_curves.csv's text from `df`'s runs (None when none has periodic probes) and how many runs
    it holds: run_id, the swept `keys` as in the table, step, layer, CURVE_QUANTITIES in that order,
    sorted by run_id, step and layer, floats rounded as in the table. A run whose probes.csv cannot be
    read is left out with one line on `warn`."""
    keys = [k for k in keys if k in df.columns]
    records: list[dict[str, Any]] = []
    runs = 0
    for _, run in df.sort_values("run_id", kind="stable").iterrows():
        try:
            curve = probe_curve(Path(run["run_dir"]))
        except RunFileError as err:
            warn(f"{PREFIX}{name}: run {run['run_id']}: {err}; exported without its probe curves")
            continue
        runs += bool(curve)
        ident = {"run_id": run["run_id"], **{k: run[k] for k in keys}}
        records.extend({**ident, **point} for point in curve)
    if not records:
        return None, 0
    quantities = [q for q in CURVE_QUANTITIES if any(q in r for r in records)]
    table = pd.DataFrame.from_records(records, columns=["run_id", *keys, "step", "layer", *quantities])
    for key in keys:  # the key columns keep the table's dtypes (nullable ints stay ints)
        table[key] = table[key].astype(df[key].dtype)
    for column in quantities:
        table[column] = table[column].astype(float)
    for column in table.columns:  # as tidy() rounds the table
        if table[column].dtype == float:
            table[column] = table[column].map(_round)
    table = safe_frame(table.sort_values(["run_id", "step", "layer"], kind="stable"))  # as tidy()'s cells
    return table.to_csv(index=False, lineterminator="\n"), runs


# ------------------------------------------------------------------ provenance


def machine(summary: dict[str, Any] | None) -> str:
    p = (summary or {}).get("provenance") or {}
    if not p:
        return "unknown"
    parts = [str(p.get("device", "unknown device"))]
    if p.get("cuda_devices"):
        parts.append(f"{p['cuda_devices']} CUDA device(s)")
    if p.get("threads"):
        parts.append(f"{p['threads']} thread(s) per run")
    torch_version = (p.get("versions") or {}).get("torch")
    if torch_version:
        parts.append(f"torch {torch_version}")
    return ", ".join(parts)


def _summary(run_dir: Path) -> dict[str, Any] | None:
    try:
        return read_json_object(run_dir / "summary.json")
    except RunFileError:  # damaged since the table was read: no provenance from it
        return None


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def run_date(summary: dict[str, Any] | None, mtime: float | None = None) -> str | None:
    """The UTC day a run ran (YYYY-MM-DD), None: unknown. From its own record, summary.json's
    provenance.time (ISO 8601); a run that records none (made before runs recorded it) falls back on
    summary.json's file time, but only a plausible one (2000 to tomorrow): a copy can reset a file
    time, `touch -d` can put it in the year 11476, and neither is when the run ran."""
    recorded = ((summary or {}).get("provenance") or {}).get("time")
    if isinstance(recorded, str):
        try:
            when = datetime.fromisoformat(recorded)
        except ValueError:
            when = None
        if when is not None:
            when = when if when.tzinfo else when.replace(tzinfo=timezone.utc)
            return when.astimezone(timezone.utc).strftime("%Y-%m-%d")
    if mtime is None or not EARLIEST <= mtime <= datetime.now(timezone.utc).timestamp() + 86_400:
        return None
    return datetime.fromtimestamp(mtime, tz=timezone.utc).strftime("%Y-%m-%d")


def wall_span(summaries: list[dict[str, Any] | None]) -> int | None:
    """Seconds from the first run's start to the last run's end (each run's provenance.time, the start of its
    last attempt, plus its wall_time_s): the sweep's wall time when one invocation ran it whole, more when it
    was run in several; None without a run that records both."""
    spans = []
    for s in summaries:
        try:
            when = datetime.fromisoformat(str((s or {}).get("provenance", {}).get("time")))
            start = (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()  # as run_date reads it
            wall = float((s or {}).get("wall_time_s"))
        except (TypeError, ValueError, AttributeError):
            continue
        if math.isfinite(start) and math.isfinite(wall) and wall >= 0:
            spans.append((start, start + wall))
    return round(max(e for _, e in spans) - min(b for b, _ in spans)) if spans else None


def primary_runs(df: pd.DataFrame) -> dict[str, Any] | None:
    """How far the sweep's primary runs had come (tuned sweeps: every seed at each variant's chosen rate;
    others: every run): their number, the median of what their last epoch added to validation accuracy
    (val/gain_last_epoch), and the share that solved their task (val/acc_best >= SOLVED); None for a sweep
    that trained nothing (no such columns)."""
    from .stats import best_lr
    from .table import SOLVED

    if not {"val/gain_last_epoch", "val/acc_best"} <= set(df.columns):
        return None
    chosen = best_lr(df)
    chosen = chosen[chosen["status"] == "completed"] if "status" in chosen.columns else chosen
    gain = pd.to_numeric(chosen["val/gain_last_epoch"], errors="coerce").dropna()
    best = pd.to_numeric(chosen["val/acc_best"], errors="coerce").dropna()
    return {"runs": int(len(chosen)), "median_gain": round(float(gain.median()), 6) if len(gain) else None,
            "solved": round(float((best >= SOLVED).mean()), 6) if len(best) else None}


def provenance(df: pd.DataFrame, swept: list[str], dtypes: dict[str, str]) -> dict[str, Any]:
    """The meta.json entry of table `df`. A table of W&B's runs has no run folders: its machine, date and wall
    time are then unknown."""
    run_dirs = [Path(d) for d in df["run_dir"] if isinstance(d, str)] if "run_dir" in df.columns else []
    summaries = [_summary(d) for d in run_dirs]
    completed = [s for s in summaries if s and s.get("status") == "completed"] or [s for s in summaries if s]
    dates = [run_date(s, _mtime(d / "summary.json")) for s, d in zip(summaries, run_dirs)]
    date = max((d for d in dates if d), default=None)
    budgets = sorted({str(b) for b in df["budget"].dropna()}) if "budget" in df.columns else []
    commit = df.attrs.get("reference_commit")
    return {
        "runs": int(len(df)),
        "status": {str(k): int(v) for k, v in sorted(df["status"].value_counts().items())},
        "budget": ", ".join(budgets) or "unknown",
        "commit": commit,
        "dirty": bool(df["dirty"].eq(True).any()) if "dirty" in df.columns else None,
        "commit_mismatch": int(df["commit_mismatch"].sum()) if "commit_mismatch" in df.columns else 0,
        "machine": machine(completed[0] if completed else None),
        "date": date,
        "wall_s": wall_span(summaries),
        "primary": primary_runs(df),
        "swept_keys": swept,
        "dtypes": dtypes,
        **({"tune": df.attrs["tune"]} if df.attrs.get("tune") else {}),
    }


# ------------------------------------------------------------------ which runs

# A runs folder keeps every run a sweep ever made: other budgets, and the runs of an older definition
# of the sweep (its grid or budget profile since edited) whose ids no longer come out of the file.
# Export takes the runs the sweep file defines now, at the first budget of BUDGET_ORDER that has any:
# most training first (none = the defaults: 5 epochs on all of MNIST, more than quick).
BUDGET_ORDER = tuple(reversed(BY_TRAINING))  # ("full", "none", "quick", "smoke")
# How much training, least first: the order in which a table may replace another (see keep_reason).
BUDGET_RANK = {b: i for i, b in enumerate(reversed(BUDGET_ORDER))}  # smoke 0 < quick 1 < none 2 < full 3
PREFIX = "ablate report export: "


class ExportError(ValueError):
    """Export cannot start (a broken meta.json); the message is the one line to print."""


def defined_runs(name: str, sweeps: Path | str) -> dict[str, tuple[set[str], int]]:
    """Budget -> (the run ids sweeps/<name>.yaml expands to at that budget, how many of them the local
    runner makes: all, or for a tuned sweep stage 1 and each other seed once at its chosen value);
    {} without a usable file."""
    from ..config import ConfigError
    from ..sweep import spec
    from ..sweep.spec import SweepError

    path = Path(sweeps) / f"{name}.yaml"
    if not path.is_file():
        return {}
    try:
        sweeps_at = {b: spec.load(str(path), budget=b) for b in BUDGET_ORDER}
        return {b: ({r.run_id for r in sw.runs}, sw.expected_runs()) for b, sw in sweeps_at.items()}
    except (SweepError, ConfigError):
        return {}


def choose_runs(
    name: str, present: Sequence[str], sweeps: Path | str, budget: str | None, log: Callable[[str], None]
) -> tuple[set[str] | None, int | None]:
    """The run ids to export out of `present` (not empty), None: all of them (no sweep file to go by);
    and how many runs the sweep file defines at the chosen budget (None without one). Says in a line
    how many it left out, and how many of the chosen budget have not run yet."""
    defined = defined_runs(name, sweeps)
    if not defined:
        return None, None
    chosen = budget or next((b for b in BUDGET_ORDER if defined[b][0] & set(present)), None)
    if chosen is None:
        log(f"{PREFIX}{name}: none of its {len(present)} runs is one sweeps/{name}.yaml defines now; "
            "exporting them all")
        return None, None
    ids, expected = defined[chosen]
    keep = ids & set(present)
    if len(keep) < len(present):
        log(f"{PREFIX}{name}: left out {len(present) - len(keep)} run(s) of other budgets or of "
            f"an older definition of the sweep (exporting budget {chosen})")
    missing = expected - len(keep)
    if keep and missing > 0:
        log(f"{PREFIX}{name}: {missing} of its {expected} runs at budget {chosen} "
            f"have not run yet (`make sweep-{name} BUDGET={chosen}`)")
    return keep, expected


def _budgets(text: Any) -> list[str]:
    """meta.json's 'quick' or 'quick, smoke' -> the known budgets in it."""
    return [b for b in (part.strip() for part in str(text or "").split(",")) if b in BUDGET_RANK]


def keep_reason(
    old: dict[str, Any] | None, new_budgets: Sequence[str], runs: int | None = None, defined: int | None = None,
    where: str = "the sweep file",
) -> str | None:
    """Why an exported table (its meta entry `old`) must not be replaced by `runs` runs of `new_budgets`,
    None: replace it. They trained less (the smallest of their budgets is below the largest budget of
    the table), or they are fewer than the table's runs and fewer than the `defined` runs the sweep
    file (`where`) has at their budget (a sweep stopped part way; with all the runs it defines, a
    sweep file cut to fewer runs replaces the table)."""
    old = old or {}
    table = f"kept the exported table ({old.get('runs')} runs at budget {old.get('budget')}): the runs here are"
    replace = "--replace (make report FORCE=1) replaces it"
    before, after = _budgets(old.get("budget")), [b for b in new_budgets if b in BUDGET_RANK]
    if before and after:  # else nothing to compare: an unknown budget on either side
        have = max(before, key=BUDGET_RANK.__getitem__)
        bring = min(after, key=BUDGET_RANK.__getitem__)
        if BUDGET_RANK[bring] < BUDGET_RANK[have]:
            return f"{table} budget {', '.join(sorted(set(after), key=BUDGET_RANK.__getitem__))}, less training; {replace}"
    count = old.get("runs")
    if runs is None or not isinstance(count, int) or runs >= count or (defined is not None and runs >= defined):
        return None
    if defined is None:
        return f"{table} only {runs}; {replace}"
    return f"{table} only {runs} of the {defined} {where} defines at budget {', '.join(after) or 'unknown'}; {replace}"


def full_cost(name: str, text: str, dtypes: dict[str, str], sweeps: Path | str) -> dict[str, Any] | None:
    """The full budget's cost of sweeps/<name>.yaml (ablate.results.cost.Cost as a dict, tuples as lists,
    and `gpu_steps_per_s`: the assumed GPU rate its GPU hours are at), measured on the exported table as
    the reports read it back (`text`, `dtypes`); None without a usable sweep file."""
    from ..config import ConfigError
    from ..sweep.spec import SweepError
    from .cost import GPU_STEPS_PER_S, sweep_cost

    back = restore_dtypes(pd.read_csv(io.StringIO(text)), dtypes)
    try:
        cost = sweep_cost(name, back, sweeps)
    except (SweepError, ConfigError):
        return None
    if cost is None:
        return None
    fields = {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(cost).items()}
    return {**fields, "gpu_steps_per_s": list(GPU_STEPS_PER_S)}


# ------------------------------------------------------------------ export


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def export_sweep(
    name: str, runs: Path | str | None, data: Path, sweeps: Path | str, log: Callable[[str], None],
    budget: str | None = None, old: dict[str, Any] | None = None, replace: bool = False,
    warn: Callable[[str], None] = _stderr, extras: Sequence[str] = (),
) -> tuple[dict | None, str, dict[Path, str | bytes | None]]:
    """The sweep's export, not yet written: (its meta entry, or None when nothing is to be written; the
    one line that says what happened; <name>.csv's, <name>.npz's and <name>_curves.csv's paths and
    contents, None for a curves file to remove). `old`: the
    table's meta entry as exported before, kept (see keep_reason) unless `replace`. `extras`: what the
    sweep's study manifest asks the export to add (run_arrays)."""
    from . import ResultsError, load, swept_keys
    from .table import CORRUPT, sweep_dir

    exported = (data / f"{name}.csv").is_file()
    kept = "kept the exported table" if exported else "nothing exported"
    old = old if exported else None  # a table deleted by hand is exported again
    where = sweep_dir(name, runs)
    present = sorted(p.name for p in where.iterdir() if (p / "summary.json").is_file()) if where.is_dir() else []
    if not present:
        return None, f"no runs under {where}; {kept}", {}
    notes: list[str] = []
    only, defined = choose_runs(name, present, sweeps, budget, notes.append)
    if only is not None and not only:
        return None, f"none of its {len(present)} runs under {where} is at budget {budget}; {kept}", {}
    try:
        df = load(name, root=runs, sweeps=sweeps, only=only)
    except ResultsError as err:  # not reached: every present run has a summary.json
        return None, f"{str(err).split('; ')[0]}; {kept}", {}
    corrupt = df["status"] == CORRUPT
    good = df[~corrupt]
    budgets = sorted({str(b) for b in good["budget"].dropna()}) if "budget" in good.columns else []
    for run_id, run_dir, error in zip(*(df.loc[corrupt, c] for c in ("run_id", "run_dir", "error"))):
        warn(f"{PREFIX}{name}: run {run_id} ({run_dir}): {error}; left out of the export")
    reason = None if replace else keep_reason(old, budgets, len(good), defined, f"sweeps/{name}.yaml")
    if reason:  # a corrupt run named above may be why there are fewer
        return None, reason, {}
    for line in notes:
        log(line)
    if good.empty:
        return None, f"all {len(df)} runs are corrupt (named above); {kept}", {}
    table = good.reset_index(drop=True)
    table.attrs = dict(df.attrs)
    swept = swept_keys(table)
    text, dtypes = tidy(table)
    computed: list[str] = []
    arrays = run_arrays(table, name, swept, warn, computed, extras)
    files: dict[Path, str | bytes | None] = {data / f"{name}.csv": text, data / f"{name}.npz": npz_bytes(arrays)}
    entry = provenance(table, swept, dtypes)
    positions = "by_position" in extras
    if positions:  # which runs recorded their accuracy by position, which had it computed here
        have = sorted(k.split("/")[0] for k in arrays if k.endswith(f"/{BY_POSITION}"))
        entry["acc_by_position"] = {"runs": len(have), "computed_from_checkpoint": sorted(computed)}
    entry["config_defaults"] = config_defaults()
    cost = full_cost(name, text, dtypes, sweeps)
    if cost is not None:
        entry["cost_full"] = cost
    curve_text, curve_runs = curves_table(table, swept, name, warn)
    files[data / curves_file(name)] = curve_text  # None: no curves, and an older file goes too
    if curve_text is not None:
        entry["curves"] = {"file": curves_file(name), "runs": curve_runs, "rows": curve_text.count("\n") - 1}
    line = f"{entry['runs']} runs ({entry['budget']})"
    if curve_text is not None:
        line += f"; probe curves of {curve_runs} run(s)"
    if positions:
        line += f"; accuracy by position of {len(have)} run(s)"
        if computed:
            line += f", computed from the checkpoint for {len(computed)}: {', '.join(sorted(computed))}"
    if corrupt.any():
        line += f"; left out {int(corrupt.sum())} corrupt run(s) (named above)"
    return entry, line, files


def export_table(name: str, table: pd.DataFrame, data: Path, sweeps: Path | str = "sweeps") -> dict[str, Any]:
    """A results table built elsewhere (`ablate results --wandb`: W&B's runs) written into the new folder `data`
    as export writes a sweep (its CSV, an empty NPZ and meta.json), so the reports' reader takes it: no run
    folders, so no arrays and no curves. Returns its meta.json entry."""
    from . import swept_keys

    swept = swept_keys(table)
    text, dtypes = tidy(table)
    entry = provenance(table, swept, dtypes)
    entry["config_defaults"] = config_defaults()
    cost = full_cost(name, text, dtypes, sweeps)
    if cost is not None:
        entry["cost_full"] = cost
    files: dict[Path, str | bytes | None] = {data / f"{name}.csv": text, data / f"{name}.npz": npz_bytes({})}
    recorded = {path.name: digest(c if isinstance(c, bytes) else c.encode(), path.name)
                for path, c in files.items() if c is not None}
    meta = {"sweeps": {name: entry}, FILES: recorded}
    files[data / META] = json.dumps(meta, indent=1, sort_keys=True) + "\n"
    data.mkdir(parents=True, exist_ok=True)
    write_together(files)
    return entry


def export(
    names: Sequence[str] | None = None,
    runs: Path | str | None = None,
    data: Path | str = "reports/data",
    sweeps: Path | str = "sweeps",
    log: Callable[[str], None] = print,
    budget: str | None = None,
    replace: bool = False,
    warn: Callable[[str], None] = _stderr,
    studies: Path | str | None = None,
) -> dict[str, str]:
    """Export every sweep in `names` (default: every sweeps/*.yaml); returns name -> what happened,
    also logged, one line per sweep. Per sweep: the runs its file defines now, at `budget` (default:
    full, else none, quick, smoke — the first that has runs). An exported table is kept against runs of
    a smaller budget or fewer runs (keep_reason) unless `replace`. Runs whose files cannot be read are
    left out, one line each on `warn` (default stderr). ExportError, before anything is written, when
    the folder's meta.json cannot be read; OSError (naming the file) when one cannot be written: each
    sweep's CSV, NPZ, curves and meta.json entry are written together, so every sweep's files stay in step.
    `studies`: the folder of the study manifests that say which extra arrays a sweep keeps (default
    ablate.studies.studies_dir(); a sweep no manifest describes keeps none)."""
    from ..studies import StudyError, load

    data = Path(data)
    try:
        known = load(studies)
    except StudyError as err:
        raise ExportError(str(err)) from None
    data.mkdir(parents=True, exist_ok=True)
    with _exporting(data):
        try:
            meta = read_meta(data)
        except DataFileError as err:
            raise ExportError(str(err)) from None
        return _export(data, meta, known, names, runs, sweeps, log, budget, replace, warn)


@contextlib.contextmanager
def _exporting(data: Path):
    """One export at a time into `data`: an exclusive flock on the folder itself (no file is added to it;
    the OS releases it when the process dies, even by kill -9). Two at once both exited 0 and one sweep's
    export was lost, after which readers refused the folder (issue 41)."""
    fd = os.open(data, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ExportError(f"another `ablate report export` is writing into {data} now; wait for it to end, "
                              "then run this one again") from None
        yield
    finally:
        os.close(fd)


def _export(data: Path, meta: dict[str, Any], known, names, runs, sweeps, log, budget, replace, warn) -> dict[str, str]:
    from ..studies import of_sweep

    clean_staging(data)  # what an export killed part way left behind
    broken = out_of_step(data, meta)
    names = list(names) if names else sweep_names(sweeps)
    meta_path = data / META
    written = meta_path.read_text() if meta_path.is_file() else None
    meta.setdefault("sweeps", {})
    outcome = {}

    def meta_text() -> str:
        meta["sweeps"] = dict(sorted(meta["sweeps"].items()))
        return json.dumps(meta, indent=1, sort_keys=True) + "\n"

    for name in names:
        old = meta["sweeps"].get(name)
        if name in broken:
            log(f"{PREFIX}{name}: its files are not the ones meta.json records (an export stopped part way?); "
                "the runs here replace them, whatever the exported table was")
            old = None
        extras = of_sweep(name, known)[2]
        entry, outcome[name], files = export_sweep(name, runs, data, sweeps, log, budget, old, replace, warn, extras)
        if entry is not None:
            if FILES not in meta:  # a folder exported before files were recorded: record them first, alone
                meta[FILES] = recorded_files(data, meta)
                written = meta_text()
                atomic_write(meta_path, written)
            meta["sweeps"][name] = entry
            if "sentence" in extras:
                meta["sentence"] = sentence()
            for path, content in files.items():
                if content is None:
                    meta[FILES].pop(path.name, None)
                else:
                    meta[FILES][path.name] = digest(content if isinstance(content, bytes) else content.encode(),
                                                    path.name)
            text = meta_text()
            if text != written:  # an export that changed nothing leaves meta.json byte for byte as it was
                files[meta_path] = text
            write_together(files)
            written = text
        log(f"{PREFIX}{name}: {outcome[name]}")
    if meta_text() != written:  # no meta.json yet, or one not in export's order
        atomic_write(meta_path, meta_text())
    return outcome
