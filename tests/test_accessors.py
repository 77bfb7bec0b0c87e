"""The model's public surface: block.attention / feed_forward / norms / sublayers, encoder.blocks and
parameter_groups by module type. Probes, parameter counts and the benchmark use only these, so a
model whose inner attributes have other names gives the same numbers (issue 12)."""

from __future__ import annotations

import copy
import math
import re
from pathlib import Path

import pytest
import torch
from torch import nn

import ablate.bench
import ablate.probes
from ablate.models import (
    Block,
    Encoder,
    EncoderConfig,
    FeedForward,
    MultiHeadAttention,
    SequenceClassifier,
    SubLayer,
    TokenModel,
    parameter_groups,
)
from ablate.probes import parameter_shares, run_probes

ROWS = 28


def _cfg(**kw) -> EncoderConfig:
    return EncoderConfig(**{**dict(d_model=16, n_heads=2, n_layers=2, dropout=0.0, max_len=ROWS), **kw})


@pytest.mark.parametrize("norm", ["pre", "post", "none"])
@pytest.mark.parametrize("ffn_mult", [0, 2])
def test_block_accessors(norm, ffn_mult):
    enc = Encoder(_cfg(norm=norm, ffn_mult=ffn_mult))
    assert list(enc.blocks) == [m for m in enc.modules() if isinstance(m, Block)]
    for block in enc.blocks:
        assert isinstance(block.attention, MultiHeadAttention)
        assert [m for m in block.modules() if isinstance(m, MultiHeadAttention)] == [block.attention]
        if ffn_mult:
            assert isinstance(block.feed_forward, FeedForward)
        else:
            assert block.feed_forward is None
        n_norms = 0 if norm == "none" else (2 if ffn_mult else 1)
        assert len(block.norms) == n_norms and all(isinstance(n, nn.LayerNorm) for n in block.norms)
        assert set(block.sublayers) == {"attn", "ffn"}
        x = torch.randn(2, 5, 16)
        h_attn = block.sublayers["attn"](x)[0]  # the hidden state after each sub-layer ...
        torch.testing.assert_close(block.sublayers["ffn"](h_attn)[0], block(x)[0], atol=0, rtol=0)


def test_norms_are_in_the_order_of_torchs_norm1_norm2():
    block = Encoder(_cfg(norm="pre")).blocks[0]
    attn_norm = block.sublayers["attn"].pre_norm
    ffn_norm = block.sublayers["ffn"].pre_norm
    assert block.norms[0] is attn_norm and block.norms[1] is ffn_norm


def test_probe_and_bench_sources_use_no_attribute_name_strings():
    sources = [
        p
        for package in (ablate.probes, ablate.bench)
        for p in Path(package.__file__).parent.glob("*.py")
    ]
    assert len(sources) >= 10
    pattern = re.compile(r"attn\.fn|ffn\.fn|\.fn\.|\"fn\"|'fn'")
    offenders = [f"{p.name}:{i}" for p in sources for i, line in enumerate(p.read_text().splitlines(), 1)
                 if pattern.search(line)]  # fmt: skip
    assert offenders == []


# --- a model whose inner attributes have other names --------------------------------------------


class RenamedSubLayer(nn.Module):
    """SubLayer's computation with the wrapped layer under another name (`inner`, not `fn`)."""

    def __init__(self, sub: SubLayer):
        super().__init__()
        self.first, self.inner, self.drop, self.skip, self.last = (
            sub.pre_norm, sub.fn, sub.drop, sub.skip, sub.post_norm
        )  # fmt: skip

    def forward(self, x: torch.Tensor, need_weights: bool = False):
        y, weights = self.inner(self.first(x), need_weights)
        return self.last(self.skip(x) + self.drop(y)), weights


class RenamedBlock(Block):
    """A Block whose sub-layers are `mixer` and `mlp`: only its accessors tell where things are."""

    def __init__(self, block: Block):
        nn.Module.__init__(self)
        self.mixer = RenamedSubLayer(block.attn)
        self.mlp = RenamedSubLayer(block.ffn) if block.feed_forward is not None else block.ffn

    def forward(self, x: torch.Tensor, need_weights: bool = False):
        x, weights = self.mixer(x, need_weights)
        return self.mlp(x)[0], weights

    attention = property(lambda self: self.mixer.inner)
    feed_forward = property(lambda self: getattr(self.mlp, "inner", None))
    sublayers = property(lambda self: {"attn": self.mixer, "ffn": self.mlp})


def _renamed(model: nn.Module) -> nn.Module:
    other = copy.deepcopy(model)
    other.encoder.blocks = nn.ModuleList(RenamedBlock(b) for b in other.encoder.blocks)
    assert not any(".attn." in n or ".ffn." in n for n, _ in other.named_parameters())
    return other


@pytest.mark.parametrize(
    "kw", [dict(), dict(norm="pre", pos_enc="rope", causal=True), dict(ffn_mult=0, pos_enc="alibi")]
)
def test_renamed_inner_attributes_give_the_same_probe_numbers(kw):
    torch.manual_seed(0)
    model = SequenceClassifier(_cfg(d_model=32, n_heads=4, **kw), ROWS, 10)
    renamed = _renamed(model)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(16, ROWS, ROWS, generator=g), torch.randint(0, 10, (16,), generator=g)
    perm = torch.randperm(ROWS, generator=g)
    kwargs = dict(cheap=True, expensive=True, val_loader=[(x, y)], permutation=perm)
    scalars, arrays = run_probes(model, (x, y), **kwargs)
    scalars_r, arrays_r = run_probes(renamed, (x, y), **kwargs)
    assert scalars_r == scalars  # every probe, bit for bit
    assert arrays_r.keys() == arrays.keys()
    for name in arrays:
        assert (arrays_r[name] == arrays[name]).all(), name
    assert parameter_groups(renamed) == parameter_groups(model)
    assert parameter_shares(renamed) == parameter_shares(model)
    # and the numbers are the real ones: attention found, gradients in every group
    assert scalars["grad_wq_l0"] > 0 and scalars["grad_wo_l1"] > 0 and math.isfinite(scalars["grad_ratio"])
    assert (scalars["grad_ffn_l0"] > 0) == ("ffn_mult" not in kw)


# --- parameter groups by module type ------------------------------------------------------------


def test_parameter_groups_are_found_by_module_type():
    """Counts from the configuration: the learned table is embedding wherever the encoder sits, a token
    embedding and a row embedding are embedding, the output head and norms are other."""
    d, L, max_len = 16, 2, 30
    cfg = _cfg(d_model=d, n_layers=L, ffn_mult=2, pos_enc="learned", max_len=max_len, norm="post")
    per_layer_attn, per_layer_ffn = 4 * d * d + 4 * d, 2 * 2 * d * d + 2 * d + d
    for model, embedding, other in [
        (Encoder(cfg), max_len * d, L * 2 * 2 * d),
        (SequenceClassifier(cfg, ROWS, 10), ROWS * d + d + max_len * d, L * 2 * 2 * d + d * 10 + 10),
        (SequenceClassifier(cfg, ROWS, 10, pooling="cls"), ROWS * d + d + max_len * d + d, L * 2 * 2 * d + d * 10 + 10),
        (TokenModel(cfg, n_tokens=11, n_out=7), 11 * d + max_len * d, L * 2 * 2 * d + d * 7 + 7),
    ]:  # fmt: skip
        groups = parameter_groups(model)
        assert groups == {
            "attention": L * per_layer_attn,
            "ffn": L * per_layer_ffn,
            "embedding": embedding,
            "other": other,
            "total": sum(p.numel() for p in model.parameters()),
        }, type(model).__name__


def test_a_linear_named_like_attention_is_not_attention():
    """Names do not decide: the output head moved to `attn.fn` (the old wrapper's name) is still
    'other', and an FFN-less model's attention stays attention."""
    model = SequenceClassifier(_cfg(pos_enc="none", ffn_mult=0), ROWS, 10)
    before = parameter_groups(model)
    model.attn = nn.Module()
    model.attn.fn = model.head
    del model.head
    assert [n for n, _ in model.named_parameters() if n.startswith("attn.fn.")] == ["attn.fn.weight", "attn.fn.bias"]
    assert parameter_groups(model) == before
