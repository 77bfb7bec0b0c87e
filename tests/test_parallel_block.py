"""model.block=parallel: attention and the FFN read the same input and add to the stream together
(GPT-J, Wang & Komatsuzaki 2021; PaLM, Chowdhery et al. 2022, sec. 2), against the formula written
out here from the block's own parts, and counted against arithmetic: one norm per block where the
sequential block has two."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ablate import config as C
from ablate import limits
from ablate.models import EncoderConfig, SequenceClassifier
from ablate.models.encoder import Encoder
from ablate.probes import gradient_flow, sublayer_outputs


def _block(**kw):
    enc = Encoder(
        EncoderConfig(block="parallel", pos_enc="none", dropout=0.0, n_layers=1, **kw)
    ).eval()
    torch.manual_seed(1)
    with torch.no_grad():  # norms off their init, so that a norm in the wrong place shows
        for norm in enc.blocks[0].norms:
            norm.weight.add_(0.3 * torch.randn_like(norm.weight))
    return enc.blocks[0]


@pytest.mark.parametrize(
    "norm, residual", [("pre", True), ("post", True), ("none", True), ("pre", False)]
)
def test_the_block_is_the_parallel_formula(norm, residual):
    block = _block(norm=norm, residual=residual)
    attn, ffn = block.attention, block.feed_forward
    x = torch.randn(3, 7, 64)
    n = block.norms[0] if norm != "none" else nn.Identity()
    with torch.no_grad():
        if norm == "pre":  # x + attn(N(x)) + ffn(N(x)): one norm, both branches read it
            expected = (x if residual else 0) + attn(n(x))[0] + ffn(n(x))[0]
        elif norm == "post":  # N(x + attn(x) + ffn(x))
            expected = n(x + attn(x)[0] + ffn(x)[0])
        else:
            expected = x + attn(x)[0] + ffn(x)[0]
        got, weights = block(x, need_weights=True)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert weights.shape == (3, 4, 7, 7)
    assert len(block.norms) == (0 if norm == "none" else 1)


@pytest.mark.parametrize(
    "norm, norm_type, fewer",
    [("pre", "layer", 128), ("post", "layer", 128), ("pre", "rms", 64), ("none", "layer", 0)],
)
def test_one_norm_per_block_where_the_sequential_block_has_two(norm, norm_type, fewer):
    sequential, parallel = (
        C.build(
            {
                "model.norm": norm,
                "model.norm_type": norm_type,
                "model.n_layers": 3,
                "model.block": b,
            }
        )
        for b in ("sequential", "parallel")
    )
    assert limits.parameter_count(sequential) - limits.parameter_count(parallel) == 3 * fewer
    assert sum(
        p.numel() for p in SequenceClassifier(parallel.encoder, 28, 10).parameters()
    ) == limits.parameter_count(parallel)


def test_it_trains_and_the_probes_read_it():
    model = SequenceClassifier(EncoderConfig(block="parallel", norm="pre", max_len=28), 28, 10)
    x, y = torch.randn(8, 28, 28), torch.randint(0, 10, (8,))
    nn.functional.cross_entropy(model(x), y).backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())
    states = sublayer_outputs(model.eval(), x)
    assert len(states) == 2 and all(len(s) == 2 and s[1].shape == (8, 28, 64) for s in states)
    flow = gradient_flow(model, (x, y))
    assert flow["grad_ffn_l0"] > 0 and flow["grad_wq_l0"] > 0 and flow["grad_norm_l0"] > 0


@pytest.mark.parametrize(
    "items, words",
    [
        ({"model.residual_around": "attention"}, "needs residual_around='both' and an FFN"),
        ({"model.ffn_mult": 0}, "needs residual_around='both' and an FFN"),
        ({"model.arch": "lstm"}, "block='parallel' does not apply to arch='lstm'"),
    ],
)
def test_what_a_parallel_block_cannot_be_is_refused(items, words):
    with pytest.raises(C.ConfigError, match=words):
        C.build({"model.block": "parallel", **items})
