"""The probes (ablate.probes), asserted on numbers at init on random data.

The issue's claims (its "What must be shown"): permutation equivariance without positions, the
√d_head growth of unscaled scores, rank collapse and vanishing gradients without residuals, the
2/3 FFN share at ffn_mult=4; and that probes leave the RNG, every `.grad` and the train mode alone.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from ablate.models import Encoder, EncoderConfig, SequenceClassifier, TokenModel
from ablate.probes import (
    accuracy,
    attention_maps,
    effective_rank,
    equivariance_error,
    format_probes,
    gradient_flow,
    head_importance,
    layer_logits,
    masked_output,
    mean_token_cosine,
    order_sensitivity,
    parameter_shares,
    relation_weights,
    residual_norms,
    run_probes,
    score_stats,
    token_collapse,
)

from .tolerance import (
    assert_accuracy_close,
    assert_close,
    atol,
    max_abs,
    max_abs_logit,
    near_tie_mask,
    output_atol,
)

ROWS = 28  # MNIST: 28 rows of 28 pixels


def _config(**kw) -> EncoderConfig:
    base = dict(d_model=32, n_heads=4, n_layers=2, pos_enc="none", dropout=0.0, max_len=ROWS)
    base.update(kw)
    return EncoderConfig(**base)


def _rows(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n random "images": unit-Gaussian rows, random labels."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, ROWS, ROWS, generator=g), torch.randint(0, 10, (n,), generator=g)


def _row_permutation(seed: int = 0) -> torch.Tensor:
    return torch.randperm(ROWS, generator=torch.Generator().manual_seed(seed))


def _copy_batch(n: int, length: int, vocab: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The copy task's layout: tokens, SEP, blanks; targets only at the blanks (-100 elsewhere)."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, vocab, (n, length), generator=g)
    x = torch.cat((tokens, torch.full((n, 1), vocab), torch.full((n, length), vocab + 1)), dim=1)
    y = torch.full_like(x, -100)
    y[:, length + 1 :] = tokens
    return x, y


class BareEncoder(nn.Module):
    """An Encoder fed directly (no embedding, no head): what the score probes need of a model."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.encoder = Encoder(cfg)

    def forward(self, x: torch.Tensor, return_attention: bool = False):
        return self.encoder(x, return_attention)


# --- order: equivariance without positions -----------------------------------------------------


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_no_positions_no_mask_is_permutation_equivariant(pooling):
    torch.manual_seed(0)
    model = SequenceClassifier(_config(d_model=64, pos_enc="none", causal=False), ROWS, 10, pooling)
    batches = [_rows(64, seed) for seed in range(4)]
    perm = _row_permutation()
    error = max(equivariance_error(model, x, perm) for x, _ in batches)
    rounding = min(atol(max_abs_logit(model, x)) for x, _ in batches)  # reordered sums round apart
    order = order_sensitivity(model, batches, perm)
    with torch.no_grad():  # a prediction whose top-2 margin is within the two orders' rounding may flip
        ties = sum(
            int((near_tie_mask(model(x), output_atol(model, x))
                 | near_tie_mask(model(x[:, perm]), output_atol(model, x[:, perm]))).sum())
            for x, _ in batches
        )  # fmt: skip
    print(f"pooling={pooling}: equiv_error={error:.2e} (rounding {rounding:.1e}) {order}, {ties} near ties")
    assert error <= rounding < 1e-4
    assert order["perm_agreement"] >= 1 - ties / 256  # each of the 256 predictions unchanged but a near tie
    assert_accuracy_close(order["perm_acc"], order["acc"], ties, 256)


@pytest.mark.parametrize(
    "pos_enc, causal",
    [("sinusoidal", False), ("learned", False), ("rope", False), ("alibi", False), ("none", True)],
)
def test_positions_or_causal_mask_break_equivariance(pos_enc, causal):
    errors = []
    for seed in range(2):
        torch.manual_seed(seed)
        model = SequenceClassifier(_config(d_model=64, pos_enc=pos_enc, causal=causal), ROWS, 10)
        errors.append(equivariance_error(model, _rows(32, seed)[0], _row_permutation()))
    print(f"pos_enc={pos_enc} causal={causal}: equiv_error={errors}")
    # learned positions (std 0.02 at init) give the smallest, ~1.5e-3; no positions give ~1e-8
    assert min(errors) > 1e-4


def test_order_sensitivity_token_model_compares_moved_predictions():
    """A per-position model without positions: the prediction moves with its token."""
    torch.manual_seed(0)
    model = TokenModel(_config(pos_enc="none"), n_tokens=10, n_out=8)
    x, y = _copy_batch(16, 5, 8, seed=0)
    perm = torch.randperm(x.shape[1], generator=torch.Generator().manual_seed(1))
    order = order_sensitivity(model, [(x, y)], perm)
    with torch.no_grad():  # position i of the permuted batch holds token perm[i]
        close = near_tie_mask(model(x), output_atol(model, x))[:, perm]
        close |= near_tie_mask(model(x[:, perm]), output_atol(model, x[:, perm]))
    counted = y[:, perm] != -100
    ties, total = int((close & counted).sum()), int(counted.sum())
    assert total == 16 * 5
    assert order["perm_agreement"] >= 1 - ties / total
    assert_accuracy_close(order["perm_acc"], order["acc"], ties, total)
    assert order["acc"] == accuracy(model, [(x, y)])  # one batch through one model: the same kernels


# --- scores: the √d_head growth of unscaled logits ----------------------------------------------


def _score_growth(init: str, qk_scale: bool, via: str, seeds=range(6)) -> dict[int, tuple[float, float]]:
    """Seed-averaged (logit_std, entropy) of layer 0 at d_head 8 and 512 (d_model 64, one head)."""
    out = {}
    for d_head in (8, 512):
        stds, entropies = [], []
        for seed in seeds:
            torch.manual_seed(seed)
            cfg = EncoderConfig(
                d_model=64, n_heads=1, d_head=d_head, n_layers=1, pos_enc="none", dropout=0.0,
                init=init, qk_scale=qk_scale,
            )  # fmt: skip
            if via == "embed":  # unit-Gaussian rows through SequenceClassifier's Linear(28, 64)
                model, x = SequenceClassifier(cfg, ROWS, 10), torch.randn(16, ROWS, ROWS)
            else:  # unit-Gaussian tokens straight into the Encoder
                model, x = BareEncoder(cfg), torch.randn(16, ROWS, 64)
            stats = score_stats(model, x)
            stds.append(stats["logit_std_l0"])
            entropies.append(stats["entropy_l0"])
        out[d_head] = (sum(stds) / len(stds), sum(entropies) / len(entropies))
    return out


@pytest.mark.parametrize("via", ["embed", "encoder"])
def test_unscaled_default_init_logit_std_grows_like_sqrt_d_head(via):
    unscaled = _score_growth("default", qk_scale=False, via=via)
    scaled = _score_growth("default", qk_scale=True, via=via)
    xavier = _score_growth("xavier", qk_scale=False, via=via)
    growth = {name: r[512][0] / r[8][0] for name, r in [("unscaled", unscaled), ("scaled", scaled), ("xavier", xavier)]}
    print(f"via={via}: std growth 8->512 {growth}; entropy unscaled {unscaled[8][1]:.3f}->{unscaled[512][1]:.3f}")
    sqrt_ratio = math.sqrt(512 / 8)  # 8
    assert abs(growth["unscaled"] / sqrt_ratio - 1) < 0.25
    assert unscaled[512][1] < unscaled[8][1] - 0.2  # the entropy falls
    assert abs(growth["scaled"] - 1) < 0.25  # roughly flat with 1/√d_head
    assert abs(growth["xavier"] - 1) < 0.25  # Xavier's fan-out term cancels the growth


def test_score_stats_of_uniform_attention_are_exact():
    """q = k = 0 gives all-zero scores: entropy 1 (normalised per row by log of its visible keys,
    the one-key row of a causal mask left out), row max 1/keys, no one-hot rows."""
    T = 6
    for causal in (False, True):
        model = BareEncoder(_config(n_layers=1, causal=causal))
        with torch.no_grad():
            model.encoder.blocks[0].attention.qkv.weight.zero_()
            model.encoder.blocks[0].attention.qkv.bias.zero_()
        stats = score_stats(model, torch.randn(3, T, 32))
        keys = range(2, T + 1) if causal else [T] * T
        sums = atol(T)  # each row sums T terms, each rounded by eps
        assert stats["entropy_l0"] == pytest.approx(1.0, abs=sums)
        assert stats["rowmax_l0"] == pytest.approx(sum(1 / n for n in keys) / len(keys), abs=sums)
        assert stats["onehot_frac_l0"] == 0.0
        assert stats["logit_std_l0"] == 0.0 and stats["logit_max_l0"] == 0.0


@pytest.mark.parametrize("pos_enc", ["rope", "alibi"])
def test_probe_logits_match_the_models_own_attention(pos_enc):
    torch.manual_seed(0)
    model = SequenceClassifier(_config(pos_enc=pos_enc, causal=True, temperature=0.5), ROWS, 10)
    x, _ = _rows(4, 0)
    maps = attention_maps(model, x)  # (B, L, H, T, T)
    for layer, scores in enumerate(layer_logits(model, x)):
        # a score's rounding, eps * max|score|, is a relative error of that size in its weight
        print(f"layer {layer}: max|softmax - map| {(scores.softmax(-1) - maps[:, layer]).abs().max():.1e}, "
              f"tol {atol(max_abs(scores)):.1e}")
        assert_close(scores.softmax(-1), maps[:, layer], max_abs(scores))
    assert maps.shape == (4, 2, 4, ROWS, ROWS)


# --- gradients and collapse: 16 layers without residuals -----------------------------------------


def _deep(norm: str, residual: bool, seed: int) -> tuple[dict, dict]:
    torch.manual_seed(seed)
    model = SequenceClassifier(EncoderConfig(n_layers=16, norm=norm, residual=residual, max_len=ROWS), ROWS, 10)
    x, y = _rows(64, seed)  # with 16 rows, seed 3 of 0..19 inverts the grad_ratio order; 64: none
    return token_collapse(model, x), gradient_flow(model, (x, y))


def test_post_ln_without_residuals_collapses_and_loses_gradient():
    for seed in range(4):
        res_collapse, res_grad = _deep("post", residual=True, seed=seed)
        no_collapse, no_grad = _deep("post", residual=False, seed=seed)
        print(
            f"seed {seed}: cosine_l15 {no_collapse['cosine_l15']:.4f} (no residual) vs "
            f"{res_collapse['cosine_l15']:.3f}; grad_ratio {no_grad['grad_ratio']:.3f} vs "
            f"{res_grad['grad_ratio']:.3f}; erank_l15 {no_collapse['erank_l15']:.3f} vs "
            f"{res_collapse['erank_l15']:.2f}"
        )
        assert no_collapse["cosine_l15"] >= 0.99
        assert res_collapse["cosine_l15"] < 0.9
        assert no_collapse["erank_l15"] < 1.1 < 5 < res_collapse["erank_l15"]
        assert no_grad["grad_ratio"] < res_grad["grad_ratio"]


def test_no_norm_no_residuals_first_layer_gradient_vanishes():
    for seed in range(3):
        _, grads = _deep("none", residual=False, seed=seed)
        print(f"seed {seed}: grad_l0 {grads['grad_l0']:.2e}, grad_l15 {grads['grad_l15']:.3f}")
        assert grads["grad_l0"] < 1e-6
        assert grads["grad_l15"] > 1e-2


def test_gradient_groups_match_a_plain_backward():
    torch.manual_seed(0)
    model = SequenceClassifier(_config(norm="pre", dropout=0.1), ROWS, 10)
    x, y = _rows(8, 0)
    grads = gradient_flow(model, (x, y))
    reference = copy.deepcopy(model).eval()
    F.cross_entropy(reference(x), y).backward()
    inner = 32

    def assert_norm(name: str, entries: torch.Tensor) -> None:
        # two summation orders of n squares: a relative rounding of about sqrt(n) eps (measured <= 1 eps)
        rel = atol(math.sqrt(entries.numel()))
        assert grads[name] == pytest.approx(entries.norm().item(), rel=rel), name

    for layer, block in enumerate(reference.encoder.blocks):
        qkv = block.attention.qkv
        for i, group in enumerate(("wq", "wk", "wv")):
            rows = slice(i * inner, (i + 1) * inner)
            assert_norm(f"grad_{group}_l{layer}", torch.cat((qkv.weight.grad[rows].flatten(), qkv.bias.grad[rows])))
        assert_norm(f"grad_wo_l{layer}", torch.cat([p.grad.flatten() for p in block.attention.out.parameters()]))
        assert_norm(f"grad_ffn_l{layer}", torch.cat([p.grad.flatten() for p in block.feed_forward.parameters()]))
        assert_norm(f"grad_l{layer}", torch.cat([p.grad.flatten() for p in block.parameters()]))
        assert grads[f"grad_norm_l{layer}"] > 0  # pre-LN: two LayerNorms per block
    assert grads["grad_ratio"] == pytest.approx(grads["grad_l0"] / grads["grad_l1"])


def test_collapse_measures_on_known_matrices():
    eye = torch.eye(5, 8)[None]  # 5 orthonormal tokens
    assert effective_rank(eye) == pytest.approx(5.0)
    assert mean_token_cosine(eye) == pytest.approx(0.0)
    same = torch.randn(1, 1, 8).expand(2, 5, 8)  # one token repeated
    assert effective_rank(same) == pytest.approx(1.0, abs=1e-6)
    assert mean_token_cosine(same) == pytest.approx(1.0)


def test_post_ln_residual_stream_norm_is_sqrt_d_model():
    """After a Post-LN sub-layer every token is LayerNorm'd (gain 1, bias 0 at init): norm √d."""
    torch.manual_seed(0)
    model = SequenceClassifier(_config(d_model=64, norm="post"), ROWS, 10)
    norms = residual_norms(model, _rows(8, 0)[0])
    assert set(norms) == {f"resid_norm_l{i}_{s}" for i in range(2) for s in ("attn", "ffn")}
    for value in norms.values():
        assert value == pytest.approx(8.0, rel=1e-4)


# --- heads ------------------------------------------------------------------------------------


def _zeroed_columns(model: nn.Module, layer: int, head: int) -> nn.Module:
    """A copy whose W_O ignores that head: its d_head columns set to zero."""
    other = copy.deepcopy(model)
    attn = other.encoder.blocks[layer].attention
    with torch.no_grad():
        attn.out.weight[:, head * attn.d_head : (head + 1) * attn.d_head] = 0
    return other.eval()


def test_masking_every_head_changes_the_output_and_none_does_not():
    torch.manual_seed(0)
    model = SequenceClassifier(_config(), ROWS, 10).eval()
    x, _ = _rows(8, 0)
    plain = model(x)
    torch.testing.assert_close(masked_output(model, x, []), plain, rtol=0, atol=0)
    every = [(layer, head) for layer in range(2) for head in range(4)]
    assert (masked_output(model, x, every) - plain).abs().max() > 1e-2


def test_masking_the_only_head_zeroes_attentions_contribution():
    torch.manual_seed(0)
    model = SequenceClassifier(_config(n_heads=1), ROWS, 10)
    x, _ = _rows(8, 0)
    for layer in range(2):
        expected = _zeroed_columns(model, layer, 0)(x)
        masked = masked_output(model, x, [(layer, 0)])
        print(f"layer {layer}: max|masked - zeroed W_O| {(masked - expected).abs().max():.1e}, "
              f"tol {atol(max_abs(expected), max_abs_logit(model, x)):.1e}")
        assert_close(masked, expected, max_abs_logit(model, x))  # tests/tolerance.py


def test_head_importance_is_the_accuracy_drop_of_each_head():
    torch.manual_seed(0)
    model = SequenceClassifier(_config(), ROWS, 10)
    loader = [_rows(32, seed) for seed in range(2)]
    drops = head_importance(model, loader)
    assert len(drops) == 1 + 2 * 4
    for layer, head in [(0, 2), (1, 3)]:
        masked = accuracy(_zeroed_columns(model, layer, head), loader)
        assert drops[f"head_drop_l{layer}_h{head}"] == pytest.approx(drops["acc"] - masked)


def test_relation_weights_of_uniform_attention_are_the_closed_form():
    """With W_Q = W_K = 0 every score is 0 and every row of every head is uniform, 1/T: each head's weight on
    the token two back is 1/T, on BOS 1/T, and on the positions holding the query's own token
    count(own token)/T, averaged over queries 3..T-1 here by hand."""
    torch.manual_seed(0)
    model = TokenModel(_config(pos_enc="none", n_layers=1, n_heads=2), n_tokens=6, n_out=8).eval()
    attn = model.encoder.blocks[0].attention
    with torch.no_grad():
        attn.qkv.weight[: 2 * attn.inner_dim].zero_()
        attn.qkv.bias[: 2 * attn.inner_dim].zero_()
    x = torch.tensor([[5, 0, 1, 0, 2, 0, 1], [5, 3, 3, 3, 3, 4, 4]])  # BOS = 5, then tokens
    T = x.shape[1]
    want_content = []
    for row in x.tolist():
        for i in range(3, T):
            want_content.append(sum(1 for j in range(1, T) if row[j] == row[i]) / T)
    got = relation_weights(model, x)  # (L, H, 3)
    assert got.shape == (1, 2, 3)
    torch.testing.assert_close(got[0, :, 0], torch.full((2,), 1 / T))
    torch.testing.assert_close(got[0, :, 1], torch.full((2,), sum(want_content) / len(want_content)))
    torch.testing.assert_close(got[0, :, 2], torch.full((2,), 1 / T))


def test_relation_weights_of_any_map_are_the_loop_by_hand(monkeypatch):
    """On random attention maps (every weight different) relation_weights equals a loop written out by hand:
    the weight on i - 2, the sum over the keys j >= 1 holding the query's token (itself included), the weight
    on BOS at position 0, averaged over queries 3..T-1 and the batch; a wrong offset, a BOS counted as a token
    or a missed key would move it."""
    import ablate.probes.scores as scores

    g = torch.Generator().manual_seed(0)
    B, L, H, T = 3, 2, 4, 9
    maps = torch.rand(B, L, H, T, T, generator=g)
    maps = maps / maps.sum(-1, keepdim=True)  # rows sum to 1, as after a softmax
    monkeypatch.setattr(scores, "attention_maps", lambda model, x: maps)
    x = torch.randint(0, 3, (B, T), generator=g)  # few tokens: equal ones everywhere
    x[:, 0] = 3  # BOS
    x[0, 1:4] = 3  # ...and tokens equal to BOS's id, which still count only as BOS at position 0
    got = relation_weights(nn.Identity(), x)
    want = torch.zeros(L, H, 3, dtype=torch.float64)
    queries = range(3, T)
    for b in range(B):
        for layer in range(L):
            for h in range(H):
                for i in queries:
                    row = maps[b, layer, h, i].double()
                    want[layer, h, 0] += row[i - 2]
                    want[layer, h, 1] += sum(row[j] for j in range(1, T) if x[b, j] == x[b, i])
                    want[layer, h, 2] += row[0]
    want /= B * len(queries)
    torch.testing.assert_close(got.double(), want, rtol=0, atol=1e-6)


# --- shares -----------------------------------------------------------------------------------


def test_ffn_share_is_two_thirds_at_ffn_mult_4():
    model = SequenceClassifier(_config(d_model=64, n_layers=3, ffn_mult=4), ROWS, 10)
    shares = parameter_shares(model)
    for layer in range(3):
        assert shares[f"share_ffn_l{layer}"] == 2 / 3
        assert shares[f"share_attention_l{layer}"] == 1 / 3
    total = sum(shares[f"share_{g}"] for g in ("attention", "ffn", "embedding", "other"))
    assert total == pytest.approx(1.0)
    assert shares["params_total"] == sum(p.numel() for p in model.parameters())


def test_ffn_share_is_counted_from_the_model():
    """Wider heads (d_head*n_heads = 2*d_model) and no FFN move the share."""
    wide = parameter_shares(SequenceClassifier(_config(d_head=16, ffn_mult=4), ROWS, 10))
    assert wide["share_ffn_l0"] == 8 / (8 + 8)  # FFN 2*4*d^2 vs attention 4*d*(2d)
    none = parameter_shares(SequenceClassifier(_config(ffn_mult=0), ROWS, 10))
    assert none["share_ffn_l0"] == 0.0 and none["share_ffn"] == 0.0


# --- probes leave training alone ---------------------------------------------------------------


def _shuffled_loader(n: int = 64) -> DataLoader:
    """Shuffled, so iterating it draws from the global RNG (as a training loader does)."""
    return DataLoader(TensorDataset(*_rows(n, 9)), batch_size=16, shuffle=True)


def test_probes_leave_rng_grads_and_modes_untouched():
    torch.manual_seed(0)
    model = SequenceClassifier(_config(dropout=0.1), ROWS, 10)
    x, y = _rows(8, 0)
    F.cross_entropy(model(x), y).backward()  # accumulated gradients, as mid-step
    model.encoder.blocks[1].eval()  # a mixed state must come back as it was
    grads = {name: p.grad for name, p in model.named_parameters()}
    values = {name: g.clone() for name, g in grads.items()}
    modes = {name: m.training for name, m in model.named_modules()}
    rng = torch.get_rng_state()

    run_probes(
        model, (x, y), cheap=True, expensive=True, val_loader=_shuffled_loader(),
        permutation=_row_permutation(),
    )  # fmt: skip

    assert torch.equal(torch.get_rng_state(), rng)
    assert {name: m.training for name, m in model.named_modules()} == modes
    for name, p in model.named_parameters():
        assert p.grad is grads[name] and torch.equal(p.grad, values[name]), name


def _train(probes: bool, steps: int = 4) -> tuple[list[float], torch.Tensor]:
    torch.manual_seed(0)
    model = SequenceClassifier(_config(dropout=0.2), ROWS, 10)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    for step, (x, y) in enumerate(_shuffled_loader(16 * steps)):
        if probes:
            run_probes(model, (x, y), expensive=step == 0, val_loader=_shuffled_loader(32))
        loss = F.cross_entropy(model(x), y)  # dropout draws from the global RNG
        optimizer.zero_grad()
        loss.backward()
        if probes:
            run_probes(model, (x, y))  # between backward and step: .grad must survive
        optimizer.step()
        losses.append(loss.item())
    return losses, torch.cat([p.detach().flatten() for p in model.parameters()])


def test_training_is_identical_with_probes_on_or_off():
    losses_off, params_off = _train(probes=False)
    losses_on, params_on = _train(probes=True)
    assert losses_on == losses_off
    assert torch.equal(params_on, params_off)


# --- run_probes, arrays and the printout ---------------------------------------------------------


def test_run_probes_names_arrays_and_format():
    torch.manual_seed(0)
    model = SequenceClassifier(_config(pos_enc="learned"), ROWS, 10)
    batch = _rows(8, 0)
    scalars, arrays = run_probes(
        model, batch, expensive=True, val_loader=[_rows(16, 1)], permutation=_row_permutation()
    )
    per_layer = [
        "logit_std", "logit_max", "entropy", "rowmax", "onehot_frac", "grad", "grad_wq", "grad_wk",
        "grad_wv", "grad_wo", "grad_ffn", "grad_norm", "cosine", "erank", "share_ffn",
    ]  # fmt: skip
    for name in per_layer:
        assert {f"{name}_l0", f"{name}_l1"} <= set(scalars), name
        assert arrays[name].shape == (2,)
    for name in ["grad_ratio", "equiv_error", "perm_agreement", "perm_acc", "acc", "share_attention",
                 "share_ffn", "share_embedding", "share_other", "resid_norm_l1_ffn", "head_drop_l1_h3"]:  # fmt: skip
        assert name in scalars, name
    assert all(isinstance(v, float) and math.isfinite(v) for v in scalars.values())
    assert arrays["attention"].shape == (2, 4, ROWS, ROWS)
    assert arrays["attention"].sum(-1) == pytest.approx(1.0, abs=atol(ROWS))  # 28 weights, each rounded
    assert arrays["resid_norm"].shape == (4,) and arrays["head_drop"].shape == (2, 4)

    text = format_probes(scalars)
    for header in ("[scores]", "[gradients]", "[collapse]", "[shares]", "[heads]", "[model]"):
        assert header in text
    scores = text.split("\n\n")[0].splitlines()
    assert scores[1].split()[0] == "layer" and [r.split()[0] for r in scores[2:]] == ["0", "1"]
    assert f"{scalars['entropy_l1']:.4g}" in scores[3]
    with pytest.raises(ValueError, match="val_loader"):
        run_probes(model, batch, expensive=True)


def test_run_probes_on_a_causal_token_model():
    torch.manual_seed(0)
    model = TokenModel(_config(causal=True, pos_enc="rope", norm="pre"), n_tokens=10, n_out=8)
    scalars, arrays = run_probes(
        model, _copy_batch(8, 5, 8, seed=0), expensive=True, val_loader=[_copy_batch(16, 5, 8, 1)]
    )
    assert all(math.isfinite(v) for v in scalars.values())
    assert 0 < scalars["entropy_l0"] < 1 and scalars["onehot_frac_l0"] < 1
    assert arrays["attention"].shape == (2, 4, 11, 11)
    assert (arrays["attention"][..., 0, 1:] == 0).all()  # causal: the first token sees itself only
    assert scalars["batch_loss"] == pytest.approx(math.log(8), rel=0.2)  # 8 classes, at init
