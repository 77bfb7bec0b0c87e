"""`ablate bench`: the CLI prints its table, and the three timed encoders compute one function."""

from __future__ import annotations

import copy
import re

import torch
from torch import nn

from ablate.bench import build_parser, main
from ablate.bench.speed import ENCODERS, Shape, Trainer, build_variants, copy_from_torch

from .tolerance import assert_close, atol, max_abs, max_abs_logit


def test_bench_prints_ratio_last(capsys):
    assert build_parser().parse_args([]).what == "train"  # `ablate bench` alone runs this one
    assert main(["--steps", "3", "--repeats", "1", "--warmup", "1", "--batch-size", "8"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(r"ratio ablate/torch: \d+\.\d+", last), last


def _laid_out_as(models: dict[str, nn.Module], name: str, values: list[torch.Tensor]) -> list[torch.Tensor]:
    """`values` (one per parameter of the torch model) in the order and shapes of `name`'s parameters,
    through copy_from_torch: the mapping that gave the three their equal weights."""
    source, target = copy.deepcopy(models["torch"]), copy.deepcopy(models[name])
    with torch.no_grad():
        for p, v in zip(source.parameters(), values, strict=True):
            p.copy_(v)
    copy_from_torch(source, target)
    return [p.detach() for p in target.parameters()]


def test_variants_compute_the_same_function():
    """At dropout 0, with the torch model's weights copied in: equal logits, equal gradients of every
    parameter, and the same first Adam update (as timed, through Trainer).

    Not logits after several Adam steps: Adam's first step moves a weight by lr * sign(g), so a
    gradient within rounding of 0 (the key bias's is 0 in exact arithmetic: 16 entries a layer here)
    may move by lr either way under another machine's kernels (its logits 1.3e-4 apart after three
    steps when such signs flip, against 3.8e-6 allowed). Those entries are allowed 2 lr
    in the update; every other weight must move as torch's does, to within rounding."""
    shape = Shape(seq_len=7, in_features=5, d_model=16, n_heads=4, n_classes=3)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(4, shape.seq_len, shape.in_features, generator=gen)
    y = torch.randint(shape.n_classes, (4,), generator=gen)
    models = build_variants(shape, dropout=0.0, seed=0)
    scores = max_abs_logit(models["ablate"], x)  # a score's rounding is a relative error in its weight
    before = {name: [p.detach().clone() for p in m.parameters()] for name, m in models.items()}
    trainers = {name: Trainer(m, [(x, y)]) for name, m in models.items()}  # train(): the timed mode
    with torch.no_grad():
        out = {name: models[name](x) for name in ENCODERS}
    for name in ENCODERS:
        trainers[name].run(1)  # one Adam step; its gradients stay in .grad
    step = {name: [p.detach() - b for p, b in zip(m.parameters(), before[name])] for name, m in models.items()}
    lr = trainers["torch"].opt.param_groups[0]["lr"]

    for name in ("plain", "ablate"):
        assert_close(out[name], out["torch"], scores)  # 32 eps * max|logit| * max|score|
        grads = _laid_out_as(models, name, [p.grad for p in models["torch"].parameters()])
        updates = _laid_out_as(models, name, step["torch"])
        weights = _laid_out_as(models, name, before["torch"])
        clear = 0
        for p, g, u, w, b in zip(models[name].parameters(), grads, updates, weights, before[name], strict=True):
            assert torch.equal(b, w)  # the same starting weights
            assert_close(p.grad, g, scores)  # 32 eps * max|grad| * max|score|
            near_zero = g.abs() <= atol(max_abs(g), scores)  # a sign that rounding may flip
            allowed = atol(max_abs(w)) + 2 * lr * near_zero  # w - lr * step rounds at eps * |w|
            assert ((p.detach() - b - u).abs() <= allowed).all(), name
            clear += int((~near_zero).sum())
        assert clear >= 0.9 * sum(p.numel() for p in models[name].parameters())


def test_bad_benchmark_input_exits_2_with_one_line_before_any_work(capsys, monkeypatch, tmp_path):
    """A length list that cannot be fitted, or CUDA asked for where there is none: exit 2, one `ablate:` line,
    nothing measured, no CSV written (before: `SystemExit(text)`, exit status 1)."""
    import pytest

    from ablate.bench import attention

    out = tmp_path / "cost.csv"
    for argv in (["attention", "--lengths", "x:y", "--csv", str(out)], ["attention", "--lengths", "64"],
                 ["rnn", "--lengths", "1,8"], ["attention", "--lengths", "32:64", "--device", "cuda"],
                 ["train", "--device", "cuda"]):
        if "cuda" in argv:
            monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        assert main(argv) == 2, argv
        captured = capsys.readouterr()
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ablate: ") and captured.out == "", (argv, captured)
        assert "--lengths" in lines[0] or "--device cuda" in lines[0]
    assert not out.exists()
    assert attention.parse_lengths("32:256") == [32, 64, 128, 256]
    assert attention.parse_lengths("300,8,100,8") == [8, 100, 300]
    with pytest.raises(ValueError, match="at least two lengths >= 2"):
        attention.parse_lengths("1:8", minimum=2)
