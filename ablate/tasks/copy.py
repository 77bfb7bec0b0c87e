"""Copy (or reverse) a token sequence: the encoder must place each token at the right blank."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torchmetrics import MaxMetric, MeanMetric
from torchmetrics.classification import MulticlassAccuracy

from ..config import Config
from ..models import TokenModel
from .base import EncoderTask

IGNORE = -100


class CopyTokens(EncoderTask):
    """Accuracy over blank positions only: per token (…/acc) and per whole sequence (…/seq_acc)."""

    def __init__(self, config: Config | dict, n_tokens: int, n_out: int):
        super().__init__(config, n_tokens=n_tokens, n_out=n_out)
        self.n_out = n_out
        self.val_acc = MulticlassAccuracy(n_out, average="micro", ignore_index=IGNORE)
        self.val_seq_acc = MeanMetric()
        self.val_acc_best = MaxMetric()
        self.val_acc_best.persistent(True)
        self.test_acc = MulticlassAccuracy(n_out, average="micro", ignore_index=IGNORE)
        self.test_seq_acc = MeanMetric()

    def build_model(self, cfg: Config, n_tokens: int, n_out: int) -> TokenModel:
        return TokenModel(cfg.encoder, n_tokens, n_out)

    def loss(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.reshape(-1, self.n_out), y.reshape(-1), ignore_index=IGNORE)

    @staticmethod
    def sequence_correct(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """(B,) 1.0 where every blank position of the sequence is predicted right."""
        wrong = (logits.argmax(-1) != y) & (y != IGNORE)
        return (~wrong.any(dim=1)).float()

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self.model(x)
        self.log("val/loss", self.loss(logits, y), on_epoch=True, sync_dist=True)
        self.val_acc.update(logits.reshape(-1, self.n_out), y.reshape(-1))
        self.val_seq_acc.update(self.sequence_correct(logits, y))

    def on_validation_epoch_end(self):
        super().on_validation_epoch_end()
        self.log("val/seq_acc", self.val_seq_acc)

    def test_step(self, batch, batch_idx):
        x, y = batch
        logits = self.model(x)
        self.test_acc.update(logits.reshape(-1, self.n_out), y.reshape(-1))
        self.test_seq_acc.update(self.sequence_correct(logits, y))
        self.log("test/acc", self.test_acc, on_epoch=True)
        self.log("test/seq_acc", self.test_seq_acc, on_epoch=True)
