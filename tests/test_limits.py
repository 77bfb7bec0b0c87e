"""The memory estimate: exact parameter counts, and runs too big for the machine refused in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ablate import cli, limits
from ablate import config as C
from ablate.models import meta, size
from ablate.tasks import ClassifyRows, CopyTokens


def built_parameters(cfg: C.Config) -> int:
    """sum(p.numel()) of the model ablate.tasks builds for cfg."""
    config = C.to_dict(cfg)
    if cfg.data.task == "mnist":
        task = ClassifyRows(config, in_features=28, n_classes=10)
    else:
        task = CopyTokens(config, n_tokens=cfg.data.vocab + 2, n_out=cfg.data.vocab)
    return sum(p.numel() for p in task.model.parameters())


@pytest.mark.parametrize("items", [
    (),
    ("pooling=cls",),
    ("model.norm=pre", "model.pos_enc=sinusoidal", "model.ffn_mult=0"),
    ("model.norm=none", "model.pos_enc=rope", "model.d_head=6", "model.n_heads=3", "model.n_layers=3"),
    ("model.pos_enc=none", "model.d_model=24", "model.n_heads=2", "model.d_head=40", "model.ffn_mult=3"),
    ("data.task=copy", "data.vocab=13", "model.max_len=40"),
    ("data.task=copy", "model.pos_enc=rope", "model.norm=pre", "data.length=5", "data.test_length=9"),
    ("model.n_layers=5", "model.norm=pre", "model.shaped_attention=true"),
    ("model.n_layers=4", "model.value_skipinit=true", "model.pos_enc=alibi", "pooling=cls"),
    ("model.n_layers=3", "model.qk_scale=false", "model.qk_reparam=true", "model.residual=false"),
])
def test_the_meta_count_at_any_depth_equals_the_built_model(items):
    """Counted on the meta device from a one- and a two-block build (ablate.models.meta): the parameters
    of the model the task really builds, at depths past two too."""
    cfg = C.build(C.parse_overrides(list(items)))
    sizes = {"in_features": 28, "n_classes": 10} if cfg.data.task == "mnist" else {"n_tokens": cfg.data.vocab + 2,
                                                                                   "n_out": cfg.data.vocab}
    assert meta.counted(cfg.encoder, sizes, cfg.pooling).parameters == built_parameters(cfg)
    assert limits.parameter_count(cfg) == built_parameters(cfg)  # through the counts kept on disk


# ---- the counts kept on disk (ablate.models.size)

COUNT = """import sys
from ablate import config as C, limits
for arch in ("transformer", "lstm"):
    cfg = C.build({"data.task": "copy", "data.vocab": 6, "model.d_model": 24, "model.n_layers": 3,
                   "model.arch": arch}, machine=False)
    size, estimate = limits.model_size(cfg), limits.estimate(cfg)
    print(size.parameters, size.buffers, estimate.activation_bytes, end=" ")
print("torch" in sys.modules)
"""


def test_a_count_is_kept_and_the_next_command_imports_no_torch(tmp_path):
    """A fresh interpreter counts the models on the meta device (a Transformer, and an LSTM whose hidden size is
    matched to it) and keeps the counts; the next one reads them and never imports torch. Both say what the
    model the task builds has, and estimate the same memory."""
    env = {**os.environ, "ABLATE_CACHE_DIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", COUNT], env=env, capture_output=True, text=True, check=True)
            for _ in range(2)]
    (first, second) = (r.stdout.split() for r in runs)
    assert first[-1] == "True" and second[-1] == "False" and first[:-1] == second[:-1]
    for i, arch in enumerate(("transformer", "lstm")):
        cfg = C.build({"data.task": "copy", "data.vocab": 6, "model.d_model": 24, "model.n_layers": 3,
                       "model.arch": arch}, machine=False)
        assert first[3 * i:3 * i + 3] == [str(built_parameters(cfg)), "0", str(limits.estimate(cfg).activation_bytes)]
    assert len(list((tmp_path / "model-sizes").glob("*/*.json"))) == 3  # two counts, one hidden size


@pytest.mark.parametrize("text", ["", "{", '{"parameters": 5}', '{"parameters": -1, "buffers": 0}',
                                  '{"parameters": 1.5, "buffers": 0}', '{"parameters": true, "buffers": 0}',
                                  '["parameters", "buffers"]'])
def test_a_damaged_count_is_not_believed(tmp_path, monkeypatch, text):
    """What the file holds is checked: anything but two non-negative integers is counted again and replaced."""
    monkeypatch.setenv("ABLATE_CACHE_DIR", str(tmp_path))
    cfg = C.build({"data.task": "copy", "model.n_layers": 2}, machine=False)
    path = size.cache_file(cfg.encoder, {"n_tokens": 12, "n_out": 10}, cfg.pooling)
    path.parent.mkdir(parents=True)
    path.write_text(text)
    assert limits.model_size(cfg) == meta.counted(cfg.encoder, {"n_tokens": 12, "n_out": 10}, cfg.pooling)
    assert json.loads(path.read_text()) == {"parameters": built_parameters(cfg), "buffers": 0}


def test_each_version_of_the_code_keeps_its_own_counts_and_the_oldest_go(tmp_path, monkeypatch):
    """A count is read only by the code that made it: another version of ablate.models (or of torch) counts
    afresh into its own folder; of CACHE_VERSIONS + 1 versions the one written to longest ago is removed."""
    monkeypatch.setenv("ABLATE_CACHE_DIR", str(tmp_path))
    cfg = C.build({"data.task": "copy"}, machine=False)
    sizes = {"n_tokens": 12, "n_out": 10}
    wrong = size.Size(1, 2)
    for i in range(size.CACHE_VERSIONS + 1):
        monkeypatch.setattr(size, "code_version", lambda i=i: f"v{i}")
        path = size.cache_file(cfg.encoder, sizes, cfg.pooling)
        assert path.parent.name == f"v{i}"
        assert size.model_size(cfg.encoder, sizes, cfg.pooling) == meta.counted(cfg.encoder, sizes, cfg.pooling)
        path.write_text(json.dumps({"parameters": wrong.parameters, "buffers": wrong.buffers}))
        assert size.model_size(cfg.encoder, sizes, cfg.pooling) == wrong  # what is kept is what is read
        os.utime(path.parent, (1000 + i, 1000 + i))
    assert sorted(p.name for p in (tmp_path / "model-sizes").iterdir()) == ["v1", "v2", "v3", "v4"]
    monkeypatch.undo()
    monkeypatch.setenv("ABLATE_CACHE_DIR", str(tmp_path))
    assert size.code_version() not in {f"v{i}" for i in range(5)}  # this source's own digest: counted afresh
    assert size.model_size(cfg.encoder, sizes, cfg.pooling) == meta.counted(cfg.encoder, sizes, cfg.pooling)


def test_a_crafted_size_is_counted_without_building_it():
    """10,000 blocks or a 2**40-wide stream: counted from two small builds, then refused in one line."""
    deep = C._build({"model.n_layers": 10_000}, None)
    one, two = (limits.parameter_count(C._build({"model.n_layers": n}, None)) for n in (1, 2))
    assert limits.parameter_count(deep) == one + 9_999 * (two - one)
    assert "make it smaller" in limits.check_fits(deep, "model.n_layers=10000", host=10**10)
    wide = C._build({"model.d_model": 2**62, "model.n_heads": 1}, None)
    assert limits.check_fits(wide, "model.d_model=4611686018427387904", host=10**12) == (
        "a tensor of the model is larger than torch's 64-bit sizes allow (model.d_model=4611686018427387904); "
        "make it smaller")


def test_estimate_grows_with_each_size():
    base = limits.estimate(C.build({"data.task": "copy"}))
    assert limits.estimate(C.build({"data.task": "copy", "model.n_layers": 4})).activation_bytes > base.activation_bytes
    assert limits.estimate(C.build({"data.task": "copy", "data.batch_size": 4096})).activation_bytes > base.activation_bytes
    assert limits.estimate(C.build({"data.task": "copy", "model.d_model": 128})).model_bytes > base.model_bytes
    # copy data: (n_train + n_val) sequences of 2L+1 tokens and n_test of 2*test_length+1, int64 x and y
    # and their temporaries: 24 bytes a token
    cfg = C.build({"data.task": "copy", "data.n_train": 100, "data.n_val": 10, "data.n_test": 20, "data.length": 4,
                   "data.test_length": 6})
    assert limits.data_bytes(cfg) == 24 * (110 * 9 + 20 * 13)


def test_check_fits_names_estimate_limit_and_keys():
    cfg = C.build({"model.d_model": 20000}, machine=False)  # ~3e9 parameters
    problem = limits.check_fits(cfg, "model.d_model=20000", host=8 * 10**9)
    assert problem.startswith("the run needs about ") and "over the 8 GB this machine has available" in problem
    assert "model.d_model=20000" in problem and problem.endswith("make it smaller")
    assert limits.check_fits(C.Config(), "the default sizes", host=8 * 10**9) is None
    assert limits.check_fits(C.Config(), "the default sizes", host=10**8) is not None  # MNIST alone is 276 MB


def test_on_a_gpu_the_model_is_checked_against_the_gpus_memory():
    cfg = C.build({"trainer.accelerator": "cuda", "model.n_layers": 200, "model.d_model": 1024,
                   "model.n_heads": 8}, machine=False)
    est = limits.estimate(cfg)
    problem = limits.check_fits(cfg, "model.n_layers=200", host=10**12, device=est.device_bytes - 1)
    assert "of GPU memory" in problem and "this GPU has" in problem
    assert limits.check_fits(cfg, "model.n_layers=200", host=10**12, device=est.device_bytes) is None
    # the data stays in host memory
    assert limits.check_fits(cfg, "model.n_layers=200", host=est.data_bytes, device=10**12) is not None


def test_machine_memory_is_read():
    assert limits.host_memory() > 10**8


@pytest.mark.parametrize("items, key", [
    (("model.n_layers=1e30",), "model.n_layers"),
    (("model.d_model=1e5",), "model.d_model"),
    (("model.d_head=1e6",), "model.d_head"),
    (("model.max_len=1e9",), "model.max_len"),
    (("model.max_len=1e9", "model.pos_enc=sinusoidal"), "model.max_len"),  # a buffer, not a parameter
    (("data.task=copy", "data.vocab=1e9"), "data.vocab"),
    (("data.task=copy", "data.n_train=1e9"), "data.n_train"),
])
def test_too_big_for_this_machine_exits_2_before_anything_is_written(items, key, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    assert cli.main(["train", "tracking=none", *items]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("ablate: ") and key in err[0], err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("n, text", [(512, "512 bytes"), (2.76e8, "276 MB"), (23.5e9, "23.5 GB"),
                                     (2.91e12, "2,910 GB"), (4e41, "4e+32 GB")])
def test_sizes_read_well(n, text):
    assert limits.size(n) == text


def test_long_sequences_are_probed_in_smaller_chunks_so_the_batch_size_counts():
    """A copy of length 255 was refused at every batch size (issue 41's rough edges): the estimate held 1000
    such sequences at once for the probes' passes (25 GB). Their chunks now hold at most EVAL_BYTES, so a
    small batch fits in 16 GB and a larger batch needs more."""
    small, large = (C.build({"data.task": "copy", "data.length": 255, "data.batch_size": b}, machine=False)
                    for b in (1, 1024))
    assert 1 <= limits.eval_chunk(small) < limits.EVAL_CHUNK
    assert limits.activation_bytes(small) <= limits.EVAL_BYTES < limits.activation_bytes(large)
    assert limits.check_fits(small, "data.length=255", host=16 * 10**9) is None
    assert limits.check_fits(large, "data.length=255", host=16 * 10**9) is not None
    assert limits.eval_chunk(C.build({"data.task": "copy"}, machine=False)) == limits.EVAL_CHUNK


def test_the_final_probes_pass_over_a_split_in_the_estimated_chunks(tmp_path, monkeypatch):
    """What the estimate counts is what the probes do: with EVAL_BYTES cut so that 7 test sequences fit in a
    chunk, a run's final probes read the test set 7 at a time."""
    import ablate.probing as P
    from ablate.train import train

    cfg = C.build(C.parse_overrides(["data.task=copy", "data.vocab=6", "data.length=4", "data.n_train=64",
                                     "data.n_val=32", "data.n_test=20", "data.batch_size=32", "model.d_model=16",
                                     "model.n_heads=2", "trainer.max_epochs=1", "tracking=none",
                                     f"run.dir={tmp_path / 'run'}"]))
    _, evaluate = limits._per_example(cfg)
    monkeypatch.setattr(limits, "EVAL_BYTES", 7 * limits.FLOAT * evaluate)
    assert limits.eval_chunk(cfg) == 7
    sizes: list[int] = []
    chunks = P._chunks

    def spied(x, y, size):
        sizes.append(size)
        return chunks(x, y, size)

    monkeypatch.setattr(P, "_chunks", spied)
    assert train(cfg, log=lambda *a: None)["status"] == "completed"
    assert sizes and set(sizes) == {7}


def _model_values() -> list[tuple[str, object]]:
    """Every value of every `model.*` key with a closed set of them (Literal or bool), read from the config's
    own types: a value added to the model joins this list, and the tests below, by itself."""
    import typing
    from dataclasses import fields

    section = C.SECTIONS["model"]
    hints = C._hints(section)
    out: list[tuple[str, object]] = []
    for f in fields(section):
        tp = hints[f.name]
        values = typing.get_args(tp) if typing.get_origin(tp) is typing.Literal else (True, False) if tp is bool else ()
        out += [(f"model.{f.name}", v) for v in values]
    return out


# a value that the config accepts only with another (its ConfigError says which)
COMPANIONS = {("model.qk_reparam", True): {"model.qk_scale": False},
              **{("model.rnn_init", v): {"model.arch": "lstm"} for v in ("forget1", "chrono")}}


@pytest.mark.parametrize("task", ["mnist", "copy"])
@pytest.mark.parametrize(("key", "value"), _model_values(), ids=lambda v: str(v))
def test_the_estimate_counts_the_built_model_for_every_value_of_every_model_key(task, key, value):
    """The estimate counts the model itself (ablate.models.meta, the meta device, any depth from two small
    builds): for every value of every model key, at three blocks, its parameters and buffers are those of
    the model the task builds (a block whose shape depended on its depth would fail here, naming the value)."""
    cfg = C.build({"data.task": task, "model.n_layers": 3, key: value, **COMPANIONS.get((key, value), {})},
                  machine=False)
    config = C.to_dict(cfg)
    task_cls = ClassifyRows if task == "mnist" else CopyTokens
    sizes = {"in_features": 28, "n_classes": 10} if task == "mnist" else {"n_tokens": cfg.data.vocab + 2,
                                                                          "n_out": cfg.data.vocab}
    model = task_cls(config, **sizes).model
    assert limits.parameter_count(cfg) == sum(p.numel() for p in model.parameters()), f"{key}={value}"
    tables = sum(b.numel() for b in model.buffers())
    assert limits.model_size(cfg).buffers == tables, f"{key}={value}: {dict(model.named_buffers())}"
