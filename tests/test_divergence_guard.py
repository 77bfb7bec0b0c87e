"""The divergence guard reads every step's loss on the CPU and, on an accelerator, keeps the first non-finite step
on the device and reads it now and then (issue 42: a host sync every step). Both record the same step and loss;
the lazy one never lets a checkpoint of a diverged run be saved. Run here with the lazy path forced on the CPU,
through Lightning's real Trainer."""

from __future__ import annotations

import math

import pytest
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

from ablate.callbacks import Diverged, DivergenceGuard

BAD_STEP = 7  # the optimiser step whose loss is the first non-finite one (global_step counts from 1 after it)


class Breaks(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        return loss * math.inf if self.global_step + 1 >= BAD_STEP else loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def _fit(guard: DivergenceGuard, **trainer) -> tuple[Diverged, int]:
    torch.manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(80, 4), torch.randn(80, 1)), batch_size=4)  # 20 steps an epoch
    model = Breaks()
    t = pl.Trainer(max_epochs=3, accelerator="cpu", callbacks=[guard], logger=False, enable_checkpointing=False,
                   enable_progress_bar=False, enable_model_summary=False, **trainer)
    with pytest.raises(Diverged) as stop:
        t.fit(model, data)
    return stop.value, t.global_step


def test_the_lazy_guard_records_the_step_and_loss_every_step_reading_would():
    eager, at_eager = _fit(DivergenceGuard(lazy=False))
    lazy, at_lazy = _fit(DivergenceGuard(lazy=True))
    assert eager.step == lazy.step == BAD_STEP and eager.loss == lazy.loss == math.inf
    assert at_eager == BAD_STEP and at_lazy == 20  # read at the epoch's last step, not at every step


def test_the_lazy_guard_reads_before_a_checkpoint_is_saved(tmp_path):
    class SaveAt(pl.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if trainer.global_step == 10:
                trainer.save_checkpoint(tmp_path / "mid.ckpt")

    guard = DivergenceGuard(lazy=True)
    torch.manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(80, 4), torch.randn(80, 1)), batch_size=4)
    t = pl.Trainer(max_epochs=1, accelerator="cpu", callbacks=[SaveAt(), guard], logger=False,
                   enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    with pytest.raises(Diverged) as stop:
        t.fit(Breaks(), data)
    assert stop.value.step == BAD_STEP and not (tmp_path / "mid.ckpt").exists()
