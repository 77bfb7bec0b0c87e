"""Bad configurations fail at construction with a ValueError naming the field, the value and what
is allowed (STYLE.md: x-transformers' "unrecognized kwargs", lightning-hydra-template's checks)."""

from __future__ import annotations

import dataclasses
import re

import pytest
import yaml

from ablate.models import Encoder, EncoderConfig

# (overrides, substrings the message must contain: field, value, what is allowed)
BAD = {
    "n_heads_not_dividing": (
        dict(d_model=64, n_heads=3),
        ["n_heads", "3", "d_model=64", "divide", "d_head"],
    ),
    "rope_odd_d_head": (
        dict(d_model=16, n_heads=2, d_head=3, pos_enc="rope"),
        ["d_head=3", "rope", "even"],
    ),
    "rope_odd_derived_d_head": (
        dict(d_model=6, n_heads=2, pos_enc="rope"),
        ["d_head=3", "rope", "even"],
    ),
    "activation": (dict(activation="tanh"), ["activation", "'tanh'", "relu", "gelu"]),
    "activation_case": (dict(activation="ReLU"), ["activation", "'ReLU'", "relu", "gelu"]),
    "norm": (dict(norm="sandwich"), ["norm", "'sandwich'", "pre", "post", "none"]),
    "norm_none_object": (dict(norm=None), ["norm", "None", "pre", "post", "none"]),
    "pos_enc": (
        dict(pos_enc="fourier"),
        ["pos_enc", "'fourier'", "none", "sinusoidal", "learned", "rope"],
    ),
    "init": (dict(init="kaiming"), ["init", "'kaiming'", "default", "xavier", "small", "unit"]),
    "temperature_zero": (dict(temperature=0.0), ["temperature", "0.0", "> 0"]),
    "temperature_zero_int": (dict(temperature=0), ["temperature", "0", "> 0"]),
    "temperature_negative": (dict(temperature=-1.0), ["temperature", "-1.0", "> 0"]),
    "temperature_nan": (dict(temperature=float("nan")), ["temperature", "nan", "> 0"]),
    "temperature_str": (dict(temperature="1"), ["temperature", "'1'", "number"]),
    "temperature_bool": (dict(temperature=True), ["temperature", "True", "number"]),
    "dropout_one": (dict(dropout=1.0), ["dropout", "1.0", "[0, 1)"]),
    "dropout_negative": (dict(dropout=-0.1), ["dropout", "-0.1", "[0, 1)"]),
    "dropout_str": (dict(dropout="0.1"), ["dropout", "'0.1'", "[0, 1)"]),
    "qk_scale_str": (dict(qk_scale="yes"), ["qk_scale", "'yes'", "true or false"]),
    "qk_scale_int": (dict(qk_scale=1), ["qk_scale", "1", "true or false"]),
    "residual_str": (dict(residual="no"), ["residual", "'no'", "true or false"]),
    "causal_none": (dict(causal=None), ["causal", "None", "true or false"]),
    "n_heads_float": (dict(n_heads=2.5), ["n_heads", "2.5", "integer"]),
    "n_heads_bool": (dict(n_heads=True), ["n_heads", "True", "integer"]),
    "n_heads_zero": (dict(n_heads=0), ["n_heads", "0", ">= 1"]),
    "n_layers_zero": (dict(n_layers=0), ["n_layers", "0", ">= 1"]),
    "n_layers_float": (dict(n_layers=2.0), ["n_layers", "2.0", "integer"]),
    "d_model_zero": (dict(d_model=0), ["d_model", "0", ">= 1"]),
    "d_head_zero": (dict(d_head=0), ["d_head", "0", ">= 1"]),
    "d_head_bool": (dict(d_head=True), ["d_head", "True", "integer"]),
    "ffn_mult_negative": (dict(ffn_mult=-1), ["ffn_mult", "-1", ">= 0"]),
    "ffn_mult_float": (dict(ffn_mult=1.5), ["ffn_mult", "1.5", "integer"]),
    "max_len_zero": (dict(max_len=0), ["max_len", "0", ">= 1"]),
    "learned_std_zero": (dict(learned_std=0.0), ["learned_std", "0.0", "> 0"]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_config_raises_value_error_naming_field_value_and_allowed(case):
    overrides, needles = BAD[case]
    with pytest.raises(ValueError) as info:
        EncoderConfig(**overrides)
    message = str(info.value)
    for needle in needles:
        assert needle in message, f"{needle!r} missing from {message!r}"


@pytest.mark.parametrize(
    "overrides",
    [
        dict(),
        dict(d_model=16, n_heads=3, d_head=5),  # n_heads need not divide d_model once d_head is set
        dict(d_model=16, n_heads=2, d_head=24, pos_enc="rope"),
        dict(temperature=2),  # an int is a number
        dict(temperature=1e-3),
        dict(dropout=0),
        dict(dropout=0.999),
        dict(ffn_mult=0),
        dict(n_layers=1, n_heads=1, d_model=1, max_len=1),
    ],
)
def test_good_configs_build(overrides):
    cfg = EncoderConfig(**{"max_len": 8, **overrides})
    assert Encoder(cfg) is not None
    for key, value in overrides.items():
        assert getattr(cfg, key) == value


def test_derived_sizes():
    cfg = EncoderConfig(
        d_model=16, n_heads=2, d_head=24, ffn_mult=3, qk_scale=True, temperature=2.0
    )
    assert (cfg.head_dim, cfg.inner_dim, cfg.ffn_dim) == (24, 48, 48)
    assert cfg.score_scale == pytest.approx(24**-0.5 / 2)
    cfg = EncoderConfig(d_model=64, n_heads=4, qk_scale=False, temperature=0.5)
    assert (cfg.head_dim, cfg.inner_dim) == (16, 64)
    assert cfg.score_scale == pytest.approx(2.0)


def test_config_is_frozen_and_rejects_unknown_fields():
    cfg = EncoderConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.n_heads = 8
    with pytest.raises(TypeError, match=re.escape("n_head")):
        EncoderConfig(n_head=8)


def test_replace_revalidates():
    with pytest.raises(ValueError, match="temperature"):
        dataclasses.replace(EncoderConfig(), temperature=-2.0)


def test_tutorial_defaults():
    cfg = EncoderConfig()
    assert (cfg.d_model, cfg.n_heads, cfg.ffn_dim, cfg.n_layers) == (64, 4, 128, 2)
    assert (cfg.pos_enc, cfg.norm, cfg.activation, cfg.dropout) == ("learned", "post", "relu", 0.1)
    assert (cfg.qk_scale, cfg.temperature, cfg.residual, cfg.causal) == (True, 1.0, True, False)


# --- every key of `ablate train`: bad input exits 2 with one line, before anything is written ---

from ablate import cli  # noqa: E402
from ablate import config as C  # noqa: E402

# (key, bad value, extra overrides). Every key of issue 11's list, then one bad value for every
# other key; `test_every_key_has_a_bad_value` keeps the table complete as keys are added.
BAD_VALUES = [
    # issue 11
    ("optim.lr", "inf", ()),
    ("optim.weight_decay", "inf", ()),
    ("optim.weight_decay", "nan", ()),
    ("trainer.accelerator", "foo", ()),
    ("trainer.precision", "foo", ()),
    ("trainer.strategy", "foo", ()),
    ("trainer.limit_val_batches", "-1", ()),
    ("trainer.limit_val_batches", "nan", ()),
    ("trainer.max_steps", "-5", ()),
    ("trainer.ckpt_every_n_steps", "-1", ()),
    ("trainer.accumulate_grad_batches", "0", ()),
    ("trainer.accumulate_grad_batches", "2", ("trainer.ckpt_every_n_steps=3",)),
    ("trainer.callbacks", "no_such_module:Callback", ()),
    ("trainer.callbacks", "os/path", ()),
    ("trainer.gradient_clip_val", "-1", ()),
    ("plugins", "no_such_plugin", ()),
    ("plugins", "a/b", ()),
    ("run.probe_batch", "0", ()),
    ("run.probe_batch", "-1", ()),
    ("run.probe_every", "-1", ()),
    ("trainer.log_every_n_steps", "-1", ()),
    ("trainer.threads", "-1", ()),
    ("seed", "-1", ()),
    ("seed", "1e20", ()),
    ("run.project", "a/b", ()),
    ("run.name", "a\tb", ()),
    ("run.sweep_id", "a/b", ()),
    # every other key
    ("model.d_model", "0", ()),
    ("model.n_heads", "0", ()),
    ("model.arch", "rnn", ()),
    ("model.rnn_hidden", "0", ()),
    ("model.rnn_init", "orthogonal", ("model.arch=lstm",)),
    ("model.rnn_init", "chrono", ()),  # a Transformer has no forget gate
    ("model.d_head", "0", ()),
    ("model.n_layers", "0", ()),
    ("model.n_layers", "1e30", ()),
    ("model.ffn_mult", "-1", ()),
    ("model.activation", "tanh", ()),
    ("model.qk_scale", "maybe", ()),
    ("model.qk_reparam", "maybe", ()),
    ("model.qk_reparam", "true", ()),  # with qk_scale=true, the default
    ("model.temperature", "inf", ()),
    ("model.temperature", "nan", ()),
    ("model.residual", "2", ()),
    ("model.residual_around", "neither", ()),
    ("model.residual_around", "ffn", ("model.residual=false",)),
    ("model.norm", "middle", ()),
    ("model.pos_enc", "fourier", ()),
    ("model.causal", "maybe", ()),
    ("model.init", "kaiming", ()),
    ("model.value_skipinit", "maybe", ()),
    ("model.shaped_attention", "maybe", ()),
    ("model.shaped_attention", "true", ("model.value_skipinit=true",)),  # two mixings: choose one
    ("model.max_len", "0", ()),
    ("model.learned_std", "0", ()),
    ("model.learned_std", "nan", ()),
    ("model.dropout", "1", ()),
    ("model.dropout", "nan", ()),
    ("data.task", "imagenet", ()),
    ("data.seed", "-1", ()),
    ("data.batch_size", "0", ()),
    ("data.train_subset", "0", ()),
    ("data.train_subset", "65", ()),  # more than data.n_train=64 below
    ("data.test_subset", "0", ()),
    ("data.val_size", "0", ()),
    ("data.val_size", "60000", ("data.task=mnist",)),  # MNIST has 60,000 training images
    ("data.permute", "rows", ()),
    ("data.permute_seed", "4294967296", ()),
    ("data.vocab", "0", ()),
    ("data.length", "0", ()),
    ("data.test_length", "0", ()),
    ("data.reverse", "maybe", ()),
    ("data.n_train", "0", ()),
    ("data.n_val", "0", ()),
    ("data.n_test", "0", ()),
    ("optim.name", "rmsprop", ()),
    ("optim.lr", "0", ()),
    ("optim.warmup", "1", ()),
    ("optim.schedule", "linear", ()),
    ("optim.grad_clip", "inf", ()),
    ("trainer.max_epochs", "0", ()),
    ("trainer.devices", "0", ()),
    ("trainer.num_nodes", "0", ()),
    ("trainer.flush_denormal", "maybe", ()),
    ("trainer.limit_val_batches", "1.5", ()),
    ("run.dir", "a\x00b", ()),
    ("run.init_from", "a\x00b", ()),
    ("run.init_from", "no/such/run", ()),  # checked before any work, as a missing data set
    ("run.group", "../x", ()),
    ("run.group", "/abs", ()),
    ("run.group", "a/b", ()),
    ("run.project", "..", ()),
    ("run.project", "a#b", ()),
    ("run.probes", "maybe", ()),
    ("run.expensive_probes", "maybe", ()),
    ("pooling", "max", ("data.task=mnist",)),
    ("budget", "huge", ()),
    ("tracking", "maybe", ()),
]


def _closed_keys_bad_values() -> list[tuple[str, str, tuple]]:
    """A value outside the choices of every key with a closed set of them (a Literal or a bool), so that a key
    added to the config is tried here by itself."""
    import typing

    out = []
    for key in C.all_keys():
        section, _, name = key.rpartition(".")
        tp = C._hints(C.SECTIONS[section] if section else C.Config)[name]
        if typing.get_origin(tp) is typing.Literal or tp is bool:
            out.append((key, "maybe" if tp is bool else "no-such-choice", ()))
    return out


BAD_VALUES += [v for v in _closed_keys_bad_values() if v[:2] not in {b[:2] for b in BAD_VALUES}]

# a run that would finish in seconds if a bad value slipped through (the old code trained these)
FAST = ("data.task=copy", "data.n_train=64", "data.n_val=32", "data.n_test=32", "trainer.max_epochs=1",
        "tracking=none", "run.probes=false", "model.d_model=16", "model.n_heads=2")


def test_every_key_has_a_bad_value():
    assert set(C.all_keys()) <= {key for key, _, _ in BAD_VALUES}


@pytest.mark.parametrize("key, value, extra", BAD_VALUES, ids=[f"{k}={v!r}" for k, v, _ in BAD_VALUES])
def test_bad_value_exits_2_with_one_line_and_writes_nothing(key, value, extra, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("WANDB_MODE", "offline")
    code = cli.main(["train", *FAST, *extra, f"{key}={value}"])
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("ablate: "), err
    assert key in lines[0], lines[0]
    assert out == ""
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", ["0.25", "1", "1.0", "4", "4.0"])
def test_limit_val_batches_is_a_fraction_or_a_whole_count(value):
    # Lightning reads 0 < x <= 1 as a fraction of the batches and a whole x > 1 as a count
    assert C.build({"trainer.limit_val_batches": value}).trainer.limit_val_batches == float(value)


@pytest.mark.parametrize("item", ["seed=4294967295", "seed=0", "data.seed=4294967295", "trainer.max_steps=-1",
                                  "trainer.max_steps=10", "trainer.ckpt_every_n_steps=0", "run.probe_every=0",
                                  "trainer.threads=null", "run.group=pos_enc", "run.project=my-project.v2",
                                  "trainer.accelerator=cpu", "trainer.precision=bf16-mixed",
                                  "trainer.strategy=ddp", "optim.weight_decay=0", "run.dir=runs/x y",
                                  "run.name=qk_scale=False lr=3e-4 s1", "run.sweep_id=abc123"])
def test_good_values_still_build(item):
    key, value = item.split("=", 1)
    assert C.flat(C.build({key: value}))[key] == yaml.safe_load(value)  # the value given, typed


def test_integers_convert_exactly():
    assert C.convert("k", "9007199254740993", int) == 2**53 + 1  # not rounded through a float
    assert C.build({"seed": "4294967295"}).seed == 2**32 - 1
    assert C.build({"seed": "1e3"}).seed == 1000


def test_sweep_dry_run_refuses_a_non_finite_value(tmp_path, capsys):
    from ablate import sweep

    f = tmp_path / "lr.yaml"
    f.write_text("program: ablate\ncommand: [ablate, train, \"${args_no_hyphens}\"]\nmethod: grid\n"
                 "parameters:\n  optim.lr: {value: inf}\n  seed: {values: [0, 1, 2]}\n")
    assert sweep.main([str(f), "--dry-run"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("ablate: ") and "optim.lr" in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lr.yaml"]


def test_yaml_alias_bomb_and_binary_file_exit_2_with_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    bomb = tmp_path / "bomb.yaml"
    lines = ["seed:", "  - &a [x, x, x, x, x, x, x, x, x, x]"]  # a real key: converting or printing
    lines += [f"  - &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]" for i in range(8)]  # 10**9 leaves
    bomb.write_text("\n".join(lines) + "\n")  # ~440 bytes
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(bytes(range(256)) * 4)
    for f, words in ((bomb, "alias"), (binary, "not UTF-8")):
        assert cli.main(["train", str(f)]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith("ablate: ") and words in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["binary.yaml", "bomb.yaml"]


def test_a_run_group_too_long_for_its_wandb_group_is_refused():
    """The W&B group is '<run.group>-<budget>' (at most 128 characters, like the group itself)."""
    from ablate.config import NAME_MAX

    C.build(C.parse_overrides([f"run.group={'g' * (NAME_MAX - 6)}", "budget=quick"]))
    with pytest.raises(C.ConfigError, match="too long for its W&B group"):
        C.build(C.parse_overrides([f"run.group={'g' * (NAME_MAX - 5)}", "budget=quick"]))
