"""model.qk_reparam, the 1/sqrt(d_k) scale's equal under Adam (issue 24, Q2): an unscaled model whose
W_Q, W_K (and biases) start c = d_head^(-1/4) smaller and step at lr * c (and eps / c) trains like the
scaled model to float64 rounding; the plain unscaled model does not; what would break it is refused."""

from __future__ import annotations

import pytest
import torch

from ablate import config as C
from ablate.models import EncoderConfig, SplitQKV, TokenModel, lr_factors
from ablate.probes import gradient_flow
from ablate.tasks import CopyTokens
from ablate.train import train

V, L, B, STEPS = 6, 5, 16, 50  # copy task: L tokens, SEP, L blanks
BASE = {"data.task": "copy", "model.d_model": "16", "model.n_heads": "2", "model.dropout": "0", "optim.lr": "3e-3"}
SCALED = {"model.qk_scale": "true"}
REPARAM = {"model.qk_scale": "false", "model.qk_reparam": "true"}
UNSCALED = {"model.qk_scale": "false"}


@pytest.fixture
def float64():
    """Built in float64 from the first draw: c * W rounded in float32 alone would differ by 1e-8."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


def _batches(n: int, seed: int = 1) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        tokens = torch.randint(0, V, (B, L), generator=g)
        x = torch.cat((tokens, torch.full((B, 1), V), torch.full((B, L), V + 1)), dim=1)
        y = torch.full_like(x, -100)
        y[:, L + 1 :] = tokens
        out.append((x, y))
    return out


def _task(arm: dict, **extra: str) -> CopyTokens:
    torch.manual_seed(0)
    task = CopyTokens(C.build({**BASE, **arm, **extra}), n_tokens=V + 2, n_out=V)

    class FakeTrainer:  # only what configure_optimizers reads (a warm-up or schedule)
        estimated_stepping_batches = STEPS

    task._trainer = FakeTrainer()
    return task


def _train(task: CopyTokens, batches, eps: float | None = None):
    """The task's own optimiser and schedule, one step per batch: losses, and the attention maps after."""
    out = task.configure_optimizers()
    opt, sched = (out["optimizer"], out["lr_scheduler"]["scheduler"]) if isinstance(out, dict) else (out, None)
    if eps is not None:
        for group in opt.param_groups:
            group["eps"] = eps
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = task.loss(task.model(x), y)
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
        losses.append(loss.detach())
    with torch.no_grad():
        _, maps = task.model(batches[0][0], return_attention=True)
    return torch.stack(losses), torch.stack(maps)  # (STEPS,), (n_layers, B, nh, T, T)


ARMS = [  # d_head, extra keys: every d_head of Q2, with rope, Pre-LN, causal, AdamW and a schedule
    ("8", {}),
    ("64", {"model.pos_enc": "rope", "model.norm": "pre", "optim.warmup": "0.1", "optim.schedule": "cosine"}),
    ("512", {"model.causal": "true", "optim.name": "adamw"}),
]


@pytest.mark.parametrize("d_head,extra", ARMS, ids=[a for a, _ in ARMS])
def test_reparametrised_unscaled_model_trains_like_the_scaled_one(float64, d_head, extra):
    """Measured: losses agree to <= 7e-16 relative and maps to <= 4e-15 over 50 steps, a few float64 ulps
    (a product by c rounds differently than a division by sqrt(d_head); nothing makes that grow)."""
    extra = {"model.d_head": d_head, **extra}
    scaled, reparam = _task(SCALED, **extra), _task(REPARAM, **extra)
    loss_s, maps_s = _train(scaled, _batches(STEPS))
    loss_r, maps_r = _train(reparam, _batches(STEPS))
    assert loss_s[-1] < 0.8 * loss_s[0]  # it learned something: the steps were not all vanishingly small
    torch.testing.assert_close(loss_r, loss_s, rtol=1e-13, atol=0)
    torch.testing.assert_close(maps_r, maps_s, rtol=0, atol=1e-13)
    c = int(d_head) ** -0.25
    for a, b in zip(scaled.model.encoder.blocks, reparam.model.encoder.blocks):
        fused, split = a.attention.qkv, b.attention.qkv
        inner = a.attention.inner_dim
        for i, (name, lin, factor) in enumerate((("q", split.q, c), ("k", split.k, c), ("v", split.v, 1.0))):
            rows = slice(i * inner, (i + 1) * inner)  # after 50 steps, W' is still c W
            for kind, got, want in (("W", lin.weight / factor, fused.weight[rows]), ("b", lin.bias / factor, fused.bias[rows])):
                # b_K adds q.b_K to every score of a query, which the softmax ignores: its gradient is rounding
                # noise, which Adam normalises, so it drifts apart (measured <= 2e-11) unseen by the output
                bound = 1e-10 if name + kind == "kb" else 1e-13  # measured <= 2e-15 for all the others
                assert ((got - want).norm() / want.norm()).item() < bound, name + kind


@pytest.mark.parametrize("d_head", ["8", "64", "512"])
def test_the_plain_unscaled_model_does_not(float64, d_head):
    """Same seed, same batches, no reparametrisation: measured max loss differences of 7%, 22% and 10x."""
    loss_s, maps_s = _train(_task(SCALED, **{"model.d_head": d_head}), _batches(STEPS))
    loss_u, maps_u = _train(_task(UNSCALED, **{"model.d_head": d_head}), _batches(STEPS))
    assert ((loss_u - loss_s).abs() / loss_s).max() > 0.05
    assert (maps_u - maps_s).abs().max() > 0.5


def test_adams_eps_must_shrink_with_the_rows():
    """Left at 1e-8 for W_Q, W_K too, eps weighs c times more against their sqrt(v) than the scaled
    model's: at d_head 512, measured 4e-5 on the loss and 3e-3 on the maps after 50 steps."""
    torch.set_default_dtype(torch.float64)
    try:
        loss_s, maps_s = _train(_task(SCALED, **{"model.d_head": "512"}), _batches(STEPS), eps=1e-8)
        loss_r, maps_r = _train(_task(REPARAM, **{"model.d_head": "512"}), _batches(STEPS), eps=1e-8)
    finally:
        torch.set_default_dtype(torch.float32)
    assert ((loss_r - loss_s).abs() / loss_s).max() > 1e-6
    assert (maps_r - maps_s).abs().max() > 1e-4


def test_init_is_the_scaled_models_draw_times_c():
    """The same random numbers as the scaled model: W_Q, W_K, b_Q, b_K times c exactly, every other
    parameter equal to the bit (SplitQKV draws nothing of its own), and the same count."""
    for init in ("default", "xavier", "unit", "small"):
        cfg = dict(d_model=16, n_heads=2, d_head=64, n_layers=2, init=init, max_len=8)
        torch.manual_seed(0)
        scaled = TokenModel(EncoderConfig(**cfg), n_tokens=8, n_out=6)
        torch.manual_seed(0)
        reparam = TokenModel(EncoderConfig(**cfg, qk_scale=False, qk_reparam=True), n_tokens=8, n_out=6)
        assert sum(p.numel() for p in reparam.parameters()) == sum(p.numel() for p in scaled.parameters())
        ref, got = scaled.state_dict(), reparam.state_dict()
        c = 64**-0.25
        for name in ref:
            if ".qkv." not in name:
                assert torch.equal(got[name], ref[name]), (init, name)
                continue
            prefix, kind = name.rsplit(".", 1)
            for i, (part, factor) in enumerate((("q", c), ("k", c), ("v", 1.0))):
                rows = ref[name][i * 128 : (i + 1) * 128]
                assert torch.equal(got[f"{prefix}.{part}.{kind}"], rows * factor if factor != 1.0 else rows), (init, name)
        assert len(got) == len(ref) + 4 * 2  # per layer, qkv.{weight,bias} -> {q,k,v}.{weight,bias}


def test_the_optimiser_steps_w_q_and_w_k_at_lr_times_c_with_eps_over_c():
    task = _task(REPARAM, **{"model.d_head": "64"})
    opt = task.configure_optimizers()
    c = 64**-0.25
    rest, slow = opt.param_groups
    qk = [p for b in task.model.encoder.blocks for lin in (b.attention.qkv.q, b.attention.qkv.k) for p in lin.parameters()]
    assert {id(p) for p in slow["params"]} == {id(p) for p in qk} == {id(p) for p, _ in lr_factors(task)}
    assert len(rest["params"]) + len(slow["params"]) == len(list(task.parameters()))
    assert (rest["lr"], rest["eps"]) == (3e-3, 1e-8)
    assert slow["lr"] == pytest.approx(3e-3 * c, rel=1e-15) and slow["eps"] == pytest.approx(1e-8 / c, rel=1e-15)
    plain = _task(SCALED)  # the default path: one group of every parameter in order, as before
    (group,) = plain.configure_optimizers().param_groups
    assert [id(p) for p in group["params"]] == [id(p) for p in plain.parameters()]
    assert (group["lr"], group["eps"]) == (3e-3, 1e-8)


def test_projections_name_the_same_rows_in_both_layouts():
    torch.manual_seed(0)
    fused = TokenModel(EncoderConfig(d_model=16, n_heads=2, d_head=8, qk_scale=False, max_len=8), 8, 6).encoder.blocks[0].attention
    torch.manual_seed(0)
    split = TokenModel(EncoderConfig(d_model=16, n_heads=2, d_head=8, qk_scale=False, qk_reparam=True, max_len=8), 8, 6)
    split = split.encoder.blocks[0].attention
    assert isinstance(split.qkv, SplitQKV) and isinstance(fused.qkv, torch.nn.Linear)
    c = 8**-0.25
    for name, factor in (("wq", c), ("wk", c), ("wv", 1.0)):
        a = torch.cat([p[rows].flatten() for p, rows in fused.projections()[name]])
        b = torch.cat([p[rows].flatten() for p, rows in split.projections()[name]])
        torch.testing.assert_close(b, a * factor, rtol=0, atol=0)
    x = torch.randn(2, 5, 16)
    for u, v, factor in zip(fused.project(x), split.project(x), (c, c, 1.0)):  # the same layout out of qkv
        torch.testing.assert_close(v, u * factor, rtol=1e-6, atol=1e-7)


def test_gradient_groups_of_a_reparametrised_model_match_a_plain_backward():
    torch.manual_seed(0)
    cfg = EncoderConfig(d_model=16, n_heads=2, d_head=8, qk_scale=False, qk_reparam=True, pos_enc="none", dropout=0.0)
    model = TokenModel(cfg, n_tokens=V + 2, n_out=V)
    x, y = _batches(1)[0]
    grads = gradient_flow(model, (x, y))
    model.zero_grad()
    torch.nn.functional.cross_entropy(model(x).reshape(-1, V), y.reshape(-1), ignore_index=-100).backward()
    for layer, block in enumerate(model.encoder.blocks):
        for name, parts in block.attention.projections().items():
            want = torch.cat([p.grad[rows].flatten() for p, rows in parts]).norm().item()
            assert grads[f"grad_{name}_l{layer}"] == pytest.approx(want, rel=1e-5), name


REFUSED = [  # (overrides, substrings of the one-line message)
    ({"model.qk_reparam": "true"}, ["qk_reparam=True", "qk_scale=False"]),
    ({**REPARAM, "optim.name": "sgd"}, ["model.qk_reparam=true", "optim.name=adam or adamw", "got sgd"]),
    ({**REPARAM, "optim.weight_decay": "0.01"}, ["model.qk_reparam=true", "optim.weight_decay=0", "got 0.01"]),
    ({**REPARAM, "optim.name": "adamw", "optim.weight_decay": "0.1"}, ["optim.weight_decay=0", "got 0.1"]),
    ({**REPARAM, "optim.grad_clip": "1.0"}, ["model.qk_reparam=true", "optim.grad_clip=null", "got 1.0"]),
    ({**REPARAM, "model.arch": "lstm", "model.qk_scale": "true"}, ["qk_reparam=True", "arch='lstm'", "False"]),
    ({"model.qk_reparam": "maybe"}, ["model.qk_reparam", "'maybe'", "true or false"]),
]


@pytest.mark.parametrize("overrides,needles", REFUSED, ids=[str(i) for i in range(len(REFUSED))])
def test_what_breaks_the_equality_is_refused_in_one_line(overrides, needles):
    with pytest.raises(C.ConfigError) as info:
        C.build(overrides)
    message = str(info.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, f"{needle!r} missing from {message!r}"


def test_run_ids_of_existing_configs_are_unchanged():
    old = ("data.task=copy", "model.pos_enc=none", "budget=quick", "seed=3", "optim.lr=0.001", "model.max_len=512")
    build = lambda *items: C.build(C.parse_overrides(list(items)))  # noqa: E731
    assert C.run_id(build("model.qk_reparam=false", "model.max_len=512")) == "bfbc209f3f36"
    assert C.run_id(build(*old, "model.qk_reparam=false")) == "1e9176e96fdb"
    assert C.run_id(build(*old, "model.qk_scale=false", "model.qk_reparam=true")) != C.run_id(
        build(*old, "model.qk_scale=false"))


def test_ablate_train_runs_a_reparametrised_model_end_to_end(tmp_path, monkeypatch):
    """Lightning, probes, checkpoint: the two parameter groups go through the real training loop."""
    monkeypatch.setenv("ABLATE_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("ABLATE_PROGRESS", "0")
    cfg = C.build(C.parse_overrides([
        "data.task=copy", "data.vocab=6", "data.length=4", "data.n_train=128", "data.n_val=32", "data.n_test=32",
        "data.batch_size=32", "model.d_model=16", "model.n_heads=2", "model.qk_scale=false", "model.qk_reparam=true",
        "trainer.max_epochs=1", "tracking=none", f"run.dir={tmp_path / 'r'}"]))
    summary = train(cfg, log=lambda *a: None)
    assert summary["status"] == "completed" and summary["global_step"] == 4


@pytest.mark.parametrize("override", ["model.qk_scale=false model.qk_reparam=true", "model.residual_around=attention",
                                      "model.value_skipinit=true", "model.shaped_attention=true"])
def test_explore_refuses_a_model_its_forward_pass_does_not_know(tmp_path, capsys, monkeypatch, override):
    """The page's forward.js builds skips around both sub-layers, one fused qkv and softmax mixing: a qk_reparam,
    residual_around or value_skipinit run would be drawn wrong, so `ablate explore` refuses it in one line (exit 2) and
    writes nothing."""
    from ablate import cli
    from tests.test_resume import COPY
    from tests.test_train import run

    monkeypatch.setenv("ABLATE_PROGRESS", "0")
    run_dir = tmp_path / "r"
    run(*COPY, "trainer.max_epochs=1", "run.probes=false", *override.split(), f"run.dir={run_dir}")
    out = tmp_path / "out"
    out.mkdir()
    assert cli.main(["explore", str(run_dir), "--json", str(out / "models.json")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    key = override.split()[-1].split("=")[0]
    assert line.startswith(f"ablate: {run_dir} is a {key}=") and "the page's forward pass computes" in line
    assert list(out.iterdir()) == []
