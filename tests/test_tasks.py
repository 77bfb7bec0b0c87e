"""Optimiser, schedule and metrics of the Lightning tasks."""

import math
import typing

import pytest
import torch

from ablate import config as C
from ablate.tasks import ClassifyRows, CopyTokens
from ablate.tasks.base import lr_lambda
from ablate.tasks.copy import IGNORE


def test_warmup_then_cosine_closed_form():
    f = lr_lambda(warmup_steps=10, total_steps=110, schedule="cosine")
    assert [f(s) for s in (0, 4, 9)] == pytest.approx([0.1, 0.5, 1.0])
    assert f(10) == pytest.approx(1.0)
    assert f(60) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.5)))
    assert f(110) == pytest.approx(0.0, abs=1e-12)
    g = lr_lambda(warmup_steps=0, total_steps=100, schedule="constant")
    assert {g(s) for s in range(100)} == {1.0}


def test_optimizer_and_scheduler_follow_the_config():
    cfg = C.build({"optim.name": "adamw", "optim.weight_decay": "0.1", "optim.warmup": "0.05",
                   "optim.schedule": "cosine", "optim.lr": "3e-4"})
    task = ClassifyRows(cfg)

    class FakeTrainer:  # only what configure_optimizers reads
        estimated_stepping_batches = 200

    task._trainer = FakeTrainer()
    out = task.configure_optimizers()
    opt, _sched = out["optimizer"], out["lr_scheduler"]["scheduler"]
    assert isinstance(opt, torch.optim.AdamW) and opt.defaults["weight_decay"] == 0.1
    assert out["lr_scheduler"]["interval"] == "step"
    assert opt.param_groups[0]["lr"] == pytest.approx(3e-4 / 10)  # step 0 of a 10-step warm-up


def test_plain_sgd_steps_by_lr_times_the_gradient():
    """optim.name=sgd: no momentum, no normalisation. One step moves every parameter by exactly
    -lr * grad (Adam's first step would move each by about lr, whatever the gradient's size)."""
    cfg = C.build({"optim.name": "sgd", "optim.lr": "0.5", "data.task": "copy", "model.d_model": "8",
                   "model.n_heads": "2", "model.dropout": "0"})
    task = CopyTokens(cfg, n_tokens=12, n_out=10)
    opt = task.configure_optimizers()
    assert type(opt) is torch.optim.SGD and opt.defaults["momentum"] == 0
    x = torch.randint(0, 12, (4, 17))
    y = torch.randint(0, 10, (4, 17))
    before = [p.detach().clone() for p in task.parameters()]
    task.loss(task.model(x), y).backward()
    grads = [p.grad.clone() for p in task.parameters()]
    opt.step()
    for p, b, g in zip(task.parameters(), before, grads):
        torch.testing.assert_close(p.detach(), b - 0.5 * g, rtol=0, atol=1e-6)


def test_copy_accuracy_counts_blank_positions_only():
    y = torch.tensor([[IGNORE, IGNORE, 1, 2], [IGNORE, IGNORE, 0, 0]])
    logits = torch.full((2, 4, 3), -5.0)
    # right everywhere except sequence 1, last blank; the ignored positions are deliberately wrong
    for b, t, c in [(0, 2, 1), (0, 3, 2), (1, 2, 0), (1, 3, 2), (0, 0, 2), (1, 1, 1)]:
        logits[b, t, c] = 5.0
    assert CopyTokens.sequence_correct(logits, y).tolist() == [1.0, 0.0]
    task = CopyTokens(C.to_dict(C.build({"data.task": "copy"})), n_tokens=5, n_out=3)
    task.test_acc.update(logits.reshape(-1, 3), y.reshape(-1))
    assert task.test_acc.compute().item() == pytest.approx(3 / 4)


def test_cls_pooling_adds_one_position():
    task = ClassifyRows(C.to_dict(C.build({"pooling": "cls"})))
    x = torch.randn(2, 28, 28)
    logits, maps = task.model(x, return_attention=True)
    assert logits.shape == (2, 10) and maps[0].shape == (2, 4, 29, 29)


def test_the_typed_config_crosses_the_lightning_boundary_and_the_budget_applies_once(monkeypatch):
    import ablate.config as config_module

    calls = []
    real = config_module.budget_profile
    monkeypatch.setattr(config_module, "budget_profile", lambda *a: calls.append(a) or real(*a))
    cfg = C.build({"budget": "quick", "data.task": "copy", "trainer.max_epochs": "3"})
    task = CopyTokens(cfg, n_tokens=12, n_out=10)
    assert task.cfg is cfg  # no round trip through a dict
    assert len(calls) == 1  # the profile was applied when the config was built, and only then
    saved = task.hparams["config"]
    assert type(saved) is dict and saved["trainer"]["max_epochs"] == 3 and saved["data"]["n_train"] == 4000
    # what the checkpoint keeps rebuilds the same config, without applying the profile again
    assert C.from_dict(saved) == cfg and len(calls) == 1
    assert CopyTokens(saved, n_tokens=12, n_out=10).cfg == cfg


def test_budget_names_have_one_home():
    from ablate import budgets

    assert budgets.NAMES == tuple(budgets.BUDGETS) == ("none", "smoke", "quick", "full")
    assert typing.get_args(typing.get_type_hints(C.Config)["budget"]) == budgets.NAMES
    with pytest.raises(C.ConfigError, match="budget='huge' is not allowed; expected one of none, smoke, quick, full"):
        C.build({"budget": "huge"})
    from ablate.report.cli import parser as report_parser
    from ablate.results.export import BUDGET_ORDER
    from ablate.sweep import parser as sweep_parser

    def choices(p):
        return next(a.choices for a in p._actions if a.dest == "budget")

    assert tuple(choices(sweep_parser())) == budgets.NAMES
    assert tuple(choices(report_parser())) == BUDGET_ORDER == tuple(reversed(budgets.BY_TRAINING))
