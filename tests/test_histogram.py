"""The histogram task (Q2): targets on hand-computed rows, the data module's layout and seeding, its
reference levels, the settings it refuses, and a real training run that learns it.

The registry's parametrised tests (tests/test_registry.py) also cover it: the data module agrees with
its entry, and its reference levels equal a brute-force count on its evaluation sets.
"""

from __future__ import annotations

import itertools
from collections import Counter
from fractions import Fraction

import pytest
import torch

from ablate import cli
from ablate import config as C
from ablate.config import ConfigError, DataConfig
from ablate.data import build_datamodule, split_seed
from ablate.data.histogram import Histogram, histogram_counts, histogram_sequences
from ablate.data.reference import IGNORE, chance, order_blind
from ablate.registry import spec as task_spec


def histogram(**kw) -> Histogram:
    dm = Histogram(DataConfig(task="histogram", **{"vocab": 5, "length": 6, "n_train": 300, "n_val": 50,
                                                   "n_test": 60, **kw}))
    dm.setup("fit")
    return dm


def test_counts_of_hand_computed_rows():
    rows = torch.tensor([
        [3, 1, 3, 3, 0],  # 3 three times, 1 and 0 once
        [7, 7, 7, 7, 7],  # one token throughout
        [0, 1, 2, 3, 4],  # all different
        [9, 5, 9, 5, 2],  # two pairs and a single
    ])
    assert histogram_counts(rows).tolist() == [
        [3, 1, 3, 3, 1],
        [5, 5, 5, 5, 5],
        [1, 1, 1, 1, 1],
        [2, 2, 2, 2, 1],
    ]
    big = 2**62 - 1  # ids of any size: counted in sorted rows, no table as large as the vocabulary
    assert histogram_counts(torch.tensor([[big, 0, big, 1, 0]])).tolist() == [[2, 2, 2, 1, 2]]


def test_sequences_are_bos_then_tokens_and_targets_are_their_counts():
    x, y = histogram_sequences(200, 6, 4, torch.Generator().manual_seed(3))
    assert x.shape == y.shape == (200, 7) and x.dtype == y.dtype == torch.int64
    assert (x[:, 0] == 4).all() and (y[:, 0] == IGNORE).all()  # BOS = vocab, no target there
    assert 0 <= x[:, 1:].min() and x[:, 1:].max() < 4
    for row_x, row_y in zip(x[:, 1:].tolist(), y[:, 1:].tolist()):
        counts = Counter(row_x)
        assert row_y == [counts[t] for t in row_x]


def test_the_data_module_is_seeded_by_data_seed_alone_and_tests_at_test_length():
    dm = histogram(test_length=11)
    assert (dm.n_tokens, dm.n_out, dm.seq_len, dm.bos) == (6, 12, 12, 5)  # counts 1..11 at the test length
    assert dm.train_set.x.shape == (300, 7) and dm.test_set.x.shape == (60, 12)
    assert dm.test_set.y.max() <= 11
    g = torch.Generator().manual_seed(split_seed(0, "val", "histogram"))
    assert torch.equal(dm.val_set.x[:, 1:], torch.randint(0, 5, (50, 6), generator=g))
    again, other = histogram(test_length=11), histogram(test_length=11, seed=1)
    assert torch.equal(again.train_set.x, dm.train_set.x) and torch.equal(again.test_set.y, dm.test_set.y)
    assert not torch.equal(other.train_set.x, dm.train_set.x)


def test_reference_levels_of_every_sequence_of_three_binary_tokens():
    """All 8 sequences of length 3 over {0, 1}: two are constant (counts 3, 3, 3), six hold a pair and
    a single (2, 2, 1), so the 24 targets are 6 threes, 12 twos and 6 ones. Chance is 12/24; a count
    is a function of the bag of tokens, so the order-blind level is exactly 1."""
    seqs = torch.tensor(list(itertools.product(range(2), repeat=3)))  # (8, 3)
    x = torch.cat((torch.full((8, 1), 2), seqs), dim=1)
    y = torch.cat((torch.full((8, 1), IGNORE), histogram_counts(seqs)), dim=1)
    assert Counter(y[:, 1:].flatten().tolist()) == {3: 6, 2: 12, 1: 6}
    assert chance(y) == 0.5
    assert order_blind(x, y) == 1.0


def test_chance_at_the_default_sizes_is_the_share_of_singletons():
    """Vocabulary 10, length 8: a token is alone with probability 0.9^7 = 47.8 %, the most frequent
    count; on 20,000 sequences the level's standard error is about 0.2 point."""
    x, y = histogram_sequences(20000, 8, 10, torch.Generator().manual_seed(0))
    assert float(Fraction(9, 10) ** 7) == pytest.approx(0.4783, abs=1e-4)
    assert chance(y) == pytest.approx(0.9**7, abs=0.006)
    assert build_datamodule(DataConfig(task="histogram", n_train=10)).reference_levels()["ref/val/order_blind"] == 1.0


def test_memory_estimate_counts_every_split_and_the_temporaries():
    cfg = DataConfig(task="histogram", n_train=100, n_val=10, n_test=20, length=4, test_length=6)
    assert task_spec("histogram").data_bytes(cfg) == 7 * 8 * ((100 + 10) * 5 + 20 * 7)  # 38,640 bytes


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"data.vocab": 1}, "data.vocab=1 is not allowed for data.task=histogram; expected an integer >= 2 "
                            "(with one token every count is data.length and there is nothing to count)"),
        ({"data.vocab": 2**62 + 1}, f"data.vocab={2**62 + 1} is not allowed; expected at most 2**62 (token ids are int64)"),
        ({"data.reverse": True}, "data.reverse=true is not allowed for data.task=histogram; expected false "
                                 "(a count does not depend on order, so there is nothing to reverse)"),
        ({"data.n_train": 10, "data.train_subset": 11},
         "data.train_subset=11 is not allowed; expected at most data.n_train=10 or null"),
    ],
    ids=["vocab 1", "vocab 2**62+1", "reverse", "train_subset"],
)
def test_settings_that_cannot_be_built_are_config_errors(overrides, message):
    with pytest.raises(ConfigError) as err:
        C.build({"data.task": "histogram", **overrides})
    assert str(err.value) == message


def test_smallest_and_largest_vocab_build():
    x, y = histogram(vocab=2).train_set.tensors()
    assert set(x[:, 1:].unique().tolist()) == {0, 1} and (x[:, 0] == 2).all()
    x, y = histogram(vocab=2**62, n_train=3, n_val=1, n_test=1).train_set.tensors()
    assert x[:, 0].tolist() == [2**62] * 3  # BOS fits int64
    assert (y[:, 1:] >= 1).all() and (y[:, 1:] <= 6).all()


def test_reverse_exits_2_through_the_cli_with_one_line(tmp_path, monkeypatch, capsys):
    runs = tmp_path / "runs"
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(runs))
    assert cli.main(["train", "data.task=histogram", "data.reverse=true", "tracking=none"]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip() == ("ablate: data.reverse=true is not allowed for data.task=histogram; expected "
                                    "false (a count does not depend on order, so there is nothing to reverse)")
    assert captured.out == "" and not runs.exists()


def test_one_scaled_head_in_two_layers_learns_to_count(tmp_path):
    """A real run through ablate.train: 252 steps of the model the task is sized for (2 layers, one
    head of d_k 64, scaled scores, no positions, no dropout) pass 90 % of validation targets, far
    above the 48 % of predicting "once" everywhere; the run records the task's reference levels."""
    from ablate.train import train

    cfg = C.build(C.parse_overrides([
        "data.task=histogram", "data.n_train=4000", "data.n_val=500", "data.n_test=500",
        "trainer.max_epochs=4", "trainer.threads=1", "tracking=none", "run.probes=false",
        "model.n_heads=1", "model.d_head=64", "model.pos_enc=none", "model.dropout=0",
        f"run.dir={tmp_path / 'run'}",
    ]))
    summary = train(cfg, log=lambda *a: None)
    metrics = summary["metrics"]
    assert summary["status"] == "completed" and summary["global_step"] == 252
    levels = build_datamodule(cfg.data).reference_levels()
    assert {k: metrics[k] for k in levels} == levels
    assert metrics["ref/val/order_blind"] == 1.0 and 0.44 < metrics["ref/val/chance"] < 0.52
    assert metrics["val/acc_best"] > 0.9 > metrics["ref/val/chance"] + 0.35
