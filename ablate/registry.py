"""The task registry: everything the rest of ablate asks about a task (`data.task`), in one entry.

A task is one module (its LightningDataModule, under ablate/data/) plus one `TaskSpec` in `TASKS`
below. The config validates `data.task` against these names and sizes the model from `model_sizes`;
the memory check reads `data_bytes`; budgets read `budgets`; the cost estimate reads `train_examples`;
the results table reads `eval_examples` (its eval/n_val and eval/n_test columns, which the reports'
intervals use for the evaluation set's own sampling error);
the reports name a task by `title` and draw its `references` (reference levels: chance, and the best
an order-blind predictor can score, which the data module computes exactly on its own evaluation sets
and every run records in summary.json as `ref/<split>/<name>`).

A leaf module: it imports nothing of ablate, and no torch (the config reads it before anything heavy
is loaded); the data module is named by its import path and loaded only when data is built.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DataConfig = Any  # ablate.config.DataConfig (not imported: this module is a leaf below the config)

MNIST_IMAGES, MNIST_TRAIN = 70_000, 60_000  # the official split: 60,000 training, 10,000 test images
MNIST_ROWS, MNIST_CLASSES = 28, 10
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081  # of the 60k training pixels, scaled to [0, 1]: ablate.data.mnist and the explorer
# MNIST's four files, in <data_dir()>/MNIST/raw/ (ablate.data.files checks them before training, the explorer reads
# its test images from them without torch). The IDX format (LeCun & Cortes): a big-endian uint32 magic (0x08 =
# unsigned bytes, then the number of dimensions), one uint32 per dimension, then the bytes; what each kind holds:
MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
MNIST_IDX = {
    "images": (2051, (MNIST_ROWS, MNIST_ROWS)),  # 3-d: count, 28 rows, 28 columns
    "labels": (2049, ()),  # 1-d: count
}
LONG = 8  # bytes of an int64 token id


def data_dir() -> Path:
    """Where data sets live: $ABLATE_DATA_DIR, else ./data (relative to the working directory)."""
    return Path(os.environ.get("ABLATE_DATA_DIR") or "data").expanduser()


# Reference levels a data module can compute on an evaluation set (see ablate/data/reference.py):
REFERENCE_TEXT = {
    "chance": "the best constant prediction (the most frequent target)",
    "order_blind": "the accuracy an order-blind (bag-of-tokens) model can expect: the best prediction "
                   "from the position's own token and the multiset of the sequence's tokens, every "
                   "arrangement the data could have had being equally likely",
    "one_key": "the best prediction from one of the two key tokens alone (facts: the better of a and b)",
    "position_only": "the accuracy a model that knows the token two back and its own token, and nothing else, "
                     "can expect (poshist: the positional relation alone, the count guessed)",
}


@dataclass(frozen=True)
class TaskSpec:
    name: str  # the data.task value
    title: str  # how a sentence or a legend names it
    kind: str  # "classify": one label per sequence; "tokens": a label per position (IGNORE elsewhere)
    datamodule: str  # "module:Class" under ablate.data, imported when data is built
    about: str  # one line for docs/train.md and `ablate keys`: what it tests
    seq_len: Callable[[DataConfig], int]  # longest sequence the encoder sees (before a CLS token)
    model_sizes: Callable[[DataConfig], dict[str, int]]  # in_features/n_classes or n_tokens/n_out
    train_examples: Callable[[DataConfig], int]  # training examples of one epoch
    data_bytes: Callable[[DataConfig], int]  # peak host memory of building the data sets
    eval_examples: Callable[[DataConfig], dict[str, int]]  # {"val": n, "test": n}: examples each split evaluates
    budgets: dict[str, dict[str, Any]] = field(default_factory=dict)  # budget -> settings (ablate.budgets)
    references: tuple[str, ...] = ()  # reference levels its data module computes (REFERENCE_TEXT)
    check: Callable[[DataConfig], str | None] = lambda cfg: None  # an impossible setting, in words
    keys: tuple[str, ...] = ()  # the data.* keys of its own it reads; another task's key must stay at its default
    plugin: str = ""  # the plug-in that registered it (ablate.plugins); its datamodule is then "package.module:Class"
    # "package.module:function", f(DataConfig): what a sweep's command checks of the data before any run without
    # building the data module (files there, memory enough), raising ablate.data.DataError; "": the data module's
    # own prepare_data (Lightning imported for it)
    prepare: str = ""

    def datamodule_class(self) -> type:
        module, _, cls = self.datamodule.partition(":")
        return getattr(importlib.import_module(module if self.plugin else f"ablate.data.{module}"), cls)


# ---- MNIST as 28 rows of 28 pixels (the tutorial's model) ----

def _mnist_check(cfg: DataConfig) -> str | None:
    train, test = MNIST_TRAIN, MNIST_IMAGES - MNIST_TRAIN
    if cfg.val_size >= train:
        return f"data.val_size={cfg.val_size} is not allowed; MNIST has {train} training images, expected fewer than {train}"
    if cfg.train_subset is not None and cfg.train_subset > train - cfg.val_size:
        return (f"data.train_subset={cfg.train_subset} is not allowed; the training split holds "
                f"{train - cfg.val_size} images, expected at most that or null")
    if cfg.test_subset is not None and cfg.test_subset > test:
        return f"data.test_subset={cfg.test_subset} is not allowed; the test set holds {test} images, expected at most that or null"
    return None


MNIST = TaskSpec(
    name="mnist",
    title="MNIST rows",
    kind="classify",
    datamodule="mnist:MnistRows",
    prepare="ablate.data.files:mnist_ready",
    about="MNIST read as 28 rows of 28 pixels, one label per image (the tutorial's model)",
    seq_len=lambda cfg: MNIST_ROWS,
    model_sizes=lambda cfg: {"in_features": MNIST_ROWS, "n_classes": MNIST_CLASSES},
    train_examples=lambda cfg: min(cfg.train_subset or MNIST_TRAIN, MNIST_TRAIN - cfg.val_size),
    # uint8 files, one float32 tensor, labels
    data_bytes=lambda cfg: MNIST_IMAGES * (MNIST_ROWS * MNIST_ROWS * 5 + 2 * LONG),
    # val: the first val_size of a seeded shuffle of the training images; test: the first test_subset
    # official test images, all 10,000 when unset
    eval_examples=lambda cfg: {"val": cfg.val_size, "test": cfg.test_subset or MNIST_IMAGES - MNIST_TRAIN},
    budgets={
        # CI: a whole sweep in about 2 minutes on 2 cores. Proves the plumbing, answers nothing.
        "smoke": {"trainer.max_epochs": 1, "data.train_subset": 512, "data.val_size": 256,
                  "data.test_subset": 512, "run.probe_batch": 32},
        # This machine (2 cores): the tutorial's model to about 88 % on MNIST rows in 376 steps.
        "quick": {"trainer.max_epochs": 4, "data.train_subset": 6000, "data.val_size": 1000,
                  "data.test_subset": 2000},
        # Paper quality, meant for GPUs: the whole training set, long training.
        "full": {"trainer.max_epochs": 20},
    },
    references=("chance",),
    check=_mnist_check,
    keys=("val_size", "permute", "permute_seed", "test_subset"),
)


# ---- synthetic token tasks: n sequences, generated in memory from data.seed ----

def _synthetic_examples(cfg: DataConfig) -> int:
    return min(cfg.train_subset or cfg.n_train, cfg.n_train)


def _synthetic_eval(cfg: DataConfig) -> dict[str, int]:
    return {"val": cfg.n_val, "test": cfg.n_test}  # sequences, generated from data.seed


def _synthetic_check(cfg: DataConfig) -> str | None:
    if cfg.train_subset is not None and cfg.train_subset > cfg.n_train:
        return f"data.train_subset={cfg.train_subset} is not allowed; expected at most data.n_train={cfg.n_train} or null"
    return None


def _copy_len(length: int) -> int:
    return 2 * length + 1  # tokens, SEP, a blank per token


def _copy_check(cfg: DataConfig) -> str | None:
    """Fewer than 2 tokens (every target the same, nothing to copy), or ids past int64."""
    if cfg.vocab < 2:
        return (f"data.vocab={cfg.vocab!r} is not allowed for data.task=copy; expected an integer >= 2 "
                "(with one token every target is the same and there is nothing to copy)")
    if cfg.vocab > 2**62:  # token ids vocab and vocab + 1 (SEP, BLANK) stay far inside int64
        return f"data.vocab={cfg.vocab!r} is not allowed; expected at most 2**62 (token ids are int64)"
    return _synthetic_check(cfg)


SYNTHETIC_KEYS = ("vocab", "length", "test_length", "n_train", "n_val", "n_test")


def _copy_bytes(cfg: DataConfig) -> int:
    """int64 x and y, and the pieces x is concatenated from, at the peak."""
    tokens = (cfg.n_train + cfg.n_val) * _copy_len(cfg.length) + cfg.n_test * _copy_len(cfg.eval_length)
    return 3 * LONG * tokens


COPY = TaskSpec(
    name="copy",
    title="copy task",
    kind="tokens",
    datamodule="copytask:CopyTask",
    prepare="ablate.data.files:memory_enough",
    about="read data.length tokens, a separator, then blanks: emit the tokens in order "
          "(data.reverse=true: reversed); the test set can be longer (data.test_length)",
    seq_len=lambda cfg: _copy_len(max(cfg.length, cfg.eval_length)),
    model_sizes=lambda cfg: {"n_tokens": cfg.vocab + 2, "n_out": cfg.vocab},
    train_examples=_synthetic_examples,
    data_bytes=_copy_bytes,
    eval_examples=_synthetic_eval,
    budgets={
        "smoke": {"trainer.max_epochs": 1, "data.n_train": 512, "data.n_val": 128, "data.n_test": 128,
                  "run.probe_batch": 32},
        "quick": {"trainer.max_epochs": 10, "data.n_train": 4000, "data.n_val": 500, "data.n_test": 500},
        "full": {"trainer.max_epochs": 30, "data.n_train": 100000, "data.n_val": 2000, "data.n_test": 5000},
    },
    references=("chance", "order_blind"),
    check=_copy_check,
    keys=(*SYNTHETIC_KEYS, "reverse"),
)


# ---- histogram (Q2): at each token, how many times it occurs in its sequence ----

def _histogram_len(length: int) -> int:
    return length + 1  # BOS, then the tokens


def _histogram_bytes(cfg: DataConfig) -> int:
    """int64 x and y of every split held, plus at the peak of building one split about five (n, L+1)
    int64 temporaries (tokens, sorted rows, two binary searches, their difference)."""
    tokens = (cfg.n_train + cfg.n_val) * _histogram_len(cfg.length) + cfg.n_test * _histogram_len(cfg.eval_length)
    return 7 * LONG * tokens


def _histogram_check(cfg: DataConfig) -> str | None:
    if cfg.vocab < 2:
        return (f"data.vocab={cfg.vocab!r} is not allowed for data.task=histogram; expected an integer >= 2 "
                "(with one token every count is data.length and there is nothing to count)")
    if cfg.vocab > 2**62:  # token ids up to vocab (BOS) stay far inside int64
        return f"data.vocab={cfg.vocab!r} is not allowed; expected at most 2**62 (token ids are int64)"
    if cfg.reverse:
        return ("data.reverse=true is not allowed for data.task=histogram; expected false "
                "(a count does not depend on order, so there is nothing to reverse)")
    return _synthetic_check(cfg)


HISTOGRAM = TaskSpec(
    name="histogram",
    title="histogram task",
    kind="tokens",
    datamodule="histogram:Histogram",
    prepare="ablate.data.files:memory_enough",
    about="BOS then data.length tokens: at each token, how many times it occurs in the sequence "
          "(Weiss et al. 2021); needs attention spread evenly over the matching tokens (Q2)",
    seq_len=lambda cfg: _histogram_len(max(cfg.length, cfg.eval_length)),
    model_sizes=lambda cfg: {"n_tokens": cfg.vocab + 1, "n_out": max(cfg.length, cfg.eval_length) + 1},
    train_examples=_synthetic_examples,
    data_bytes=_histogram_bytes,
    eval_examples=_synthetic_eval,
    budgets={
        "smoke": {"trainer.max_epochs": 1, "data.n_train": 512, "data.n_val": 128, "data.n_test": 128,
                  "run.probe_batch": 32},
        # 1,000 steps: twice what 2 layers of one scaled head (d_head 64, no positions, no dropout)
        # took to pass 99 % here (docs/tasks/histogram.md)
        "quick": {"trainer.max_epochs": 8, "data.n_train": 8000, "data.n_val": 1000, "data.n_test": 1000},
        "full": {"trainer.max_epochs": 30, "data.n_train": 100000, "data.n_val": 2000, "data.n_test": 5000},
    },
    references=("chance", "order_blind"),  # order_blind is 100 %: a count is a function of the bag of tokens
    check=_histogram_check,
    keys=SYNTHETIC_KEYS,
)


# ---- lookup (Q3): the ordered pair of the two tokens before each position; lookup1: one of them ----

LOOKUP_SPAN = 2  # positions without a target: ablate/data/lookup.py's offsets reach 2 back (a test checks)


def _lookup_bytes(cfg: DataConfig) -> int:
    """int64 x and y of every split held, plus at the peak of building one split an (n, L) target."""
    tokens = (cfg.n_train + cfg.n_val) * cfg.length + cfg.n_test * cfg.eval_length
    return 3 * LONG * tokens


def _lookup_check(task: str) -> Callable[[DataConfig], str | None]:
    def check(cfg: DataConfig) -> str | None:
        if cfg.vocab < 2:
            return (f"data.vocab={cfg.vocab!r} is not allowed for data.task={task}; expected an integer >= 2 "
                    "(with one token every target is the same and there is nothing to look up)")
        if cfg.vocab > 2**31:  # pair classes up to vocab² stay inside int64
            return f"data.vocab={cfg.vocab!r} is not allowed for data.task={task}; expected at most 2**31 (class ids vocab² are int64)"
        for key in ("length", "test_length"):
            value = getattr(cfg, key)
            if value is not None and value <= LOOKUP_SPAN:
                return (f"data.{key}={value!r} is not allowed for data.task={task}; expected at least "
                        f"{LOOKUP_SPAN + 1} (the first {LOOKUP_SPAN} positions have no target)")
        if cfg.reverse:
            return (f"data.reverse=true is not allowed for data.task={task}; expected false "
                    "(the offsets fix which token comes first)")
        return _synthetic_check(cfg)
    return check


LOOKUP_BUDGETS = {
    "smoke": {"trainer.max_epochs": 1, "data.n_train": 512, "data.n_val": 128, "data.n_test": 128,
              "run.probe_batch": 32},
    # This machine: 1,260 steps. The 1-layer attention-only model (d_model 64) reached 99 % in 504-819
    # steps with 1 head, 126-441 with 2, 189 with 4, 8 or 16; the control in 63 with any (docs/tasks/lookup.md)
    "quick": {"trainer.max_epochs": 20, "data.n_train": 4000, "data.n_val": 500, "data.n_test": 500},
    "full": {"trainer.max_epochs": 30, "data.n_train": 100000, "data.n_val": 2000, "data.n_test": 5000},
}

LOOKUP = TaskSpec(
    name="lookup",
    title="lookup task",
    kind="tokens",
    datamodule="lookup:Lookup",
    prepare="ablate.data.files:memory_enough",
    about="data.length tokens: at each position from the third, the ordered pair of the two tokens "
          "before it as one of vocab² classes; two lookups at once, which two heads can split (Q3)",
    seq_len=lambda cfg: max(cfg.length, cfg.eval_length),
    model_sizes=lambda cfg: {"n_tokens": cfg.vocab, "n_out": cfg.vocab**2},
    train_examples=_synthetic_examples,
    data_bytes=_lookup_bytes,
    eval_examples=_synthetic_eval,
    budgets=LOOKUP_BUDGETS,
    references=("chance", "order_blind"),
    check=_lookup_check("lookup"),
    keys=SYNTHETIC_KEYS,
)

LOOKUP1 = TaskSpec(
    name="lookup1",
    title="one-lookup control",
    kind="tokens",
    datamodule="lookup:Lookup1",
    prepare="ablate.data.files:memory_enough",
    about="lookup's control: at each position from the third, the token two before it (one lookup)",
    seq_len=lambda cfg: max(cfg.length, cfg.eval_length),
    model_sizes=lambda cfg: {"n_tokens": cfg.vocab, "n_out": cfg.vocab},
    train_examples=_synthetic_examples,
    data_bytes=_lookup_bytes,
    eval_examples=_synthetic_eval,
    budgets=LOOKUP_BUDGETS,
    references=("chance", "order_blind"),
    check=_lookup_check("lookup1"),
    keys=SYNTHETIC_KEYS,
)


# ---- poshist (Q3): at each token, the token two back and whether the token occurs again, as one class ----

POSHIST_BACK = 2  # the positional relation: the token this many back (ablate/data/poshist.py)
POSHIST_CAP = 2  # the content relation: a count, every count from this one up one class (2: whether it recurs)


def _poshist_bytes(cfg: DataConfig) -> int:
    """int64 x and y of every split held, plus at the peak of building one split about seven (n, L+1)
    int64 temporaries (tokens, sorted rows, two binary searches, the count, the target, its pieces)."""
    tokens = (cfg.n_train + cfg.n_val) * _histogram_len(cfg.length) + cfg.n_test * _histogram_len(cfg.eval_length)
    return 9 * LONG * tokens


def _poshist_check(cfg: DataConfig) -> str | None:
    if cfg.vocab < 2:
        return (f"data.vocab={cfg.vocab!r} is not allowed for data.task=poshist; expected an integer >= 2 "
                "(with one token every target is the same)")
    if cfg.vocab > 2**60:  # class ids up to vocab * POSHIST_CAP stay inside int64
        return (f"data.vocab={cfg.vocab!r} is not allowed for data.task=poshist; expected at most 2**60 "
                f"(class ids vocab * {POSHIST_CAP} are int64)")
    for key in ("length", "test_length"):
        value = getattr(cfg, key)
        if value is not None and value <= POSHIST_BACK:
            return (f"data.{key}={value!r} is not allowed for data.task=poshist; expected at least "
                    f"{POSHIST_BACK + 1} (the first {POSHIST_BACK} tokens have no token {POSHIST_BACK} back)")
    if cfg.reverse:
        return ("data.reverse=true is not allowed for data.task=poshist; expected false "
                "(the offset fixes which token is asked for)")
    return _synthetic_check(cfg)


POSHIST = TaskSpec(
    name="poshist",
    title="position-and-count task",
    kind="tokens",
    datamodule="poshist:Poshist",
    prepare="ablate.data.files:memory_enough",
    about="BOS then data.length tokens: at each token from the third, the token two back and its own "
          f"count capped at {POSHIST_CAP} (whether it occurs again) as one of vocab * {POSHIST_CAP} classes; "
          "a positional and a content relation at once, which two heads of one layer can split (Q3)",
    seq_len=lambda cfg: _histogram_len(max(cfg.length, cfg.eval_length)),
    model_sizes=lambda cfg: {"n_tokens": cfg.vocab + 1, "n_out": cfg.vocab * POSHIST_CAP},
    train_examples=_synthetic_examples,
    data_bytes=_poshist_bytes,
    eval_examples=_synthetic_eval,
    budgets={
        "smoke": {"trainer.max_epochs": 1, "data.n_train": 512, "data.n_val": 128, "data.n_test": 128,
                  "run.probe_batch": 32},
        # 1,500 steps: sized so that the tutorial's 4 heads (1 layer, FFN 128) sit between the
        # position-only level and the ceiling, short of solving it (docs/tasks/poshist.md)
        "quick": {"trainer.max_epochs": 12, "data.n_train": 8000, "data.n_val": 1000, "data.n_test": 1000},
        "full": {"trainer.max_epochs": 30, "data.n_train": 100000, "data.n_val": 2000, "data.n_test": 5000},
    },
    references=("chance", "position_only", "order_blind"),
    check=_poshist_check,
    keys=SYNTHETIC_KEYS,
)


# ---- recall (the RNN's long range): read n tokens and a query, emit the first token ----

def _recall_len(length: int) -> int:
    return length + 1  # the tokens, then the query


def _recall_bytes(cfg: DataConfig) -> int:
    """int64 x and y of every split held, plus at the peak of building one split the (n, L) tokens."""
    tokens = (cfg.n_train + cfg.n_val) * _recall_len(cfg.length) + cfg.n_test * _recall_len(cfg.eval_length)
    return 3 * LONG * tokens


def _recall_check(cfg: DataConfig) -> str | None:
    if cfg.vocab < 2:
        return (f"data.vocab={cfg.vocab!r} is not allowed for data.task=recall; expected an integer >= 2 "
                "(with one token every target is the same and there is nothing to recall)")
    if cfg.vocab > 2**62:  # token ids up to vocab (the query) stay far inside int64
        return f"data.vocab={cfg.vocab!r} is not allowed; expected at most 2**62 (token ids are int64)"
    if cfg.reverse:
        return ("data.reverse=true is not allowed for data.task=recall; expected false "
                "(one token is recalled: there is no order to reverse)")
    return _synthetic_check(cfg)


RECALL = TaskSpec(
    name="recall",
    title="lag-recall task",
    kind="tokens",
    datamodule="recall:Recall",
    prepare="ablate.data.files:memory_enough",
    about="read data.length tokens and a query: at the query, emit the first token, data.length steps "
          "back (one token to hold: the lag alone moves; the test set can use another lag, data.test_length)",
    seq_len=lambda cfg: _recall_len(max(cfg.length, cfg.eval_length)),
    model_sizes=lambda cfg: {"n_tokens": cfg.vocab + 1, "n_out": cfg.vocab},
    train_examples=_synthetic_examples,
    data_bytes=_recall_bytes,
    eval_examples=_synthetic_eval,
    budgets={
        "smoke": {"trainer.max_epochs": 1, "data.n_train": 512, "data.n_val": 128, "data.n_test": 128,
                  "run.probe_batch": 32},
        # This machine: 500 steps, so that the recall sweeps' lag 256 fits 10 minutes per arm
        "quick": {"trainer.max_epochs": 8, "data.n_train": 4000, "data.n_val": 500, "data.n_test": 1000},
        "full": {"trainer.max_epochs": 30, "data.n_train": 100000, "data.n_val": 2000, "data.n_test": 5000},
    },
    references=("chance", "order_blind"),
    check=_recall_check,
    keys=SYNTHETIC_KEYS,
)


# ---- facts (the FFN stores facts): a fixed random value for each key pair (a, b) ----

def _facts_bytes(cfg: DataConfig) -> int:
    """int64 x and y (2 tokens) of every split held, the table, and at the peak three K² key orders."""
    facts = cfg.vocab**2
    rows = cfg.n_train + min(cfg.n_val, facts) + min(cfg.n_test, facts)
    return 2 * 2 * LONG * rows + 2 * LONG * cfg.n_train + 4 * LONG * facts


def _facts_check(cfg: DataConfig) -> str | None:
    if cfg.vocab < 2:
        return (f"data.vocab={cfg.vocab!r} is not allowed for data.task=facts; expected an integer >= 2 "
                "(with one key per slot there is one value to store per row and nothing to look up)")
    if cfg.vocab > 2**15:  # K² facts held as a table
        return (f"data.vocab={cfg.vocab!r} is not allowed for data.task=facts; expected at most 32768 "
                "(the table holds vocab² facts)")
    if cfg.reverse:
        return ("data.reverse=true is not allowed for data.task=facts; expected false "
                "(the keys come from disjoint ranges: their order carries nothing)")
    return _synthetic_check(cfg)


FACTS = TaskSpec(
    name="facts",
    title="key→value facts task",
    kind="tokens",
    datamodule="facts:Facts",
    prepare="ablate.data.files:memory_enough",
    about="a key pair (a, b) from two ranges of data.vocab tokens: emit its value in a fixed random table "
          "of vocab² facts drawn from data.seed; only the weights can hold it (what the FFN stores)",
    seq_len=lambda cfg: 2,
    model_sizes=lambda cfg: {"n_tokens": 2 * cfg.vocab, "n_out": cfg.vocab},
    train_examples=_synthetic_examples,
    data_bytes=_facts_bytes,
    eval_examples=lambda cfg: {"val": min(cfg.n_val, cfg.vocab**2), "test": min(cfg.n_test, cfg.vocab**2)},
    budgets={
        "smoke": {"trainer.max_epochs": 1, "data.n_train": 512, "data.n_val": 128, "data.n_test": 128,
                  "run.probe_batch": 32},
        # This machine: 768 steps at the facts sweeps' batch of 256 (each of 4,096 facts seen 48 times);
        # every split's size is capped at vocab², so 100,000 means every fact
        "quick": {"trainer.max_epochs": 12, "data.n_train": 16384, "data.n_val": 100000, "data.n_test": 100000},
        "full": {"trainer.max_epochs": 100, "data.n_train": 65536, "data.n_val": 10**9, "data.n_test": 10**9},
    },
    references=("chance", "one_key"),
    check=_facts_check,
    keys=("vocab", "n_train", "n_val", "n_test"),
)


# The registry: data.task -> its entry. Adding a task: its module under ablate/data/ and one entry here (or, from
# your own code, a plug-in's plugin.task: ablate/plugins.py). NAMES: the built-in ones.
TASKS: dict[str, TaskSpec] = {spec.name: spec for spec in (MNIST, COPY, HISTOGRAM, LOOKUP, LOOKUP1, POSHIST,
                                                                   RECALL, FACTS)}
NAMES: tuple[str, ...] = tuple(TASKS)


def spec(name: str) -> TaskSpec:
    """The entry of data.task=`name` (KeyError for an unknown name: the config refuses those first)."""
    return TASKS[name]


# the end of the line that refuses a value, a section or a task a plug-in could bring (ablate.plugins): the plug-in
# may just not be named; here, a leaf, so that `ablate tasks` (ablate.studies) says it without importing plug-ins
def plugin_missing(named_with: str = "plugins=<module>") -> str:
    """That line's end, naming the plug-in as the command line does, or as `named_with` (a sweep file's way)."""
    return f"if it comes from a plug-in, name it with {named_with}"


PLUGIN_MISSING = plugin_missing()
# in a sweep file the plug-in is a parameter of its own
PLUGIN_MISSING_SWEEP = plugin_missing("the parameter plugins: {value: <module>}")
