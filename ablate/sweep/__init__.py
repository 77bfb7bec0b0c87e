"""`ablate sweep FILE`: a W&B sweep file, run here, each configuration once, W at a time.

    spec.py      read, check and expand the file (grid, random) into runs; bad input -> SweepError
    runner.py    run them: forkserver workers, GPU slots, skip/resume/retry, outcome of each run
    gpus.py      which GPUs each worker gets: several runs per GPU, disjoint GPU groups per run
    names.py     each run's W&B display name from its swept values (`qk_scale=False lr=3e-4 s1`)
    wandb_sweep.py  --wandb-sweep: the file registered with W&B, its id on every run
    sync.py      `ablate sync NAME`: every offline W&B run of a sweep uploaded in one command
    worker.py    one run in its own process (dies with the runner)
    progress.py  the sweep's progress line
    tune.py      fair tuning: a `tune KEY on seeds ...` description line, stage 1 / stage 2, the choice rule
    executor.py  --executor slurm|local: the runs as submitit jobs (SLURM job arrays), each exactly once

The package knows configurations, run directories and processes; nothing of model internals.
"""

from __future__ import annotations

import argparse
import sys

from ..budgets import NAMES as BUDGETS
from ..cliparse import OneLineParser
from .executor import EXECUTORS, FLAGS, options_of


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="ablate sweep", allow_abbrev=False, description="Run every configuration of a W&B sweep file here, "
                "each once, in parallel; the same command again finishes what is missing.")
    p.add_argument("file", help="a sweep .yaml file, or NAME for sweeps/NAME.yaml")
    p.add_argument("--budget", choices=BUDGETS, metavar="B",
                   help=f"{'|'.join(BUDGETS)} for every run (overrides the file's; smoke also keeps seed 0 only)")
    p.add_argument("--workers", type=int, metavar="W", help="runs at once (default: one per core / per --threads "
                   "cores; with GPUs, one per group of --gpus-per-run GPUs)")
    p.add_argument("--threads", type=int, metavar="T", help="torch threads per run (default 1, or the cores shared "
                   "out between --workers)")
    p.add_argument("--gpus-per-run", type=int, metavar="K", help="GPUs per run, disjoint between concurrent runs "
                   "(default 1; ignored without GPUs)")
    p.add_argument("--runs-per-gpu", type=int, metavar="N", help="runs at once on each GPU (group), each its own "
                   "process (default: what fits in the free GPU memory, at most one per core and 16; stated "
                   "when the sweep starts; ignored without GPUs). With --executor: on each of a job's "
                   "--gpus-per-job GPUs (default 1)")
    p.add_argument("--wandb-sweep", action="store_true", help="register the file as a W&B sweep (online) and tag "
                   "every run with its id, so synced runs appear on W&B's sweep page; the id is kept for the "
                   "next call")
    p.add_argument("--tracking", choices=["wandb", "none"], help="override the file's tracking (default: W&B, offline without an account)")
    p.add_argument("--max-runs", type=int, metavar="N", help="run at most N of the missing runs this time")
    p.add_argument("--sweep-seed", type=int, metavar="S", default=0, help="sampling seed of method random (default 0)")
    p.add_argument("--dry-run", action="store_true", help="print the expanded runs and their ids (with --executor "
                   "slurm: the sbatch parameters); run nothing")
    p.add_argument("--retrain-stale", action="store_true", help="train again, from scratch and as new attempts (new "
                   "W&B runs in the same group), the completed or diverged runs that other code made (another commit "
                   "whose package differs); their earlier files are kept in <run folder>/attempts/<n>/. Without it "
                   "they are kept and counted")
    jobs = p.add_argument_group("jobs (--executor slurm|local, through submitit: pip install '.[slurm]' in ablate's checkout)")
    jobs.add_argument("--executor", choices=EXECUTORS, default="here", help="here: this process's workers (default); "
                      "slurm: a SLURM job array per stage; local: the same jobs as processes here")
    jobs.add_argument("--partition", metavar="P", help="SLURM partition (default: the cluster's)")
    jobs.add_argument("--time", type=int, metavar="MIN", help=f"time limit of a job in minutes (default {FLAGS['time']})")
    jobs.add_argument("--cpus-per-job", type=int, metavar="C", help=f"CPUs of a job, also its runs' threads (default {FLAGS['cpus_per_job']})")
    jobs.add_argument("--gpus-per-job", type=int, metavar="G", help=f"GPUs of a job (default {FLAGS['gpus_per_job']})")
    jobs.add_argument("--chunk", type=int, metavar="N", help=f"runs per job, trained one after the other (default {FLAGS['chunk']}; "
                      "each job pays ~6 s of imports: raise it for short runs); a job of GPUs trains "
                      "--gpus-per-job x --runs-per-gpu of them at once (the default chunk then)")
    jobs.add_argument("--max-jobs", type=int, metavar="J", help="jobs at once (the array's %%J; default: the "
                      "scheduler's choice, local: one per core)")
    jobs.add_argument("--retries", type=int, metavar="R", help="submissions again of a run whose job was preempted, "
                      f"timed out or killed (default {FLAGS['retries']})")
    jobs.add_argument("--account", metavar="A", help="SLURM account to charge (sbatch --account)")
    jobs.add_argument("--qos", metavar="Q", help="SLURM quality of service (sbatch --qos)")
    jobs.add_argument("--mem", metavar="M", help="host memory of a job, as sbatch writes it (8G, 16000M; default: the "
                      "partition's): a run of the tutorial's models peaks at about 1.3 GB, times the runs a job "
                      "trains at once")
    jobs.add_argument("--constraint", metavar="F", help="node features a job needs (sbatch --constraint)")
    return p


def main(argv: list[str]) -> int:
    """The `ablate sweep` command; returns its exit status (0 every run completed or diverged, 1 a run
    failed or was stopped, or the runs folder cannot be written, 2 bad input, 130/143 interrupted)."""
    try:
        args = parser().parse_args(argv)
    except SystemExit as stop:  # --help (0) or a bad option (2, one line)
        return int(stop.code or 0)
    from . import worker

    given = [f"--{k.replace('_', '-')}" for k in FLAGS if getattr(args, k) is not None]
    if args.executor == "here" and given:
        print(f"ablate: {' '.join(given)}: only with --executor slurm or local; add --executor slurm (or drop "
              "them)", file=sys.stderr)
        return 2
    ours = args.executor == "here" and not args.dry_run and not worker.forkserver_running()
    if ours:  # ~7 s of imports in the server, while this process imports torch and checks the file
        worker.forkserver()
    try:
        return _run(args, sys.stdout, sys.stderr)
    finally:
        if ours:  # done with it: no imports left running behind a bad input, no slow exit after a sweep
            worker.stop_forkserver()


def _run(args: argparse.Namespace, out, err) -> int:
    from .. import config as C
    from . import runner
    from .spec import SweepError, load

    try:
        if args.threads is not None and args.threads < 1:
            raise SweepError(f"--threads={args.threads} is not allowed; expected an integer >= 1")
        if args.runs_per_gpu is not None and args.runs_per_gpu < 1:
            raise SweepError(f"--runs-per-gpu={args.runs_per_gpu} is not allowed; expected an integer >= 1")
        gpus = runner.visible_gpus() if args.executor == "here" else []  # a job's own GPUs are the job's to count
        if gpus and (why := runner.gpus_unusable()):
            print(f"note: CUDA_VISIBLE_DEVICES lists {len(gpus)} GPU(s), but {why}: the runs train on the CPU, "
                  "shared out as if per GPU", file=err)
        per_gpu = args.runs_per_gpu or 1

        def expand():
            if args.executor != "here":  # a job's CPUs shared out between the runs it trains at once
                default = options_of(args).threads
            else:
                default = runner.default_threads(args.workers, gpus, args.gpus_per_run, per_gpu)
            return load(args.file, budget=args.budget, tracking=args.tracking, threads=args.threads,
                        seed=args.sweep_seed, default_threads=default)

        sweep = expand()
        if not args.dry_run and any(r.cfg.tracking == "wandb" for r in sweep.runs):
            from ..tracking import online_problem

            if problem := online_problem():
                raise SweepError(problem)
        for note in sweep.notes:
            print(f"note: {note}", file=err)
        if args.wandb_sweep:
            from . import wandb_sweep

            wandb_sweep.check(sweep)
        if args.executor != "here":
            return _jobs(args, sweep, out, err)
        if args.dry_run:
            return runner.dry_run(sweep, out, retrain_stale=args.retrain_stale)
        if not gpus and args.runs_per_gpu is not None:
            print(f"note: --runs-per-gpu {args.runs_per_gpu} is ignored: no GPU is visible (runs share the CPU "
                  "cores)", file=err)
        if gpus:
            per_gpu = _runs_per_gpu(args, gpus, sweep, err)
            if per_gpu != 1 and args.threads is None:  # the cores shared out between more runs
                sweep = expand()
        threads = max(r.cfg.trainer.threads or 1 for r in sweep.runs)
        run = runner.Runner(sweep, workers=args.workers, threads=threads, gpus_per_run=args.gpus_per_run,
                            max_runs=args.max_runs, stream=err, gpus=gpus, runs_per_gpu=per_gpu,
                            retrain_stale=args.retrain_stale)
        runner.check_data([r for r in sweep.runs if args.retrain_stale or not runner.finished(r)])
        if args.wandb_sweep:  # registered only once every other input is known good
            from .. import tracking
            from . import wandb_sweep

            sweep_id = wandb_sweep.register(sweep, tracking.wandb_mode(), err)
            if sweep_id:
                sweep = run.sweep = wandb_sweep.attach(sweep, sweep_id)
    except (SweepError, C.ConfigError) as error:
        print(f"ablate: {error}", file=err)
        return 2
    report = run.run()
    return runner.summarise(sweep, report, err, out)


def _jobs(args: argparse.Namespace, sweep, out, err) -> int:
    """--executor slurm|local: the sweep's runs as submitit jobs (ablate.sweep.executor)."""
    from . import executor as E
    from . import runner

    here_only = {"--wandb-sweep": args.wandb_sweep or None, "--max-runs": args.max_runs, "--workers": args.workers,
                 "--gpus-per-run": args.gpus_per_run}
    if given := [flag for flag, value in here_only.items() if value is not None]:
        raise E.SweepError(f"{' '.join(given)}: only with --executor here; drop them (--max-jobs caps the jobs "
                           "at once, --gpus-per-job sets a job's GPUs, --runs-per-gpu the runs on each)")
    options = E.options_of(args)
    E.check(options, args.dry_run)
    E.check_runs(sweep)
    runner.check_runs_folder(sweep)
    if args.dry_run:
        return E.dry_run(sweep, options, out)
    runner.check_data([r for r in sweep.runs if args.retrain_stale or not runner.finished(r)])
    report = E.Dispatch(sweep, options, err).run()
    return runner.summarise(sweep, report, err, out)


def _runs_per_gpu(args: argparse.Namespace, gpus: list[str], sweep, err) -> int:
    """--runs-per-gpu, checked against the GPUs' free memory, or the default chosen from the largest
    run's memory, the free memory and the cores; the choice is printed."""
    from .. import limits
    from . import gpus as G
    from .runner import cpu_count

    need = max(limits.estimate(r.cfg).device_bytes for r in sweep.runs)
    free = G.free_memory(gpus)
    if args.runs_per_gpu is not None:
        G.check_fits(args.runs_per_gpu, need, free)
        return args.runs_per_gpu
    k = args.gpus_per_run or 1
    ranks = max(int(r.cfg.trainer.devices) if r.cfg.trainer.devices.isdigit() else 1 for r in sweep.runs)
    choice = G.default_runs_per_gpu(need, free, cpu_count(), len(G.groups(gpus, k)), processes_per_run=ranks,
                                    threads=args.threads or 1)
    print(f"ablate sweep {sweep.name}: {choice.why}; --runs-per-gpu N sets it", file=err)
    return choice.runs_per_gpu
