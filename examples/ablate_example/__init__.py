"""An ablate plug-in, outside ablate: a component, a task and a whole model of its own.

    model.norm_type=scalenorm   ScaleNorm (Nguyen & Salazar 2019): g * x / ||x||, one learned scalar g,
                                its start a key of its own (scalenorm.g_init)
    data.task=sort              read data.length tokens, a separator, then blanks: emit the tokens sorted
    model.arch=bow              a bag-of-tokens MLP: each position sees its own token and the mean of all,
                                no order (bow.hidden, bow.layers): the order-blind baseline, trained

ablate imports it only where a config names it: `ablate train plugins=ablate_example ...`, or, once this folder
is installed (`pip install -e examples`), by its entry point's name, `plugins=example`.
"""

from __future__ import annotations

__version__ = "0.1.0"


def register(plugin) -> None:
    from .bow import BowOptions, bow_check, bow_task
    from .scalenorm import ScaleNorm, ScaleNormOptions
    from .sort import SORT

    plugin.component("model.norm_type", "scalenorm", ScaleNorm, options=ScaleNormOptions)
    plugin.task(SORT)
    plugin.model("bow", bow_task, options=BowOptions, check=bow_check)
