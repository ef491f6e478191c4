"""attnlab's tasks: a registry of long-range dependency tasks that generate their own batches.

    >>> from experiments import tasks
    >>> tasks.list_tasks("p*")
    ['passkey', 'pathfinder']
    >>> task = tasks.create_task("passkey", profile="quick", num_keys=8)
    >>> batch = task.batch(32, tasks.train_generator(0), "cpu")
    >>> batch.inputs.shape, task.num_classes, task.chance_accuracy
    (torch.Size([32, 128]), 8, 0.125)
"""

from common.registry import import_modules
from experiments.tasks.base import (
    DATA_PROFILES,
    IGNORE,
    MAD_PROFILE,
    MAX_TRAIN_SEED,
    PROFILES,
    TEST_SEED_OFFSET,
    VALIDATION_SEED_OFFSET,
    Batch,
    Task,
    check_train_seed,
    distance_buckets,
    test_seed,
    train_generator,
    training_set_seed,
    validation_seed,
)
from experiments.tasks.lra_files import DataError, MissingData
from experiments.tasks.mad import mad_levels
from experiments.tasks.registry import (
    TASK_SETS,
    caveats,
    check_drawable,
    create_task,
    describe_tasks,
    expand_tasks,
    list_data_tasks,
    list_tasks,
    register_task,
    task_class,
)

# Every module of the package is imported, and importing a task's module registers it: a new file needs its
# `@register_task` and nothing else.
import_modules(__name__, __path__)

# What `attnlab run` trains when no task is named: every task whose quick profile is discriminative (dense
# clearly above chance, and a local window of 16 measurably below dense; docs/calibration.md has the figures),
# in the order of their `suite_position`; a task with a known shortcut at quick (`Task.known_shortcut`) fails its
# control and is left out until its generator is fixed, and so is one that is not discriminative at quick
# (`Task.not_discriminative`).
DEFAULT_SUITE = sorted((name for name in list_tasks() if task_class(name).suite_position is not None
                        and "quick" not in task_class(name).known_shortcut
                        and "quick" not in task_class(name).not_discriminative),
                       key=lambda name: task_class(name).suite_position)

__all__ = [
    "DATA_PROFILES",
    "DEFAULT_SUITE",
    "TEST_SEED_OFFSET",
    "IGNORE",
    "MAD_PROFILE",
    "MAX_TRAIN_SEED",
    "PROFILES",
    "VALIDATION_SEED_OFFSET",
    "Batch",
    "DataError",
    "MissingData",
    "TASK_SETS",
    "Task",
    "check_drawable",
    "check_train_seed",
    "create_task",
    "caveats",
    "describe_tasks",
    "distance_buckets",
    "expand_tasks",
    "test_seed",
    "list_data_tasks",
    "list_tasks",
    "mad_levels",
    "register_task",
    "task_class",
    "train_generator",
    "training_set_seed",
    "validation_seed",
]
