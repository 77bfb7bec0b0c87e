"""model.rnn_init: the standard remedies for an LSTM's memory, as their papers state them (issue 37).

forget1: the forget gate's bias starts at 1 (Gers et al. 2000; Jozefowicz et al. 2015). chrono (Tallec &
Ollivier 2018, sec. 4): b_f ~ log(U(1, T_max - 1)) and b_i = -b_f, T_max the longest dependency, here the
task's longest sequence. torch adds bias_ih and bias_hh, so the test reads their sum, gate by gate (torch's
order: input, forget, cell, output), and checks that nothing else moved from torch's own draw.
"""

from __future__ import annotations

import math

import pytest
import torch

from ablate import config as C
from ablate.models import EncoderConfig, TokenModel
from ablate.models.rnn import RecurrentEncoder

H = 32


def _lstm(init: str, seed: int = 0, max_len: int = 258, **kw) -> RecurrentEncoder:
    torch.manual_seed(seed)
    return RecurrentEncoder(EncoderConfig(arch="lstm", rnn_hidden=H, n_layers=2, max_len=max_len, rnn_init=init, **kw))


def _gates(rnn: torch.nn.LSTM) -> dict[str, torch.Tensor]:
    total = (rnn.bias_ih_l0 + rnn.bias_hh_l0).detach()
    return dict(zip("ifgo", total.split(rnn.hidden_size), strict=True))


def test_forget1_sets_the_forget_bias_to_one_and_nothing_else():
    base, one = _lstm("default"), _lstm("forget1")
    for b, o in zip(base.blocks, one.blocks, strict=True):
        assert torch.equal(_gates(o.rnn)["f"], torch.ones(H))
        for gate in "igo":
            assert torch.equal(_gates(o.rnn)[gate], _gates(b.rnn)[gate])
        assert torch.equal(o.rnn.weight_ih_l0, b.rnn.weight_ih_l0) and torch.equal(o.rnn.weight_hh_l0, b.rnn.weight_hh_l0)


def test_chrono_draws_memory_times_up_to_t_max_and_closes_the_input_gate_as_much():
    t_max = 258
    enc = _lstm("chrono", max_len=t_max)
    forget = torch.cat([_gates(b.rnn)["f"] for b in enc.blocks])
    inputs = torch.cat([_gates(b.rnn)["i"] for b in enc.blocks])
    assert torch.equal(inputs, -forget)
    assert forget.min() >= 0 and forget.max() <= math.log(t_max - 1)
    # exp(b_f) ~ U(1, T_max - 1): its mean is T_max / 2, its std (T_max - 2) / sqrt(12); 64 draws
    memory = forget.exp()
    assert abs(memory.mean().item() - t_max / 2) < 4 * (t_max - 2) / math.sqrt(12 * memory.numel())
    assert not torch.equal(forget, _lstm("chrono", seed=1, max_len=t_max).blocks[0].rnn.bias_ih_l0[H:2 * H].repeat(2))


def test_the_task_sets_t_max_and_defaults_keep_their_run_ids():
    cfg = C.build({"model.arch": "lstm", "model.rnn_init": "chrono", "data.task": "copy", "data.length": 20,
                   "tracking": "none"})
    model = TokenModel(cfg.encoder, 12, 10)
    t_max = cfg.longest  # 20 tokens, SEP and 20 blanks
    assert t_max == 41
    assert max(_gates(b.rnn)["f"].max().item() for b in model.encoder.blocks) <= math.log(t_max - 1)
    lstm = C.build({"model.arch": "lstm", "tracking": "none"})
    assert C.run_id(lstm) == C.run_id(C.build({"model.arch": "lstm", "model.rnn_init": "default", "tracking": "none"}))
    assert C.run_id(lstm) != C.run_id(cfg)


@pytest.mark.parametrize("kw, words", [
    (dict(rnn_init="chrono"), "arch='transformer'"),
    (dict(arch="gru", rnn_init="forget1"), "arch='gru'"),
    (dict(arch="lstm", rnn_init="orthogonal"), "rnn_init"),
])
def test_an_init_that_does_not_apply_is_refused_in_one_line(kw, words):
    with pytest.raises(ValueError) as err:
        EncoderConfig(**kw)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_chrono_without_a_t_max_is_refused():
    with pytest.raises(ValueError, match="max_len >= 3"):
        RecurrentEncoder(EncoderConfig(arch="lstm", rnn_init="chrono", pos_enc="none"))
