"""The optimiser of every run: AdamW, with weight decay on the matrices of linear maps and nothing else."""

from __future__ import annotations

import torch
from torch import nn

from experiments.run.config import TrainConfig

LINEAR_MAPS = (nn.Linear, nn.Embedding, nn.Conv1d)  # modules whose `weight` is the matrix of a linear map


def decays(module: nn.Module, name: str) -> bool:
    """Whether weight decay applies to `module`'s own parameter `name`: the matrices of linear maps, nothing
    else. That is the `weight` of linear, embedding and convolution layers, a recurrent layer's input and
    hidden matrices, and the parameters a module names in `linear_weights` (additive attention's per-head
    projections, Linformer's projections along the sequence). Not biases, norms' gains, qknorm's gains and
    biases (decay would pull them to 0, not to their 1 and 0), position tables (learned, T5's, Shaw's),
    per-head temperatures or slopes, Mamba's A and D: none of them is a matrix whose size decay is meant to
    keep down. The embedding is decayed because it is a linear layer applied to one-hot tokens, as nanoGPT
    decays it (through its tied output head); this also keeps dense and local runs' numbers what they were."""
    if isinstance(module, LINEAR_MAPS):
        return name == "weight"
    if isinstance(module, nn.RNNBase):
        return name.startswith(("weight_ih", "weight_hh"))
    return name in getattr(module, "linear_weights", ())


def build_optimizer(model: nn.Module, train: TrainConfig) -> tuple[torch.optim.AdamW, list[str]]:
    """AdamW with weight decay on the parameters `decays` names, and those parameters' names."""
    decayed = {f"{prefix}.{name}".lstrip(".") for prefix, module in model.named_modules()
               for name, _ in module.named_parameters(recurse=False) if decays(module, name)}
    parameters = list(model.named_parameters())
    optimizer = torch.optim.AdamW(
        [{"params": [p for n, p in parameters if n in decayed], "weight_decay": train.weight_decay},
         {"params": [p for n, p in parameters if n not in decayed], "weight_decay": 0.0}],
        lr=train.lr, betas=(0.9, 0.98),
    )
    return optimizer, [name for name, _ in parameters if name in decayed]
