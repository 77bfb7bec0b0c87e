"""The explorer's shipped models: what `make explore` trains (one run each, EXPLORE_BUDGET=quick) and puts on
one page, by name and `ablate train` overrides. The browser tests build every one of these configs.

    python -m ablate.explore.shipped     one `name=override+override` a line (what the Makefile reads)

unscaled-dk512: one head of d_k = 512 without 1/sqrt(d_k), one layer (4 heads of 512 at two layers would be
1.1M parameters, 6 MB of page); no-residual-8: eight blocks without skip connections. max_len=28: the learned
table holds the 28 rows it is used for (at 512 it is a third of the tutorial's parameters). sinusoidal and rope:
the tutorial's model with its other two position schemes, so the page draws their waves for a trained model.
"""

from __future__ import annotations

SHIPPED: dict[str, list[str]] = {
    "tutorial": [],
    "no-pe": ["model.pos_enc=none"],
    "sinusoidal": ["model.pos_enc=sinusoidal"],
    "rope": ["model.pos_enc=rope"],
    "pre-ln": ["model.norm=pre"],
    "unscaled-dk512": ["model.qk_scale=false", "model.n_heads=1", "model.d_head=512", "model.n_layers=1",
                       "model.max_len=28"],
    "no-residual-8": ["model.residual=false", "model.n_layers=8", "model.max_len=28"],
}


def specs() -> list[str]:
    """The models as `make explore` spells them: name=overrides joined by + (the tutorial's: `tutorial=`)."""
    return [f"{name}={'+'.join(overrides)}" for name, overrides in SHIPPED.items()]


if __name__ == "__main__":
    print("\n".join(specs()))
