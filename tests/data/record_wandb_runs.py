"""Records tests/data/wandb_runs.json and tests/data/wandb_runs/: one small sweep, as W&B's API serves it
and as its run directories hold it, for tests/test_results.py (there is no W&B server here).

    .venv/bin/python tests/data/record_wandb_runs.py

Trains five tiny copy-task runs in group `wbsweep` with tracking=wandb in offline mode: two heads x
two seeds, one run at lr 1e12 that diverges, one that raises after its first validation (W&B marks
it failed: exit code 1). Each offline `run-<id>.wandb` file (a LevelDB-style log of wandb's
`Record` protobufs) is read back into the node that W&B's GraphQL `RunFragment` returns for it
(`name` = run id, `state`, `group`, `commit`, `config` and `summaryMetrics` as JSON strings, config
values wrapped as {"value": ...}), which is what `wandb.apis.public.Run(attrs=node)` is built from.
To keep the fixture small, only a few probe scalars (and the attention heatmap, a non-scalar
summary entry) are kept, the same ones on both sides.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import tempfile
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
GROUP = "wbsweep"
KEEP_PROBE = re.compile(r"^probe/(init|final)/(entropy_l0|erank_l0|grad_ratio|attention)$")
BASE = ["data.task=copy", "data.n_train=128", "data.n_val=64", "data.n_test=64", "model.d_model=16",
        "trainer.max_epochs=1", "tracking=wandb", f"run.group={GROUP}", "run.project=ablate-test"]
RUNS = [
    ["model.n_heads=1", "seed=0"],
    ["model.n_heads=1", "seed=1"],
    ["model.n_heads=2", "seed=0"],
    ["model.n_heads=2", "seed=1"],
    ["model.n_heads=2", "seed=2", "model.norm=none", "optim.lr=1e12"],  # diverges
]
FAILING = ["model.n_heads=1", "seed=2"]  # raises after its first validation


def records(path: Path):
    """The payloads of a wandb transaction log: 7-byte file header, 32 KiB blocks, each record a
    7-byte header (crc32, length, type FULL=1 / FIRST=2 / MIDDLE=3 / LAST=4) and its bytes."""
    data, pos, parts = path.read_bytes(), 7, b""
    assert data[:4] == b":W&B", path
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:  # a block's tail too short for a header is padding
            pos += 32768 - pos % 32768
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == 1:
            yield chunk
        elif kind in (2, 3):
            parts = chunk if kind == 2 else parts + chunk
        elif kind == 4:
            yield parts + chunk
            parts = b""


def graphql_node(path: Path) -> dict:
    from wandb.proto import wandb_internal_pb2 as pb

    config, summary, run, exit_code = {}, {}, None, None
    for payload in records(path):
        record = pb.Record()
        record.ParseFromString(payload)
        kind = record.WhichOneof("record_type")
        if kind in ("run", "config"):
            run = record.run if kind == "run" else run
            for item in (record.run.config if kind == "run" else record.config).update:
                config[item.key] = {"value": json.loads(item.value_json), "desc": None}
        elif kind == "summary":
            for item in record.summary.update:
                keys = [item.key] if item.key else list(item.nested_key)
                node = summary
                for k in keys[:-1]:
                    node = node.setdefault(k, {})
                node[keys[-1]] = json.loads(item.value_json)
        elif kind == "exit":
            exit_code = record.exit.exit_code
    summary = {k: v for k, v in summary.items() if not k.startswith("probe/") or KEEP_PROBE.match(k)}
    started = datetime.fromtimestamp(run.start_time.seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return {
        "id": f"run-storage-{run.run_id}",
        "name": run.run_id,
        "displayName": run.display_name,
        "projectId": "1",
        "sweepName": None,
        "tags": [],
        "state": "crashed" if exit_code is None else ("finished" if exit_code == 0 else "failed"),
        "group": run.run_group,
        "jobType": None,
        "commit": run.git.commit or None,
        "readOnly": False,
        "createdAt": started,
        "heartbeatAt": started,
        "description": None,
        "notes": None,
        "config": json.dumps(config),
        "systemMetrics": "{}",
        "summaryMetrics": json.dumps(summary),
        "historyLineCount": 0,
        "user": {"name": "recorder", "username": "recorder"},
    }


def main() -> None:
    import pytorch_lightning as pl
    import wandb

    from ablate import config as C
    from ablate.rundir import read_summary, write_json
    from ablate.train import train

    class FailAfterValidation(pl.Callback):
        def on_validation_end(self, trainer, pl_module):
            raise RuntimeError("injected failure after the first validation")

    tmp = Path(tempfile.mkdtemp())
    os.environ.update(ABLATE_RUNS_DIR=str(tmp), WANDB_MODE="offline", WANDB_SILENT="true")
    for extra in [*RUNS, FAILING]:
        cfg = C.build(C.parse_overrides(BASE + extra))
        try:
            train(cfg, log=lambda *a: None, callbacks=[FailAfterValidation()] if extra is FAILING else None)
        except RuntimeError:
            wandb.finish(exit_code=1)  # what wandb's exit hook does when the process dies of it

    out_runs = HERE / "wandb_runs" / GROUP
    shutil.rmtree(out_runs, ignore_errors=True)
    nodes = []
    for run_dir in sorted((tmp / GROUP).iterdir()):
        [log] = run_dir.glob("wandb/offline-run-*/run-*.wandb")
        nodes.append(graphql_node(log))
        summary = read_summary(run_dir)
        summary["probes"] = {k: v for k, v in summary.get("probes", {}).items() if KEEP_PROBE.match(k)}
        summary["run_dir"] = f"runs/{GROUP}/{run_dir.name}"
        (out_runs / run_dir.name).mkdir(parents=True)
        shutil.copy(run_dir / "config.yaml", out_runs / run_dir.name / "config.yaml")
        write_json(out_runs / run_dir.name / "summary.json", summary)
    (HERE / "wandb_runs.json").write_text(json.dumps(nodes, indent=1) + "\n")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
