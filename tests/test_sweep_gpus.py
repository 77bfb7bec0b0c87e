"""Several runs per GPU (`ablate sweep --runs-per-gpu N [--gpus-per-run K]`): the assignment of GPUs
to worker slots and the default N, tested on CPU with the devices given to the functions."""

from __future__ import annotations

from collections import Counter

import pytest

from ablate.sweep import gpus as G
from ablate.sweep import runner
from ablate.sweep.spec import SweepError

GB = 10**9


def test_each_gpu_gets_n_runs_spread_round_robin():
    assert G.assign(["0", "1"], 3) == ["0", "1", "0", "1", "0", "1"]
    assert G.assign(["0"], 4) == ["0"] * 4
    slots = G.assign([str(i) for i in range(8)], 16)
    assert len(slots) == 128 and Counter(slots) == {str(i): 16 for i in range(8)}
    assert slots[:8] == [str(i) for i in range(8)]  # the first 8 runs use 8 different GPUs
    assert G.assign(["3", "5", "7"], 1) == ["3", "5", "7"]  # one run per GPU: as before


def test_multi_gpu_runs_get_disjoint_groups_shared_only_by_runs_of_the_same_group():
    slots = G.assign(["0", "1", "2", "3", "4", "5", "6", "7"], 2, gpus_per_run=4)
    assert slots == ["0,1,2,3", "4,5,6,7", "0,1,2,3", "4,5,6,7"]
    for a in set(slots):
        for b in set(slots) - {a}:
            assert not set(a.split(",")) & set(b.split(","))  # two groups never share a GPU
    assert G.assign(["0", "1", "2"], 2, gpus_per_run=2) == ["0,1", "0,1"]  # the odd GPU stays idle
    assert G.assign(["GPU-a", "GPU-b"], 2, gpus_per_run=2) == ["GPU-a,GPU-b"] * 2  # UUIDs work too


@pytest.mark.parametrize("n", [0, -1, True, 1.5])
def test_bad_runs_per_gpu_is_refused_with_one_line(n):
    with pytest.raises(SweepError, match=r"--runs-per-gpu=.* expected an integer >= 1"):
        G.assign(["0"], n)


def test_more_gpus_per_run_than_visible_is_refused():
    with pytest.raises(SweepError, match="only 2 GPUs"):
        G.assign(["0", "1"], 4, gpus_per_run=4)


def test_the_plan_packs_n_runs_per_gpu_and_workers_may_ask_for_fewer():
    assert runner.plan(None, 1, None, ["0", "1"], runs_per_gpu=4) == runner.Plan(8, G.assign(["0", "1"], 4))
    assert runner.plan(3, 1, None, ["0", "1"], runs_per_gpu=4) == runner.Plan(3, ["0", "1", "0"])
    with pytest.raises(SweepError, match="--workers 8 or fewer"):
        runner.plan(9, 1, None, ["0", "1"], runs_per_gpu=4)
    cpu = runner.plan(None, 1, None, [], runs_per_gpu=8)  # ignored without GPUs: one run per core
    assert cpu.workers == runner.cpu_count() and cpu.slots == [None] * cpu.workers
    # the cores are shared out between every run of every GPU
    assert runner.default_threads(None, ["0"], None, runs_per_gpu=1) == runner.cpu_count()
    assert runner.default_threads(None, ["0"], None, runs_per_gpu=runner.cpu_count()) == 1
    assert G.describe(G.assign(["0", "1"], 4)) == "0 x4 | 1 x4" and G.describe(["0", "1"]) == "0 | 1"


def test_default_is_what_fits_in_free_memory_bounded_by_cores_and_16():
    ctx = G.CONTEXT_BYTES
    # a tutorial-size run (~0.1 GB) on a 140 GB GPU with 16 cores: the cores bound it
    choice = G.default_runs_per_gpu(10**8, 140 * GB, cores=16, n_groups=1)
    assert choice.runs_per_gpu == 16 and "16 cores" in choice.why and "140.0 GB free" in choice.why
    assert G.default_runs_per_gpu(10**8, 140 * GB, cores=64, n_groups=1).runs_per_gpu == G.MAX_DEFAULT
    assert G.default_runs_per_gpu(10**8, 140 * GB, cores=16, n_groups=8).runs_per_gpu == 2  # 16 cores / 8 GPUs
    # memory bounds it: 0.8 x 10 GB free, 2 GB a run plus its context
    need = 2 * GB
    expected = int(0.8 * 10 * GB // (need + ctx))
    assert G.default_runs_per_gpu(need, 10 * GB, cores=64, n_groups=1).runs_per_gpu == expected == 3
    assert G.default_runs_per_gpu(50 * GB, 10 * GB, cores=64, n_groups=1).runs_per_gpu == 1  # never 0
    # DDP runs of 4 ranks with 2 threads each: 64 cores / (2 groups x 4 x 2) = 4
    assert G.default_runs_per_gpu(10**8, 80 * GB, cores=64, n_groups=2, processes_per_run=4,
                                  threads=2).runs_per_gpu == 4
    unknown = G.default_runs_per_gpu(10**8, None, cores=16, n_groups=1)
    assert unknown.runs_per_gpu == 1 and "--runs-per-gpu N" in unknown.why


def test_a_given_n_that_cannot_fit_is_refused_naming_the_most_that_fits():
    G.check_fits(4, 2 * GB, 20 * GB)
    G.check_fits(100, GB, None)  # free memory unknown: the user's choice stands
    per_run = 2 * GB + G.CONTEXT_BYTES
    with pytest.raises(SweepError, match=f"use --runs-per-gpu {10 * GB // per_run} or fewer"):
        G.check_fits(8, 2 * GB, 10 * GB)


def test_free_memory_is_read_for_the_visible_gpus_from_nvidia_smis_table():
    table = "0, GPU-aaa, 81000\n1, GPU-bbb, 1000\n2, GPU-ccc, 40000\n"
    assert G.parse_free(table, ["0", "2"]) == 40000 * 2**20  # the fullest visible one
    assert G.parse_free(table, ["GPU-aaa"]) == 81000 * 2**20
    assert G.parse_free(table, ["7"]) == 1000 * 2**20  # not matched: the fullest of all
    assert G.parse_free(table, ["MIG-xyz"]) is None  # a slice: the table's row is its whole GPU
    assert G.parse_free("", ["0"]) is None and G.parse_free("garbage\n", ["0"]) is None


# -- ablate bench gpus ----------------------------------------------------------------------------

def test_bench_gpus_without_cuda_exits_2_with_one_line(capsys, monkeypatch):
    import argparse

    import torch

    from ablate.bench import packing

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # also true on a GPU machine
    args = argparse.Namespace(steps=5, repeats=1, warmup=1, batch_size=8, threads=1)
    assert packing.run(args) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("ablate: bench gpus needs a CUDA GPU")
    assert captured.err.count("\n") == 1


def test_packed_runs_are_separate_processes_timed_together_and_aggregated():
    from ablate.bench import packing

    # the machinery on the CPU: 2 processes, each trains the tutorial's model for 3 timed steps
    result, reports = packing.measure_once(2, steps=3, warmup=1, batch_size=4, device="cpu")
    assert not result.error and len(reports) == 2 and all(r["steps"] == 3 for r in reports)
    # the aggregate: every run's steps over the span from the first start to the last end (whether the two
    # windows overlap is up to the scheduler on a busy 2-core machine: not asserted)
    span = max(r["end"] for r in reports) - min(r["start"] for r in reports)
    assert result.steps_per_s == pytest.approx(6 / span)
    # the arithmetic on known windows: 4 runs of 100 steps over 2 s in all, each 1 s long
    fake = [{"start": 10.0 + i / 3, "end": 11.0 + i / 3, "steps": 100, "memory_mb": 50.0 + i} for i in range(4)]
    assert packing.aggregate(4, fake) == packing.Result(4, 200.0, pytest.approx(100.0), 53.0)
    lines = packing.table([packing.Result(1, 100.0, 100.0, 40.0), packing.aggregate(4, fake),
                           packing.Result(16, 0.0, 0.0, 0.0, error="CUDA out of memory")])
    assert lines[1].split()[:4] == ["1", "100", "100", "1.00"] and lines[2].split()[:4] == ["4", "200", "100", "2.00"]
    assert lines[3] == "16              failed: CUDA out of memory"


def test_packed_runs_not_ready_in_time_are_ended_and_reported(monkeypatch):
    """A run stuck before its warm-up ends (a CUDA context that never comes) must not hang the benchmark:
    past READY_TIMEOUT_S every run of that count is ended and the count reports the error."""
    from ablate.bench import packing

    monkeypatch.setattr(packing, "READY_TIMEOUT_S", 0.05)  # importing torch alone takes longer
    result, reports = packing.measure_once(2, steps=3, warmup=1, batch_size=4, device="cpu")
    assert reports == [] and result.steps_per_s == 0.0
    assert result.error == "2 of 2 runs not ready within 0.05 s (or ended before)"
