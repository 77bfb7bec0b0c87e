"""model.value_skipinit: He et al. 2023's Value-SkipInit, (alpha I + beta A) V with learned scalars from
alpha = 1, beta = 0 (issue 37, Q4: a stack without skips whose attention mixes no tokens at initialisation,
to tell token collapse from gradient flow).

The reference is written out here from the layer's weights with torch.nn.functional alone: at
initialisation the layer is W_O (W_V x + b_V) + b_O token by token; at alpha = 0, beta = 1 it is
torch's own nn.MultiheadAttention with the same weights; in between, linear in (alpha, beta).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ablate import config as C
from ablate.models import EncoderConfig, TokenModel
from ablate.models.attention import MultiHeadAttention
from ablate.models.positional import build_positional

D, H = 16, 2


def _layer(seed: int = 0, **kw) -> MultiHeadAttention:
    torch.manual_seed(seed)
    cfg = EncoderConfig(d_model=D, n_heads=H, dropout=0.0, max_len=8, **kw)
    return MultiHeadAttention(cfg, build_positional(cfg)).eval()


def _per_token(layer: MultiHeadAttention, x: torch.Tensor) -> torch.Tensor:
    """W_O (W_V x + b_V) + b_O, each token alone: what alpha = 1, beta = 0 must compute."""
    inner = layer.inner_dim
    v = F.linear(x, layer.qkv.weight[2 * inner:], layer.qkv.bias[2 * inner:])
    return F.linear(v, layer.out.weight, layer.out.bias)


def _is_torchs_multihead_attention(layer: MultiHeadAttention) -> None:
    """The layer's output, both paths, is torch's nn.MultiheadAttention's with the same weights."""
    ref = torch.nn.MultiheadAttention(D, H, dropout=0.0, batch_first=True).eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(layer.qkv.weight)
        ref.in_proj_bias.copy_(layer.qkv.bias)
        ref.out_proj.weight.copy_(layer.out.weight)
        ref.out_proj.bias.copy_(layer.out.bias)
    x = torch.randn(2, 6, D)
    expected, _ = ref(x, x, x, need_weights=False)
    for need_weights in (False, True):
        torch.testing.assert_close(layer(x, need_weights=need_weights)[0], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kw", [{}, {"causal": True}, {"pos_enc": "alibi"}, {"pos_enc": "rope"}],
                         ids=["plain", "causal", "alibi", "rope"])
@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "explicit"])
def test_at_initialisation_each_token_keeps_its_own_value_and_no_tokens_mix(kw, need_weights):
    layer = _layer(value_skipinit=True, **kw)
    assert layer.alpha.item() == 1.0 and layer.beta.item() == 0.0
    x = torch.randn(3, 7, D)
    y, _ = layer(x, need_weights=need_weights)
    torch.testing.assert_close(y, _per_token(layer, x), rtol=0, atol=1e-6)
    moved = x.clone()
    moved[:, 4] += 5.0  # one token changed: every other token's output stays put
    y2, _ = layer(moved, need_weights=need_weights)
    others = [t for t in range(7) if t != 4]
    assert torch.equal(y2[:, others], y[:, others]) and not torch.allclose(y2[:, 4], y[:, 4])


def test_with_alpha_0_and_beta_1_it_is_torchs_multihead_attention():
    layer = _layer(value_skipinit=True)
    with torch.no_grad():
        layer.alpha.fill_(0.0)
        layer.beta.fill_(1.0)
    _is_torchs_multihead_attention(layer)


def test_in_between_the_output_is_alpha_times_the_own_value_plus_beta_times_attention():
    layer, x = _layer(value_skipinit=True), torch.randn(2, 5, D)

    def at(a: float, b: float) -> torch.Tensor:
        with torch.no_grad():
            layer.alpha.fill_(a)
            layer.beta.fill_(b)
            return layer(x)[0] - layer.out.bias  # W_O's bias is added once, outside the mixing

    torch.testing.assert_close(at(0.7, -1.3), 0.7 * at(1.0, 0.0) - 1.3 * at(0.0, 1.0), rtol=1e-5, atol=1e-5)


def test_the_same_seed_draws_the_same_weights_and_only_two_scalars_are_added():
    plain, skip = _layer(seed=3), _layer(seed=3, value_skipinit=True)
    skip_state = skip.state_dict()
    assert set(skip_state) - set(plain.state_dict()) == {"alpha", "beta"}
    for name, tensor in plain.state_dict().items():
        assert torch.equal(skip_state[name], tensor), name
    model = TokenModel(EncoderConfig(d_model=D, n_heads=H, n_layers=3, value_skipinit=True, max_len=8), 8, 6)
    base = TokenModel(EncoderConfig(d_model=D, n_heads=H, n_layers=3, max_len=8), 8, 6)
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(model) - count(base) == 2 * 3


def test_beta_gets_a_gradient_at_initialisation_and_a_step_moves_it():
    """beta = 0 must not be a dead end: d loss / d beta = <dL/dy, A V> is non-zero, so attention can grow."""
    torch.manual_seed(0)
    model = TokenModel(EncoderConfig(d_model=D, n_heads=H, n_layers=2, residual=False, norm="pre",
                                     value_skipinit=True, max_len=8, dropout=0.0), 8, 6)
    x, y = torch.randint(0, 8, (4, 8)), torch.randint(0, 6, (4, 8))
    loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
    loss.backward()
    attn = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    assert all(a.beta.grad.abs().item() > 1e-6 and a.alpha.grad.abs().item() > 1e-6 for a in attn)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    opt.step()
    assert all(a.beta.item() != 0.0 and a.alpha.item() != 1.0 for a in attn)


def test_an_rnn_refuses_it_and_old_runs_keep_their_ids():
    with pytest.raises(ValueError, match="value_skipinit=True does not apply to arch='lstm'"):
        EncoderConfig(arch="lstm", value_skipinit=True)
    with pytest.raises(C.ConfigError, match="model.value_skipinit"):
        C.build({"model.value_skipinit": "maybe"}, machine=False)
    base = {"data.task": "copy", "tracking": "none"}
    assert C.run_id(C.build(base, machine=False)) == C.run_id(C.build({**base, "model.value_skipinit": False},
                                                                       machine=False))
    assert C.run_id(C.build(base, machine=False)) != C.run_id(C.build({**base, "model.value_skipinit": True},
                                                                       machine=False))


# ---- model.shaped_attention: (alpha I + beta A - gamma C) V, W_Q from 0 (Noci et al. 2023; He & Hofmann 2024)

@pytest.mark.parametrize("kw", [{}, {"causal": True}, {"pos_enc": "alibi"}, {"pos_enc": "rope"}],
                         ids=["plain", "causal", "alibi", "rope"])
@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "explicit"])
def test_shaped_attention_is_the_identity_mixing_at_initialisation(kw, need_weights):
    layer = _layer(shaped_attention=True, **kw)
    assert (layer.alpha.item(), layer.beta.item(), layer.gamma.item()) == (1.0, 1.0, 1.0)
    assert not layer.qkv.weight[: layer.inner_dim].any() and not layer.qkv.bias[: layer.inner_dim].any()
    x = torch.randn(3, 7, D)
    torch.testing.assert_close(layer(x, need_weights=need_weights)[0], _per_token(layer, x), rtol=0, atol=1e-5)


def test_shaped_attentions_centre_is_the_mixing_of_zero_scores():
    """C V written out: uniform over all keys, over keys 0..i with the causal mask; the layer's own q and k
    do not enter it."""
    for causal in (False, True):
        layer = _layer(shaped_attention=True, causal=causal)
        v, k = torch.randn(2, H, 6, D // H), torch.randn(2, H, 6, D // H)
        if causal:
            expected = v.cumsum(dim=2) / torch.arange(1, 7).view(1, 1, 6, 1)
        else:
            expected = v.mean(dim=2, keepdim=True).expand_as(v)
        torch.testing.assert_close(layer.centre(k, v), expected, rtol=1e-5, atol=1e-6)


def test_shaped_attention_with_only_beta_is_torchs_multihead_attention():
    layer = _layer(shaped_attention=True)
    with torch.no_grad():
        layer.qkv.weight[: layer.inner_dim].normal_()  # a trained W_Q
        layer.alpha.fill_(0.0)
        layer.gamma.fill_(0.0)
    _is_torchs_multihead_attention(layer)


def _grads_at_init(**kw) -> dict[str, float]:
    torch.manual_seed(0)
    model = TokenModel(EncoderConfig(d_model=D, n_heads=H, n_layers=2, residual=False, norm="pre", max_len=8,
                                     dropout=0.0, **kw), 8, 6)
    x, y = torch.randint(0, 8, (4, 8)), torch.randint(0, 6, (4, 8))
    F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
    attn = next(m for m in model.modules() if isinstance(m, MultiHeadAttention))
    inner = attn.inner_dim
    return {"wq": attn.qkv.weight.grad[:inner].abs().max().item(),
            "wk": attn.qkv.weight.grad[inner : 2 * inner].abs().max().item()}


def test_shaped_attention_gives_w_q_a_gradient_where_value_skipinit_gives_none():
    """Why the shaped arm (issue 37, added after residual_skipinit's outcome): with beta = 0 the scores do not
    reach the loss, so W_Q and W_K get no gradient at all at initialisation; shaped attention's W_Q does."""
    skip, shaped = _grads_at_init(value_skipinit=True), _grads_at_init(shaped_attention=True)
    assert skip == {"wq": 0.0, "wk": 0.0}
    assert shaped["wq"] > 1e-6


def test_shaped_attention_refusals_and_size():
    with pytest.raises(ValueError, match="choose one"):
        EncoderConfig(value_skipinit=True, shaped_attention=True, max_len=8)
    with pytest.raises(ValueError, match="shaped_attention=True does not apply to arch='lstm'"):
        EncoderConfig(arch="lstm", shaped_attention=True)
    model = TokenModel(EncoderConfig(d_model=D, n_heads=H, n_layers=3, shaped_attention=True, max_len=8), 8, 6)
    base = TokenModel(EncoderConfig(d_model=D, n_heads=H, n_layers=3, max_len=8), 8, 6)
    assert sum(p.numel() for p in model.parameters()) - sum(p.numel() for p in base.parameters()) == 3 * 3
