"""Memory limits the size checks honour: a process's address-space limit (ulimit -v) and its cgroup's memory
limit (v2 memory.max, v1 memory.limit_in_bytes), not only the machine's MemAvailable (issue 23, item 9); and a
crafted checkpoint whose config would build a model far larger than its weights is refused before any model is
built (item 4)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ablate import limits

ROOT = Path(__file__).resolve().parents[1]
KB, GB = 1024, 10**9


def _proc(tmp_path: Path, *, available_kb: int = 16_000_000, vm_kb: int = 1_000_000, cgroup: str = "0::/\n") -> dict:
    """Fake /proc/meminfo, /proc/self/status and /proc/self/cgroup, and an empty cgroup mount, under tmp_path."""
    (tmp_path / "meminfo").write_text(f"MemTotal:       32000000 kB\nMemFree:         1000000 kB\n"
                                      f"MemAvailable:   {available_kb} kB\n")
    (tmp_path / "status").write_text(f"Name:\tpython\nVmPeak:\t {vm_kb + 5} kB\nVmSize:\t {vm_kb} kB\n")
    (tmp_path / "cgroup").write_text(cgroup)
    (tmp_path / "sys").mkdir(exist_ok=True)
    return {"meminfo": tmp_path / "meminfo", "status": tmp_path / "status", "cgroup": tmp_path / "cgroup",
            "cgroup_root": tmp_path / "sys", "address_limit": None}


def _files(folder: Path, **files: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name.replace("__", ".")).write_text(text)


def test_without_limits_the_machines_available_memory(tmp_path):
    limit = limits.host_limit(**_proc(tmp_path, available_kb=16_000_000))
    assert limit.available == 16_000_000 * KB and limit.where == "this machine has available"
    assert not limit.raisable


def test_address_space_limit_minus_what_the_process_has_mapped(tmp_path):
    paths = {**_proc(tmp_path, available_kb=16_000_000, vm_kb=1_500_000), "address_limit": 4_000_000 * KB}
    limit = limits.host_limit(**paths)
    assert limit.available == (4_000_000 - 1_500_000) * KB
    assert "ulimit -v 4000000" in limit.where and limit.raisable
    # an unlimited address space (RLIM_INFINITY) is no limit
    assert limits.host_limit(**{**paths, "address_limit": -1}).available == 16_000_000 * KB
    # mapped beyond the limit already: nothing is left
    assert limits.host_limit(**{**paths, "address_limit": 1_000_000 * KB}).available == 0


def test_cgroup_v2_memory_max_minus_current_less_reclaimable_cache(tmp_path):
    paths = _proc(tmp_path, available_kb=16_000_000, cgroup="0::/user.slice/job-7\n")
    job = paths["cgroup_root"] / "user.slice" / "job-7"
    _files(job, memory__max=f"{4 * GB}\n", memory__current=f"{3 * GB}\n",
           memory__stat=f"anon 2000000000\nfile 1000000000\ninactive_file {GB // 2}\n")
    _files(job.parent, memory__max="max\n", memory__current=f"{5 * GB}\n")  # the parent: no limit
    limit = limits.host_limit(**paths)
    assert limit.available == 4 * GB - (3 * GB - GB // 2)
    assert f"memory.max of {job}" in limit.where and limit.raisable
    # a tighter parent counts instead
    _files(job.parent, memory__max=f"{6 * GB}\n", memory__current=f"{5_500_000_000}\n")
    limit = limits.host_limit(**paths)
    assert limit.available == 500_000_000 and str(job.parent) in limit.where


def test_cgroup_v1_limit_in_bytes_minus_usage(tmp_path):
    v1 = "4:memory:/process_api/abc\n3:cpu:/\n0::/\n"
    paths = _proc(tmp_path, available_kb=16_000_000, cgroup=v1)
    group = paths["cgroup_root"] / "memory" / "process_api" / "abc"
    _files(group, memory__limit_in_bytes=f"{2 * GB}\n", memory__usage_in_bytes=f"{GB}\n",
           memory__stat=f"cache 300000000\ntotal_inactive_file {GB // 4}\n")
    _files(group.parent, memory__limit_in_bytes="9223372036854771712\n", memory__usage_in_bytes=f"{GB}\n")  # no limit
    limit = limits.host_limit(**paths)
    assert limit.available == 2 * GB - (GB - GB // 4)
    assert f"memory.limit_in_bytes of {group}" in limit.where
    # the smallest of the three wins: here MemAvailable
    assert limits.host_limit(**_proc(tmp_path, available_kb=500_000, cgroup=v1)).available == 500_000 * KB


def test_check_fits_names_the_limit_that_binds(tmp_path):
    from ablate import config as C

    cfg = C.build({"data.task": "copy", "data.n_train": 8_000_000, "tracking": "none"}, machine=False)
    paths = {**_proc(tmp_path, available_kb=64_000_000, vm_kb=2_000_000), "address_limit": 4_000_000 * KB}
    problem = limits.check_fits(cfg, "data.n_train=8000000", limit=limits.host_limit(**paths))
    assert problem.startswith("the run needs about 3.43 GB of memory")
    assert "over the 2.05 GB this process may still map under its address-space limit (ulimit -v 4000000)" in problem
    assert problem.endswith("; make it smaller, or raise the limit")
    assert "\n" not in problem


def _vm_size_after_import() -> int:
    """Bytes the CLI's process has mapped once torch and Lightning are imported (what a limit must leave room for)."""
    code = ("import ablate.cli, torch, pytorch_lightning; print(next(int(l.split()[1]) for l in "
            "open('/proc/self/status') if l.startswith('VmSize:')))")
    return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              cwd=ROOT).stdout) * KB


def _limited(limit: int):
    def preexec():
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return preexec


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads /proc (Linux)")
@pytest.mark.slow
def test_train_under_ulimit_v_exits_2_with_one_line(tmp_path):
    """`ulimit -v` leaving ~1.5 GB, a copy task of 8 M sequences (3.4 GB): exit 2, one line naming the limit,
    before the run directory is written."""
    limit = _vm_size_after_import() + 1_500_000_000
    run_dir = tmp_path / "run"
    env = {**os.environ, "WANDB_MODE": "disabled", "ABLATE_RUNS_DIR": str(tmp_path / "runs")}
    done = subprocess.run([sys.executable, "-m", "ablate.cli", "train", "data.task=copy", "data.n_train=8000000",
                           "tracking=none", f"run.dir={run_dir}"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300, preexec_fn=_limited(limit))
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-3000:]
    assert "data.n_train=8000000" in lines[0] and f"ulimit -v {limit // KB}" in lines[0]
    assert "raise the limit" in lines[0]
    assert not run_dir.exists()


# ---- item 4: a crafted checkpoint, tiny weights and a huge config ----

def _crafted(tmp_path: Path, overrides: dict, name: str = "crafted") -> Path:
    """A last.ckpt as `ablate train` writes one, but with a few small tensors for weights and `overrides` in its
    config: what a user may be handed."""
    import torch

    from ablate import config as C

    cfg = C.build({"tracking": "none", **overrides}, machine=False)
    run = tmp_path / name
    run.mkdir()
    state = {"model.embed.proj.weight": torch.zeros(4, 28), "model.head.weight": torch.zeros(10, 4),
             "model.head.bias": torch.zeros(10)}
    torch.save({"state_dict": state, "global_step": 3, "pytorch-lightning_version": "2.6.6",
                "hyper_parameters": {"config": C.to_dict(cfg), "in_features": 28, "n_classes": 10}}, run / "last.ckpt")
    return run


HUGE = {"model.d_model": 65536, "model.n_layers": 64}


def _cli_limited(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """`ablate ARGS` with an address-space limit 2 GB above what its imports map: a 51 GB allocation cannot
    happen, a traceback would say MemoryError."""
    env = {**os.environ, "WANDB_MODE": "disabled", "ABLATE_DATA_DIR": str(tmp_path / "no-data")}
    return subprocess.run([sys.executable, "-m", "ablate.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300, preexec_fn=_limited(_vm_size_after_import() + 2 * GB))


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads /proc (Linux)")
@pytest.mark.slow
def test_explore_json_refuses_a_huge_config_before_building(tmp_path):
    run = _crafted(tmp_path, HUGE)
    done = _cli_limited(tmp_path, "explore", str(run), "--json", str(tmp_path / "out.json"))
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-3000:]
    assert "model.d_model=65536, model.n_layers=64" in lines[0] and "2,199,073,783,818 parameters" in lines[0]
    assert not (tmp_path / "out.json").exists()


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads /proc (Linux)")
@pytest.mark.slow
def test_probe_refuses_a_huge_config_before_building(tmp_path):
    run = _crafted(tmp_path, HUGE)
    done = _cli_limited(tmp_path, "probe", str(run))
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-3000:]
    assert "model.d_model=65536, model.n_layers=64" in lines[0] and "2,199,073,783,818 parameters" in lines[0]


def test_explore_checks_the_fit_on_the_meta_device(tmp_path, monkeypatch):
    """A config whose model fits memory (400 M parameters, 1.6 GB) but not the checkpoint's few small weights:
    refused, naming the tensor, with no more than a few MB allocated (its shapes come from a meta-device build)."""
    import resource

    from ablate.explore import ExploreError, export_model

    run = _crafted(tmp_path, {"model.d_model": 2048, "model.n_layers": 8})
    monkeypatch.setattr(limits, "host_limit", lambda **_: limits.HostLimit(10**15, "this machine has available"))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * KB
    with pytest.raises(ExploreError, match=r"does not fit the model its config builds \(it lacks "):
        export_model(run)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * KB - before < 200_000_000


def test_explore_counts_the_checkpoints_own_sizes(tmp_path, monkeypatch):
    """The model is built with the sizes saved beside the config: a crafted in_features=10**9 (a 256 GB
    embedding under the tutorial's config) is what the size check counts."""
    import torch

    from ablate.explore import ExploreError, export_model

    run = _crafted(tmp_path, {})
    ckpt = torch.load(run / "last.ckpt", weights_only=True)
    ckpt["hyper_parameters"]["in_features"] = 10**9
    torch.save(ckpt, run / "last.ckpt")
    monkeypatch.setattr(limits, "host_limit", lambda **_: limits.HostLimit(8 * GB, "this machine has available"))
    with pytest.raises(ExploreError, match=r"its config builds a model of about 256 GB \(64,000,[0-9,]+ parameters; "
                                           r"the default sizes\), over the 8 GB this machine has available"):
        export_model(run)


def test_checkpoint_problem_in_numbers(tmp_path):
    from ablate import config as C

    cfg = C.build({"tracking": "none", **HUGE}, machine=False)
    small = limits.HostLimit(8 * GB, "this machine has available")
    problem = limits.checkpoint_problem(cfg, {"in_features": 28, "n_classes": 10}, "model.d_model=65536", small)
    assert problem == ("its config builds a model of about 8,796 GB (2,199,073,783,818 parameters; "
                       "model.d_model=65536), over the 8 GB this machine has available")
    tutorial = C.build({"tracking": "none"}, machine=False)
    assert limits.checkpoint_problem(tutorial, {"in_features": 28, "n_classes": 10}, "", small) is None


@pytest.mark.parametrize("n_classes", [float("inf"), 0, -3])
def test_probe_refuses_sizes_that_are_not_positive_integers_in_one_line(tmp_path, capsys, n_classes):
    """A crafted size of inf raised OverflowError (a traceback); 0 or below passed the size check and failed
    inside torch: each is now one line, exit 2."""
    import torch

    from ablate import cli

    run = _crafted(tmp_path, {})
    saved = torch.load(run / "last.ckpt", weights_only=True)
    saved["hyper_parameters"]["n_classes"] = n_classes
    torch.save(saved, run / "last.ckpt")
    assert cli.main(["probe", str(run)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "holds a config this version cannot build" in line


def test_cpu_ranks_are_bounded_by_the_cores_and_counted_in_the_memory(monkeypatch):
    """trainer.devices on the CPU was bounded by neither: 10 ranks ran on 2 cores, and 4 ranks used 4.4 GB
    against a 162 MB estimate (issue 41, item 12). Now more ranks than cores is refused, and each rank's
    process and copy of the data count in the memory check."""
    from ablate import config as C

    monkeypatch.setattr(limits, "cores", lambda: 2)
    cpu = {"trainer.accelerator": "cpu", "trainer.strategy": "ddp", "data.task": "copy"}
    with pytest.raises(C.ConfigError, match=r"trainer.devices=3 on the CPU starts 3 processes on the 2 core\(s\) "
                                            r"this process may use; use trainer.devices=2 or fewer"):
        C.build({**cpu, "trainer.devices": "3"})
    one = limits.estimate(C.build({**cpu, "trainer.devices": "1"}))
    need_one = one.data_bytes + one.device_bytes
    monkeypatch.setattr(limits, "host_limit", lambda **_: limits.HostLimit(
        need_one + limits.RANK_PROCESS_BYTES, "this machine has available"))
    C.build({**cpu, "trainer.devices": "1"})  # one rank fits
    with pytest.raises(C.ConfigError, match=r"the run needs about .* \(2 processes, each data .* and about 1.1 GB "
                                            r"of Python, torch and Lightning"):
        C.build({**cpu, "trainer.devices": "2"})
    assert C.build({**cpu, "trainer.devices": "2", "trainer.num_nodes": 2}).trainer.devices == "2"  # srun's ranks
