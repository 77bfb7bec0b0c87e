"""The recurrent baseline (issue 17): `model.arch=lstm|gru` with the Transformer's embedding and heads,
its parameter count against torch's closed formula, the size matched to the Transformer's, the stack
against torch's own multi-layer nn.LSTM/nn.GRU, impossible combinations, training on every task,
resume, probes and the results table."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from torch import nn

from ablate.models import (
    Encoder,
    EncoderConfig,
    RecurrentEncoder,
    SequenceClassifier,
    TokenModel,
    build_encoder,
    matched_hidden,
    parameter_groups,
    rnn_params,
    sinusoidal_table,
)
from ablate.models.rnn import transformer_params
from ablate.probes import (
    NOT_APPLICABLE_TO_RNN,
    NotApplicable,
    attention_maps,
    effective_rank,
    equivariance_error,
    format_probes,
    layer_logits,
    masked_heads,
    mean_token_cosine,
    not_applicable,
    order_sensitivity,
    periodic_part,
    periodic_probes,
    run_probes,
    score_stats,
    task_loss,
)
from ablate.registry import NAMES as TASK_NAMES

IGNORE = -100

ARCHS = ("lstm", "gru")
GATES = {"lstm": 4, "gru": 3}
# matched_hidden's promise: the closest integer size, and for these widths within this fraction of
# the Transformer encoder's count (one step of the hidden size moves the count by about 2/h of it)
MATCH_TOLERANCE = 0.05


def _cfg(**kw) -> EncoderConfig:
    return EncoderConfig(**{"arch": "lstm", "pos_enc": "none", "dropout": 0.0, **kw})


# --- parameter counts --------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("d_model, hidden, n_layers", [(16, 8, 1), (16, 24, 2), (64, 64, 3), (8, 5, 4)])
def test_parameter_count_is_torch_closed_formula(arch, d_model, hidden, n_layers):
    """gates * (h * (d_in + h) + 2h) per layer (two biases, as torch keeps them), d_in = d_model for
    layer 0 and h above; the encoder holds exactly that, and the recurrent group of a whole model too."""
    g = GATES[arch]
    formula = g * (hidden * (d_model + hidden) + 2 * hidden) + (n_layers - 1) * g * (hidden * 2 * hidden + 2 * hidden)
    assert rnn_params(arch, d_model, hidden, n_layers) == formula
    cfg = _cfg(arch=arch, d_model=d_model, n_layers=n_layers, rnn_hidden=hidden)
    enc = RecurrentEncoder(cfg)
    assert sum(p.numel() for p in enc.parameters()) == formula
    # torch's own multi-layer module of the same shape has the same count
    ref = (nn.LSTM if arch == "lstm" else nn.GRU)(d_model, hidden, num_layers=n_layers)
    assert sum(p.numel() for p in ref.parameters()) == formula
    model = TokenModel(cfg, n_tokens=11, n_out=7)
    groups = parameter_groups(model)
    assert groups["recurrent"] == formula and groups["attention"] == groups["ffn"] == 0
    assert groups["embedding"] == 11 * d_model
    assert groups["other"] == hidden * 7 + 7  # the head reads the hidden size
    assert groups["total"] == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("d_model, n_layers", [(16, 1), (32, 2), (64, 2), (64, 4), (128, 2), (256, 6)])
def test_matched_hidden_is_the_closest_size_to_the_transformer(arch, d_model, n_layers):
    cfg = _cfg(arch=arch, d_model=d_model, n_layers=n_layers)
    target = transformer_params(cfg)
    # the target is the real Transformer encoder of the same d_model and n_layers, positions left out
    real = Encoder(EncoderConfig(d_model=d_model, n_layers=n_layers, pos_enc="none"))
    assert target == sum(p.numel() for p in real.parameters())
    h = matched_hidden(cfg)
    gap = abs(rnn_params(arch, d_model, h, n_layers) - target)
    for other in (h - 1, h + 1):
        if other >= 1:
            assert gap <= abs(rnn_params(arch, d_model, other, n_layers) - target)
    assert gap <= MATCH_TOLERANCE * target
    assert RecurrentEncoder(cfg).hidden == h  # rnn_hidden=None picks it
    # whole models: same embedding, the head differs by (h - d_model) * n_out
    rnn, tf = SequenceClassifier(cfg, 28, 10), SequenceClassifier(dataclasses.replace(cfg, arch="transformer"), 28, 10)
    diff = parameter_groups(rnn)["total"] - parameter_groups(tf)["total"]
    assert diff == rnn_params(arch, d_model, h, n_layers) - target + (h - d_model) * 10


def test_default_lstm_matches_the_tutorial_model_at_hidden_64():
    """The tutorial's Transformer (d_model 64, 2 layers): 66,944 encoder parameters; the LSTM of hidden 64
    has 66,560 (0.6 % fewer), hidden 65 would have 68,380."""
    cfg = EncoderConfig(arch="lstm")
    assert transformer_params(cfg) == 66_944
    assert matched_hidden(cfg) == 64
    assert rnn_params("lstm", 64, 64, 2) == 66_560 and rnn_params("lstm", 64, 65, 2) == 68_380


# --- numerics: the stack is torch's multi-layer module -------------------------------------------


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("n_layers", [1, 3])
def test_stack_equals_torch_multi_layer_module(arch, n_layers):
    """Weights copied into nn.LSTM/nn.GRU(num_layers=L): the same outputs (eval), and in training the
    same dropout placement (outputs of every layer but the last) gives the same result under one seed."""
    torch.manual_seed(0)
    cfg = _cfg(arch=arch, d_model=12, n_layers=n_layers, rnn_hidden=10, dropout=0.3)
    enc = RecurrentEncoder(cfg)
    ref = (nn.LSTM if arch == "lstm" else nn.GRU)(12, 10, num_layers=n_layers, batch_first=True,
                                                 dropout=0.3 if n_layers > 1 else 0.0)
    with torch.no_grad():
        for layer, block in enumerate(enc.blocks):
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                getattr(ref, f"{name}_l{layer}").copy_(getattr(block.rnn, f"{name}_l0"))
    x = torch.randn(4, 9, 12)
    enc.eval(), ref.eval()
    torch.testing.assert_close(enc(x), ref(x)[0], rtol=0, atol=1e-6)
    y, maps = enc(x, return_attention=True)
    assert maps == [] and y.shape == (4, 9, 10)


def test_reads_in_order_output_at_t_depends_on_the_past_only():
    """Uni-directional: changing position 5 leaves outputs 0..4 exactly as they were."""
    torch.manual_seed(0)
    enc = RecurrentEncoder(_cfg(d_model=8, n_layers=2)).eval()
    x = torch.randn(2, 10, 8)
    x2 = x.clone()
    x2[:, 5] += 1.0
    y, y2 = enc(x), enc(x2)
    assert torch.equal(y[:, :5], y2[:, :5])
    assert (y[:, 5:] - y2[:, 5:]).abs().amax() > 1e-4


def test_positions_are_the_transformer_input_slot():
    """pos_enc=learned/sinusoidal is added to the embedding as for the Transformer; none adds nothing."""
    torch.manual_seed(0)
    x = torch.randn(1, 6, 8)
    added = {}
    for pos_enc in ("none", "sinusoidal", "learned"):
        enc = build_encoder(_cfg(pos_enc=pos_enc, d_model=8, max_len=16))
        assert isinstance(enc, RecurrentEncoder)
        added[pos_enc] = enc.pos_enc(x) - x
        if pos_enc == "learned":
            assert parameter_groups(enc)["embedding"] == 16 * 8
            torch.testing.assert_close(added[pos_enc], enc.pos_enc.weight[:6][None].detach())
    assert torch.equal(added["none"], torch.zeros_like(x))
    torch.testing.assert_close(added["sinusoidal"], sinusoidal_table(6, 8)[None], rtol=0, atol=1e-6)


def test_cls_pooling_reads_an_appended_token_and_mean_pools_outputs():
    """A uni-directional RNN at a prepended token has read nothing: its cls token goes last."""
    torch.manual_seed(0)
    cfg = _cfg(d_model=8, n_layers=1, rnn_hidden=6)
    x = torch.randn(3, 5, 4)
    cls = SequenceClassifier(cfg, 4, 3, pooling="cls").eval()
    h = cls.encoder(cls.pool.prepend(cls.embed(x)))
    assert h.shape == (3, 6, 6)
    torch.testing.assert_close(cls(x), cls.head(h[:, -1]))
    mean = SequenceClassifier(cfg, 4, 3, pooling="mean").eval()
    torch.testing.assert_close(mean(x), mean.head(mean.encoder(mean.embed(x)).mean(1)))


# --- impossible combinations ---------------------------------------------------------------------

TRANSFORMER_ONLY = [
    ("n_heads", 8), ("d_head", 16), ("ffn_mult", 4), ("activation", "gelu"), ("qk_scale", False),
    ("temperature", 2.0), ("residual", False), ("norm", "pre"), ("causal", True), ("init", "small"),
]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("key, value", TRANSFORMER_ONLY)
def test_transformer_toggles_are_refused_for_an_rnn(arch, key, value):
    with pytest.raises(ValueError, match=rf"^{key}={value!r} does not apply to arch='{arch}' \(.+\); leave it at its default"):
        EncoderConfig(arch=arch, **{key: value})


@pytest.mark.parametrize("pos_enc", ["rope", "alibi"])
def test_score_positions_are_refused_for_an_rnn(pos_enc):
    with pytest.raises(ValueError, match=rf"^pos_enc='{pos_enc}' does not apply to arch='lstm'.*none, sinusoidal, learned"):
        EncoderConfig(arch="lstm", pos_enc=pos_enc)


def test_rnn_hidden_is_checked_and_refused_on_a_transformer():
    with pytest.raises(ValueError, match=r"^rnn_hidden=0 is not allowed; expected an integer >= 1"):
        EncoderConfig(arch="lstm", rnn_hidden=0)
    with pytest.raises(ValueError, match=r"^rnn_hidden=32 does not apply to arch='transformer'"):
        EncoderConfig(rnn_hidden=32)
    with pytest.raises(ValueError, match=r"^arch='rnn' is not allowed; choose one of transformer, lstm, gru"):
        EncoderConfig(arch="rnn")
    with pytest.raises(ValueError, match="use ablate.models.build_encoder"):
        Encoder(EncoderConfig(arch="gru"))
    # an RNN has no heads: a d_model the default 4 heads do not divide is fine
    assert RecurrentEncoder(_cfg(d_model=30)).hidden == matched_hidden(_cfg(d_model=30))


# --- probes ----------------------------------------------------------------------------------------


def _token_model(arch="lstm", **kw) -> TokenModel:
    torch.manual_seed(0)
    return TokenModel(_cfg(arch=arch, d_model=16, n_layers=2, rnn_hidden=12, **kw), n_tokens=8, n_out=6)


def _batch():
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 8, (5, 9), generator=g)
    y = torch.randint(0, 6, (5, 9), generator=g)
    y[:, :3] = IGNORE
    return x, y


@pytest.mark.parametrize("arch", ARCHS)
def test_probes_of_an_rnn_measure_its_hidden_states_and_leave_attention_out(arch):
    model = _token_model(arch)
    x, y = _batch()
    perm = torch.arange(9).flip(0)
    loader = [(x, y)]
    scalars, arrays = run_probes(model, (x, y), expensive=True, val_loader=loader, permutation=perm)
    # what applies, by its own definition, on the layer outputs computed here directly
    model.eval()
    with torch.no_grad():
        h0, _ = model.encoder.blocks[0](model.encoder.pos_enc(model.embed(x)))
        h1, _ = model.encoder.blocks[1](h0)
    for layer, h in enumerate((h0, h1)):
        assert scalars[f"cosine_l{layer}"] == pytest.approx(mean_token_cosine(h), abs=1e-6)
        assert scalars[f"erank_l{layer}"] == pytest.approx(effective_rank(h), abs=1e-5)
        assert scalars[f"resid_norm_l{layer}_rnn"] == pytest.approx(h.norm(dim=-1).mean().item(), abs=1e-6)
    with torch.enable_grad():
        loss = task_loss(model(x), y)
        grads = torch.autograd.grad(loss, list(model.encoder.blocks[0].parameters()))
    assert scalars["grad_l0"] == pytest.approx(torch.sqrt(sum(g.double().square().sum() for g in grads)).item(), rel=1e-6)
    assert scalars["batch_loss"] == pytest.approx(loss.item(), rel=1e-6)
    assert scalars["grad_ratio"] == pytest.approx(scalars["grad_l0"] / scalars["grad_l1"])
    counts = parameter_groups(model)
    assert scalars["share_recurrent"] == pytest.approx(counts["recurrent"] / counts["total"])
    assert scalars["share_attention"] == scalars["share_ffn"] == 0.0
    assert scalars["params_total"] == counts["total"]
    order = order_sensitivity(model, loader, perm)
    assert {k: scalars[k] for k in order} == order and 0 <= order["perm_agreement"] <= 1
    assert scalars["acc"] == pytest.approx(order["acc"])
    # not applicable: absent, never NaN, never an error
    attention_words = ("logit_", "entropy", "rowmax", "onehot", "q_var", "k_var", "head_drop", "equiv_error",
                       "grad_wq", "grad_wk", "grad_wv", "grad_wo", "grad_ffn", "grad_norm", "share_attention_l",
                       "share_ffn_l")
    assert not [k for k in scalars if k.startswith(attention_words)]
    assert all(v == v for v in scalars.values())  # no NaN
    assert "attention" not in arrays
    assert arrays["resid_norm"].shape == (2,) and arrays["cosine"].shape == (2,)
    assert not_applicable(model) == NOT_APPLICABLE_TO_RNN
    assert not_applicable(TokenModel(EncoderConfig(d_model=16, n_heads=2, max_len=8), 8, 6)) == ()
    # periodic probes: the same part, measured alone
    assert periodic_probes(model, (x, y)) == periodic_part({k: scalars[k] for k in periodic_probes(model, (x, y))})


def test_attention_probes_say_not_applicable():
    model = _token_model()
    x, _ = _batch()
    for fn in (attention_maps, score_stats, layer_logits):
        with pytest.raises(NotApplicable, match=r"needs attention, and this model \(arch=lstm\) has none"):
            fn(model, x)
    with pytest.raises(NotApplicable):
        equivariance_error(model, x, torch.arange(9))
    with pytest.raises(NotApplicable):
        with masked_heads(model, [(0, 0)]):
            pass
    text = format_probes({"grad_l0": 1.0, "acc": 0.5}, not_applicable(model))
    assert text.endswith("[not applicable: the model has no attention]\n" + "\n".join(NOT_APPLICABLE_TO_RNN))
    assert "not applicable" not in format_probes({"grad_l0": 1.0})


# --- training on every task, resume, the results table, `ablate probe` -----------------------------

SYNTHETIC_FAST = ["data.vocab=6", "data.length=4", "data.n_train=64", "data.n_val=32", "data.n_test=32"]
MNIST_FAST = ["data.val_size=20", "data.train_subset=64", "data.test_subset=20"]
FAST = ["data.batch_size=32", "model.d_model=16", "trainer.max_epochs=1", "tracking=none", "run.probe_batch=16"]


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """Runs under tmp_path; MNIST is 100 + 20 images of noise in the standard files there (no network)."""
    import ablate.data.files as files
    from tests.test_data import write_idx

    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("ABLATE_PROGRESS", "0")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setattr(files, "network_available", lambda: False)
    raw = tmp_path / "mnist" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    g = torch.Generator().manual_seed(0)
    for prefix, n in (("train", 100), ("t10k", 20)):
        write_idx(raw / f"{prefix}-images-idx3-ubyte", torch.randint(0, 256, (n, 28, 28), generator=g, dtype=torch.uint8))
        write_idx(raw / f"{prefix}-labels-idx1-ubyte", torch.arange(n) % 10)
    monkeypatch.setenv("ABLATE_DATA_DIR", str(tmp_path / "mnist"))


def _train(*items, callbacks=None, log=None):
    from ablate import config as C
    from ablate.train import train

    return train(C.build(C.parse_overrides(list(items))), log=log or (lambda *a: None), callbacks=callbacks)


def _task_items(task: str) -> list[str]:
    synthetic = [i for i in SYNTHETIC_FAST if task != "facts" or not i.startswith("data.length=")]  # a key is 2 tokens
    return [f"data.task={task}", *(MNIST_FAST if task == "mnist" else synthetic), *FAST]


@pytest.mark.parametrize("task, arch", [(t, "lstm") for t in TASK_NAMES] + [("copy", "gru"), ("mnist", "gru")])
def test_trains_on_every_task_with_its_own_parameter_count(task, arch, tmp_path):
    """Real Lightning, one epoch: completed, metrics in range, summary params are the RNN's (the
    recurrent group is torch's formula at the matched size), probes.json has no attention keys, and
    the checkpoint loads weights-only into the same model."""
    import json

    from ablate.tasks import load_task

    run_dir = tmp_path / "r"
    s = _train(*_task_items(task), f"model.arch={arch}", f"run.dir={run_dir}")
    assert s["status"] == "completed"
    assert 0 <= s["metrics"]["test/acc"] <= 1 and 0 <= s["metrics"]["val/acc"] <= 1
    h = matched_hidden(EncoderConfig(arch=arch, d_model=16))
    assert s["params"]["recurrent"] == rnn_params(arch, 16, h, 2)
    assert s["params"]["attention"] == s["params"]["ffn"] == 0
    raw = torch.load(run_dir / "last.ckpt", weights_only=True)  # tensors and plain values only
    assert raw["hyper_parameters"]["config"]["model"]["arch"] == arch
    task_module, _ = load_task(run_dir / "last.ckpt")
    assert isinstance(task_module.model.encoder, RecurrentEncoder)
    assert s["params"]["total"] == sum(p.numel() for p in task_module.model.parameters())
    probes = json.loads((run_dir / "probes.json").read_text())
    assert {"probe/init/grad_l0", "probe/final/cosine_l1", "probe/final/resid_norm_l1_rnn", "probe/final/acc"} <= set(probes)
    assert not [k for k in probes if "logit_std" in k or "head_drop" in k or "equiv_error" in k]
    if task == "mnist":  # the permuted test set applies: an RNN reads in order
        assert 0 <= probes["probe/final/test_perm_acc"] <= 1


def test_an_lstm_learns_the_copy_task():
    """Not a smoke run: an LSTM of the matched size (d_model 32 -> hidden 32) copies 4 tokens of 6 well
    above the order-blind level within 12 short epochs (a uni-directional RNN reads tokens, SEP, then
    answers at each blank)."""
    items = ["data.task=copy", "data.vocab=6", "data.length=4", "data.n_train=2000", "data.n_val=200",
             "data.n_test=200", "data.batch_size=50", "model.d_model=32", "model.arch=lstm", "model.pos_enc=none",
             "model.dropout=0", "trainer.max_epochs=12", "tracking=none", "run.probes=false", "optim.lr=3e-3"]
    s = _train(*items)
    assert s["metrics"]["test/acc"] > 0.9, s["metrics"]


def test_an_interrupted_lstm_run_resumes_with_the_numbers_of_an_uninterrupted_one(tmp_path):
    from tests.test_train import StopAt, rows

    items = [*_task_items("copy"), "data.n_train=256", "model.arch=lstm", "trainer.max_epochs=3"]
    full = _train(*items, f"run.dir={tmp_path / 'full'}")
    with pytest.raises(SystemExit):  # Lightning turns KeyboardInterrupt into exit(1)
        _train(*items, f"run.dir={tmp_path / 'cut'}", callbacks=[StopAt(step=11)])
    assert torch.load(tmp_path / "cut" / "last.ckpt", weights_only=True)["global_step"] == 8
    said: list[str] = []
    resumed = _train(*items, f"run.dir={tmp_path / 'cut'}", log=said.append)
    assert f"ablate: resuming {tmp_path / 'cut'} from last.ckpt (step 8)" in said
    assert resumed["attempts"] == 2 and resumed["global_step"] == 24
    assert rows(tmp_path / "cut") == rows(tmp_path / "full")
    assert resumed["metrics"] == full["metrics"] and resumed["probes"] == full["probes"]


def test_results_table_and_ablate_probe_handle_an_lstm_run(tmp_path, capsys):
    """A sweep folder with an LSTM and a Transformer run: one row each, the LSTM's parameter counts,
    its attention probe columns empty (absent keys), the ones it has filled; `ablate results` prints
    and exports it; `ablate probe` on the LSTM checkpoint prints its probes and exits 0."""
    import math

    from ablate import cli
    from ablate import results as R

    _train(*_task_items("copy"), "model.arch=lstm", "run.group=mix")
    _train(*_task_items("copy"), "model.n_heads=2", "run.group=mix")
    table = R.load("mix").set_index("model.arch")
    lstm, tf = table.loc["lstm"], table.loc["transformer"]
    assert lstm["params/recurrent"] == rnn_params("lstm", 16, matched_hidden(EncoderConfig(arch="lstm", d_model=16)), 2)
    assert lstm["params/attention"] == 0 and tf["params/attention"] > 0
    assert math.isnan(lstm["probe/final/logit_std_l0"]) and not math.isnan(tf["probe/final/logit_std_l0"])
    assert math.isnan(lstm["probe/final/head_drop_l0_h0"])
    for key in ("probe/final/grad_l0", "probe/final/cosine_l1", "probe/final/acc", "test/acc"):
        assert not math.isnan(lstm[key]) and not math.isnan(tf[key]), key
    assert cli.main(["results", "mix", "--csv", str(tmp_path / "mix.csv")]) == 0
    out = capsys.readouterr().out
    assert "lstm" in out and "transformer" in out
    assert (tmp_path / "mix.csv").read_text().count("\n") == 3
    run_dir = Path(lstm["run_dir"])
    assert cli.main(["probe", str(run_dir), "--batch", "16"]) == 0
    out = capsys.readouterr().out
    assert "[collapse]" in out and "resid_norm_rnn" in out and "share_recurrent" in out
    measured, _, said = out.partition("[not applicable: the model has no attention]")
    assert "logit_std" not in measured and "head_drop" not in measured and "logit_std" in said


def test_gradient_flow_runs_its_backward_pass_without_cudnn(monkeypatch):
    """On CUDA, cuDNN refuses an RNN's backward in eval mode ("cudnn RNN backward can only be called in
    training mode"), where the probes run: gradient_flow's forward and backward run with cuDNN off (torch's
    native kernels, same gradients). Checked here through the flag the loss is computed under."""
    from ablate.probes import gradients

    seen = []

    def loss_seen(out, y):
        seen.append(torch.backends.cudnn.enabled)
        return task_loss(out, y)

    monkeypatch.setattr(gradients, "task_loss", loss_seen)
    gradients.gradient_flow(_token_model("lstm"), _batch())
    assert seen == [False]
    assert torch.backends.cudnn.enabled  # restored afterwards
