"""The LightningModule every task shares: config in, encoder built here, optimiser and schedule."""

from __future__ import annotations

import math
from typing import Any

import pytorch_lightning as pl
import torch
from torch import nn

from ..config import Config, from_dict, to_dict
from ..models import lr_factors


def lr_lambda(warmup_steps: int, total_steps: int, schedule: str):
    """Linear warm-up from 0 over `warmup_steps`, then constant or cosine decay to 0 at `total_steps`."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        if schedule == "cosine":
            progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
            return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
        return 1.0

    return factor


OPTIMIZERS = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}


def param_groups(module: nn.Module, lr: float) -> list[dict[str, Any]]:
    """Every parameter of `module` in one group at `lr`, but those `ablate.models.lr_factors` names (the W_Q,
    W_K of model.qk_reparam, c = d_head^(-1/4)) in a group per factor, at lr * factor."""
    factor = {id(p): f for p, f in lr_factors(module)}
    groups = [{"params": [p for p in module.parameters() if id(p) not in factor], "lr": lr}]
    for f in sorted(set(factor.values())):
        groups.append({"params": [p for p in module.parameters() if factor.get(id(p)) == f], "lr": lr * f})
    return groups


class EncoderTask(pl.LightningModule):
    """Receives the typed run config and the task's sizes. The checkpoint keeps the config as a plain
    dict (it loads with weights_only=True), from which `load_from_checkpoint` rebuilds it."""

    def __init__(self, config: Config | dict[str, Any], **sizes: int):
        super().__init__()
        self.cfg: Config = config if isinstance(config, Config) else from_dict(config)
        # in the checkpoint only: the W&B run has the flat config already (ablate.tracking.run_fields)
        self.save_hyperparameters({"config": to_dict(self.cfg), **sizes}, logger=False)
        self.model = self.build_model(self.cfg, **sizes)

    def build_model(self, cfg: Config, **sizes: int) -> nn.Module:
        raise NotImplementedError

    def forward(self, x: torch.Tensor, return_attention: bool = False):
        return self.model(x, return_attention)

    def loss(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = self.loss(self.model(x), y)
        self.log("train/loss", loss, on_step=True, on_epoch=False, prog_bar=True)
        return loss

    def on_validation_epoch_end(self):
        """val/acc of the epoch and the best so far (subclasses own `val_acc` and `val_acc_best`)."""
        acc = self.val_acc.compute()
        self.val_acc.reset()
        self.val_acc_best.update(acc)
        self.log("val/acc", acc, prog_bar=True, sync_dist=True)  # already synced by torchmetrics
        self.log("val/acc_best", self.val_acc_best.compute(), sync_dist=True)

    def configure_optimizers(self):
        o = self.cfg.optim
        optimizer = OPTIMIZERS[o.name](param_groups(self, o.lr), lr=o.lr, weight_decay=o.weight_decay)
        for group in optimizer.param_groups[1:]:  # Adam: c-times smaller weights, 1/c-times larger sqrt(v)
            if "eps" in group:  # eps / c keeps its ratio to sqrt(v): the step is then exactly c times
                group["eps"] *= o.lr / group["lr"]
        if o.warmup == 0 and o.schedule == "constant":
            return optimizer
        total = int(self.trainer.estimated_stepping_batches)
        warmup = round(o.warmup * total)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(warmup, total, o.schedule))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
