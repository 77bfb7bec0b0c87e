"""One MNIST epoch: the tutorial's own training script against the harness, end to end.

`article`: the script the tutorial ends with, as such scripts are written — torchvision's MNIST
           with per-item `ToTensor` + `Normalize` transforms in a shuffled DataLoader, the model
           (Linear(28->64) + learned positions, `nn.TransformerEncoder` of 2 Post-LN layers with
           4 heads and FFN 128, mean pooling, Linear(64->10)), Adam 1e-3, batch 64; one epoch of
           training followed by an evaluation pass over the 10k test images.
`ablate` : `ablate train` with its defaults (the same model) for one epoch, in this process:
           Lightning, in-memory data, metrics.csv, W&B offline, probes at step 0 and at the end,
           checkpointing; one epoch of training followed by its validation pass (5k images).

Both are timed from the first training step to the end of that epoch's evaluation; the harness's
whole wall time (setup, probes, test pass) is printed too. The last line reads
`ratio ablate/article epoch time: <number>` (< 1: the harness is faster).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import torch
import torch.nn.functional as F
from torch import nn


class ArticleModel(nn.Module):
    def __init__(self, d_model: int = 64, n_heads: int = 4, ffn: int = 128, n_layers: int = 2):
        super().__init__()
        self.embed = nn.Linear(28, d_model)
        self.pos = nn.Parameter(torch.zeros(1, 28, d_model))
        layer = nn.TransformerEncoderLayer(d_model, n_heads, ffn, 0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.fc = nn.Linear(d_model, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 1, 28, 28)
        h = self.embed(x.squeeze(1)) + self.pos  # (B, 28, d)
        return self.fc(self.encoder(h).mean(dim=1))


def article_epoch(root: str, limit: int | None) -> tuple[float, float]:
    """(seconds for one training epoch + test evaluation, test accuracy)."""
    from torch.utils.data import DataLoader, Subset
    from torchvision import datasets, transforms

    tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    train = datasets.MNIST(root, train=True, download=False, transform=tf)
    test = datasets.MNIST(root, train=False, download=False, transform=tf)
    if limit:
        train, test = Subset(train, range(limit)), Subset(test, range(limit // 6))
    torch.manual_seed(0)
    model = ArticleModel()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    t0 = time.perf_counter()
    model.train()
    for x, y in DataLoader(train, batch_size=64, shuffle=True):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    model.eval()
    right = 0
    with torch.no_grad():
        for x, y in DataLoader(test, batch_size=1000):
            right += int((model(x).argmax(1) == y).sum())
    return time.perf_counter() - t0, right / len(test)


def harness_epoch(limit: int | None) -> tuple[float, float, float]:
    """(seconds for the first epoch incl. its validation, whole wall time, val/acc)."""
    import pytorch_lightning as pl

    from ablate import config as C
    from ablate.train import train

    class EpochClock(pl.Callback):
        def on_train_start(self, trainer, pl_module):
            self.t0 = time.perf_counter()

        def on_train_epoch_end(self, trainer, pl_module):
            self.seconds = time.perf_counter() - self.t0

    clock = EpochClock()
    items = ["trainer.max_epochs=1"] + ([f"data.train_subset={limit}"] if limit else [])
    os.environ.setdefault("WANDB_MODE", "offline")
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        summary = train(C.build(C.parse_overrides([*items, f"run.dir={tmp}/run"])), log=lambda *a: None,
                        callbacks=[clock])
        wall = time.perf_counter() - t0
    return clock.seconds, wall, summary["metrics"]["val/acc"]


def run(args: argparse.Namespace) -> int:
    from ablate.data import DataError, data_dir
    from ablate.data.mnist import check_mnist, ensure_mnist

    try:
        ensure_mnist(data_dir())
        check_mnist(data_dir())
    except DataError as err:
        print(f"ablate: {err}", file=sys.stderr)
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    limit = args.limit or None
    print(f"one MNIST epoch on {torch.get_num_threads()} threads{f', first {limit} images' if limit else ''}")
    article_s, article_acc = article_epoch(str(data_dir()), limit)
    print(f"  article script : {article_s:7.1f} s   (test acc {article_acc:.4f})")
    ablate_s, wall, val_acc = harness_epoch(limit)
    print(f"  ablate train   : {ablate_s:7.1f} s   (val acc {val_acc:.4f}; whole run incl. setup, probes, test: {wall:.1f} s)")
    print(f"ratio ablate/article epoch time: {ablate_s / article_s:.3f}")
    return 0
