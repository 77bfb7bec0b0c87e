"""The lookup task (Q3) and its one-lookup control: targets on hand-computed examples, the settings it
refuses, its order-blind level against an enumeration of every arrangement, and a real training run.
(tests/test_registry.py checks its entry and its reference levels against a brute-force count.)"""

from __future__ import annotations

import itertools
import json
from collections import Counter

import pytest
import torch

from ablate import cli
from ablate import config as C
from ablate.data import build_datamodule, lookup
from ablate.data.lookup import (
    Lookup,
    Lookup1,
    expected_order_blind,
    lookup_sequences,
    lookup_targets,
)
from ablate.data.reference import order_blind
from ablate.registry import LOOKUP_SPAN, TASKS

N = -100  # IGNORE: no target


def test_pair_targets_by_hand():
    """y_i = (t_{i-2}, t_{i-1}) as t_{i-2} * V + t_{i-1}; the first two positions have no pair."""
    x = torch.tensor([[3, 1, 4, 1, 5, 9],
                      [2, 7, 7, 0, 8, 2]])
    assert lookup_targets(x, 10, pair=True).tolist() == [[N, N, 31, 14, 41, 15],
                                                        [N, N, 27, 77, 70, 8]]
    # vocabulary 3: the first token of the pair counts 3 times
    assert lookup_targets(torch.tensor([[2, 1, 0, 2]]), 3, pair=True).tolist() == [[N, N, 7, 3]]


def test_the_pair_is_ordered():
    """Swapping the two tokens before a position changes its class: (1, 2) is 12, (2, 1) is 21."""
    assert lookup_targets(torch.tensor([[1, 2, 0], [2, 1, 0]]), 10, pair=True)[:, 2].tolist() == [12, 21]


def test_control_targets_by_hand():
    """The control: y_i = t_{i-2}, at the same positions."""
    x = torch.tensor([[3, 1, 4, 1, 5, 9]])
    assert lookup_targets(x, 10, pair=False).tolist() == [[N, N, 3, 1, 4, 1]]


def test_generated_sets_follow_the_definition_position_by_position():
    """A datamodule's sets, checked against the definition in plain Python; splits are fixed by
    data.seed alone, and each task draws its own stream."""
    cfg = C.build({"data.task": "lookup", "data.n_train": 50, "data.n_val": 40, "data.n_test": 30,
                   "data.length": 6, "data.test_length": 9, "data.vocab": 7}).data
    dm = build_datamodule(cfg)
    assert isinstance(dm, Lookup) and (dm.n_tokens, dm.n_out, dm.seq_len) == (7, 49, 9)
    dm.setup()
    for data, length in ((dm.train_set, 6), (dm.val_set, 6), (dm.test_set, 9)):
        x, y = data.tensors()
        assert x.shape[1] == length and 0 <= x.min() and x.max() < 7
        for row_x, row_y in zip(x.tolist(), y.tolist()):
            assert row_y == [N, N] + [row_x[i - 2] * 7 + row_x[i - 1] for i in range(2, length)]
    again = build_datamodule(cfg)
    again.setup()
    assert torch.equal(again.val_set.tensors()[0], dm.val_set.tensors()[0])
    control = build_datamodule(C.build({"data.task": "lookup1", "data.n_train": 50, "data.n_val": 40,
                                        "data.n_test": 30, "data.vocab": 7}).data)
    assert isinstance(control, Lookup1) and (control.n_tokens, control.n_out) == (7, 7)
    control.setup()
    x, y = control.val_set.tensors()
    assert torch.equal(y[:, 2:], x[:, :-2]) and (y[:, :2] == N).all()


def test_the_registry_knows_how_far_the_offsets_reach():
    assert LOOKUP_SPAN == lookup.SPAN == 2 and (lookup.A, lookup.B) == (-2, -1)
    for name in ("lookup", "lookup1"):
        assert TASKS[name].seq_len(C.build({"data.task": name, "data.length": 5, "data.test_length": 11}).data) == 11


@pytest.mark.parametrize("task", ["lookup", "lookup1"])
@pytest.mark.parametrize(("key", "value", "says"), [
    ("data.vocab", 1, "expected an integer >= 2"),
    ("data.vocab", 2**31 + 1, "expected at most 2**31"),
    ("data.length", 2, "expected at least 3"),
    ("data.test_length", 1, "expected at least 3"),
    ("data.reverse", True, "expected false"),
])
def test_impossible_settings_are_refused_with_one_line(task, key, value, says):
    with pytest.raises(C.ConfigError) as err:
        C.build({"data.task": task, key: value})
    message = str(err.value)
    assert "\n" not in message and f"{key}=" in message and says in message and f"data.task={task}" in message


def test_the_cli_refuses_a_too_short_sequence_before_writing_anything(tmp_path, capsys):
    assert cli.main(["train", "data.task=lookup", "data.length=2", f"run.dir={tmp_path / 'run'}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["ablate: data.length=2 is not allowed for data.task=lookup; expected at least 3 "
                   "(the first 2 positions have no target)"]
    assert not (tmp_path / "run").exists()


def brute_expected_order_blind(x: torch.Tensor, y: torch.Tensor, vocab: int, pair: bool) -> float:
    """The definition by enumeration: for every targeted position i of every sequence, all orderings
    of the sequence's tokens that keep its own token at i are equally likely (tokens are i.i.d.); an
    order-blind model sees only (bag, own token), so it is right with the probability of the most
    frequent target over those orderings."""
    total, right = 0, 0.0
    for row_x, row_y in zip(x.tolist(), y.tolist()):
        arrangements = [p for p in set(itertools.permutations(row_x))]
        for i, target in enumerate(row_y):
            if target == N:
                continue
            keep = torch.tensor([p for p in arrangements if p[i] == row_x[i]])
            targets = lookup_targets(keep, vocab, pair)[:, i].tolist()
            right += max(Counter(targets).values()) / len(targets)
            total += 1
    return right / total


@pytest.mark.parametrize("pair", [True, False])
def test_expected_order_blind_level_equals_an_enumeration_of_every_arrangement(pair):
    g = torch.Generator().manual_seed(3)
    for length, vocab in ((3, 2), (5, 3), (6, 4)):
        x, y = lookup_sequences(12, length, vocab, pair, g)
        x[0] = 0  # a bag of one token: every target is known
        y = lookup_targets(x, vocab, pair)
        assert expected_order_blind(x, y, pair) == pytest.approx(brute_expected_order_blind(x, y, vocab, pair), abs=1e-12)


def test_order_matters_an_order_blind_model_can_expect_little():
    """At the defaults (length 8, vocabulary 10) a model blind to order can expect 9.3 % on lookup
    (chance 1 %), 31.6 % on the control; the in-sample maximum over the set is far higher, because
    a bag of 8 tokens almost never repeats and it counts memorised positions."""
    g = torch.Generator().manual_seed(0)
    x, y = lookup_sequences(20000, 8, 10, True, g)
    assert expected_order_blind(x, y, True) == pytest.approx(0.0926, abs=0.002)
    x1, y1 = lookup_sequences(20000, 8, 10, False, g)
    assert expected_order_blind(x1, y1, False) == pytest.approx(0.316, abs=0.003)
    x, y = x[:2000], y[:2000]
    assert order_blind(x, y) > 0.6 > 6 * expected_order_blind(x, y, True)


def test_a_one_layer_attention_only_model_learns_lookup(tmp_path):
    """A real run: d_model 64, 4 heads, no FFN, one layer, 189 steps (1 thread, a few seconds). It
    solves the task on validation and test (measured: 100 %)."""
    from ablate.train import train

    cfg = C.build(C.parse_overrides([
        "data.task=lookup", "data.n_train=4000", "data.n_val=200", "data.n_test=200", "trainer.max_epochs=3",
        "model.n_layers=1", "model.ffn_mult=0", "model.n_heads=4", "tracking=none", "run.probes=false",
        "trainer.threads=1", f"run.dir={tmp_path / 'run'}",
    ]))
    metrics = train(cfg, log=lambda *a: None)["metrics"]
    assert metrics["val/acc"] >= 0.99 and metrics["test/acc"] >= 0.99
    assert metrics["ref/val/chance"] < 0.05
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "completed"


@pytest.mark.parametrize("task", ["lookup", "lookup1"])
def test_recorded_order_blind_level_is_the_enumerated_expectation_on_the_evaluation_sets(task):
    """What a run records as ref/<split>/order_blind for lookup is the expectation over arrangements,
    equal to enumerating every arrangement of each evaluation sequence (short ones, so it is quick)."""
    from ablate import config as C
    from ablate.data import build_datamodule

    cfg = C.build({"data.task": task, "data.length": 5, "data.vocab": 3, "data.n_train": 8,
                   "data.n_val": 12, "data.n_test": 12, "data.test_length": 6}).data
    dm = build_datamodule(cfg)
    levels = dm.reference_levels()
    for split, data in (("val", dm.val_set), ("test", dm.test_set)):
        x, y = data.tensors()
        assert levels[f"ref/{split}/order_blind"] == pytest.approx(
            brute_expected_order_blind(x, y, 3, task == "lookup"), abs=1e-12)
