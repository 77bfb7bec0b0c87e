"""The position-and-count task (Q3): targets on hand-computed rows, the generated sets against the
definition, its two expected reference levels against enumerations, the settings it refuses, and a
real smoke run through `ablate train`.
(tests/test_registry.py checks its entry and its chance level against a brute-force count.)"""

from __future__ import annotations

import itertools
import json
from collections import Counter

import pytest
import torch

from ablate import cli
from ablate import config as C
from ablate.data import build_datamodule, poshist
from ablate.data.poshist import (
    Poshist,
    expected_order_blind_poshist,
    expected_position_only,
    poshist_sequences,
    poshist_targets,
)
from ablate.registry import TASKS

N = -100  # IGNORE: no target


def test_the_constants_the_examples_assume():
    assert (poshist.BACK, poshist.CAP) == (2, 2)


def test_targets_by_hand():
    """y_i = t_{i-2} * 2 + [t_i occurs elsewhere]; BOS, t_1 and t_2 have no target."""
    tokens = torch.tensor([[3, 1, 4, 1, 5, 9],    # 1 twice, the rest once
                           [2, 2, 2, 2, 0, 1]])   # 2 four times: capped, the same class as twice
    assert poshist_targets(tokens).tolist() == [[N, N, 6, 3, 8, 2],
                                                    [N, N, 5, 5, 4, 4]]
    # the token two back is the pair's first part: swapping it changes the class, not the count part
    assert poshist_targets(torch.tensor([[0, 5, 7], [1, 5, 7]]))[:, 2].tolist() == [0, 2]


def test_sequences_start_with_bos_and_targets_align_with_their_tokens():
    x, y = poshist_sequences(3, 5, 4, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (3, 6) and (x[:, 0] == 4).all() and (y[:, :3] == N).all()
    assert torch.equal(y[:, 1:], poshist_targets(x[:, 1:]))


def test_generated_sets_follow_the_definition_position_by_position():
    """A data module's sets against the definition in plain Python, the test set longer
    (data.test_length: the same classes); splits depend on data.seed alone."""
    cfg = C.build({"data.task": "poshist", "data.n_train": 50, "data.n_val": 40, "data.n_test": 30,
                   "data.length": 6, "data.test_length": 9, "data.vocab": 7}).data
    dm = build_datamodule(cfg)
    assert isinstance(dm, Poshist) and (dm.n_tokens, dm.n_out, dm.seq_len) == (8, 14, 10)
    dm.setup()
    for data, length in ((dm.train_set, 6), (dm.val_set, 6), (dm.test_set, 9)):
        x, y = data.tensors()
        assert x.shape[1] == length + 1 and (x[:, 0] == 7).all() and 0 <= x[:, 1:].min() and x[:, 1:].max() < 7
        for row_x, row_y in zip(x.tolist(), y.tolist()):
            t = row_x[1:]
            assert row_y == [N, N, N] + [t[i - 2] * 2 + (t.count(t[i]) > 1) for i in range(2, length)]
    again = build_datamodule(cfg)
    again.setup()
    assert torch.equal(again.test_set.tensors()[0], dm.test_set.tensors()[0])
    assert TASKS["poshist"].model_sizes(cfg)["n_out"] == TASKS["poshist"].model_sizes(
        C.build({"data.task": "poshist", "data.vocab": 7, "data.length": 20}).data)["n_out"]


def brute_position_only(x: torch.Tensor, y: torch.Tensor) -> float:
    """The definition by enumeration: at each targeted position, t_i and t_{i-2} are known and every
    filling of the other positions with tokens of the vocabulary is equally likely; the best guess is
    the most frequent target over those fillings."""
    vocab, total, right = int(x[0, 0]), 0, 0.0
    for row_x, row_y in zip(x[:, 1:].tolist(), y[:, 1:].tolist()):
        length = len(row_x)
        for i, target in enumerate(row_y):
            if target == N:
                continue
            others = [j for j in range(length) if j not in (i, i - 2)]
            fills = []
            for values in itertools.product(range(vocab), repeat=len(others)):
                seq = list(row_x)
                for j, v in zip(others, values):
                    seq[j] = v
                fills.append(seq)
            targets = poshist_targets(torch.tensor(fills))[:, i].tolist()
            right += max(Counter(targets).values()) / len(targets)
            total += 1
    return right / total


def brute_order_blind(x: torch.Tensor, y: torch.Tensor) -> float:
    """The definition by enumeration: an order-blind model sees (bag, own token); every arrangement of
    the row's tokens with its own token at i is equally likely; it is right with the probability of
    the most frequent target over them."""
    total, right = 0, 0.0
    for row_x, row_y in zip(x[:, 1:].tolist(), y[:, 1:].tolist()):
        arrangements = set(itertools.permutations(row_x))
        for i, target in enumerate(row_y):
            if target == N:
                continue
            keep = torch.tensor([p for p in arrangements if p[i] == row_x[i]])
            targets = poshist_targets(keep)[:, i].tolist()
            right += max(Counter(targets).values()) / len(targets)
            total += 1
    return right / total


@pytest.mark.parametrize(("length", "vocab"), [(3, 2), (5, 3), (6, 4), (7, 2)])
def test_expected_levels_equal_an_enumeration(length, vocab):
    x, y = poshist_sequences(10, length, vocab, torch.Generator().manual_seed(length))
    x[0, 1:] = 1  # one token throughout: every count is known
    y[0, 1:] = poshist_targets(x[:1, 1:])
    assert expected_position_only(x, y) == pytest.approx(brute_position_only(x, y), abs=1e-12)
    assert expected_order_blind_poshist(x, y) == pytest.approx(brute_order_blind(x, y), abs=1e-12)


def test_position_only_level_in_closed_form():
    """Vocabulary 10, 8 tokens: with t_{i-2} = t_i the count part is known ("recurs"); otherwise the
    best guess is "once", right with probability 0.9^6 (the other 6 tokens all differ from t_i)."""
    x = torch.tensor([[10, 0, 1, 0, 2, 3, 4, 5, 6]])  # t_3 = t_1: one position of six with the count known
    y = torch.cat((torch.tensor([[N]]), poshist_targets(x[:, 1:])), dim=1)
    assert expected_position_only(x, y) == pytest.approx((1 + 5 * 0.9**6) / 6, abs=1e-15)


def test_recorded_levels_are_the_enumerated_expectations_on_the_evaluation_sets():
    cfg = C.build({"data.task": "poshist", "data.length": 5, "data.vocab": 3, "data.n_train": 8,
                   "data.n_val": 12, "data.n_test": 12, "data.test_length": 6}).data
    dm = build_datamodule(cfg)
    levels = dm.reference_levels()
    for split, data in (("val", dm.val_set), ("test", dm.test_set)):
        x, y = data.tensors()
        assert levels[f"ref/{split}/position_only"] == pytest.approx(brute_position_only(x, y), abs=1e-12)
        assert levels[f"ref/{split}/order_blind"] == pytest.approx(brute_order_blind(x, y), abs=1e-12)


def test_levels_at_the_quick_sizes_sit_in_order():
    """chance < order-blind (the count alone) < position-only (the token two back alone) < 1."""
    cfg = C.build({"data.task": "poshist", "data.n_train": 8, "data.n_val": 1000, "data.n_test": 1000}).data
    levels = build_datamodule(cfg).reference_levels()
    for split in ("val", "test"):
        chance, blind, position = (levels[f"ref/{split}/{k}"] for k in ("chance", "order_blind", "position_only"))
        assert 0.03 < chance < 0.08 < 0.25 < blind < 0.40 < 0.55 < position < 0.61


@pytest.mark.parametrize(("key", "value", "says"), [
    ("data.vocab", 1, "expected an integer >= 2"),
    ("data.vocab", 2**60 + 1, "expected at most 2**60"),
    ("data.length", 2, "expected at least 3"),
    ("data.test_length", 1, "expected at least 3"),
    ("data.reverse", True, "expected false"),
])
def test_impossible_settings_are_refused_with_one_line(key, value, says):
    with pytest.raises(C.ConfigError) as err:
        C.build({"data.task": "poshist", key: value})
    message = str(err.value)
    assert "\n" not in message and f"{key}=" in message and says in message and "data.task=poshist" in message


def test_the_cli_refuses_a_too_short_sequence_before_writing_anything(tmp_path, capsys):
    assert cli.main(["train", "data.task=poshist", "data.length=2", f"run.dir={tmp_path / 'run'}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["ablate: data.length=2 is not allowed for data.task=poshist; expected at least 3 "
                   "(the first 2 tokens have no token 2 back)"]
    assert not (tmp_path / "run").exists()


def test_a_smoke_run_through_the_cli_completes_and_records_the_levels(tmp_path):
    """`ablate train data.task=poshist budget=smoke` (the 1-layer model Q3 uses, a longer test set),
    8 steps: it completes and records the three reference levels of both evaluation sets."""
    run = tmp_path / "run"
    assert cli.main(["train", "data.task=poshist", "budget=smoke", "data.test_length=12", "model.n_layers=1",
                     "tracking=none", "run.probes=false", "trainer.threads=1", f"run.dir={run}"]) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed"
    metrics = summary["metrics"]
    for split in ("val", "test"):
        assert {f"ref/{split}/{k}" for k in TASKS["poshist"].references} <= set(metrics)
    assert 0.0 <= metrics["test/acc"] <= 1.0
