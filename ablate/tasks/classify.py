"""MNIST read as a sequence: 28 rows of 28 pixels, one class per image (the tutorial's task)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torchmetrics import MaxMetric
from torchmetrics.classification import MulticlassAccuracy

from ..config import Config
from ..models import SequenceClassifier
from .base import EncoderTask


class ClassifyRows(EncoderTask):
    """Logs train/loss, val/acc, val/acc_best, test/acc and test/acc_perm (test rows in a fixed
    permuted order: the word-order experiment)."""

    def __init__(self, config: Config | dict, in_features: int = 28, n_classes: int = 10):
        super().__init__(config, in_features=in_features, n_classes=n_classes)
        self.val_acc = MulticlassAccuracy(n_classes, average="micro")
        self.val_acc_best = MaxMetric()
        self.val_acc_best.persistent(True)  # survives resume from last.ckpt
        self.test_acc = MulticlassAccuracy(n_classes, average="micro")
        self.test_acc_perm = MulticlassAccuracy(n_classes, average="micro")
        from ..data import row_permutation

        # test/acc_perm always means "test rows in the fixed permuted order P": when the test
        # loader already applies P (permute=test|both), the rows it gives are used as they are.
        perm = row_permutation(self.cfg.data.permute_seed)
        if self.cfg.data.permute in ("test", "both"):
            perm = torch.arange(len(perm))
        self.register_buffer("perm", perm, persistent=False)

    def build_model(self, cfg: Config, in_features: int, n_classes: int) -> SequenceClassifier:
        return SequenceClassifier(cfg.encoder, in_features, n_classes, cfg.pooling)

    def loss(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self.model(x)
        self.log("val/loss", self.loss(logits, y), on_epoch=True, sync_dist=True)
        self.val_acc.update(logits, y)

    def test_step(self, batch, batch_idx):
        x, y = batch
        self.test_acc.update(self.model(x), y)
        self.test_acc_perm.update(self.model(x[:, self.perm]), y)
        self.log("test/acc", self.test_acc, on_epoch=True)
        self.log("test/acc_perm", self.test_acc_perm, on_epoch=True)
