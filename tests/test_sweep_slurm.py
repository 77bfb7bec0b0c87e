"""`ablate sweep --executor slurm|local` and DDP under srun, on a real single-node SLURM cluster (issue 28).

The cluster (tests/slurm_cluster.py: munged, slurmctld, slurmd from Debian's slurm-wlm and munge, a slurm.conf
in a temporary folder) starts once for the module and is stopped by its daemons' pids. Where it cannot start
(the packages missing, not root) the SLURM tests skip with the line saying so, unless ABLATE_REQUIRE_SLURM=1
(.ci/run sets it), where they fail with it. The `--executor local` tests need no SLURM.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ablate.rundir import read_summary
from ablate.sweep import main as sweep_main
from ablate.sweep import spec
from tests import slurm_cluster
from tests.sweep_fixtures import descendants

TINY = {
    "data.task": {"value": "copy"}, "data.vocab": {"value": 6}, "data.length": {"value": 4},
    "data.n_train": {"value": 128}, "data.n_val": {"value": 32}, "data.n_test": {"value": 32},
    "data.batch_size": {"value": 32}, "model.d_model": {"value": 16}, "model.n_layers": {"value": 1},
    "trainer.max_epochs": {"value": 1}, "run.probes": {"value": False}, "tracking": {"value": "none"},
}
HEADER = {"program": "ablate", "command": ["ablate", "train", "${args_no_hyphens}"], "method": "grid"}
PROBLEM = slurm_cluster.problem()
REQUIRED = os.environ.get("ABLATE_REQUIRE_SLURM") == "1"
needs_slurm = pytest.mark.skipif(PROBLEM is not None and not REQUIRED,
                                 reason=f"{PROBLEM}: {slurm_cluster.HOW} to run the SLURM tests")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if PROBLEM is not None:  # here only with ABLATE_REQUIRE_SLURM=1
        pytest.fail(f"ABLATE_REQUIRE_SLURM=1 but {PROBLEM}; {slurm_cluster.HOW}", pytrace=False)
    folder = tmp_path_factory.mktemp("slurm")
    folder.chmod(0o700)  # munged refuses a socket folder others can write
    c = slurm_cluster.Cluster(folder)
    try:
        c.start()
        yield c
    finally:
        c.stop()


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("ABLATE_PROGRESS", "0")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("ABLATE_POLL_MAX_S", "1")  # the test cluster is this module's alone: look every second
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def slurm(cluster, monkeypatch):
    for key, value in cluster.env.items():
        monkeypatch.setenv(key, value)
    return cluster


def write(tmp_path: Path, name: str, parameters: dict, **top) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({**HEADER, **top, "parameters": {**TINY, **parameters}}, sort_keys=False))
    return path


def summaries(tmp_path: Path, name: str) -> dict[str, dict]:
    return {d.name: read_summary(d) for d in sorted((tmp_path / "runs" / name).iterdir()) if d.is_dir()}


def sweep(capsys, *argv: str) -> tuple[int, str, str]:
    code = sweep_main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


# -- without SLURM -------------------------------------------------------------------------------

@pytest.mark.slow
def test_local_executor_runs_each_configuration_once_with_the_runners_ids(tmp_path, capsys):
    path = write(tmp_path, "loc", {"model.n_heads": {"values": [1, 2]}, "seed": {"values": [0, 1]}})
    code, out, err = sweep(capsys, str(path), "--executor", "local", "--chunk", "2")
    assert code == 0, err
    runs = summaries(tmp_path, "loc")
    assert set(runs) == {r.run_id for r in spec.load(str(path)).runs}  # the local runner's ids
    assert all(s["status"] == "completed" and s["attempts"] == 1 for s in runs.values())
    assert "submitted 4 runs as 2 jobs: local jobs" in err
    for run_id in runs:  # each run's own log, as the local runner's runs have it (issue 42)
        assert "ablate: training " in (tmp_path / "runs" / "loc" / run_id / "train.log").read_text()
    code, out, err = sweep(capsys, str(path), "--executor", "local")  # again: nothing trained twice
    assert code == 0 and "4 finished before, 0 to run" in err
    assert all(s["attempts"] == 1 for s in summaries(tmp_path, "loc").values())


@pytest.mark.slow
def test_retrain_stale_reaches_the_runs_of_the_jobs(tmp_path, capsys):
    """--retrain-stale with --executor local (the jobs' code path, without a scheduler): of two completed runs, the
    one another commit made is submitted and trained again as a new attempt in its job, the other kept; the same
    command again has nothing to run."""
    from ablate.provenance import git_state
    from ablate.rundir import write_json

    now = git_state()["commit"]
    if now is None:
        pytest.skip("not a git checkout: no commit to compare")
    path = write(tmp_path, "jobstale", {"model.n_heads": {"value": 2}, "seed": {"values": [0, 1]}})
    assert sweep(capsys, str(path), "--executor", "local", "--chunk", "2")[0] == 0
    stale, current = sorted(summaries(tmp_path, "jobstale"))
    root = tmp_path / "runs" / "jobstale"
    old = read_summary(root / stale)
    old["provenance"]["commit"] = "0" * 40
    write_json(root / stale / "summary.json", old)
    kept = read_summary(root / current)
    code, out, err = sweep(capsys, str(path), "--executor", "local")  # without the flag: said, kept
    assert code == 0 and (f"ablate sweep jobstale: of the 2 runs finished before, 1 of them made by other code (commit "
                          f"0000000000; the code is now at {now[:10]}): kept, not rerun; --retrain-stale trains them "
                          "again as new attempts") in err.splitlines() and read_summary(root / stale) == old
    code, out, err = sweep(capsys, str(path), "--executor", "local", "--retrain-stale")
    assert code == 0 and "2 runs, 1 finished before, 1 to run as local jobs" in err, err
    assert (f"ablate sweep jobstale: of the 1 runs to run, 1 of them made by other code (commit 0000000000; the code is "
            f"now at {now[:10]}): trained again as new attempts (--retrain-stale), each earlier one kept in its "
            "folder's attempts/") in err.splitlines()  # the local runner's words (tests/test_sweep.py)
    new = read_summary(root / stale)
    assert new["status"] == "completed" and new["provenance"]["commit"] == now and new["retrained"] == "attempts/1"
    assert read_summary(root / stale / "attempts" / "1") == old and read_summary(root / current) == kept
    code, out, err = sweep(capsys, str(path), "--executor", "local", "--retrain-stale")
    assert code == 0 and "2 finished before, 0 to run" in err and read_summary(root / stale) == new


@pytest.mark.slow
def test_a_run_another_process_trains_is_waited_for_not_submitted_twice(tmp_path):
    from ablate.rundir import RunLock

    path = write(tmp_path, "held", {"seed": {"values": [0]}})
    (run,) = spec.load(str(path)).runs
    lock = RunLock(tmp_path / "runs" / "held" / run.run_id)
    assert lock.acquire()  # as a job of an earlier command holds it while it trains
    driver = subprocess.Popen([sys.executable, "-m", "ablate", "sweep", str(path), "--executor", "local"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in driver.stderr:  # released once the command has said it waits
        lines.append(line)
        if "waiting for them" in line:
            lock.release()
            break
    rest = driver.communicate(timeout=300)[1]
    err = "".join(lines) + rest
    assert driver.returncode == 0, err
    assert "1 run(s) are being trained by another process (their lock is held); waiting for them" in err
    assert err.index("waiting for them") < err.index("submitted 1 runs")  # submitted once the lock was free
    assert read_summary(tmp_path / "runs" / "held" / run.run_id)["attempts"] == 1


@pytest.mark.slow
def test_past_its_retries_an_interrupted_run_is_reported_and_the_same_command_resumes_it(tmp_path):
    import signal

    path = write(tmp_path, "retry", {"data.n_train": {"value": 2048}, "trainer.max_epochs": {"value": 2},
                                     "seed": {"value": 0}})
    (run,) = spec.load(str(path)).runs
    folder = tmp_path / "runs" / "retry" / run.run_id
    command = [sys.executable, "-m", "ablate", "sweep", str(path), "--executor", "local"]
    driver = subprocess.Popen([*command, "--retries", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in driver.stderr:  # the job's pid is its local job id
        lines.append(line)
        if "jobs: local jobs " in line:
            pid = int(line.split("jobs: local jobs ")[1].split()[0])
            break
    deadline = time.monotonic() + 120
    while not (folder / "last.ckpt").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(pid, signal.SIGTERM)  # as a scheduler preempting it
    err = "".join(lines) + driver.communicate(timeout=300)[1]
    assert driver.returncode == 1, err
    assert f"{run.run_id} is still interrupted after 1 submissions (--retries); the same command submits it again" in err
    assert read_summary(folder)["status"] == "interrupted"
    again = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    summary = read_summary(folder)
    assert summary["status"] == "completed" and summary["attempts"] == 2


@pytest.mark.parametrize("argv, line", [
    (["--chunk", "0", "--executor", "local"], "ablate: --chunk=0 is not allowed; expected an integer >= 1"),
    (["--partition", "gpu"], "ablate: --partition: only with --executor slurm or local; add --executor slurm "
                             "(or drop them)"),
    (["--executor", "local", "--workers", "2", "--runs-per-gpu", "2"],
     "ablate: --workers: only with --executor here; drop them (--max-jobs caps the jobs at once, "
     "--gpus-per-job sets a job's GPUs, --runs-per-gpu the runs on each)"),
    (["--executor", "local", "--runs-per-gpu", "2"],
     "ablate: --runs-per-gpu 2 packs runs onto a job's GPUs, but the jobs ask for none; add --gpus-per-job G "
     "(or drop --runs-per-gpu)"),
    (["--executor", "slurm", "--dry-run", "--gpus-per-job", "1", "--runs-per-gpu", "0"],
     "ablate: --runs-per-gpu=0 is not allowed; expected an integer >= 1"),
    (["--executor", "local", "--mem", "8 GB"],
     "ablate: --mem 8 GB: not a memory size; write it as sbatch does, e.g. 8G or 16000M (a run of the tutorial's "
     "models peaks at about 1.3 GB, times the runs a job trains at once)"),
    (["--mem", "8G"], "ablate: --mem: only with --executor slurm or local; add --executor slurm (or drop them)"),
])
def test_bad_job_options_exit_2_in_one_line_before_any_work(tmp_path, capsys, argv, line):
    path = write(tmp_path, "bad", {"seed": {"values": [0]}})
    code, out, err = sweep(capsys, str(path), *argv)
    assert code == 2 and err.strip().splitlines() == [line]
    assert not (tmp_path / "runs").exists()


def test_a_ddp_run_is_refused_by_the_job_executors(tmp_path, capsys):
    path = write(tmp_path, "ddp", {"trainer.devices": {"value": 2}, "trainer.strategy": {"value": "ddp"}})
    code, out, err = sweep(capsys, str(path), "--executor", "local")
    assert code == 2 and "a job of --executor slurm|local trains one process" in err
    assert len(err.strip().splitlines()) == 1


def test_dry_run_prints_the_sbatch_parameters(tmp_path, capsys):
    path = write(tmp_path, "dry", {"model.n_heads": {"values": [1, 2]}, "seed": {"values": [0, 1, 2]}})
    code, out, err = sweep(capsys, str(path), "--executor", "slurm", "--dry-run", "--chunk", "2", "--max-jobs", "2",
                           "--partition", "debug", "--time", "30", "--cpus-per-job", "2")
    assert code == 0, err
    for line in ("#SBATCH --array=0-2%2", "#SBATCH --partition=debug", "#SBATCH --time=30",
                 "#SBATCH --cpus-per-task=2", "#SBATCH --job-name=ablate-dry"):
        assert line in out.splitlines(), out
    assert "6 runs, 3 jobs of 2" in out
    assert not (tmp_path / "runs").exists()


def test_dry_run_passes_the_resource_flags_to_sbatch(tmp_path, capsys):
    path = write(tmp_path, "res", {"seed": {"values": [0, 1]}})
    code, out, err = sweep(capsys, str(path), "--executor", "slurm", "--dry-run", "--account", "lab", "--qos", "short",
                           "--mem", "4G", "--constraint", "avx512")
    assert code == 0, err
    assert {"#SBATCH --account=lab", "#SBATCH --qos=short", "#SBATCH --mem=4G",
            "#SBATCH --constraint=avx512"} <= set(out.splitlines()), out


@pytest.mark.parametrize("text, expected", [("infinite", None), ("UNLIMITED", None), ("1:00:00", 60), ("30:00", 30),
                                            ("1-00:00:00", 1440), ("2-12:30:00", 3630), ("5", 5), ("0:59", 0)])
def test_sinfo_time_limits_read_in_minutes(text, expected):
    from ablate.sweep.executor import minutes

    assert minutes(text) == expected


def test_dry_run_of_gpu_jobs_says_how_they_are_packed_and_shares_the_cpus_out(tmp_path, capsys):
    path = write(tmp_path, "pack", {"model.n_heads": {"values": [1, 2]}, "seed": {"values": [0, 1, 2]}})
    code, out, err = sweep(capsys, str(path), "--executor", "slurm", "--dry-run", "--gpus-per-job", "2",
                           "--runs-per-gpu", "3", "--cpus-per-job", "12")
    assert code == 0, err
    assert "6 runs, 1 jobs of 6, 6 at once (2 GPU(s) x 3 run(s) per GPU, 2 thread(s) each)" in out
    assert {"#SBATCH --gpus-per-node=2", "#SBATCH --cpus-per-task=12", "#SBATCH --array=0-0%1"} <= set(out.splitlines())
    code, out, err = sweep(capsys, str(path), "--executor", "slurm", "--dry-run", "--gpus-per-job", "2",
                           "--runs-per-gpu", "3", "--chunk", "4")  # a chunk given is kept
    assert code == 0 and "6 runs, 2 jobs of 4, 4 at once (2 GPU(s) x 3 run(s) per GPU, 1 thread(s) each on 1 CPU(s): " \
        "raise --cpus-per-job)" in out  # at most the chunk at once; too few CPUs for them said


@pytest.mark.slow
def test_a_gpu_job_trains_runs_per_gpu_of_its_runs_at_once_each_once(tmp_path, capsys, monkeypatch):
    """`--gpus-per-job 1 --runs-per-gpu 2`: each job trains its two runs at once, each its own process with the
    job's GPU, by the local runner inside the job. Tested on CPU: submitit's local executor hands a job
    CUDA_VISIBLE_DEVICES=0 whatever the machine has, and the runs train on the CPU (accelerator cpu). Its
    jobs run one at a time by default (they would all get GPU 0)."""
    path = write(tmp_path, "packed", {"model.n_heads": {"values": [1, 2]}, "seed": {"values": [0, 1]},
                                      "trainer.accelerator": {"value": "cpu"}, "data.n_train": {"value": 2048},
                                      "trainer.max_epochs": {"value": 2}})
    code, out, err = sweep(capsys, str(path), "--executor", "local", "--gpus-per-job", "1", "--runs-per-gpu", "2",
                           "--cpus-per-job", "2")
    assert code == 0, err
    assert "4 to run as local jobs of 2 run(s), 2 at once (1 GPU(s) x 2 run(s) per GPU, 1 thread(s) each)" in err
    assert err.count("submitted 2 runs as 1 jobs") == 2  # one job, then the other
    runs = spec.load(str(path)).runs
    found = summaries(tmp_path, "packed")
    assert set(found) == {r.run_id for r in runs}  # the local runner's ids, each trained once
    assert all(s["status"] == "completed" and s["attempts"] == 1 for s in found.values())
    logs = "".join(p.read_text() for p in (tmp_path / "runs" / ".submitit" / "packed").glob("*_log.out"))
    assert logs.count("on 2 workers x 1 thread(s), GPUs 0 x2") == 2  # each job: its runs at once on its GPU

    def span(run):  # from the run's config (written as it starts) to its summary (as it ends)
        folder = tmp_path / "runs" / "packed" / run.run_id
        return (folder / "config.yaml").stat().st_mtime, (folder / "summary.json").stat().st_mtime

    (a0, a1), (b0, b1), (c0, c1), (d0, d1) = (span(r) for r in runs)  # chunks: runs 1-2, then 3-4
    assert a0 < b1 and b0 < a1 and c0 < d1 and d0 < c1  # a job's two runs overlap
    assert max(a1, b1) <= min(c0, d0)  # one job at a time

    here = tmp_path / "here"
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(here))
    code, _, err = sweep(capsys, str(path), "--workers", "1", "--threads", "1")
    assert code == 0, err
    for run_id, summary in found.items():  # the same numbers as one run at a time in this process's runner
        again = read_summary(here / "packed" / run_id)
        assert again["metrics"]["test/acc"] == summary["metrics"]["test/acc"], run_id
        assert again["metrics"]["val/loss"] == summary["metrics"]["val/loss"], run_id


@pytest.mark.slow
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGUSR2"])
def test_a_packed_job_signalled_as_slurm_does_records_its_runs_interrupted_and_they_resume(tmp_path, signame):
    """SIGTERM (preemption, time limit, scancel) or SIGUSR2 (submitit's warning before the time limit) sent,
    as SLURM does, to every process of a job training two runs at once: the job's runner, its forkserver
    and the runs. Both runs are recorded `interrupted` (none killed unrecorded), the job ends, and the
    command submits them again to resume from their last.ckpt: after SIGTERM from their last epoch's end,
    after the warning from the step where each saved its place (issue 42: the partial epoch was lost)."""
    import signal

    path = write(tmp_path, "prempt", {"data.n_train": {"value": 2048}, "trainer.max_epochs": {"value": 4},
                                      "trainer.accelerator": {"value": "cpu"}, "seed": {"values": [0, 1]}})
    runs = spec.load(str(path)).runs
    folders = [tmp_path / "runs" / "prempt" / r.run_id for r in runs]
    driver = subprocess.Popen([sys.executable, "-m", "ablate", "sweep", str(path), "--executor", "local",
                               "--gpus-per-job", "1", "--runs-per-gpu", "2", "--cpus-per-job", "2", "--retries", "1"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines, pid = [], None
    for line in driver.stderr:  # the job's pid is its local job id
        lines.append(line)
        if "jobs: local jobs " in line:
            pid = int(line.split("jobs: local jobs ")[1].split()[0])
            break
    assert pid is not None, "".join(lines) + driver.communicate(timeout=60)[1]
    deadline = time.monotonic() + 180
    while not all((f / "last.ckpt").exists() for f in folders) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(read_summary(f)["status"] == "running" for f in folders)
    for process in descendants(pid):  # the job (below submitit's local controller), its forkserver, the runs
        try:
            os.kill(process, getattr(signal, signame))
        except ProcessLookupError:
            pass
    err = "".join(lines) + driver.communicate(timeout=300)[1]
    assert driver.returncode == 0, err
    assert "2 run(s) interrupted or killed before they finished; submitting them again" in err
    log = "".join(p.read_text() for p in (tmp_path / "runs" / ".submitit" / "prempt").glob("*_log.out"))
    assert "2 run(s) of this job interrupted (preempted, timed out or cancelled)" in log
    resumed_at = []
    for folder in folders:
        summary = read_summary(folder)
        assert summary["status"] == "completed" and summary["attempts"] == 2, summary
        text = (folder / "train.log").read_text()  # each run's own log (the job's runner writes it there)
        assert "run stopped (Interrupted)" in text and "from last.ckpt (step" in text, text
        resumed_at.append(int(text.split("from last.ckpt (step ")[1].split(")")[0]))
    steps = 2048 // 32  # per epoch
    if signame == "SIGTERM":  # stopped at once: back to the end of the last epoch
        assert all(step % steps == 0 for step in resumed_at), resumed_at
    else:  # the warning: each run saved its place at its next step first (a run exactly at an epoch's end
        # saves there, so one of the two may, by chance; both would be 1 in 4,096)
        assert any(step % steps for step in resumed_at), resumed_at


# -- on the SLURM cluster --------------------------------------------------------------------------

@needs_slurm
@pytest.mark.slow
def test_smoke_sweep_on_slurm_runs_each_once_with_the_runners_ids(tmp_path, capsys, slurm):
    path = write(tmp_path, "smoke", {"model.n_heads": {"values": [1, 2]}, "seed": {"values": [0, 1]}})
    started = time.monotonic()
    code, out, err = sweep(capsys, str(path), "--executor", "slurm", "--chunk", "2", "--max-jobs", "2")
    print(f"4 runs as 2 SLURM jobs: {time.monotonic() - started:.1f} s\n{err}")
    assert code == 0, err
    runs = summaries(tmp_path, "smoke")
    assert set(runs) == {r.run_id for r in spec.load(str(path)).runs}
    assert all(s["status"] == "completed" and s["attempts"] == 1 for s in runs.values())
    submitted = [line for line in err.splitlines() if "submitted" in line]
    assert len(submitted) == 1 and "as 2 jobs: SLURM job array " in submitted[0], err
    code, out, err = sweep(capsys, str(path), "--executor", "slurm")  # again: nothing submitted
    assert code == 0 and "4 finished before, 0 to run" in err and "submitted" not in err
    assert all(s["attempts"] == 1 for s in summaries(tmp_path, "smoke").values())


@needs_slurm
@pytest.mark.slow
def test_a_plugin_sweep_trains_in_the_jobs_and_the_runs_an_edited_plugin_made_are_named(tmp_path, capsys, slurm):
    """A user's own component (issue 44) on SLURM, the plug-in not installed but in the folder the sweep is run
    from: the jobs import it as the driver does and record its source; after an edit of it the same command
    names the runs it made as made by other code and keeps them (--retrain-stale in jobs:
    test_retrain_stale_reaches_the_runs_of_the_jobs)."""
    from ablate import plugins as P

    def forget() -> None:  # as a new command starts: the plug-in neither registered nor imported
        P.unload("ablate_example")
        for name in [m for m in sys.modules if m == "ablate_example" or m.startswith("ablate_example.")]:
            del sys.modules[name]

    shutil.copytree(Path(__file__).resolve().parents[1] / "examples" / "ablate_example", tmp_path / "ablate_example")
    forget()  # test_plugins imports the example from examples/ in this process
    sys.path.insert(0, str(tmp_path))  # the driver's `python -m ablate` has its folder first on its path
    try:
        path = write(tmp_path, "plug", {"plugins": {"value": "ablate_example"}, "model.norm": {"value": "pre"},
                                        "model.norm_type": {"value": "scalenorm"}, "seed": {"values": [0, 1]}})
        code, out, err = sweep(capsys, str(path), "--executor", "slurm", "--chunk", "2")
        assert code == 0, err
        runs = summaries(tmp_path, "plug")
        assert set(runs) == {r.run_id for r in spec.load(str(path)).runs}
        made = {s["provenance"]["plugins"]["ablate_example"]["sha256"] for s in runs.values()}
        assert all(s["status"] == "completed" and s["attempts"] == 1 for s in runs.values())
        assert made == {P.LOADED["ablate_example"].sha256}  # the jobs' import is the driver's source, this copy
        assert Path(sys.modules["ablate_example"].__file__).parent == tmp_path / "ablate_example"
        source = tmp_path / "ablate_example" / "scalenorm.py"
        source.write_text(source.read_text() + "\n# edited after the runs\n")
        forget()  # a new command: it imports the edited plug-in
        code, out, err = sweep(capsys, str(path), "--executor", "slurm")
        assert code == 0 and "2 of them made by other code (plugins=ablate_example, whose source has changed)" in err
        assert "submitted" not in err
    finally:
        sys.path.remove(str(tmp_path))
        forget()


@needs_slurm
def test_an_unknown_partition_exits_2_in_one_line_before_any_work(tmp_path, capsys, slurm):
    path = write(tmp_path, "part", {"seed": {"values": [0]}})
    code, out, err = sweep(capsys, str(path), "--executor", "slurm", "--partition", "gpu")
    assert code == 2 and err.strip().splitlines() == [
        "ablate: --partition gpu: the cluster has no such partition; choose one of debug, short"]
    assert not (tmp_path / "runs").exists()


@needs_slurm
def test_a_time_over_the_partitions_limit_exits_2_before_any_work(tmp_path, capsys, slurm):
    """SLURM would accept the array and leave it pending forever (PartitionTimeLimit): refused before submitting."""
    path = write(tmp_path, "limit", {"seed": {"values": [0]}})
    code, out, err = sweep(capsys, str(path), "--executor", "slurm", "--partition", "short", "--time", "60")
    assert code == 2 and err.strip().splitlines() == [
        "ablate: --time 60: partition short's time limit is 1 minutes, so SLURM would leave the jobs pending forever "
        "(PartitionTimeLimit); use --time 1 or less (an interrupted run resumes in the next job) or another --partition"]
    assert not (tmp_path / "runs").exists()
    code, out, err = sweep(capsys, str(path), "--executor", "slurm", "--partition", "short", "--time", "1", "--dry-run")
    assert code == 0 and "#SBATCH --partition=short" in out.splitlines()


class _Job:  # what the driver reads of a submitit job: its id
    def __init__(self, job_id: str):
        self.job_id = job_id


@needs_slurm
def test_a_pending_reason_slurm_never_gets_past_cancels_and_names_the_fix(tmp_path, slurm, monkeypatch):
    """A job SLURM accepted but will never start (submitted past the check, as by hand): squeue's reason is read,
    the job cancelled, and the command stops in one line with the fix."""
    from ablate.sweep import executor as E

    submitted = subprocess.run(["sbatch", "--parsable", "-p", "short", "-t", "60", "--wrap", "true"],
                               capture_output=True, text=True, check=True)
    job = submitted.stdout.strip().split(";")[0]
    sweep_file = write(tmp_path, "stuck", {"seed": {"values": [0]}})
    dispatch = E.Dispatch(spec.load(str(sweep_file)), E.Options(executor="slurm"), sys.stderr)
    dispatch.job_ids, dispatch.live = [job], [(_Job(job), [])]
    deadline = time.monotonic() + 30
    with pytest.raises(E.SweepError) as stop:
        while time.monotonic() < deadline:  # the controller sets the reason at its first scheduling pass
            dispatch._poll()
            time.sleep(0.5)
    assert str(stop.value) == (f"SLURM will not start the jobs (PartitionTimeLimit): {E.NEVER['PartitionTimeLimit']}; "
                               f"the jobs {job} were cancelled and nothing ran")
    for _ in range(50):
        listed = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True).stdout.strip()
        if listed in ("", "CANCELLED"):
            break
        time.sleep(0.2)
    assert listed in ("", "CANCELLED")


@needs_slurm
@pytest.mark.slow
def test_the_progress_line_shows_why_jobs_are_pending(tmp_path, capsys, slurm):
    """Every CPU of the cluster held by another job: the sweep's job pends, and the driver says why (Resources)."""
    blocker = subprocess.run(["sbatch", "--parsable", "-c", str(slurm_cluster.CPUS), "--wrap", "sleep 4"],
                             capture_output=True, text=True, check=True).stdout.strip().split(";")[0]
    try:
        path = write(tmp_path, "wait", {"seed": {"values": [0]}})
        code, out, err = sweep(capsys, str(path), "--executor", "slurm")
    finally:
        subprocess.run(["scancel", blocker], capture_output=True)
    assert code == 0, err
    assert "1 of 1 jobs queued or running (pending: 1 Resources)" in err or \
        "1 of 1 jobs queued or running (pending: 1 Priority)" in err, err
    assert all(s["status"] == "completed" for s in summaries(tmp_path, "wait").values())


@needs_slurm
@pytest.mark.slow
def test_a_driver_killed_with_sigkill_and_run_again_adopts_its_jobs_and_submits_nothing_twice(tmp_path, capsys, slurm):
    """The driver (on a login node, its ssh gone) killed with SIGKILL while its jobs wait; the same command again
    finds the array still queued, waits for it, and every run is trained once."""
    import select

    blocker = subprocess.run(["sbatch", "--parsable", "-c", str(slurm_cluster.CPUS), "--wrap", "sleep 10"],
                             capture_output=True, text=True, check=True).stdout.strip().split(";")[0]
    path = write(tmp_path, "adopt", {"seed": {"values": [0, 1]}})
    try:
        driver = subprocess.Popen([sys.executable, "-m", "ablate", "sweep", str(path), "--executor", "slurm"],
                                  stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=tmp_path)
        said, deadline = "", time.monotonic() + 120
        while "submitted" not in said and time.monotonic() < deadline and driver.poll() is None:
            if select.select([driver.stderr], [], [], 1.0)[0]:
                said += driver.stderr.readline()
        driver.kill()
        driver.wait()
        assert "submitted 2 runs as 2 jobs" in said, said
        queued = subprocess.run(["squeue", "-h", "-r", "-n", "ablate-adopt", "-o", "%i"], capture_output=True,
                                text=True).stdout.split()
        assert len(queued) == 2  # left behind by the killed driver, pending behind the blocker
        code, out, err = sweep(capsys, str(path), "--executor", "slurm")
    finally:
        subprocess.run(["scancel", blocker], capture_output=True)
    assert code == 0, err
    assert "adopting SLURM job array" in err and "submitted" not in err, err
    runs = summaries(tmp_path, "adopt")
    assert len(runs) == 2 and all(s["status"] == "completed" and s["attempts"] == 1 for s in runs.values())


def orphaned(tmp_path: Path, slurm, name: str) -> tuple[Path, Path, Path, dict, str]:
    """A one-run sweep `name` submitted by a driver that is killed with SIGKILL once the run has ended an epoch:
    (sweep file, run folder, jobs folder, environment, the job's id)."""
    path = write(tmp_path, name, {"data.n_train": {"value": 4096}, "trainer.max_epochs": {"value": 3},
                                  "seed": {"value": 0}})
    (run,) = spec.load(str(path)).runs
    folder, logs = tmp_path / "runs" / name / run.run_id, tmp_path / "runs" / ".submitit" / name
    env = {**os.environ, **slurm.env}
    driver = subprocess.Popen([sys.executable, "-m", "ablate", "sweep", str(path), "--executor", "slurm"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 120
    while not (folder / "last.ckpt").exists() and time.monotonic() < deadline:  # an epoch has ended
        time.sleep(0.05)
    driver.kill()
    driver.wait()
    (job,) = subprocess.run(["squeue", "-h", "-r", "-o", "%i"], capture_output=True, text=True, env=env).stdout.split()
    return path, folder, logs, env, job


@needs_slurm
@pytest.mark.slow
def test_a_job_interrupted_after_its_driver_was_killed_requeues_itself_and_its_run_resumes(tmp_path, capsys, slurm):
    """The driver killed with SIGKILL while its job trains, then the job stopped by SIGTERM (as by preemption):
    nobody would submit the run again, so the job requeues itself in place (issue 42); the run resumes in the
    same job id, SLURM's restart count 1, and the same command run afterwards finds it finished."""
    path, folder, logs, env, job = orphaned(tmp_path, slurm, "orphan")
    subprocess.run(["scancel", "--signal=TERM", job], check=True, env=env)
    deadline, state = time.monotonic() + 60, ""
    while state != "PENDING" and time.monotonic() < deadline:  # requeued: back in the queue, same id
        state = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True,
                               env=env).stdout.strip()
        time.sleep(0.2)
    assert state == "PENDING", state
    # SLURM holds a requeued job for about two minutes (BeginTime, set once its step has ended: asked again
    # while it pends); the test lets it start sooner, but not within two seconds of the requeue: slurmd drops,
    # silently, a launch whose credential is dated no later than the second its last start was revoked in
    # (slurm_cred.c, `ctime <= revoked`), and the job would then sit RUNNING with nothing running
    allowed, deadline = time.monotonic() + 2, time.monotonic() + 180
    while (read_summary(folder) or {}).get("status") != "completed" and time.monotonic() < deadline:
        if time.monotonic() >= allowed and subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True,
                                                          text=True, env=env).stdout.strip() == "PENDING":
            subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], capture_output=True, env=env)
        time.sleep(1)
    log = "".join(p.read_text(errors="replace") for p in logs.glob("*_log.out"))
    summary = read_summary(folder)
    seen = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T %r %S"], capture_output=True, text=True, env=env)
    slurmd = [line for line in (slurm.folder / "slurmd.log").read_text(errors="replace").splitlines()
              if f"{job}" in line and "launch" in line.lower()]
    assert summary["status"] == "completed" and summary["attempts"] == 2, (seen.stdout, slurmd, log[-3000:])
    assert "requeued in place (1 of 2); its runs resume when SLURM starts it again" in log
    assert "from last.ckpt (step" in log
    code, out, err = sweep(capsys, str(path), "--executor", "slurm")
    assert code == 0 and "1 finished before, 0 to run" in err, err
    assert read_summary(folder)["attempts"] == 2


@needs_slurm
@pytest.mark.slow
def test_a_job_cancelled_after_its_driver_was_killed_is_not_requeued(tmp_path, slurm):
    """A plain scancel (the user's, or the driver's own on Ctrl-C, which marks the job CANCELLED before the
    SIGTERM arrives) is not undone: with no driver left the job does not requeue itself, and its run stays
    interrupted for the next command."""
    _, folder, logs, env, job = orphaned(tmp_path, slurm, "gone")
    subprocess.run(["scancel", job], check=True, env=env)
    deadline, listed = time.monotonic() + 60, job
    while listed and time.monotonic() < deadline:
        time.sleep(0.5)
        listed = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True,
                                env=env).stdout.strip()
    log = "".join(p.read_text(errors="replace") for p in logs.glob("*_log.out"))
    assert listed in ("", "CANCELLED", "COMPLETING"), listed
    assert "requeued in place" not in log, log[-2000:]
    assert read_summary(folder)["status"] == "interrupted"


@needs_slurm
def test_a_second_driver_of_the_same_sweep_is_refused_in_one_line(tmp_path, capsys, slurm):
    path = write(tmp_path, "twice", {"seed": {"values": [0]}})
    folder = tmp_path / "runs" / ".submitit" / "twice"
    folder.mkdir(parents=True)
    (folder / "driver.lock.pid").write_text("pid 1 on elsewhere\n")
    child = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'w'); "
                              "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
                              str(folder / "driver.lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        code, out, err = sweep(capsys, str(path), "--executor", "slurm")
    finally:
        child.kill()
        child.wait()
    assert code == 2 and err.strip().splitlines() == [
        "ablate: another command is driving sweep twice (pid 1 on elsewhere); let it finish, or stop it and run this "
        "again: its queued jobs are adopted, not submitted twice"]


@needs_slurm
@pytest.mark.slow
def test_tuned_sweep_on_slurm_runs_stage_2_at_the_chosen_value_only(tmp_path, capsys, slurm):
    path = write(tmp_path, "tuned", {"optim.lr": {"values": [0.0001, 0.0003, 0.001, 0.003]}, "seed": {"values": [0, 1]}},
                 description="tune optim.lr on seeds 0", metric={"name": "val/acc_best", "goal": "maximize"})
    code, out, err = sweep(capsys, str(path), "--executor", "slurm", "--chunk", "2")
    print(err)
    assert code == 0, err
    runs = summaries(tmp_path, "tuned")
    expanded = spec.load(str(path)).runs
    stage1 = {r.run_id for r in expanded if r.cfg.seed == 0}
    assert len(runs) == 5 and stage1 <= set(runs)  # stage 1: 4 rates on seed 0; stage 2: seed 1 at one
    assert len([line for line in err.splitlines() if "submitted" in line]) == 2, err  # stage 2 after stage 1
    chosen = float(next(line for line in err.splitlines() if "stage 2 of" in line).split("optim.lr=")[1].split()[0])
    assert set(runs) - stage1 == {r.run_id for r in expanded if r.cfg.seed == 1 and r.cfg.optim.lr == chosen}


@needs_slurm
@pytest.mark.slow
def test_a_job_stopped_by_sigterm_is_resubmitted_and_resumes_to_the_uninterrupted_numbers(tmp_path, slurm):
    """Two runs as two jobs of one array; the first job stopped by SIGTERM after an epoch: its run is submitted
    again while the other job still trains (a retry waits for its own job only, issue 42), resumes, and ends
    with the numbers of the same run trained in one go."""
    longer = {"data.n_train": {"value": 4096}, "trainer.max_epochs": {"values": [4, 10]}, "model.n_heads": {"value": 2},
              "seed": {"value": 0}}
    path = write(tmp_path, "pre", longer)
    env = {**os.environ, **slurm.env}
    driver = subprocess.Popen([sys.executable, "-m", "ablate", "sweep", str(path), "--executor", "slurm"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    run, other = spec.load(str(path)).runs  # 4 and 10 epochs: array tasks _0 and _1
    folder = tmp_path / "runs" / "pre" / run.run_id
    deadline = time.monotonic() + 120
    while not (folder / "last.ckpt").exists() and time.monotonic() < deadline:  # an epoch has ended
        time.sleep(0.05)
    jobs = subprocess.run(["squeue", "-h", "-r", "-o", "%i"], capture_output=True, text=True, env=env).stdout.split()
    assert (folder / "last.ckpt").exists() and len(jobs) == 2, (jobs, driver.poll())
    (folder / "hpc_ckpt_1.ckpt").write_bytes(b"not a checkpoint")  # Lightning would load it, ablate sets it aside
    first = min(jobs, key=lambda j: int(j.split("_")[1]))
    subprocess.run(["scancel", "--signal=TERM", first], check=True, env=env)
    said = []
    for line in driver.stderr:
        said.append(line)
        if "submitting them again" in line:
            break
    running = subprocess.run(["squeue", "-h", "-r", "-o", "%i"], capture_output=True, text=True, env=env).stdout.split()
    assert [j for j in jobs if j != first] == [j for j in running if j in jobs], (jobs, running)  # the other: still on
    out, err = driver.communicate(timeout=300)
    err = "".join(said) + err
    print(err)
    assert driver.returncode == 0, err
    assert "1 run(s) interrupted or killed before they finished; submitting them again" in err
    resumed = read_summary(folder)
    assert resumed["status"] == "completed" and resumed["attempts"] == 2
    assert read_summary(tmp_path / "runs" / "pre" / other.run_id)["attempts"] == 1
    log = "".join(p.read_text() for p in (tmp_path / "runs" / ".submitit" / "pre").glob("*_log.out"))
    assert "interrupted by SIGTERM" in log and "resuming" in log and "from last.ckpt (step" in log
    assert "hpc_ckpt_1.ckpt is Lightning's SLURM requeue checkpoint" in log
    assert not list(folder.glob("*hpc_ckpt_*")) and list(folder.glob("lightning-hpc-1.ckpt.corrupt-*"))

    from ablate import config as C
    from ablate.train import train

    reference = train(C.build({**C.flat(run.cfg), "run.dir": str(tmp_path / "uninterrupted")}), log=lambda _: None)
    print({k: (resumed["metrics"][k], reference["metrics"][k]) for k in ("val/loss", "val/acc", "test/acc")})
    assert resumed["global_step"] == reference["global_step"]
    for key in ("train/loss", "val/loss", "val/acc", "val/acc_best", "test/acc"):
        assert resumed["metrics"][key] == reference["metrics"][key], key


@needs_slurm
@pytest.mark.slow
def test_the_time_limit_warning_saves_the_partial_epoch_and_the_resume_is_exact(tmp_path, slurm):
    """SLURM's warning ahead of the time limit (SIGUSR2) in the middle of an epoch: the run saves its place at
    the next step and stops, recorded interrupted by SIGUSR2; submitted again it resumes from that step (not
    the epoch's start) and ends with the uninterrupted run's numbers."""
    longer = {"data.n_train": {"value": 32768}, "trainer.max_epochs": {"value": 1}, "model.n_heads": {"value": 2},
              "seed": {"value": 0}}
    path = write(tmp_path, "warn", longer)
    env = {**os.environ, **slurm.env}
    driver = subprocess.Popen([sys.executable, "-m", "ablate", "sweep", str(path), "--executor", "slurm"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    (run,) = spec.load(str(path)).runs
    folder, logs = tmp_path / "runs" / "warn" / run.run_id, tmp_path / "runs" / ".submitit" / "warn"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and "ablate: training" not in "".join(
            p.read_text(errors="replace") for p in logs.glob("*_log.out")):
        time.sleep(0.05)
    time.sleep(0.5)  # inside the first epoch (1,024 steps of a few ms)
    jobs = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, env=env).stdout.split()
    assert len(jobs) == 1, (jobs, driver.poll())
    subprocess.run(["scancel", "--signal=USR2", jobs[0]], check=True, env=env)
    out, err = driver.communicate(timeout=300)
    assert driver.returncode == 0, err
    log = "".join(p.read_text() for p in logs.glob("*_log.out"))
    assert "interrupted by SIGUSR2" in log, log[-3000:]
    step = int(log.split("from last.ckpt (step ")[1].split(")")[0])
    assert 0 < step < 1024, step  # the place inside the first epoch, not its start
    resumed = read_summary(folder)
    assert resumed["status"] == "completed" and resumed["attempts"] == 2

    from ablate import config as C
    from ablate.train import train

    reference = train(C.build({**C.flat(run.cfg), "run.dir": str(tmp_path / "uninterrupted")}), log=lambda _: None)
    assert resumed["global_step"] == reference["global_step"]
    for key in ("train/loss", "val/loss", "val/acc", "val/acc_best", "test/acc"):
        assert resumed["metrics"][key] == reference["metrics"][key], key


@pytest.mark.parametrize("value, seconds", [(None, 5.0), ("1", 1.0), ("2.5", 2.5), ("0", 1.0), ("600", 60.0),
                                            ("soon", 5.0), ("nan", 5.0)])
def test_the_longest_wait_between_looks_at_the_queue_is_5_s_or_what_the_variable_says(monkeypatch, value, seconds):
    from ablate.sweep.executor import POLL_ENV, max_poll_s

    monkeypatch.delenv(POLL_ENV, raising=False)
    if value is not None:
        monkeypatch.setenv(POLL_ENV, value)
    assert max_poll_s() == seconds


def test_the_warning_comes_90_s_before_the_limit_or_a_quarter_of_a_short_job():
    from ablate.sweep.executor import warning_s

    assert [warning_s(m) for m in (60, 6, 2, 1)] == [90, 90, 30, 15]


DDP = ["data.task=copy", "data.vocab=6", "data.length=4", "data.n_train=256", "data.n_val=64", "data.n_test=64",
       "data.batch_size=32", "model.d_model=16", "model.n_heads=2", "trainer.max_epochs=2", "tracking=none",
       "run.probes=false", "trainer.accelerator=cpu", "trainer.devices=2", "trainer.strategy=ddp", "trainer.threads=1"]


@needs_slurm
@pytest.mark.slow
def test_srun_ddp_on_two_tasks_completes_and_matches_torchrun(tmp_path, slurm):
    env = {**os.environ, **slurm.env}
    ablate = [sys.executable, "-m", "ablate", "train"]
    srun = subprocess.run(["srun", "-n2", "--ntasks-per-node=2", *ablate, *DDP, f"run.dir={tmp_path / 'srun'}"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert srun.returncode == 0, srun.stderr[-2000:]
    assert srun.stdout.count('"status": "completed"') == 1  # rank 1 prints nothing
    assert "srun` command is available" not in srun.stderr
    torchrun = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                               "-m", "ablate", "train", *DDP, f"run.dir={tmp_path / 'torchrun'}"],
                              capture_output=True, text=True, env={**os.environ}, timeout=300)
    assert torchrun.returncode == 0, torchrun.stderr[-2000:]
    a, b = read_summary(tmp_path / "srun"), read_summary(tmp_path / "torchrun")
    assert a["status"] == b["status"] == "completed" and a["global_step"] == b["global_step"] == 2 * 4
    for key in ("val/loss", "val/acc", "test/acc"):
        assert a["metrics"][key] == b["metrics"][key], key


@needs_slurm
@pytest.mark.slow
def test_ddp_runs_side_by_side_inside_one_allocation_each_get_their_own_port(tmp_path, slurm):
    """`ablate sweep` of 2-rank DDP runs, --workers 2, inside `sbatch -n1`: Lightning's launcher starts each run's
    ranks on a free port of its own. SLURM's environment (its port derived from the job id, the same for every
    run of the job) is for srun's tasks only; with it the second run died of EADDRINUSE (issue 42)."""
    sweep_file = tmp_path / "pair.yaml"
    params = {k: {"value": v} for k, v in (item.split("=", 1) for item in DDP)}
    params["seed"] = {"values": [0, 1]}
    params["trainer.max_epochs"] = {"value": 1}
    sweep_file.write_text(yaml.safe_dump({**HEADER, "parameters": params}, sort_keys=False))
    log = tmp_path / "job.log"
    script = (f"cd {tmp_path} && ABLATE_RUNS_DIR={tmp_path / 'runs'} {sys.executable} -m ablate sweep {sweep_file} "
              "--workers 2 --threads 1")
    env = {**os.environ, **slurm.env}
    job = subprocess.run(["sbatch", "--parsable", "-n1", "-c4", "-o", str(log), "--wrap", script], capture_output=True,
                         text=True, env=env, check=True).stdout.strip().split(";")[0]
    deadline = time.monotonic() + 420
    while time.monotonic() < deadline:
        if not subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True, env=env).stdout.strip():
            break
        time.sleep(2)
    said = log.read_text(errors="replace") if log.exists() else ""
    runs = summaries(tmp_path, "pair")
    assert len(runs) == 2 and all(s["status"] == "completed" for s in runs.values()), said[-3000:]
    assert "EADDRINUSE" not in said and "address already in use" not in said.lower()
