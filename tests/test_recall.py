"""The lag-recall task (issue 25, the RNN's long range): targets on hand-written examples, its order-blind
expectation against an enumeration of every arrangement, the settings it refuses, and a real training
run of each arm. (tests/test_registry.py checks its entry and its chance level against a brute-force count.)"""

from __future__ import annotations

import itertools
import json
from collections import Counter

import pytest
import torch

from ablate import cli
from ablate import config as C
from ablate.data import build_datamodule
from ablate.data.recall import Recall, expected_order_blind, recall_sequences
from ablate.registry import TASKS

N = -100  # IGNORE: no target


def test_the_target_is_the_first_token_at_the_query_only():
    g = torch.Generator().manual_seed(0)
    x, y = recall_sequences(50, 7, 5, g)
    assert x.shape == y.shape == (50, 8)
    assert (x[:, -1] == 5).all() and (x[:, :-1] < 5).all()  # the query is token vocab, after 7 tokens
    assert torch.equal(y[:, -1], x[:, 0]) and (y[:, :-1] == N).all()


def test_order_blind_expectation_equals_an_enumeration_of_every_arrangement():
    """Given the bag, each arrangement is equally likely: the best guess of the first token is right in
    (largest count) / n of them; the expectation is that share averaged over the sequences."""
    x = torch.tensor([[1, 1, 2, 3, 9], [4, 4, 4, 0, 9], [0, 1, 2, 3, 9]])  # query 9 (vocab 9)
    y = torch.full_like(x, N)
    y[:, -1] = x[:, 0]
    by_hand = []
    for row in x[:, :-1].tolist():
        arrangements = list(itertools.permutations(row))
        firsts = Counter(a[0] for a in arrangements)
        by_hand.append(max(firsts.values()) / len(arrangements))
    assert by_hand == [2 / 4, 3 / 4, 1 / 4]
    assert expected_order_blind(x, y) == pytest.approx(sum(by_hand) / 3, abs=1e-12)


def test_order_blind_level_falls_towards_chance_with_the_lag():
    """E[largest count] / n: 30 % at n = 8 (copy's 30.0 %, the same count), far lower at 256."""
    levels = {}
    for n in (8, 256):
        dm = build_datamodule(C.build({"data.task": "recall", "data.length": n, "data.n_train": 64,
                                       "data.n_val": 2000, "data.n_test": 64}).data)
        levels[n] = dm.reference_levels()["ref/val/order_blind"]
    assert levels[8] == pytest.approx(0.300, abs=0.01)
    assert 0.10 < levels[256] < 0.16


def test_sets_follow_data_seed_and_test_length_sets_the_test_lag():
    cfg = C.build({"data.task": "recall", "data.length": 6, "data.test_length": 12, "data.n_train": 40,
                   "data.n_val": 30, "data.n_test": 20, "data.vocab": 7}).data
    dm = build_datamodule(cfg)
    assert isinstance(dm, Recall) and (dm.n_tokens, dm.n_out, dm.seq_len) == (8, 7, 13)
    dm.setup()
    assert dm.train_set.tensors()[0].shape == (40, 7) and dm.test_set.tensors()[0].shape == (20, 13)
    again = build_datamodule(cfg)
    again.setup()
    assert torch.equal(again.test_set.tensors()[0], dm.test_set.tensors()[0])
    other = build_datamodule(C.build({"data.task": "recall", "data.length": 6, "data.test_length": 12, "data.n_train": 40,
                                      "data.n_val": 30, "data.n_test": 20, "data.vocab": 7, "data.seed": 1}).data)
    other.setup()
    assert not torch.equal(other.test_set.tensors()[0], dm.test_set.tensors()[0])
    assert TASKS["recall"].seq_len(cfg) == 13


@pytest.mark.parametrize("overrides, words", [
    ({"data.vocab": 1}, "data.vocab=1 is not allowed for data.task=recall"),
    ({"data.reverse": True}, "data.reverse=true is not allowed for data.task=recall"),
    ({"data.train_subset": 10**6}, "data.train_subset=1000000 is not allowed"),
])
def test_impossible_settings_are_refused_in_one_line_before_any_work(overrides, words, tmp_path, capsys):
    args = ["train", "data.task=recall", *(f"{k}={v}" for k, v in overrides.items()), f"run.dir={tmp_path / 'run'}"]
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("arch, pe", [("lstm", "none"), ("transformer", "sinusoidal")])
def test_each_arm_learns_a_short_lag_in_a_real_run(tmp_path, arch, pe, monkeypatch):
    """Lag 4, vocabulary 4, 400 steps: each arm learns to recall the first token, well above the order-blind
    level it records (a model that cannot reach back 4 steps stays below it)."""
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path))
    overrides = ["data.task=recall", "data.length=4", "data.vocab=4", "data.n_train=3200", "data.n_val=500",
                 "data.n_test=500", "trainer.max_epochs=8", f"model.arch={arch}", f"model.pos_enc={pe}",
                 "model.d_model=32", "model.dropout=0", "optim.lr=0.01", "tracking=none", "run.probes=false",
                 f"run.dir={tmp_path / 'run'}"] + (["model.n_heads=2"] if arch == "transformer" else [])
    assert cli.main(["train", *overrides]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "completed"
    metrics = summary["metrics"]
    assert 0.48 < metrics["ref/test/order_blind"] < 0.58  # E[largest of 4 counts] / 4 = 0.531 (1,000,000 draws)
    assert metrics["test/acc"] > 0.9, metrics["test/acc"]
