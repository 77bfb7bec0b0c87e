"""Each sweep run's W&B display name, from the values its sweep varies: `qk_scale=False lr=3e-4 s1`.

Keys lose their section (`model.qk_scale` -> `qk_scale`) unless two swept keys would then read the
same; values are shown as the sweep file gives them, floats in their shortest form (0.0003 -> 3e-4,
0.01 stays 0.01); the seed comes last as `s<seed>`. The name is `run.name`, which is not part of a
run's identity: naming runs changes no run id, so runs made before names existed are found again.
"""

from __future__ import annotations

from typing import Any

from ..config import NAME_MAX
from ..tracking import short  # one home: `ablate train`'s derived names read the same


def labels(keys: list[str]) -> dict[str, str]:
    """Each key without its section, unless that would make two keys read the same."""
    bare = {k: k.rpartition(".")[2] for k in keys}
    counts: dict[str, int] = {}
    for b in bare.values():
        counts[b] = counts.get(b, 0) + 1
    return {k: b if counts[b] == 1 else k for k, b in bare.items()}


def display_name(params: dict[str, Any], keys: list[str], seed: int, fallback: str = "") -> str:
    """`<key>=<value> ... s<seed>` over the swept `keys` present in `params` (seed left out: it comes
    last); `fallback` (the sweep's name) when nothing but the seed varies. At most NAME_MAX
    characters (the middle cut, the seed kept), printable."""
    shown = labels([k for k in keys if k != "seed"])
    parts = [f"{label}={short(params[k])}" for k, label in shown.items() if k in params]
    head = " ".join(parts) or fallback
    tail = f"s{seed}"
    name = f"{head} {tail}".strip()
    name = "".join(c if c.isprintable() else "?" for c in name)
    if len(name) > NAME_MAX:
        name = name[: NAME_MAX - len(tail) - 2] + "… " + tail
    return name
