"""The task registry (ablate/registry.py) and the reference levels every task exports.

Every registered task: its data module agrees with its entry (kind, sizes, sequence length, memory),
its budget profiles name real keys, and its reference levels equal a brute-force computation on its
own evaluation set.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from fractions import Fraction

import pytest
import torch

from ablate import config as C
from ablate.budgets import NAMES as BUDGETS
from ablate.data import build_datamodule
from ablate.data.copytask import copy_sequences
from ablate.data.reference import IGNORE, chance, order_blind
from ablate.registry import REFERENCE_TEXT, TASKS

SYNTHETIC = [name for name, task in TASKS.items() if task.kind == "tokens"]
SMALL = {"data.n_train": 64, "data.n_val": 300, "data.n_test": 300}


def _data(name: str, **extra) -> C.DataConfig:
    return C.build({"data.task": name, **SMALL, **extra}).data


def brute_order_blind(x: torch.Tensor, y: torch.Tensor) -> float:
    """The definition, in plain Python: group target positions by (sorted tokens of the sequence,
    own token) over the whole set, score each group's most frequent target."""
    groups: dict[tuple, Counter] = defaultdict(Counter)
    total = 0
    for row_x, row_y in zip(x.tolist(), y.tolist()):
        bag = tuple(sorted(row_x))
        for token, target in zip(row_x, row_y):
            if target != IGNORE:
                groups[(bag, token)][target] += 1
                total += 1
    return sum(max(c.values()) for c in groups.values()) / total


def brute_chance(y: torch.Tensor) -> float:
    targets = [t for t in y.flatten().tolist() if t != IGNORE]
    return max(Counter(targets).values()) / len(targets)


def test_every_budget_profile_sets_real_keys_of_real_budgets():
    keys = set(C.all_keys())
    for task in TASKS.values():
        assert set(task.budgets) <= set(BUDGETS), task.name
        for settings in task.budgets.values():
            assert set(settings) <= keys, (task.name, set(settings) - keys)


@pytest.mark.parametrize("name", SYNTHETIC)
def test_the_data_module_agrees_with_its_entry(name):
    cfg = _data(name)
    task = TASKS[name]
    dm = build_datamodule(cfg)
    dm.setup("fit")
    assert dm.kind == task.kind == "tokens"
    assert (dm.n_tokens, dm.n_out) == (task.model_sizes(cfg)["n_tokens"], task.model_sizes(cfg)["n_out"])
    x, y = dm.train_set.tensors()
    assert x.shape[1] <= task.seq_len(cfg) == cfg.seq_len()
    assert 0 <= x.min() and x.max() < dm.n_tokens
    targets = y[y != IGNORE]
    assert targets.numel() > 0 and 0 <= targets.min() and targets.max() < dm.n_out
    held = sum(t.numel() * t.element_size() for s in (dm.train_set, dm.val_set, dm.test_set) for t in s.tensors())
    assert held <= task.data_bytes(cfg)  # the memory check never underestimates what is held
    assert task.train_examples(cfg) == len(dm.train_set)


@pytest.mark.parametrize("name", SYNTHETIC)
def test_reference_levels_equal_a_brute_force_count_on_the_evaluation_sets(name):
    dm = build_datamodule(_data(name))
    levels = dm.reference_levels()
    assert set(levels) == {f"ref/{s}/{r}" for s in ("val", "test") for r in TASKS[name].references}
    for split, data in (("val", dm.val_set), ("test", dm.test_set)):
        x, y = data.tensors()
        assert levels[f"ref/{split}/chance"] == pytest.approx(brute_chance(y), abs=1e-12)
        if "order_blind" in TASKS[name].references and "order_blind" not in dm.levels:
            assert levels[f"ref/{split}/order_blind"] == pytest.approx(brute_order_blind(x, y), abs=1e-12)
        # a task with its own exact level (lookup's and poshist's expectations) checks it against its
        # own brute force in its test file (tests/test_lookup.py, tests/test_poshist.py)


def test_every_reference_level_a_task_records_is_described():
    for task in TASKS.values():
        assert set(task.references) <= set(REFERENCE_TEXT), (task.name, set(task.references) - set(REFERENCE_TEXT))


def test_copy_order_blind_level_is_the_expected_largest_count_over_length():
    """Every sequence of length 4 over 3 tokens, each once: the level is exactly E[max count] / L,
    counted from the multinomial (Fraction arithmetic), and the order-blind computation agrees."""
    L, V = 4, 3
    seqs = torch.tensor(list(itertools.product(range(V), repeat=L)))  # all 81 sequences
    x, y = copy_sequences(len(seqs), L, V, False, torch.Generator().manual_seed(0))
    x[:, :L], y[:, L + 1:] = seqs, seqs
    expected = sum(Fraction(max(Counter(s).values()), L) for s in itertools.product(range(V), repeat=L)) / V**L
    assert expected == Fraction(16, 27)  # 192 of 324 blanks
    assert order_blind(x, y) == pytest.approx(16 / 27, abs=1e-12)
    assert chance(y) == pytest.approx(1 / 3)  # every token equally often


def test_copy_plateau_levels_at_the_issues_lengths():
    """The numbers the README quotes: 30.0 % at L = 8, 23.6 % at L = 16 (vocabulary 10), on 20,000
    sequences (the standard error of a level is about 0.1 point)."""
    g = torch.Generator().manual_seed(0)
    assert order_blind(*copy_sequences(20000, 8, 10, False, g)) == pytest.approx(0.300, abs=0.003)
    assert order_blind(*copy_sequences(20000, 16, 10, False, g)) == pytest.approx(0.236, abs=0.003)


def test_order_blind_groups_across_sequences_with_the_same_tokens():
    """Two sequences with one multiset and one own token must share a prediction: the level counts
    one majority over both, not each sequence's own."""
    x = torch.tensor([[1, 2, 9], [2, 1, 9]])  # same multiset {1, 2, 9}
    y = torch.tensor([[IGNORE, IGNORE, 1], [IGNORE, IGNORE, 2]])  # token 9's target differs by order
    assert order_blind(x, y) == 0.5
    assert brute_order_blind(x, y) == 0.5


def test_chance_is_the_most_frequent_target_ignoring_untargeted_positions():
    assert chance(torch.tensor([3, 3, 1, 0])) == 0.5  # one label per sequence (MNIST)
    assert chance(torch.tensor([[IGNORE, 2, 2, 5], [IGNORE, IGNORE, 5, 5]])) == 0.6


def test_a_run_records_its_tasks_reference_levels(tmp_path):
    """summary.json carries ref/<split>/<level>, equal to the data module's own computation."""
    from ablate.train import train

    cfg = C.build(C.parse_overrides([
        "data.task=copy", "data.n_train=64", "data.n_val=40", "data.n_test=40", "data.test_length=12",
        "trainer.max_epochs=1", "tracking=none", "run.probes=false", "model.d_model=16", "model.n_heads=2",
        f"run.dir={tmp_path / 'run'}",
    ]))
    metrics = train(cfg, log=lambda *a: None)["metrics"]
    expected = build_datamodule(cfg.data).reference_levels()
    assert {k: metrics[k] for k in expected} == expected
    assert 0.1 < expected["ref/test/order_blind"] < expected["ref/val/order_blind"] < 0.5  # L 12 < L 8


@pytest.mark.parametrize("overrides, words", [
    ({"data.task": "histogram", "data.permute": "both"}, ["data.permute='both'", "data.task=histogram", "only to mnist"]),
    ({"data.task": "lookup", "data.val_size": "100"}, ["data.val_size=100", "data.task=lookup", "only to mnist"]),
    ({"data.task": "mnist", "data.vocab": "20"}, ["data.vocab=20", "data.task=mnist", "copy, histogram, lookup"]),
    ({"data.task": "lookup1", "data.reverse": "true"}, ["data.reverse=true", "lookup1"]),
])
def test_another_tasks_key_is_refused_not_silently_ignored(overrides, words):
    with pytest.raises(C.ConfigError) as err:
        C.build(overrides)
    assert "\n" not in str(err.value) and all(w in str(err.value) for w in words), str(err.value)


def test_every_task_check_runs_at_config_time_so_a_dry_run_sees_it():
    """copy's vocab check lives in its registry entry like the others': C.build (what `ablate sweep
    --dry-run` calls) refuses it, before any data module is built."""
    for task in SYNTHETIC:
        with pytest.raises(C.ConfigError, match="data.vocab=1 is not allowed"):
            C.build({"data.task": task, "data.vocab": "1"})


def test_defaults_of_every_task_build_and_keys_are_known_fields():
    fields = {f"data.{k}" for t in TASKS.values() for k in t.keys}
    assert fields <= set(C.all_keys())
    for name in TASKS:
        C.build({"data.task": name})


def test_copy_targets_on_a_hand_written_example():
    """Vocabulary 5 (SEP 5, BLANK 6), 3 tokens: the generator of seed 0 draws 4 4 3, so the input is
    4 4 3 SEP _ _ _ and the targets at the blanks 4 4 3 (reverse: 3 4 4); every other position IGNORE.
    Order-blind level of that one sequence: the most frequent token, 2 of 3 blanks."""
    n = IGNORE
    x, y = copy_sequences(1, 3, 5, False, torch.Generator().manual_seed(0))
    assert x.tolist() == [[4, 4, 3, 5, 6, 6, 6]] and y.tolist() == [[n, n, n, n, 4, 4, 3]]
    x, y = copy_sequences(1, 3, 5, True, torch.Generator().manual_seed(0))
    assert x.tolist() == [[4, 4, 3, 5, 6, 6, 6]] and y.tolist() == [[n, n, n, n, 3, 4, 4]]
    assert order_blind(x, y) == pytest.approx(2 / 3) and chance(y) == pytest.approx(2 / 3)
