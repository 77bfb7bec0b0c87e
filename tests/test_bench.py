"""`ablate bench`: the CLI prints its table, and the three timed encoders compute one function."""

from __future__ import annotations

import re

import torch

from ablate.bench import build_parser, main
from ablate.bench.speed import ENCODERS, Shape, Trainer, build_variants

from .tolerance import assert_close


def test_bench_prints_ratio_last(capsys):
    assert build_parser().parse_args([]).what == "train"  # `ablate bench` alone runs this one
    assert main(["--steps", "3", "--repeats", "1", "--warmup", "1", "--batch-size", "8"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(r"ratio ablate/torch: \d+\.\d+", last), last


def test_variants_compute_the_same_function():
    """At dropout 0, with the torch model's weights copied in: equal logits, and equal after training."""
    shape = Shape(seq_len=7, in_features=5, d_model=16, n_heads=4, n_classes=3)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(4, shape.seq_len, shape.in_features, generator=gen)
    y = torch.randint(shape.n_classes, (4,), generator=gen)
    models = build_variants(shape, dropout=0.0, seed=0)
    for m in models.values():
        m.train()  # the mode that is timed (torch's encoder takes its slow path here too)

    def logits() -> dict[str, torch.Tensor]:
        with torch.no_grad():
            return {name: models[name](x) for name in ENCODERS}

    for _ in range(2):  # before, then after three Adam steps on each
        out = logits()
        assert_close(out["plain"], out["torch"])  # 32 eps * max|logit| (tests/tolerance.py)
        assert_close(out["ablate"], out["torch"])
        for name in ENCODERS:
            Trainer(models[name], [(x, y)]).run(3)
