"""The `ablate` command: train, bench, keys (and more as the harness grows).

Bad input exits with status 2 and one line naming the problem and the fix, before any work starts.
"""

from __future__ import annotations

import json
import sys

USAGE = """usage: ablate <command> [args]

commands:
  train [key=value ...] [file.yaml]   train one configuration (see `ablate keys`)
  keys                                list every configuration key with its default
  bench [train]                       training speed: torch's encoder vs plain vs ablate's
"""


def fail(message: str, code: int = 2) -> int:
    print(f"ablate: {message}", file=sys.stderr)
    return code


def cmd_train(argv: list[str]) -> int:
    from . import config as C

    try:
        cfg = C.build(C.parse_overrides(argv))
    except C.ConfigError as err:
        return fail(str(err))
    from .data import DataError
    from .train import RunBusy, is_ddp_child, train

    try:
        summary = train(cfg)
    except (DataError, C.ConfigError) as err:
        return fail(str(err))
    except RunBusy as err:
        return fail(str(err), 1)
    if is_ddp_child():
        return 0
    metrics = {k: round(v, 4) for k, v in summary.get("metrics", {}).items() if k.startswith(("test/", "val/"))}
    print(json.dumps({"status": summary["status"], "run_dir": summary["run_dir"], **metrics}))
    return 0 if summary["status"] in ("completed", "diverged") else 1


def cmd_keys(argv: list[str]) -> int:
    from . import config as C

    for key, value in C.flat(C.Config()).items():
        print(f"{key}={value}")
    return 0


def cmd_bench(argv: list[str]) -> int:
    from .bench import main as bench_main

    return bench_main(argv)


COMMANDS = {"train": cmd_train, "keys": cmd_keys, "bench": cmd_bench}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        return fail(f"unknown command {command!r}; choose one of {', '.join(COMMANDS)}")
    return COMMANDS[command](rest)


if __name__ == "__main__":
    sys.exit(main())
