"""Measurements on a model: each a plain function of (model, batch) returning flat float dicts.

Pure torch/numpy (no Lightning, W&B or pandas), so a notebook can use them alone. Every probe runs
in eval mode inside `torch.random.fork_rng` and restores the model's modes; none writes `.grad`.
"""

from .collapse import (
    collapse_of,
    effective_rank,
    mean_token_cosine,
    norms_of,
    residual_norms,
    sublayer_outputs,
    token_collapse,
)
from .common import NotApplicable, accuracy, has_attention, probe_mode, task_loss
from .gradients import GROUPS, gradient_flow
from .heads import head_importance, masked_heads, masked_output, relation_weights
from .norms import geometry, norm_geometry
from .order import equivariance_error, order_sensitivity
from .positions import accuracy_by_position
from .readout import layer_readout
from .run import (
    AT_ENDS_ONLY,
    NOT_APPLICABLE_TO_RNN,
    format_probes,
    layer_arrays,
    not_applicable,
    periodic_part,
    periodic_probes,
    run_probes,
)
from .scores import attention_maps, entropy_per_head, layer_logits, score_stats
from .shares import parameter_shares
from .temperature import FACTORS, attention_temperature, factor_name, inference_temperature

__all__ = [
    "AT_ENDS_ONLY",
    "FACTORS",
    "GROUPS",
    "NOT_APPLICABLE_TO_RNN",
    "NotApplicable",
    "accuracy",
    "accuracy_by_position",
    "attention_maps",
    "attention_temperature",
    "collapse_of",
    "effective_rank",
    "entropy_per_head",
    "equivariance_error",
    "factor_name",
    "format_probes",
    "geometry",
    "gradient_flow",
    "has_attention",
    "head_importance",
    "inference_temperature",
    "layer_arrays",
    "layer_logits",
    "layer_readout",
    "masked_heads",
    "masked_output",
    "mean_token_cosine",
    "norm_geometry",
    "norms_of",
    "not_applicable",
    "order_sensitivity",
    "parameter_shares",
    "periodic_part",
    "periodic_probes",
    "probe_mode",
    "relation_weights",
    "residual_norms",
    "run_probes",
    "score_stats",
    "sublayer_outputs",
    "task_loss",
    "token_collapse",
]
