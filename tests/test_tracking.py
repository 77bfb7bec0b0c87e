"""What a synced W&B run shows: a real `ablate train` written offline, read back from its .wandb file
(tests/wandb_records.py, what `wandb sync` would upload)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

import ablate.config as C
from ablate import cli
from ablate.results import load_wandb
from ablate.tracking import derived_name, run_fields, short
from tests.wandb_records import offline_run_record, wandb_file_records

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["budget=smoke", "data.task=copy", "data.train_subset=256", "trainer.max_epochs=1", "trainer.threads=1", "tracking=wandb",
        "run.group=toy", "model.n_heads=2", "optim.lr=3e-4", "seed=1", "run.probe_every=2", "run.sweep_id=abc123"]


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    """One real training run, tracked by W&B offline, with `srun` on PATH as on a SLURM node: (run dir, its record,
    its stderr, its config)."""
    tmp = tmp_path_factory.mktemp("tracked")
    env = {**os.environ, "WANDB_MODE": "offline", "ABLATE_RUNS_DIR": str(tmp / "runs"), "WANDB_DIR": str(tmp),
           "WANDB_CONFIG_DIR": str(tmp / "wandb-config"), "WANDB_CACHE_DIR": str(tmp / "wandb-cache"),
           "WANDB_DATA_DIR": str(tmp / "wandb-data"), "HOME": str(tmp),
           "WANDB_BASE_URL": "http://127.0.0.1:9"}  # nothing answers there: a run that tried the network would say so
    # a SLURM node has `srun` on PATH (Lightning warns about it there): the same run sees a fake one
    fake = tmp / "bin"
    fake.mkdir()
    (fake / "srun").write_text("#!/bin/sh\necho 'fake srun: not to be run' >&2\nexit 1\n")
    (fake / "srun").chmod(0o755)
    env["PATH"] = f"{fake}{os.pathsep}{os.environ.get('PATH', '')}"
    assert shutil.which("srun", path=env["PATH"]) == str(fake / "srun")
    run_dir = tmp / "run"
    done = subprocess.run([sys.executable, "-m", "ablate.cli", "train", *ARGS, f"run.dir={run_dir}"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    cfg = C.build(C.parse_overrides(ARGS))
    return run_dir, offline_run_record(run_dir), done.stderr, cfg


def test_the_config_is_logged_once_and_flat(offline):
    _, record, _, cfg = offline
    print("config keys of an offline run:", ", ".join(record["config"]))
    assert list(record["config"]) == list(C.flat(cfg))  # no nested `config`, no Lightning sizes
    assert not [k for k in record["config"] if k == "config" or k.startswith("config.")]
    assert record["config"]["model.n_heads"] == 2 and record["config"]["optim.lr"] == 3e-4
    assert record["config"]["budget"] == "smoke" and record["config"]["data.task"] == "copy"


def test_name_group_job_type_tags_and_sweep(offline):
    run_dir, record, _, cfg = offline
    # the id is this attempt's (a retrain is a W&B run of its own), recorded in the run folder; the hash, the
    # run id, is its tag
    assert re.fullmatch(rf"{C.run_id(cfg)}-[0-9a-f]{{6}}", record["id"]), record["id"]
    assert (run_dir / "wandb_id").read_text().strip() == record["id"]
    assert record["name"] == "n_heads=2 lr=3e-4 s1"
    assert record["group"] == "toy-smoke"  # budgets never mix in a group
    assert record["job_type"] == "sweep"
    assert record["tags"] == ["budget:smoke", "task:copy", "sweep:toy", f"run:{C.run_id(cfg)}"]
    assert record["sweep_id"] == "abc123"


def test_probe_scalars_in_the_summary_curves_in_the_history(offline):
    run_dir, record, _, _ = offline
    probes = json.loads((run_dir / "probes.json").read_text())
    summary, history = record["summary"], set(record["history_keys"])
    assert {k: summary[k] for k in probes} == pytest.approx(probes)
    assert not [k for k in history if k.startswith(("probe/init/", "probe/final/")) and not k.endswith("/attention")]
    assert {"probe/init/attention", "probe/final/attention"} <= history  # the heatmaps
    assert {"val/acc", "val/loss", "test/acc", "probe/step/grad_l0", "probe/step/entropy_l0"} <= history
    assert record["tables"] == ["probes/final"]
    table = summary["probes/final"]
    files = list(run_dir.glob(f"wandb/offline-run-*/files/{table['path']}"))
    data = json.loads(files[0].read_text())
    final = {k.removeprefix("probe/final/"): v for k, v in probes.items() if k.startswith("probe/final/")}
    assert data["columns"] == ["probe", "value"]
    assert dict(map(tuple, data["data"])) == pytest.approx(final)


def test_no_warnings_on_stderr(offline):
    _, _, err, _ = offline
    assert [line for line in err.splitlines() if line.strip() and not line.startswith("ablate: ")] == []
    assert "W&B run saved offline" in err  # the harness's own lines are there


def test_the_checkpoint_still_holds_the_config(offline):
    from ablate.tasks import load_task

    run_dir, _, _, cfg = offline
    task, _ = load_task(run_dir / "last.ckpt")
    assert task.cfg == C.build({**C.parse_overrides(ARGS), "run.dir": str(run_dir)}, machine=False)


def test_load_wandb_reads_new_and_old_groups(offline, tmp_path, monkeypatch):
    """A W&B Api serving the offline run as synced (group "toy-smoke") and one written before (group
    "toy", nested config): the table holds both, probe scalars from the summary."""
    _, record, _, cfg = offline
    ours = C.run_id(cfg)
    new = SimpleNamespace(id=record["id"], state="finished", config=record["config"], summary=record["summary"],
                          commit=record["summary"]["commit"], group=record["group"], tags=record["tags"],
                          created_at="2026-12-01T10:00:00")
    # the same run trained again later in the project, crashed: the finished attempt is the run's row
    again = SimpleNamespace(id=f"{ours}-000000", state="crashed", config=record["config"], summary={}, commit="c",
                            group=record["group"], tags=record["tags"], created_at="2026-12-02T10:00:00")
    old = SimpleNamespace(id="old", state="finished", config={"config": {"model": {"n_heads": 4}}, "n_classes": 10},
                          summary={"status": "completed", "test/acc": 0.5, "probe/final/acc": 0.5},
                          commit="c", group="toy")
    other = SimpleNamespace(id="other", state="finished", config={}, summary={}, commit="c", group="toy2-smoke")

    class Api:
        def runs(self, path, filters=None, lazy=True):
            wanted = filters["group"]["$in"]
            return [r for r in (new, again, old, other) if r.group in wanted]

    df = load_wandb("toy", "team/p", api=Api()).set_index("run_id")
    assert sorted(df.index) == sorted([ours, "old"])  # the run id from the tag; a run logged before: its W&B id
    assert df.loc[ours, "probe/final/acc"] == pytest.approx(record["summary"]["probe/final/acc"])
    assert df.loc[ours, "status"] == "completed"
    assert df.loc["old", "model.n_heads"] == 4 and df.loc[ours, "model.n_heads"] == 2


def test_each_training_afresh_is_a_w_and_b_run_of_its_own_and_a_resume_goes_on_in_it(tmp_path):
    """attempt_id: a run trained afresh gets a new W&B id (run id + 6 hex digits) recorded in its folder, a resume
    the recorded one, a folder from before the file existed (a wandb/ folder, no wandb_id) the run id itself."""
    from ablate.tracking import attempt_id

    cfg = C.build(C.parse_overrides(ARGS))
    ours = C.run_id(cfg)
    first = attempt_id(tmp_path, cfg, resume=False)
    assert re.fullmatch(rf"{ours}-[0-9a-f]{{6}}", first) and (tmp_path / "wandb_id").read_text() == first + "\n"
    assert attempt_id(tmp_path, cfg, resume=True) == first
    again = attempt_id(tmp_path, cfg, resume=False)  # retrained: another W&B run, never the old one overwritten
    assert again != first and attempt_id(tmp_path, cfg, resume=True) == again
    assert attempt_id(tmp_path, cfg, resume=False, write=False) != again  # a DDP rank that does not own the folder
    assert (tmp_path / "wandb_id").read_text() == again + "\n"
    legacy = tmp_path / "legacy"
    (legacy / "wandb").mkdir(parents=True)
    assert attempt_id(legacy, cfg, resume=True) == ours


def test_two_retrains_of_one_config_are_two_wandb_runs_in_one_group(tmp_path, monkeypatch):
    """`ablate train --retrain` twice: the first trains the run, the second trains it again as a new attempt. Each
    is a W&B run of its own (two offline runs, two ids) in the one group, both tagged with the run id, so that a
    dashboard of the group shows both and `ablate results --wandb` matches them to the run; the folder's
    wandb_id names the latest, attempts/1/wandb_id the earlier."""
    for var, name in (("WANDB_CONFIG_DIR", "wandb-config"), ("WANDB_CACHE_DIR", "wandb-cache"),
                      ("WANDB_DATA_DIR", "wandb-data"), ("WANDB_DIR", "wandb-dir")):
        monkeypatch.setenv(var, str(tmp_path / name))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("ABLATE_PROGRESS", "0")
    run_dir = tmp_path / "run"
    items = [*ARGS, "run.probes=false", f"run.dir={run_dir}"]
    assert cli.main(["train", *items, "--retrain"]) == 0 and cli.main(["train", *items, "--retrain"]) == 0
    records = [offline_run_record(p) for p in sorted((run_dir / "wandb").glob("offline-run-*"))]
    ours = C.run_id(C.build(C.parse_overrides(items)))
    assert len(records) == 2 and len({r["id"] for r in records}) == 2, [r["id"] for r in records]
    assert all(re.fullmatch(rf"{ours}-[0-9a-f]{{6}}", r["id"]) for r in records)
    assert {r["group"] for r in records} == {"toy-smoke"} and all(f"run:{ours}" in r["tags"] for r in records)
    assert {(run_dir / "attempts" / "1" / "wandb_id").read_text().strip(),
            (run_dir / "wandb_id").read_text().strip()} == {r["id"] for r in records}


def test_a_torn_or_foreign_run_file(offline, tmp_path):
    run_dir, record, _, _ = offline
    path = next(run_dir.glob("wandb/offline-run-*/run-*.wandb"))
    whole = list(wandb_file_records(path))
    torn = tmp_path / "run-x.wandb"
    torn.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # a run killed half-way
    assert 0 < len(list(wandb_file_records(torn))) < len(whole)
    assert offline_run_record(tmp_path, finished=False)["id"] == record["id"]
    # a finished run's file still being written (wandb.finish returned before its service wrote it: seen in
    # CI) is read once its exit record is there, not as the empty record its 7-byte header alone would give
    torn.write_bytes(path.read_bytes()[:7])

    def the_rest():
        with open(torn, "ab") as f:
            f.write(path.read_bytes()[7:])

    later = threading.Timer(0.5, the_rest)
    started = time.monotonic()
    later.start()
    assert offline_run_record(tmp_path, wait_s=20)["config"] == record["config"]
    assert time.monotonic() - started < 10  # read when the exit record came, not when the wait ran out
    later.join()
    torn.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # a file that never gets one: named
    with pytest.raises(AssertionError, match="no exit record after 0.3 s in .*run-x.wandb"):
        offline_run_record(tmp_path, wait_s=0.3)
    torn.write_bytes(b"not a run")
    with pytest.raises(ValueError, match="not a W&B run file"):
        offline_run_record(tmp_path)
    with pytest.raises(FileNotFoundError):
        offline_run_record(tmp_path / "nothing")


@pytest.mark.parametrize("value, shown", [(3e-4, "3e-4"), (1e-3, "1e-3"), (0.1, "0.1"), (0.25, "0.25"),
                                          (512, "512"), (False, "False"), (1e-05, "1e-5"), ("pre", "pre"),
                                          (3.0000001e-4, "3.0000001e-4"), (0.01, "0.01")])
def test_short_values(value, shown):
    assert short(value) == shown


def test_derived_names():
    assert derived_name(C.build({})) == "tutorial s0"
    assert derived_name(C.build({"budget": "smoke", "data.train_subset": "9", "seed": "3"})) == "tutorial s3"
    assert derived_name(C.build({"model.n_heads": "8", "optim.lr": "3e-4"})) == "n_heads=8 lr=3e-4 s0"
    assert derived_name(C.build({"model.qk_scale": "false", "model.d_head": "512", "seed": "1"})) == "d_head=512 qk_scale=False s1"
    long = derived_name(C.build({"model.n_layers": "6", "model.d_model": "64", "model.n_heads": "8", "model.d_head": "16",
                                 "model.ffn_mult": "2", "model.activation": "gelu", "model.qk_scale": "false",
                                 "model.temperature": "0.5", "model.residual": "false", "model.norm": "post",
                                 "model.pos_enc": "rope", "model.init": "xavier", "optim.name": "sgd",
                                 "optim.lr": "0.3", "optim.weight_decay": "0.01", "optim.warmup": "0.1",
                                 "optim.schedule": "cosine", "optim.grad_clip": "1.0", "seed": "12345"}))
    assert len(long) <= C.NAME_MAX and long.startswith("n_heads=8 d_head=16 n_layers=6") and long.endswith(" ... s12345")


def test_run_fields_of_a_plain_train():
    cfg = C.build({"run.name": "qk_scale=False lr=3e-4 s1"})
    fields = run_fields(cfg)
    assert (fields["name"], fields["group"], fields["job_type"]) == ("qk_scale=False lr=3e-4 s1", "train-none", "train")
    assert fields["tags"] == ["budget:none", "task:mnist", "sweep:train", f"run:{C.run_id(cfg)}"]
    assert fields["id"] == C.run_id(cfg) and run_fields(cfg, f"{C.run_id(cfg)}-abcdef")["id"] == f"{C.run_id(cfg)}-abcdef"


def test_name_and_sweep_id_never_change_the_run_id():
    base = C.build({})
    assert C.run_id(C.build({"run.name": "x y=1 s0", "run.sweep_id": "ab12_-"})) == C.run_id(base)
    assert C.build({"run.name": "qk_scale=False lr=3e-4 s1"}).run.name == "qk_scale=False lr=3e-4 s1"


@pytest.mark.parametrize("item", ["run.name=a\tb", "run.name=" + "x" * 129, "run.sweep_id=a/b", "run.sweep_id=a b",
                                  "run.sweep_id=" + "x" * 129])
def test_bad_name_or_sweep_id_exits_2_with_one_line(item, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    code = cli.main(["train", "tracking=none", item])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith(f"ablate: {item.partition('=')[0]}="), err
    assert list(tmp_path.iterdir()) == []


def test_every_final_metric_is_in_the_wandb_summary(offline):
    """summary.json's metrics on W&B too, also those never logged as history: val/acc_mean (the tune metric
    of the heads sweeps, a parallel-coordinates axis of their dashboards) and the ref/ reference levels."""
    run_dir, record, _, _ = offline
    metrics = json.loads((run_dir / "summary.json").read_text())["metrics"]
    assert {"val/acc_mean", "ref/val/order_blind", "test/acc"} <= set(metrics)
    assert {k: record["summary"][k] for k in metrics} == pytest.approx(metrics)


@pytest.mark.parametrize("home", ["unset", "a file"])
def test_a_run_without_a_usable_home_keeps_wandb_core_quiet(tmp_path, home):
    """HOME unset (cron, some containers) or a HOME that is no writable folder: W&B's core found no cache
    folder and wrote ~20 lines of its own logs to stderr, an ERROR among them. Now its cache, config and data
    folders go to a private temp folder (TMPDIR here, inside tmp_path): stderr holds only ablate's lines,
    and the run is the same offline W&B run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WANDB_", "XDG_")) and k != "HOME"}
    env.update(WANDB_MODE="offline", ABLATE_RUNS_DIR=str(tmp_path / "runs"), TMPDIR=str(tmp_path / "tmp"),
               ABLATE_PROGRESS="0")
    (tmp_path / "tmp").mkdir()
    if home == "a file":  # no folder can be made in it, root or not
        env["HOME"] = str(tmp_path / "home-file")
        (tmp_path / "home-file").write_text("")
        env["MPLCONFIGDIR"] = str(tmp_path / "mpl")  # matplotlib (imported before W&B starts) says so too
    run_dir = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "ablate.cli", "train", "budget=smoke", "data.task=copy",
                           "data.train_subset=64", "trainer.max_epochs=1", "trainer.threads=1", "tracking=wandb",
                           "run.probes=false", f"run.dir={run_dir}"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("ablate: ")] == []
    assert "W&B run saved offline" in done.stderr
    assert offline_run_record(run_dir)["job_type"] == "train"
    logs = list((tmp_path / "tmp").glob("ablate-wandb-*/*/wandb/logs/core-debug-*.log"))
    assert len(logs) == 1  # W&B's own log, where it can be read, not on stderr
    assert not (ROOT / ".wandb_cache").exists()


def test_a_sweep_name_longer_than_a_wandb_tag_trains_and_keeps_its_tags_apart(tmp_path):
    """run.group of 59-122 characters made the tag `sweep:<group>` longer than W&B's 64, and wandb.init
    failed every run with a 50-line traceback (issue 41, item 10). A long tag is cut with a digest of the
    whole name, so two names that share their start keep two tags."""
    from ablate.tracking import TAG_MAX

    long = "ablation-of-the-feed-forward-width-at-every-depth-and-head-count-" * 2  # 130 characters
    long = long[:120]
    cut = run_fields(C.build(C.parse_overrides([*ARGS, f"run.group={long}", "run.probe_every=0"])))["tags"]
    other = run_fields(C.build(C.parse_overrides([*ARGS, f"run.group={long[:-1]}x", "run.probe_every=0"])))["tags"]
    assert max(map(len, cut)) == TAG_MAX and cut[2].startswith("sweep:ablation-of") and cut[2] != other[2]
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path), "HOME": str(tmp_path),
           "WANDB_SILENT": "true", "ABLATE_RUNS_DIR": str(tmp_path / "runs")}
    done = subprocess.run([sys.executable, "-m", "ablate.cli", "train", *ARGS, f"run.group={long}",
                           f"run.dir={tmp_path / 'run'}", "run.probe_every=0"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert offline_run_record(tmp_path / "run")["tags"] == cut


@pytest.mark.parametrize("case", ["no key", "no answer"])
def test_wandb_online_that_cannot_work_is_one_line_before_any_work(case, tmp_path, monkeypatch, capsys):
    """WANDB_MODE=online without credentials failed after ~20 s, and without the network waited ~100 s, each
    with a traceback (issue 41, item 11): now exit 2 at once, one line, nothing written, for train and sweep."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("NETRC", str(home / ".netrc"))
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    if case == "no answer":
        monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
        monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")  # nothing listens there
    sweep = tmp_path / "online.yaml"
    sweep.write_text(yaml.safe_dump({"program": "ablate", "command": ["ablate", "train", "${args_no_hyphens}"],
                                     "method": "grid", "parameters": {"tracking": {"value": "wandb"},
                                                                      "seed": {"values": [0]}}}))
    for argv in (["train", *ARGS], ["sweep", str(sweep), "--budget", "smoke"]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "WANDB_MODE=online but" in err and "WANDB_MODE=offline" in err, err
        assert ("no W&B API key" in err) == (case == "no key")
    assert not (tmp_path / "runs").exists()
