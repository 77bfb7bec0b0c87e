"""model.residual_around: the identity skip around both sub-layers, the attention only or the FFN only
(issue 24, Q4). Each placement computes its formula, costs no parameter and no random number, is
refused where it means nothing, keeps old run ids, and the probes still find every sub-layer."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ablate import config as C
from ablate.models import Block, EncoderConfig, SequenceClassifier
from ablate.models.block import NoSkip
from ablate.probes import residual_norms, run_probes, token_collapse

B, T, D = 3, 6, 16
ROWS = 28


def _cfg(**kw) -> EncoderConfig:
    base = dict(d_model=D, n_heads=2, n_layers=2, pos_enc="none", dropout=0.0)
    base.update(kw)
    return EncoderConfig(**base)


def _hand_block(block: Block, x: torch.Tensor, norm: str, skip_attn: bool, skip_ffn: bool) -> torch.Tensor:
    """The block's forward written out with its own attention, FFN and LayerNorms:
    pre: h = [x +] attn(LN1 x), out = [h +] ffn(LN2 h); post: h = LN1([x +] attn x), out = LN2([h +] ffn h)."""
    attn, ffn, keep = block.attention, block.feed_forward, nn.Identity()
    ln1, ln2 = block.norms if norm != "none" else (keep, keep)
    pre1, pre2 = (ln1, ln2) if norm == "pre" else (keep, keep)
    post1, post2 = (ln1, ln2) if norm == "post" else (keep, keep)
    a = attn(pre1(x))[0]
    h = post1(x + a if skip_attn else a)
    f = ffn(pre2(h))[0]
    return post2(h + f if skip_ffn else f)


PLACEMENTS = [  # (residual, residual_around) -> skip around (attention, ffn)
    (True, "both", True, True),
    (True, "attention", True, False),
    (True, "ffn", False, True),
    (False, "both", False, False),  # residual=False: neither
]


@pytest.mark.parametrize("norm", ["pre", "post", "none"])
@pytest.mark.parametrize("residual,around,skip_attn,skip_ffn", PLACEMENTS)
def test_block_computes_the_formula_of_its_skip_placement(norm, residual, around, skip_attn, skip_ffn):
    torch.manual_seed(0)
    block = Block(_cfg(norm=norm, residual=residual, residual_around=around)).eval()
    assert isinstance(block.attn.skip, nn.Identity if skip_attn else NoSkip)
    assert isinstance(block.ffn.skip, nn.Identity if skip_ffn else NoSkip)
    x = torch.randn(B, T, D) * 2 + 0.5
    y, _ = block(x)
    # the same operations in the same order: equal to the last bit
    torch.testing.assert_close(y, _hand_block(block, x, norm, skip_attn, skip_ffn), rtol=0, atol=0)
    others = {(a, f) for _, _, a, f in PLACEMENTS} - {(skip_attn, skip_ffn)}
    for a, f in others:  # and no other placement gives it: the test can tell them apart
        assert (y - _hand_block(block, x, norm, a, f)).abs().max() > 1e-2, (a, f)


@pytest.mark.parametrize("around,ffn_mult", [("both", 0), ("attention", 0), ("both", 2), ("attention", 2), ("ffn", 2)])
def test_placement_costs_no_parameter_and_no_random_number(around, ffn_mult):
    torch.manual_seed(0)
    reference = SequenceClassifier(_cfg(ffn_mult=ffn_mult), ROWS, 10)
    torch.manual_seed(0)
    placed = SequenceClassifier(_cfg(ffn_mult=ffn_mult, residual_around=around), ROWS, 10)
    ref, got = reference.state_dict(), placed.state_dict()
    assert list(got) == list(ref)
    for name in ref:
        assert torch.equal(got[name], ref[name]), name
    attn, ffn, norms = 4 * D * D + 4 * D, 2 * ffn_mult * D * D + ffn_mult * D + D, 2 * D * (2 if ffn_mult else 1)
    embed, head = ROWS * D + D, D * 10 + 10
    expected = 2 * (attn + (ffn if ffn_mult else 0) + norms) + embed + head  # 2874 without FFN, 5082 with
    assert sum(p.numel() for p in placed.parameters()) == sum(p.numel() for p in reference.parameters()) == expected


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_attention_only_with_the_ffn_removed_is_the_default_model(norm):
    """ffn_mult=0 leaves one sub-layer: residual_around='attention' is then what 'both' computes, the skip
    around the attention written out by hand (pre: x + attn(LN x); post: LN(x + attn x)), and not the
    block without that skip (the comparison can fail)."""
    x = torch.randn(B, T, D) * 2 + 0.5
    for around in ("both", "attention"):
        torch.manual_seed(0)
        block = Block(_cfg(ffn_mult=0, norm=norm, residual_around=around)).eval()
        assert block.feed_forward is None and len(block.norms) == 1
        (ln,), attn = block.norms, block.attention
        with torch.no_grad():
            y = block(x)[0]
            skip = x + attn(ln(x))[0] if norm == "pre" else ln(x + attn(x)[0])
            no_skip = attn(ln(x))[0] if norm == "pre" else ln(attn(x)[0])
        torch.testing.assert_close(y, skip, rtol=0, atol=0)
        assert (y - no_skip).abs().max() > 1e-2


REFUSED = {
    "no_residual_attention": (
        dict(residual=False, residual_around="attention"),
        ["residual_around='attention'", "residual=True", "residual_around='both'"],
    ),
    "no_residual_ffn": (
        dict(residual=False, residual_around="ffn"),
        ["residual_around='ffn'", "residual=True", "residual_around='both'"],
    ),
    "ffn_removed": (dict(ffn_mult=0, residual_around="ffn"), ["residual_around='ffn'", "ffn_mult=0", "'attention'"]),
    "unknown": (dict(residual_around="neither"), ["residual_around", "'neither'", "both, attention, ffn"]),
    "rnn": (dict(arch="lstm", residual_around="attention"), ["residual_around='attention'", "arch='lstm'", "'both'"]),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_meaningless_placements_are_refused_with_one_clear_error(case):
    overrides, needles = REFUSED[case]
    with pytest.raises(ValueError) as info:
        EncoderConfig(**overrides)
    message = str(info.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, f"{needle!r} missing from {message!r}"


def test_the_dotted_key_reaches_the_model_and_is_refused_there_too():
    cfg = C.build(C.parse_overrides(["model.residual_around=ffn", "model.n_layers=16"]))
    assert cfg.model.residual_around == "ffn"
    with pytest.raises(C.ConfigError, match="residual_around='attention' needs residual=True"):
        C.build(C.parse_overrides(["model.residual_around=attention", "model.residual=false"]))


def test_run_ids_of_existing_configs_are_unchanged():
    """The pinned ids of tests/test_config.py: the new key at its default leaves them as they were."""
    old = ("data.task=copy", "model.pos_enc=none", "budget=quick", "seed=3", "optim.lr=0.001", "model.max_len=512")
    build = lambda *items: C.build(C.parse_overrides(list(items)))  # noqa: E731
    wide = "model.max_len=512"  # the default these ids were made with (tests/test_config.py)
    assert C.run_id(build(wide)) == C.run_id(build(wide, "model.residual_around=both")) == "bfbc209f3f36"
    assert C.run_id(build(*old, "model.residual_around=both")) == "1e9176e96fdb"
    ids = {C.run_id(build(*old, f"model.residual_around={a}")) for a in ("both", "attention", "ffn")}
    assert len(ids) == 3


def _rows(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, ROWS, ROWS, generator=g), torch.randint(0, 10, (n,), generator=g)


@pytest.mark.parametrize("around", ["attention", "ffn"])
def test_probes_find_every_sublayer_of_a_placed_model(around):
    torch.manual_seed(0)
    model = SequenceClassifier(_cfg(norm="none", residual_around=around), ROWS, 10).eval()
    x, y = _rows(8, 0)
    scalars, arrays = run_probes(model, (x, y), expensive=True, val_loader=[_rows(16, 1)])
    for layer in range(2):
        for key in ("grad", "grad_wq", "grad_ffn", "cosine", "erank", "entropy", "attn", "ffn"):
            key = f"resid_norm_l{layer}_{key}" if key in ("attn", "ffn") else f"{key}_l{layer}"
            assert key in scalars and torch.isfinite(torch.tensor(scalars[key])), key
    assert arrays["resid_norm"].shape == (4,)
    # the probe's states are the sub-layers' outputs: checked against the hand forward, layer by layer
    hidden = []

    def keep(module, args):
        hidden.append(args[0])

    handles = [b.register_forward_pre_hook(keep) for b in model.encoder.blocks]
    with torch.no_grad():
        model(x)
    for handle in handles:
        handle.remove()
    norms, collapse = residual_norms(model, x), token_collapse(model, x)
    skip_attn, skip_ffn = around == "attention", around == "ffn"
    for layer, (block, h) in enumerate(zip(model.encoder.blocks, hidden)):
        a = block.attention(h)[0]
        mid = h + a if skip_attn else a
        f = block.feed_forward(mid)[0]
        out = mid + f if skip_ffn else f
        assert norms[f"resid_norm_l{layer}_attn"] == pytest.approx(mid.norm(dim=-1).mean().item(), rel=1e-6)
        assert norms[f"resid_norm_l{layer}_ffn"] == pytest.approx(out.norm(dim=-1).mean().item(), rel=1e-6)
        cos = F.normalize(out.double(), dim=-1)
        gram = cos @ cos.transpose(1, 2)
        mean_cos = ((gram.sum((1, 2)) - gram.diagonal(dim1=1, dim2=2).sum(-1)) / (ROWS * (ROWS - 1))).mean()
        assert collapse[f"cosine_l{layer}"] == pytest.approx(mean_cos.item(), rel=1e-6)
