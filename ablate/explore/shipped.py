"""The explorer's shipped models: what `make explore` trains (one run each, EXPLORE_BUDGET=quick) and puts on
one page, by name and `ablate train` overrides. The browser tests build every one of these configs.

    python -m ablate.explore.shipped     one `name=override+override` a line (what the Makefile reads)

Each model serves the tutorial's demos it is named for; one model serves several where that is honest:

    tutorial        the tutorial's model (d_model 64, 4 heads, 2 layers, Post-LN, learned positions): the
                    spotlight, q/k/v, tau, LayerNorm, FFN (width 2 x d) and per-layer readout demos
    heads-1/2/8     the tutorial's model with 1, 2 or 8 heads of d_k = 64/h: the same d_model and parameter
                    count as the tutorial's 4 heads (demo 4: switch h)
    no-pe, sinusoidal, rope   the tutorial's model without positions or with its other schemes (demo 5)
    pre-ln          LayerNorm before each sub-layer (demo 7 compares it with the tutorial's Post-LN)
    unscaled-dk512  one head of d_k = 512 without 1/sqrt(d_k), one layer: why the scale exists
    residual-8, no-residual-8  eight blocks with and without skip connections (demo 6, side by side)
    ffn-1, ffn-8    FFN hidden width 1 x d and 8 x d (demo 8, with the tutorial's 2 x d)
    copy, copy-no-pe   the tutorial's model on the copy task (data.task=copy) at data.length=6, so that the
                    tutorial's sentence 猫坐在垫子上 (six tokens, ids 0..5 of data.vocab=10) is in distribution:
                    with learned positions, and without any (order-blind: it can only guess); demo 1's Q1 part

The two eight-block models train for 2 epochs instead of the quick budget's 4 (188 steps): at 4 one took over 10 minutes on this machine's 2 shared cores.
"""

from __future__ import annotations

# the copy task at the tutorial sentence's length: 6 tokens, SEP, 6 blanks = 13 positions (the table's rows)
COPY = ["data.task=copy", "data.length=6", "data.vocab=10"]
DEEP = ["trainer.max_epochs=2"]  # eight blocks: half the quick budget's epochs keeps a run within 10 minutes here

SHIPPED: dict[str, list[str]] = {
    "tutorial": [],
    "heads-1": ["model.n_heads=1"],
    "heads-2": ["model.n_heads=2"],
    "heads-8": ["model.n_heads=8"],
    "no-pe": ["model.pos_enc=none"],
    "sinusoidal": ["model.pos_enc=sinusoidal"],
    "rope": ["model.pos_enc=rope"],
    "pre-ln": ["model.norm=pre"],
    "unscaled-dk512": ["model.qk_scale=false", "model.n_heads=1", "model.d_head=512", "model.n_layers=1"],
    "residual-8": ["model.n_layers=8", *DEEP],
    "no-residual-8": ["model.residual=false", "model.n_layers=8", *DEEP],
    "ffn-1": ["model.ffn_mult=1"],
    "ffn-8": ["model.ffn_mult=8"],
    "copy": COPY,
    "copy-no-pe": [*COPY, "model.pos_enc=none"],
}


def specs() -> list[str]:
    """The models as `make explore` spells them: name=overrides joined by +."""
    return [f"{name}={'+'.join(overrides)}" for name, overrides in SHIPPED.items()]


if __name__ == "__main__":
    print("\n".join(specs()))
