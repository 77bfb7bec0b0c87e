"""The tutorial's model as its article writes it, against the one ablate builds at its defaults.

The seed article ends with a PyTorch class reading MNIST as 28 rows of 28 pixels: a Linear(28, 64) row
embedding plus a learned position table `nn.Parameter(torch.randn(1, 28, 64))`, two
`nn.TransformerEncoderLayer(64, 4, dim_feedforward=128)` layers, the mean over rows and a Linear(64, 10)
head. `TutorialClassifier` below is that class, transcribed; ablate's model comes from `Config()` (the
defaults every sweep starts from) through the task that trains it. The two must hold the same parameters
module by module: a default that builds something else (a 512-row table, issue 37: 102,218 parameters
where the tutorial has 71,242) makes every parameter count and every "matched size" in the findings wrong
while the accuracies look right.
"""

from __future__ import annotations

import torch
from torch import nn

from ablate.config import Config, build, run_id
from ablate.limits import parameter_count
from ablate.models import parameter_groups
from ablate.tasks import ClassifyRows


class TutorialClassifier(nn.Module):
    """The seed article's model, as written there (its names, its sizes)."""

    def __init__(self, input_dim: int = 28, d_model: int = 64, nhead: int = 4, num_layers: int = 2,
                 num_classes: int = 10):
        super().__init__()
        self.embedding = nn.Linear(input_dim, d_model)
        self.pos_encoding = nn.Parameter(torch.randn(1, 28, d_model))
        layer = nn.TransformerEncoderLayer(d_model=d_model, nhead=nhead, dim_feedforward=128, dropout=0.1,
                                           batch_first=True)
        self.transformer = nn.TransformerEncoder(layer, num_layers=num_layers)
        self.classifier = nn.Linear(d_model, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 28, 28)
        h = self.transformer(self.embedding(x) + self.pos_encoding)
        return self.classifier(h.mean(dim=1))


def count(module: nn.Module | nn.Parameter) -> int:
    return module.numel() if isinstance(module, nn.Parameter) else sum(p.numel() for p in module.parameters())


def ours(cfg: Config | None = None) -> nn.Module:
    return ClassifyRows(cfg or Config()).model


def test_the_default_model_is_the_tutorials_module_by_module():
    theirs, model = TutorialClassifier(), ours()
    pairs = {
        "row embedding": (theirs.embedding, model.embed),
        "position table": (theirs.pos_encoding, model.encoder.pos_enc.weight),
        "head": (theirs.classifier, model.head),
    }
    for i, (layer, block) in enumerate(zip(theirs.transformer.layers, model.encoder.blocks, strict=True)):
        pairs[f"layer {i} attention"] = (layer.self_attn, block.attention)
        pairs[f"layer {i} FFN"] = (nn.ModuleList([layer.linear1, layer.linear2]), block.feed_forward)
        pairs[f"layer {i} norms"] = (nn.ModuleList([layer.norm1, layer.norm2]), nn.ModuleList(block.norms))
    counts = {name: (count(a), count(b)) for name, (a, b) in pairs.items()}
    assert {n: a for n, (a, _) in counts.items()} == {n: b for n, (_, b) in counts.items()}, counts
    assert sum(a for a, _ in counts.values()) == count(theirs) == count(model) == 71_242
    assert counts["position table"] == (1_792, 1_792)  # 28 rows of 64: the tutorial's randn(1, 28, 64)


def test_the_ffn_share_and_the_estimate_are_the_tutorials():
    model = ours()
    groups = parameter_groups(model)
    assert groups["ffn"] == 2 * (64 * 128 + 128 + 128 * 64 + 64) == 33_152
    assert groups["total"] == 71_242 and round(100 * groups["ffn"] / groups["total"], 1) == 46.5
    assert parameter_count(Config()) == 71_242  # ablate.limits' count, on the meta device


def test_the_table_follows_the_task_and_an_explicit_max_len_is_kept():
    cls = build({"pooling": "cls"})  # a CLS token reads one more position
    assert ours(cls).encoder.pos_enc.weight.shape == (29, 64)
    wide = build({"model.max_len": 512})  # the table issue 37 found in every sweep: still buildable
    assert count(ours(wide)) == 71_242 + (512 - 28) * 64 == parameter_count(wide)
    # the same table, spelled or left to the task, is the same run
    assert run_id(build({"model.max_len": 28})) == run_id(Config()) != run_id(wide)
