"""`ablate bench`: speed benchmarks. `ablate bench [train]` times training of torch's encoder,
a plain reference encoder and ablate's encoder on the tutorial's configuration;
`ablate bench attention` times one attention layer against sequence length (fused vs explicit);
`ablate bench epoch` times one MNIST epoch of the tutorial's own script against `ablate train`;
`ablate bench rnn` times one training step of an LSTM and a Transformer against sequence length."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from ..cliparse import OneLineParser
from . import attention, epoch, packing, rnn, speed
from .speed import BenchInputError

# What `ablate bench <what>` runs; each entry takes the parsed arguments and returns an exit code.
BENCHMARKS: dict[str, Callable[[argparse.Namespace], int]] = {
    "train": speed.run,
    "attention": attention.run,
    "epoch": epoch.run,
    "rnn": rnn.run,
    "gpus": packing.run,
}
# Per benchmark, the values of the options left unset on the command line.
DEFAULTS: dict[str, dict[str, int | str]] = {
    "train": {"steps": 10, "repeats": 50, "warmup": 10, "batch_size": 64},
    "attention": {"steps": 3, "repeats": 7, "warmup": 2, "batch_size": 1, "lengths": "32:8192"},
    "epoch": {"steps": 1, "repeats": 1, "warmup": 0, "batch_size": 64},  # one epoch each; batch 64
    "rnn": {"steps": 1, "repeats": 3, "warmup": 1, "batch_size": 8, "lengths": "16:2048"},
    "gpus": {"steps": 300, "repeats": 3, "warmup": 20, "batch_size": 64},  # per run; 1, 4 and 16 runs at once
}


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="ablate bench",
        description="Speed benchmarks. 'train': training samples/s of nn.TransformerEncoder, "
        "a plain reference encoder and ablate's encoder (same function, same weights), "
        "at dropout 0.1 and 0, interleaved in rounds. 'attention': forward+backward time and "
        "memory of one attention layer for n = 32 ... 8192 tokens, fused vs explicit, with the "
        "fitted log-log slope. 'rnn': time and memory of one training step of an LSTM and the "
        "tutorial's Transformer for n = 16 ... 2048, slopes, crossovers and the LSTM's serial part. "
        "'gpus': aggregate training steps/s of 1, 4 and 16 runs at once on one GPU (needs CUDA).",
    )
    parser.add_argument(
        "what",
        nargs="?",
        choices=list(BENCHMARKS),
        default="train",
        help="benchmark (default: train)",
    )
    parser.add_argument(
        "--steps", type=int, default=None, help="timed steps per variant per round (train 10, attention 3, rnn 1)"
    )
    parser.add_argument(
        "--repeats", type=int, default=None,
        help="interleaved rounds; the median is reported (train 50, attention 7, rnn 3)",
    )
    parser.add_argument(
        "--warmup", type=int, default=None, help="untimed steps per variant before timing (train 10, attention 2, rnn 1)"
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: torch's default)"
    )
    parser.add_argument("--batch-size", type=int, default=None, help="train 64, attention 1, rnn 8")
    parser.add_argument("--device", choices=["cpu", "cuda", "auto"], default="cpu")
    parser.add_argument(
        "--lengths", default=None,
        help="attention, rnn: sequence lengths, MIN:MAX (doubling from MIN) or N,N,... (attention 32:8192, rnn 16:2048)",
    )
    parser.add_argument("--csv", metavar="PATH", help="attention, rnn: write the table (with the slopes) as CSV")
    parser.add_argument("--limit", type=int, default=0, help="epoch: train on the first N images only (0: all)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for name, value in DEFAULTS[args.what].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    for name in ("steps", "repeats", "batch_size"):
        if getattr(args, name) < 1:
            build_parser().error(f"--{name.replace('_', '-')} must be >= 1")
    if args.warmup < 0:
        build_parser().error("--warmup must be >= 0")
    if args.threads is not None and args.threads < 1:
        build_parser().error("--threads must be >= 1")
    try:
        return BENCHMARKS[args.what](args)
    except BenchInputError as err:  # before any measurement: one line, exit 2
        print(f"ablate: {err}", file=sys.stderr)
        return 2


__all__ = ["BENCHMARKS", "DEFAULTS", "build_parser", "main"]
