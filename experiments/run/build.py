"""The one place a run's parts are made: a resolved `RunConfig` -> its task and its model, whose blocks each
build their attention (or a baseline's token mixer) once.

    >>> parts = build(configs.resolve(variant="local", task="passkey", profile="quick", seed=0, device="cpu"))
    >>> parts.described, parts.task.seq_len
    ('local_w16', 256)

Everything that trains, times, draws or names a run gets its parts here (`experiments.run.train`, the sweeps' and
the benchmark's workers through `train`, the saturation tables, the training-throughput timing, the report's
attention pictures), so that a change to how a run is assembled is made once. Options travel typed (the
`Options` dataclasses the config holds); JSON only at the run folder's files.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from experiments import tasks
from experiments.run.config import RunConfig
from experiments.run.model import Transformer
from variants import layouts


@dataclass
class Parts:
    """A run's task and model, made from `config` by `build`."""

    config: RunConfig
    task: tasks.Task
    model: Transformer  # on the CPU, initialised from the run's seed
    # The CPU generator right after the model's initialisation: training starts from it, so that a run trains
    # alike whether its parts were built just before or while other runs trained.
    rng_state: torch.Tensor

    @property
    def described(self) -> str:
        """The variant as the model's first block describes itself, e.g. `local_w16`."""
        return self.model.variant_module.describe()

    @property
    def attends_every_pair(self) -> bool:
        """Whether the variant's layout attends every pair at the longest length the task has (a window that
        covers the whole sequence, say): it then computes dense attention, at its own kernel's cost."""
        layout = getattr(self.model.variant_module, "block_layout", None)  # a baseline's mixer has none
        return layouts.coverage(layout, self.task.max_len, self.config.model.causal) == 1.0


def build_task(config: RunConfig) -> tasks.Task:
    """The run's task at its profile with the config's options."""
    return tasks.create_task(config.task, profile=config.profile, options=config.task_options)


def build(config: RunConfig) -> Parts:
    """The task and the model (initialised from the run's seed) of `config`; sizes or a kernel the variant
    cannot run with are a one-sentence error."""
    task = build_task(config)
    torch.manual_seed(config.seed)
    model = Transformer(config.model, vocab_size=task.vocab_size, num_classes=task.num_classes, max_len=task.max_len,
                        variant=config.variant, variant_options=config.variant_options, kernel=config.kernel,
                        seed=config.seed, towers=task.towers, bottleneck=task.bottleneck)
    return Parts(config=config, task=task, model=model, rng_state=torch.get_rng_state())
