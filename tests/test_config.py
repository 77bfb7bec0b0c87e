"""Dotted overrides: type conversion (YAML and Python spellings), unknown keys, run ids."""

import pytest

from ablate import config as C


def build(*items):
    return C.build(C.parse_overrides(list(items)))


def test_defaults_are_the_tutorials_model():
    cfg = C.Config()
    m = cfg.model
    assert (m.d_model, m.n_heads, m.ffn_dim, m.n_layers) == (64, 4, 128, 2)
    assert (m.pos_enc, m.norm, m.activation, m.dropout) == ("learned", "post", "relu", 0.1)
    assert (cfg.optim.name, cfg.optim.lr, cfg.data.batch_size, cfg.trainer.max_epochs) == ("adam", 1e-3, 64, 5)
    assert cfg.pooling == "mean" and cfg.data.task == "mnist"


@pytest.mark.parametrize(
    "item, key, expected",
    [
        ("model.qk_scale=False", "qk_scale", False),  # Python's spelling (W&B agents)
        ("model.qk_scale=false", "qk_scale", False),  # YAML's
        ("model.residual=True", "residual", True),
        ("model.d_head=None", "d_head", None),
        ("model.d_head=null", "d_head", None),
        ("model.d_head=512", "d_head", 512),
        ("model.temperature=1e-1", "temperature", 0.1),  # YAML 1.1 reads 1e-1 as a string
        ("model.n_heads=8.0", "n_heads", 8),
        ("model.norm=none", "norm", "none"),  # 'none' is a choice here, not null
    ],
)
def test_values_convert_by_field_type(item, key, expected):
    value = getattr(build(item).model, key)
    assert value == expected and type(value) is type(expected)


def test_w_and_b_argument_spelling_and_yaml_file(tmp_path):
    f = tmp_path / "o.yaml"
    f.write_text("model:\n  n_heads: 8\noptim.lr: 3.0e-4\nseed: 2\n")
    cfg = build("--model.n_layers=3", str(f))
    assert (cfg.model.n_layers, cfg.model.n_heads, cfg.optim.lr, cfg.seed) == (3, 8, 3e-4, 2)


@pytest.mark.parametrize(
    "item, words",
    [
        ("model.n_head=8", ["unknown key 'model.n_head'", "model.n_heads"]),
        ("nonsense=1", ["unknown key 'nonsense'"]),
        ("model.n_heads=abc", ["model.n_heads='abc'", "integer"]),
        ("model.n_heads=2.5", ["model.n_heads='2.5'", "integer"]),
        ("model.qk_scale=maybe", ["model.qk_scale", "true or false"]),
        ("model.norm=middle", ["model.norm='middle'", "pre, post, none"]),
        ("model.n_heads=3", ["n_heads=3", "d_model=64"]),
        ("optim.lr=0", ["optim.lr=0.0", "> 0"]),
        ("data.task=imagenet", ["data.task='imagenet'", "mnist, copy"]),
        ("model.n_heads", ["not key=value"]),
    ],
)
def test_bad_values_name_key_value_and_fix(item, words):
    with pytest.raises(C.ConfigError) as err:
        build(item)
    message = str(err.value)
    assert "\n" not in message
    for w in words:
        assert w in message


def test_impossible_combination_learned_table_too_short():
    with pytest.raises(C.ConfigError, match=r"model.max_len=20 .* set model.max_len=28"):
        build("model.max_len=20")
    with pytest.raises(C.ConfigError, match=r"model.max_len=28 .*29"):
        build("model.max_len=28", "pooling=cls")  # CLS adds a position
    build("model.max_len=20", "model.pos_enc=rope")  # RoPE has no table: fine


def test_malformed_yaml_file(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("model: [unclosed\n")
    with pytest.raises(C.ConfigError, match="not valid YAML"):
        build(str(f))
    with pytest.raises(C.ConfigError, match="does not exist"):
        build(str(tmp_path / "missing.yaml"))


@pytest.mark.parametrize(("text", "words"), [
    ("model:\n  n_heads: 2\nmodel.n_heads: 4\n", "model.n_heads is given twice, nested under model: and dotted"),
    ("seed: 1\nseed: 2\n", "gives 'seed' twice, at lines 1 and 2"),
    ("model:\n  n_heads: 2\n  n_heads: 4\n", "gives 'n_heads' twice, at lines 2 and 3"),
])
def test_an_override_file_giving_a_key_twice_is_refused_naming_both(tmp_path, text, words):
    """The last of two silently won (issue 41, item 5); now neither does."""
    f = tmp_path / "twice.yaml"
    f.write_text(text)
    with pytest.raises(C.ConfigError) as err:
        build(str(f))
    assert words in str(err.value) and str(f) in str(err.value) and "\n" not in str(err.value)


def test_run_id_depends_on_what_is_computed_only():
    a = build("model.n_heads=8")
    assert C.run_id(a) == C.run_id(build("model.n_heads=8.0", "run.dir=/elsewhere", "tracking=none"))
    assert C.run_id(a) != C.run_id(build("model.n_heads=8", "seed=1"))
    assert C.run_id(a) != C.run_id(build("model.n_heads=8", "budget=smoke"))


def test_run_ids_of_runs_made_before_later_keys_are_kept():
    """Ids computed by ablate at 3c1db80, before model.arch, model.rnn_hidden, run.name and run.sweep_id
    existed: a sweep must find those runs again (exactly once), so the new keys at their defaults, and the
    recording-only ones at any value, leave the id as it was; a new value is a new run. Those runs were
    made when model.max_len defaulted to 512 (issue 37 sized the table from the task): spelled, the ids
    stay; the new default is another model, so another run."""
    assert C.run_id(build("model.max_len=512")) == "bfbc209f3f36" != C.run_id(build())
    old = ("data.task=copy", "model.pos_enc=none", "budget=quick", "seed=3", "optim.lr=0.001", "model.max_len=512")
    assert C.run_id(build(*old)) == "1e9176e96fdb"
    assert C.run_id(build(*old, "run.name=pos_enc=none lr=1e-3 s3", "run.sweep_id=abc123")) == "1e9176e96fdb"
    assert C.run_id(build(*old, "model.arch=transformer", "model.rnn_hidden=null")) == "1e9176e96fdb"
    assert C.run_id(build(*old, "model.residual_around=both", "model.qk_reparam=false")) == "1e9176e96fdb"
    assert C.run_id(build(*old, "model.arch=lstm")) != "1e9176e96fdb"
    assert C.run_id(build(*old, "model.arch=lstm")) != C.run_id(build(*old, "model.arch=lstm", "model.rnn_hidden=32"))


def test_run_ids_are_kept_by_keep_best_and_init_from_at_their_defaults(tmp_path, monkeypatch):
    """run.keep_best and run.init_from came after the ids of tests above: at their defaults the ids stay; keep_best
    changes only what is kept (best.ckpt), never what is computed, so no value of it makes another run; a run started
    from a checkpoint is another experiment, whose id does not depend on the folder the path was written from."""
    old = ("data.task=copy", "model.pos_enc=none", "budget=quick", "seed=3", "optim.lr=0.001", "model.max_len=512")
    assert {"run.keep_best", "run.init_from"} <= set(C.added_defaults()) and not {"run.keep_best",
                                                                                   "run.init_from"} & C.ORIGINAL_KEYS
    assert C.run_id(build(*old, "run.keep_best=true", "run.init_from=null")) == "1e9176e96fdb"
    assert C.run_id(build(*old, "run.keep_best=false")) == "1e9176e96fdb"
    warm = build(*old, f"run.init_from={tmp_path / 'runs' / 'a'}")
    assert C.run_id(warm) != "1e9176e96fdb"
    monkeypatch.chdir(tmp_path)
    assert build(*old, "run.init_from=runs/a").run.init_from == str(tmp_path / "runs" / "a")
    assert C.run_id(build(*old, "run.init_from=runs/a")) == C.run_id(warm)


def test_round_trip_through_the_saved_dict():
    cfg = build("model.d_head=16", "model.pos_enc=rope", "data.task=copy", "optim.grad_clip=1")
    assert C.from_dict(C.to_dict(cfg)) == cfg
    assert C.flat(cfg)["model.pos_enc"] == "rope"


def test_ablate_keys_lists_every_key_with_default_allowed_values_and_description(capsys):
    import typing

    from ablate import cli

    assert cli.main(["keys"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header, rows = lines[0], lines[1:]
    assert header.split() == ["key", "default", "allowed", "description"]
    columns = [header.index(word) for word in ("default", "allowed", "description")]
    by_key = {}
    for line in rows:
        key = line[: columns[0]].strip()
        by_key[key] = (line[columns[0]:columns[1]].strip(), line[columns[1]:columns[2]].strip(), line[columns[2]:].strip())
    assert list(by_key) == [*C.all_keys(), *C.ALIASES]  # Lightning's names last, "as <key>"
    for key, (default, allowed, description) in by_key.items():
        assert default and allowed and description, key  # aligned columns, each one filled
    assert by_key["model.norm"][:2] == ("post", "pre | post | none")
    assert by_key["model.d_head"][0] == "null"
    assert by_key["data.batch_size"] == ("64", "an integer >= 1", "examples per optimiser step (and per evaluation batch)")
    assert by_key["model.d_model"][2] == "width of the residual stream"  # EncoderConfig's own comment
    for key in C.all_keys():  # every Literal key shows its choices
        section, _, name = key.rpartition(".")
        tp = typing.get_type_hints(C.SECTIONS[section] if section else C.Config)[name]
        if typing.get_origin(tp) is typing.Literal:
            assert by_key[key][1] == " | ".join(typing.get_args(tp)), key
    assert "cpu" in by_key["trainer.accelerator"][1]


def test_every_field_has_a_description():
    for cls in (*C.SECTIONS.values(), C.Config):
        helps = C.field_help(cls)
        for f in C.fields(cls):
            if f.name not in C.SECTIONS and not f.metadata.get("internal"):  # plugged, ext: not keys
                assert helps.get(f.name), f"{cls.__name__}.{f.name} has no help (declare it with option(default, help))"
