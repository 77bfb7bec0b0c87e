"""ScaleNorm (Nguyen & Salazar 2019, "Transformers without Tears"): x -> g * x / max(||x||, eps), g one learned
scalar, started at sqrt(d_model) (the paper's) or at scalenorm.g_init."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from ablate.models.config import POSITIVE, option


@dataclass(frozen=True)
class ScaleNormOptions:
    g_init: float | None = option(None, "the gain g's start; null: sqrt(d_model), the paper's", bound=POSITIVE)


class ScaleNorm(nn.Module):
    def __init__(self, d_model: int, eps: float, options: ScaleNormOptions):
        super().__init__()
        self.eps = eps
        start = options.g_init if options.g_init is not None else math.sqrt(d_model)
        self.g = nn.Parameter(torch.tensor(float(start)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.g * x / x.norm(dim=-1, keepdim=True).clamp_min(self.eps)
