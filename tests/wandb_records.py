"""What `wandb sync` would upload for a run, read back from its offline files: the tests' window on the W&B
runs ablate writes (names, groups, tags, config, summary, history keys), without the network.

W&B has no public reader of its .wandb files (wandb 0.31's `wandb sync` has no --view), so this reads the
format itself; it lives with the tests, not in the package, so that ablate's own wandb bound does not
follow the format: a wandb release that changes it fails these tests, not a user's install."""

from __future__ import annotations

import json
import struct
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# The .wandb file is a LevelDB-style log (W&B's own format, wandb/sdk/internal/datastore.py before 0.19,
# now Go's leveldb writer): a 7-byte file header ":W&B", magic 0xBEE1, version 0, then 32 KiB blocks of
# records, each `crc32 (4) | length (2) | type (1) | data`; a record too long for its block is split
# into FIRST, MIDDLE..., LAST pieces, and a block's tail shorter than a header is zero padding. Each
# whole record is one protobuf `wandb.proto.wandb_internal_pb2.Record`.
_HEADER = struct.Struct("<4sHB")
_PIECE = struct.Struct("<IHB")
_BLOCK = 32768
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def wandb_file_records(path: Path) -> Iterator[Any]:
    """The protobuf Records of one .wandb file, in order; a torn tail (a killed run) ends them."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    if len(data) < _HEADER.size or _HEADER.unpack_from(data)[:2] != (b":W&B", 0xBEE1):
        raise ValueError(f"{path} is not a W&B run file (no ':W&B' header)")
    pos, pieces = _HEADER.size, b""
    while True:
        if _BLOCK - pos % _BLOCK < _PIECE.size:  # zero padding at the end of a block
            pos += _BLOCK - pos % _BLOCK
        if pos + _PIECE.size > len(data):
            return
        crc, length, kind = _PIECE.unpack_from(data, pos)
        body = data[pos + _PIECE.size : pos + _PIECE.size + length]
        pos += _PIECE.size + length
        if len(body) < length or zlib.crc32(bytes([kind]) + body) != crc:
            return  # cut short by a kill, or never written
        if kind == _FULL:
            whole = body
        elif kind == _FIRST:
            pieces = body
            continue
        elif kind == _MIDDLE:
            pieces += body
            continue
        elif kind == _LAST:
            whole, pieces = pieces + body, b""
        else:
            return
        record = pb.Record()
        record.ParseFromString(whole)
        yield record


def _item_key(item) -> str:
    """A config/summary/history item's key: `key`, or the first of `nested_key` (a logged image's
    fields are nested under its name)."""
    return item.key or (item.nested_key[0] if item.nested_key else "")


def _item_value(item) -> Any:
    value = json.loads(item.value_json) if item.value_json else None
    for part in reversed(item.nested_key[1:]):
        value = {part: value}
    return value


def _closed(path: Path) -> bool:
    """Whether the run file holds its exit record: the run was finished and the file written to its end. A file
    not yet past its header (or emptied by a rewrite) is not."""
    if path.stat().st_size < _HEADER.size:
        return False
    return any(r.WhichOneof("record_type") == "exit" for r in wandb_file_records(path))


def offline_run_record(run_dir: str | Path, finished: bool = True, wait_s: float = 30.0) -> dict[str, Any]:
    """What `wandb sync` would upload for a run, read from its offline files: {"id", "name", "group",
    "job_type", "tags", "sweep_id", "config" (key -> value, W&B's own `_wandb` left out), "summary"
    (key -> last value), "summary_keys", "history_keys" (sorted; W&B's `_step`, `_runtime`,
    `_timestamp` left out), "tables" (the names of the W&B Tables logged)}. `run_dir` is an ablate run
    directory (its wandb/offline-run-* folders are read in order: a resumed run has one per attempt) or
    one offline-run folder. Raises FileNotFoundError when there is no .wandb file.

    `finished`: every run was finished (wandb.finish returned), so each file is read once it holds its exit
    record, waiting up to `wait_s`, and AssertionError names the files still without one. wandb 0.31's finish
    can return before its service has written the file: after an in-process run the file can still hold only
    its header (tests/test_dashboard.py failed in CI with every key missing). A killed run, or a resumed run's
    killed attempt (no exit record), is read as it is with finished=False."""
    run_dir = Path(run_dir)
    files = sorted(run_dir.glob("run-*.wandb")) or sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb"))
    if not files:
        raise FileNotFoundError(f"no W&B offline run under {run_dir}")
    deadline = time.monotonic() + wait_s
    while finished and (open_ := [f for f in files if not _closed(f)]):
        if time.monotonic() > deadline:
            raise AssertionError(f"no exit record after {wait_s:g} s in {', '.join(map(str, open_))}: the run was "
                                 "not finished, or W&B never wrote it (pass finished=False for a killed run)")
        time.sleep(0.1)
    out: dict[str, Any] = {"id": "", "name": "", "group": "", "job_type": "", "tags": [], "sweep_id": ""}
    config: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    history: set[str] = set()
    for path in files:
        for record in wandb_file_records(path):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                run = record.run
                out.update(id=run.run_id, name=run.display_name, group=run.run_group, job_type=run.job_type,
                           tags=list(run.tags), sweep_id=run.sweep_id)
                config.update({_item_key(u): _item_value(u) for u in run.config.update})
            elif kind == "config":
                config.update({_item_key(u): _item_value(u) for u in record.config.update})
                for r in record.config.remove:
                    config.pop(_item_key(r), None)
            elif kind == "summary":
                summary.update({_item_key(u): _item_value(u) for u in record.summary.update if not u.nested_key[1:]})
                for u in record.summary.update:  # a nested item (an image's fields) sets one field of its key
                    if u.nested_key[1:]:
                        summary.setdefault(u.nested_key[0], {})
                        if isinstance(summary[u.nested_key[0]], dict):
                            summary[u.nested_key[0]].update(_item_value(u) if len(u.nested_key) == 2 else {})
                for r in record.summary.remove:
                    summary.pop(_item_key(r), None)
            elif kind == "history":
                history.update(_item_key(i) for i in record.history.item)
    config.pop("_wandb", None)
    own = ("_step", "_runtime", "_timestamp", "_wandb")
    summary = {k: v for k, v in summary.items() if k not in own}
    tables = sorted(k for k, v in summary.items() if isinstance(v, dict) and str(v.get("_type", "")).startswith("table"))
    return {**out, "config": config, "summary": summary, "summary_keys": sorted(summary),
            "history_keys": sorted(k for k in history if k not in own), "tables": tables}
