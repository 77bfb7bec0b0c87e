"""model.qkv_tie: two of W_Q, W_K, W_V as one matrix (issue 37, the tutorial's "three cards"), against
PyTorch's own nn.TransformerEncoderLayer given the tied matrix twice (a reference nobody here wrote),
counted against arithmetic, and its gradient the sum of what the two uses would get apart."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from ablate import config as C
from ablate import limits
from ablate.models import Encoder, EncoderConfig, SequenceClassifier
from ablate.probes import gradient_flow

from . import tolerance

D, HEADS = 16, 4


def _tied(tie: str, **kw) -> Encoder:
    torch.manual_seed(0)
    return Encoder(EncoderConfig(d_model=D, n_heads=HEADS, n_layers=1, ffn_mult=2, pos_enc="none", dropout=0.0,
                                 qkv_tie=tie, **kw)).eval()


def _torch_layer(enc: Encoder, tie: str) -> nn.TransformerEncoderLayer:
    """PyTorch's layer with in_proj_weight = [W_Q; W_K; W_V], the tied block written where both uses read it."""
    ref = nn.TransformerEncoderLayer(D, HEADS, dim_feedforward=2 * D, dropout=0.0, batch_first=True).eval()
    block = enc.blocks[0]
    attn, ffn = block.attention, block.feed_forward
    inner = attn.inner_dim
    blocks = {"kv": (0, 1, 1), "qk": (0, 0, 1)}[tie]  # written out here, not read from the model
    with torch.no_grad():
        for dst, src in ((ref.self_attn.in_proj_weight, attn.qkv.weight), (ref.self_attn.in_proj_bias, attn.qkv.bias)):
            dst.copy_(torch.cat([src[b * inner:(b + 1) * inner] for b in blocks]))
        for dst, src in ((ref.self_attn.out_proj, attn.out), (ref.linear1, ffn.fc1), (ref.linear2, ffn.fc2),
                         (ref.norm1, block.norms[0]), (ref.norm2, block.norms[1])):
            dst.weight.copy_(src.weight)
            dst.bias.copy_(src.bias)
    return ref


@pytest.mark.parametrize("tie", ["kv", "qk"])
def test_a_tied_layer_is_pytorchs_layer_given_the_shared_matrix_twice(tie):
    enc = _tied(tie)
    ref = _torch_layer(enc, tie)
    x = torch.randn(3, 7, D)
    with torch.no_grad():
        tolerance.assert_close(enc(x), ref(x), factor=16)
    assert enc.blocks[0].attention.qkv.weight.shape == (2 * D, D)


@pytest.mark.parametrize("tie, uses", [("kv", ("wk", "wv")), ("qk", ("wq", "wk"))])
def test_the_shared_matrix_gets_the_sum_of_both_uses_gradients(tie, uses):
    """The tied model against the untied one holding the same matrix in both places: the tied gradient is
    the sum of the two places' gradients, and the probe's per-group norms show it for each use."""
    tied = _tied(tie)
    untied = _tied("none")
    inner = tied.blocks[0].attention.inner_dim
    blocks = {"kv": (0, 1, 1), "qk": (0, 0, 1)}[tie]
    with torch.no_grad():
        for (name, p), q in zip(untied.named_parameters(), tied.parameters()):
            if name.endswith("qkv.weight") or name.endswith("qkv.bias"):
                p.copy_(torch.cat([q[b * inner:(b + 1) * inner] for b in blocks]))
            else:
                p.copy_(q)
    x = torch.randn(2, 5, D)
    for model in (tied, untied):
        model.zero_grad()
        model(x).square().sum().backward()
    g_tied = tied.blocks[0].attention.qkv.weight.grad
    g_untied = untied.blocks[0].attention.qkv.weight.grad
    shared = 1 if tie == "kv" else 0
    twice = sum(g_untied[i * inner:(i + 1) * inner] for i, b in enumerate(blocks) if b == shared)
    torch.testing.assert_close(g_tied[shared * inner:(shared + 1) * inner], twice, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("tie", ["kv", "qk"])
def test_the_probe_shows_the_shared_gradient_in_both_groups_and_counts_it_once(tie):
    model = SequenceClassifier(EncoderConfig(qkv_tie=tie, max_len=28, dropout=0.0), 28, 10)
    torch.manual_seed(0)
    flow = gradient_flow(model, (torch.randn(8, 28, 28), torch.randint(0, 10, (8,))))
    a, b = ("wk", "wv") if tie == "kv" else ("wq", "wk")
    assert flow[f"grad_{a}_l0"] == flow[f"grad_{b}_l0"] > 0
    groups = ("wq", "wk", "wv", "wo", "ffn", "norm")
    once = sum(flow[f"grad_{g}_l0"] ** 2 for g in groups) - flow[f"grad_{a}_l0"] ** 2
    assert math.isclose(flow["grad_l0"], math.sqrt(once), rel_tol=1e-12)


def test_qk_tied_scores_are_symmetric_before_the_softmax():
    attn = _tied("qk").blocks[0].attention
    q, k, _ = attn.project(torch.randn(2, 6, D))
    scores = attn.logits(q, k)
    torch.testing.assert_close(scores, scores.transpose(-2, -1))
    # and a query's own key scores at least as high as any other of equal length (Cauchy-Schwarz): the diagonal
    # of W W^T's form is each row's maximum when the projected tokens have equal norms
    unit = q / q.norm(dim=-1, keepdim=True)
    same = attn.logits(unit, unit)
    assert torch.all(same.diagonal(dim1=-2, dim2=-1) >= same.amax(-1) - 1e-6)


@pytest.mark.parametrize("tie", ["kv", "qk"])
def test_tying_removes_one_projection_from_the_count(tie):
    """d_model * inner weights and inner biases per layer, from the meta-device count (limits) and a real build."""
    kw = {"model.n_layers": 3}
    separate, tied = C.build(kw), C.build({**kw, "model.qkv_tie": tie})
    inner = separate.encoder.inner_dim
    assert limits.parameter_count(separate) - limits.parameter_count(tied) == 3 * (64 * inner + inner)
    assert sum(p.numel() for p in SequenceClassifier(tied.encoder, 28, 10).parameters()) == limits.parameter_count(tied)


@pytest.mark.parametrize("init", ["xavier", "unit", "small"])
def test_each_init_draws_each_matrix_once(init):
    attn = _tied("kv", init=init).blocks[0].attention
    assert attn.qkv.weight.shape[0] == 2 * attn.inner_dim
    if init == "unit":  # W_Q and the shared W_K = W_V at N(0, 1/d_model)
        assert abs(attn.qkv.weight.std().item() - D**-0.5) < 0.05


@pytest.mark.parametrize(
    "items, words",
    [
        ({"model.qkv_tie": "qv"}, "expected one of none, kv, qk"),
        ({"model.qkv_tie": "kv", "model.qk_scale": False, "model.qk_reparam": True}, "set qkv_tie=none or qk_reparam"),
        ({"model.qkv_tie": "qk", "model.shaped_attention": True}, "would zero the tied W_K"),
        ({"model.qkv_tie": "kv", "model.arch": "lstm"}, "qkv_tie='kv' does not apply to arch='lstm'"),
    ],
)
def test_what_a_tie_cannot_be_is_refused(items, words):
    with pytest.raises(C.ConfigError, match=words):
        C.build(items)
