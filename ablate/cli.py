"""The `ablate` command: train, bench, keys (and more as the harness grows).

Bad input exits with status 2 and one line naming the problem and the fix, before any work starts.
"""

from __future__ import annotations

import json
import os
import sys

from . import ctrlc
from .cliparse import OneLineParser, plugins_arg

USAGE = """usage: ablate <command> [args]    (ablate --version: the installed version)

commands:
  train [key=value ...] [file.yaml] [--print-config] [--retrain]
                                      train one configuration (see `ablate keys`; --help)
  keys                                list every configuration key with its default
  probe CHECKPOINT [--batch N]        every probe on a saved model (a run's last.ckpt, best.ckpt or its folder)
  bench [train|attention|epoch|rnn|gpus]
                                      speed: encoders side by side; attention cost vs n; one MNIST epoch vs
                                      the tutorial script; LSTM vs Transformer vs n; several runs per GPU
  sweep FILE|NAME [--budget B] [--workers W] [--dry-run] [--wandb-sweep] [--runs-per-gpu N] [--executor slurm] ...
                                      run a W&B sweep file here (or as SLURM jobs), each configuration once
  sync NAME                           upload every offline W&B run of a sweep
  dashboard NAME --entity E --project P [--report] [--dry-run [--out PATH]]
                                      a W&B workspace (and report) for a sweep; --dry-run: its spec as JSON
  results NAME [--csv P] [--parquet P] [--wandb ENTITY/PROJECT] [--all-columns] [--aggregate]
                                      the table of a sweep: one row per run (or per variant)
  report [export|build|all] [--data DIR] [--out DIR]
                                      export results to reports/data, run the report notebooks
  tasks [plugins=NAMES]               every data.task: what it tests, its reference levels, its keys, its sweeps
                                      (with plugins=: the tasks of these plug-ins too)
  studies [--sweeps]                  the questions the reports answer (reports/*.yaml): notebook, question,
                                      primary and secondary sweeps; --sweeps: every sweep file's question and role
  compare NAME [--out DIR] [--baseline KEY=VALUE,...] [--runs DIR | --data DIR | --wandb E/P]
                                      any sweep's variants against a baseline: Markdown, HTML, CSV, figures
  explore SOURCE... --out PAGE.html [--json PATH]
                                      trained models (run directories or last.ckpt) in one offline HTML page
                                      that runs them in the browser; --json: the models as JSON
"""


def fail(message: str, code: int = 2) -> int:
    print(f"ablate: {message}", file=sys.stderr)
    return code


TRAIN_USAGE = """usage: ablate train [--print-config] [--retrain] [key=value ...] [file.yaml ...]

Train one configuration into its run folder ($ABLATE_RUNS_DIR/<run.group>/<run id>, default ./runs);
the same command again resumes it (interrupted) or skips it (finished). Keys: `ablate keys`.

  key=value        one setting, e.g. model.n_heads=8 optim.lr=3e-4 seed=1 budget=quick
  file.yaml        a mapping of settings (later arguments win)
  --print-config   print the resolved config, its run id, run folder and memory estimate; train nothing
  --retrain        train a finished run again from scratch as a new attempt (a new W&B run in the same
                   group); its earlier files are kept in <run folder>/attempts/<n>/. An interrupted run
                   resumes, unless other code (another commit) started it: then it starts afresh too
  -h, --help       this text"""


def cmd_train(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(TRAIN_USAGE)
        return 0
    show, retrain = "--print-config" in argv, "--retrain" in argv
    argv = [a for a in argv if a not in ("--print-config", "--retrain")]
    import os

    from . import config as C

    try:
        overrides = C.parse_overrides(argv)
        agent = C.agent_overrides(os.environ)  # a W&B agent's budget and threads win over its sweep file's
        cfg = C.build({**overrides, **agent}, machine=not show)  # --print-config: no GPU or memory check (train does)
    except C.ConfigError as err:
        return fail(str(err))
    if cfg.tracking == "wandb" and not show:
        from .tracking import online_problem

        if problem := online_problem():
            return fail(problem)
    if os.environ.get("WANDB_SWEEP_ID"):
        for line in _agent_lines(agent, overrides, cfg.run.group):
            print(f"ablate: W&B agent: {line}", file=sys.stderr)
    from .rundir import RunDirError, run_dir_for

    if show:
        try:
            print(_resolved(cfg, run_dir_for(cfg)))
        except RunDirError as err:
            return fail(str(err))
        return 0
    import signal

    from .data import DataError
    from .train import Interrupted, RunBusy, is_ddp_child, recorded, train

    def say(line: str) -> None:  # stdout carries only the final JSON line (scripts parse it)
        print(line, file=sys.stderr, flush=True)

    try:
        summary = train(cfg, log=say, retrain="any" if retrain else None)
    except (DataError, C.ConfigError, RunDirError) as err:
        if recorded(err) is None:  # before the run started: bad input
            return fail(str(err))
        return fail(f"{err} (after {run_dir_for(cfg)} had started: it is recorded as failed; the same command "
                    "runs it again once that is fixed)", 1)
    except RunBusy as err:
        return fail(str(err), 1)
    except Interrupted as err:
        return fail(_interrupted(f"interrupted by {signal.Signals(err.signum).name}", err, run_dir_for(cfg)),
                    err.code)
    except (KeyboardInterrupt, SystemExit) as err:  # Ctrl-C (Lightning turns it into exit 1 during fit)
        return fail(_interrupted("interrupted", err, run_dir_for(cfg)), 130)
    except BrokenPipeError:
        raise
    except OSError as err:  # a folder that cannot be written is the user's to fix (2); the rest the machine's (1)
        from .report.cli import write_fix

        fix, code = write_fix(err, "make the folder writable (or choose another with ABLATE_RUNS_DIR or run.dir)")
        return fail(f"cannot write the run into {run_dir_for(cfg)}: {err}; {fix}, then run the same command again",
                    code)
    if is_ddp_child():
        return 0
    metrics = {k: round(v, 4) for k, v in summary.get("metrics", {}).items() if k.startswith(("test/", "val/"))}
    code = 0 if summary["status"] in ("completed", "diverged") else 1
    if _command_line:
        _finished_on_sigterm(f"{run_dir_for(cfg)} had {summary['status']}", code)
    print(json.dumps({"status": summary["status"], "run_dir": summary["run_dir"], **metrics}), flush=True)
    return code


def _agent_lines(agent: dict, overrides: dict, group: str) -> list[str]:
    """Under a W&B agent: what its environment changed, and, for a tuned sweep, that it runs every value."""
    from .config import AGENT_ENV

    names = {key: var for var, key in AGENT_ENV.items()}
    lines = [f"{key}={value} from {names[key]}" + (f" (the sweep file says {overrides[key]})" if key in overrides else "")
             for key, value in agent.items()]
    from .sweep.spec import SweepError, read, resolve
    from .sweep.tune import TuneError, tune_line

    try:
        line = tune_line(read(resolve(group)).get("description"))
    except (SweepError, TuneError):  # no (readable) sweep file of that name here: nothing to say about its tuning
        line = None
    if line:
        lines.append(f"sweep {group} is tuned ({line.strip()}), but an agent runs every value on every seed, not "
                     f"ablate sweep's two stages; `ablate results {group}` applies the same choice to the runs after")
    return lines


def _resolved(cfg, run_dir) -> str:
    """`ablate train --print-config`: every key as YAML, then the run id, folder, state and memory."""
    import yaml

    from . import config as C
    from .limits import estimate, size
    from .models.config import PLUGGED
    from .rundir import read_summary

    state = (read_summary(run_dir) or {}).get("status", "new")
    if cfg.model.arch in PLUGGED["arch"]:  # ablate's closed forms are its encoder's
        memory = f"# memory: not estimated for a plug-in's model (model.arch={cfg.model.arch})"
    else:
        est = estimate(cfg)
        memory = (f"# memory: about {size(est.data_bytes + est.device_bytes)} ({est.parameters:,} parameters; model "
                  f"{size(est.model_bytes)}, activations {size(est.activation_bytes)}, data {size(est.data_bytes)})")
    return "\n".join([
        yaml.safe_dump(C.to_dict(cfg), sort_keys=False).rstrip(),
        f"# run id: {C.run_id(cfg)}",
        f"# run folder: {run_dir} ({state})",
        memory,
        "# nothing trained or written; the accelerator, GPUs and free memory are checked when it trains",
    ])


_command_line = False  # main() called as the process's command (not by a test or a notebook in its process)


def _finished_on_sigterm(what: str, code: int) -> None:
    """From here on the run is recorded: a SIGTERM while the process winds down (W&B's and Lightning's
    exit hooks) ends it with the status it has earned and a line saying so, never 143 and no word.
    Only for the process's own command: a handler that exits must not outlive a call from Python."""
    import os
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return

    def finish(signum, frame):
        print(f"ablate: {signal.Signals(signum).name} after {what}; it stays so (nothing was lost)", file=sys.stderr,
              flush=True)
        sys.stdout.flush()
        os._exit(code)

    signal.signal(signal.SIGTERM, finish)


def _interrupted(how: str, err: BaseException, run_dir) -> str:
    """The line for an interrupted `ablate train`, saying what summary.json actually holds."""
    from .rundir import CKPT
    from .train import recorded

    status = recorded(err)
    if status in ("completed", "diverged"):
        return f"{how} after {run_dir} had {status}; it stays {status} (the same command does not run it again)"
    if status is None:
        return f"{how} while preparing, before anything was written to {run_dir}; the same command runs it"
    if not status:
        return f"{how}; {run_dir} could not be recorded as interrupted (said above); the same command resumes it"
    if (run_dir / CKPT).is_file():
        return f"{how}; {run_dir} is recorded as interrupted: the same command resumes it from its last.ckpt"
    return (f"{how}; {run_dir} is recorded as interrupted: the same command starts it again (no epoch had "
            "ended, so there is no last.ckpt to resume from)")


def cmd_keys(argv: list[str]) -> int:
    from . import config as C

    if argv in (["-h"], ["--help"]):
        print("usage: ablate keys [SECTION] [plugins=NAMES] [--markdown]\n\nEvery configuration key: its default, what "
              "it allows and what it does (set one with key=value).\n  SECTION        only the keys of one section (model, "
              "data, optim, ...)\n  plugins=NAMES  with the keys and values of these plug-ins (docs/plugins.md)\n"
              "  --markdown     a Markdown table (docs/train.md shows this output)")
        return 0
    markdown = "--markdown" in argv
    plugins, rest = plugins_arg(argv)
    rest = [a for a in rest if a != "--markdown"]
    try:
        table = C.key_table(plugins)
    except C.ConfigError as err:
        return fail(str(err))
    sections = sorted({k.rpartition(".")[0] for k, *_ in table} - {""})
    if len(rest) > 1 or (rest and rest[0] not in sections):
        return fail(f"`ablate keys` takes one section ({', '.join(sections)}), plugins=NAMES and --markdown, got "
                    f"{' '.join(argv)!r}; run `ablate keys` or `ablate keys model`")
    rows = [r for r in table if not rest or r[0].startswith(rest[0] + ".")]
    if markdown:
        print("| key | default | allowed | what it does |\n| --- | --- | --- | --- |")
        for key, default, allowed, description in rows:
            cells = (f"`{key}`", f"`{default}`", allowed, description)
            print("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        return 0
    rows = [("key", "default", "allowed", "description"), *rows]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]  # every column as wide as its widest cell: aligned
    for key, default, allowed, description in rows:
        print(f"{key:<{widths[0]}}  {default:<{widths[1]}}  {allowed:<{widths[2]}}  {description}".rstrip())
    return 0


def cmd_probe(argv: list[str]) -> int:
    from pathlib import Path

    parser = OneLineParser(prog="ablate probe", description="run every probe on a checkpoint")
    parser.add_argument("checkpoint", type=Path, help="a last.ckpt or best.ckpt, or a run directory (its last.ckpt)")
    parser.add_argument("--batch", type=int, default=64, help="validation examples in the probe batch")
    parser.add_argument("--no-expensive", action="store_true", help="skip head masking and permuted test set")
    parser.add_argument("--json", action="store_true", help="print the scalars as JSON")
    args = parser.parse_args(argv)
    ckpt = args.checkpoint / "last.ckpt" if args.checkpoint.is_dir() else args.checkpoint
    if not ckpt.is_file():
        return fail(f"no checkpoint at {ckpt}; give a last.ckpt or best.ckpt, or a run directory that holds one")
    if args.batch < 1:
        return fail(f"--batch={args.batch} is not allowed; expected an integer >= 1")
    from .data import DataError
    from .limits import eval_chunk
    from .probes import format_probes, not_applicable
    from .probing import ProbeRecorder, probe_batch, probe_permutation
    from .tasks import CheckpointError, PluginModel, load_task

    try:
        task, datamodule = load_task(ckpt)
        datamodule.setup("fit")
    except PluginModel as err:
        return fail(f"{err}; its loss curves and gradient norms per module are in its metrics.csv")
    except CheckpointError as err:
        return fail(f"{err}; give a last.ckpt or best.ckpt written by `ablate train`")
    except DataError as err:
        return fail(str(err))
    batch = probe_batch(datamodule, args.batch)
    perm = probe_permutation(datamodule, batch[0].shape[1])
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:  # the run directory itself is left as it is
        named = ProbeRecorder(Path(tmp), batch, perm, chunk=eval_chunk(task.cfg)).final(None, task.model, datamodule,
                                                                                 not args.no_expensive)
    scalars = {k.removeprefix("probe/final/"): v for k, v in named.items()}
    print(json.dumps(scalars, indent=1) if args.json else format_probes(scalars, not_applicable(task.model)))
    return 0


def cmd_bench(argv: list[str]) -> int:
    from .bench import main as bench_main

    return bench_main(argv)


def cmd_sweep(argv: list[str]) -> int:
    from .sweep import main as sweep_main

    return sweep_main(argv)


def cmd_results(argv: list[str]) -> int:

    parser = OneLineParser(prog="ablate results", description="the results table of a sweep, one row per run")
    parser.add_argument("name", help="the sweep: its name (its folder under $ABLATE_RUNS_DIR, default ./runs; its "
                        "W&B group) or its file sweeps/NAME.yaml")
    parser.add_argument("--csv", metavar="PATH", help="write the printed table (every column) as CSV, atomically")
    parser.add_argument("--parquet", metavar="PATH", help="write the printed table (every column) as Parquet, atomically")
    parser.add_argument("--wandb", metavar="ENTITY/PROJECT", help="build the table from W&B instead of run folders")
    parser.add_argument("--all-columns", action="store_true", help="print every column, not the short view")
    parser.add_argument("--aggregate", action="store_true", help="one row per variant: seed mean with its 95%% interval [lo, hi], std, n")
    args = parser.parse_args(argv)
    from importlib.util import find_spec

    if args.parquet and find_spec("pyarrow") is None:  # before the table is built: one line, no traceback
        return fail(missing_package("pyarrow", "results --parquet"))
    from . import results as R
    from .results.table import sweep_arg

    try:
        name, sweeps = sweep_arg(args.name)
        runs = R.load_wandb(name, args.wandb, sweeps=str(sweeps)) if args.wandb else R.load(name, sweeps=sweeps)
        table = R.aggregate(runs) if args.aggregate else runs
        print(R.format_table(table, all_columns=args.all_columns))
        for line in R.commit_warnings(runs):
            print(f"ablate: warning: {line}", file=sys.stderr)
        for path in (args.csv, args.parquet):
            if path:
                R.write(table, path)
    except R.ResultsError as err:
        return fail(str(err))
    return 0


def cmd_report(argv: list[str]) -> int:
    from .report import main as report_main

    return report_main(argv)


def cmd_studies(argv: list[str]) -> int:
    from .studies import main as studies_main

    return studies_main(argv)


def cmd_tasks(argv: list[str]) -> int:
    """`ablate tasks [plugins=NAMES]`: the plug-ins are loaded here, so that their tasks are in the registry the
    table reads (ablate.studies, a leaf, imports none of them)."""
    from .studies import tasks_main

    plugins, _ = plugins_arg(argv)
    if plugins and not any(a in ("-h", "--help") for a in argv):
        from . import plugins as P

        try:
            P.load(plugins)
        except P.PluginError as err:
            return fail(str(err))
    return tasks_main(argv)


def cmd_compare(argv: list[str]) -> int:
    from .report.compare_cli import main as compare_main

    return compare_main(argv)


def cmd_explore(argv: list[str]) -> int:
    from .explore import main as explore_main

    return explore_main(argv)


def cmd_sync(argv: list[str]) -> int:
    from .sweep.sync import main as sync_main

    return sync_main(argv)


def cmd_dashboard(argv: list[str]) -> int:
    from .dashboard import main as dashboard_main

    return dashboard_main(argv)


COMMANDS = {"train": cmd_train, "keys": cmd_keys, "probe": cmd_probe, "bench": cmd_bench, "sweep": cmd_sweep, "results": cmd_results,
            "report": cmd_report, "studies": cmd_studies, "tasks": cmd_tasks, "compare": cmd_compare, "explore": cmd_explore, "sync": cmd_sync, "dashboard": cmd_dashboard}


def main(argv: list[str] | None = None) -> int:
    global _command_line
    _command_line = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    if not _command_line:  # called from Python (the tests, a notebook): the caller handles what comes
        return _main(argv)
    import signal

    said = f"ablate {argv[0] if argv else ''}".rstrip()

    def terminate(signum, frame):
        """SIGTERM before a run or a sweep has its own handler: what the default action did (end at once, exit
        143: nothing is recorded yet), saying so. Not an exception: one raised while an import runs a finalizer
        is swallowed, and the command went on."""
        try:
            os.write(2, f"{said}: terminated (SIGTERM)\n".encode())
        except OSError:  # stderr gone (a closed pipe): exit all the same
            pass
        finally:
            os._exit(128 + signal.SIGTERM)

    ctrlc.install()  # a Ctrl-C that an import's finalizer swallows is raised again where the work begins
    signal.signal(signal.SIGTERM, terminate)  # after it: once SIGTERM is caught, so is SIGINT (tests wait on this)
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, not at exit: a reader gone meanwhile is the BrokenPipeError below
        return code
    except KeyboardInterrupt:  # Ctrl-C before a run had started (while torch imports): no traceback of it
        print(f"{said}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `ablate keys | head -3`: the reader of stdout has gone; say nothing more to it
        if not _stdout_gone():  # another pipe broke (a log, a worker's): not ours to hide
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE  # as a command killed by SIGPIPE (git, seq): its output was cut short


def _stdout_gone() -> bool:
    """Whether stdout is a pipe whose reader has closed it (poll says POLLERR on its write end)."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def _main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if argv else 2
    if argv in (["--version"], ["-V"]):
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"ablate {version('ablate')}")
        except PackageNotFoundError:  # a checkout on sys.path, not installed
            print("ablate (not installed: run `make venv` or `pip install -e .`)")
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        return fail(f"unknown command {command!r}; choose one of {', '.join(COMMANDS)}")
    try:
        return COMMANDS[command](rest)
    except ModuleNotFoundError as err:  # an optional package not installed: say which extra brings it
        top = (err.name or "").split(".")[0]
        if not top or top == "ablate":
            raise
        return fail(missing_package(top, command))


DISTRIBUTIONS = {"PIL": "pillow", "yaml": "pyyaml"}  # import names that are not their package's name


def missing_package(module: str, command: str) -> str:
    """The line for `ablate <command>` stopped by a package that is not installed: the extra of ablate's that
    brings it, read from the installed package's own metadata (pyproject.toml's optional-dependencies)."""
    import re
    from importlib.metadata import PackageNotFoundError, requires

    wanted = DISTRIBUTIONS.get(module, module).lower().replace("_", "-")
    try:
        specs = requires("ablate") or []
    except PackageNotFoundError:
        specs = []
    extras = sorted({m.group(2) for spec in specs
                     if (m := re.match(r"([A-Za-z0-9_.-]+).*extra == \"([^\"]+)\"", spec))
                     and m.group(1).lower().replace("_", "-") == wanted},
                    key=lambda extra: (extra == "dev", extra))  # the extra of its own before dev's everything
    # '.[extra]' in the checkout: PyPI's `ablate` is another project, which 'ablate[extra]' would fetch
    fix = f"pip install '.[{extras[0]}]' in ablate's checkout" if extras else f"pip install {wanted}"
    return (f"`ablate {command}` needs the Python package {wanted}, which is not installed; {fix} "
            "(`make venv` installs every extra)")


if __name__ == "__main__":
    sys.exit(main())
