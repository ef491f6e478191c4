"""Images of an image task's examples as PNG files (Pathfinder's: `attnlab sample pathfinder --images DIR`)."""

from __future__ import annotations

from pathlib import Path

from experiments.tasks.base import Batch, Task


def save_images(task: Task, batch: Batch, folder: str | Path, count: int) -> list[Path]:
    """Write the first `count` examples of `batch` (at most all of them) as grey-scale PNG files in `folder`.

    The task's inputs are an image_size x image_size image of grey levels, flattened row by row (token id
    num_classes + level), then the query; its options hold grey_levels.

    Each pixel becomes a square of 512 // image_size pixels (nearest neighbour, at least 1), so every
    size comes out about 512 pixels wide; grey level g is drawn at brightness g / (grey_levels - 1), so
    the markers are white. Files are named `pathfinder_<size>x<size>_<index>_<label>.png`, label "same"
    or "different". Returns the paths written, in example order.
    """
    from matplotlib import image as mpimg  # imported here, as drawing batches needs no plotting

    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count got {count!r}; accepted: an integer >= 1.")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    size = task.image_size
    scale = max(1, 512 // size)
    written = []
    for index in range(min(count, batch.inputs.shape[0])):
        levels = (batch.inputs[index, :-1] - task.num_classes).view(size, size).double().cpu()  # (S, S)
        picture = (levels / (task.options.grey_levels - 1)).repeat_interleave(scale, 0).repeat_interleave(scale, 1)
        label = task.vocabulary[int(batch.targets[index, -1])]
        path = folder / f"{task.name}_{size}x{size}_{index:03d}_{label}.png"
        mpimg.imsave(path, picture.numpy(), cmap="gray", vmin=0.0, vmax=1.0)
        written.append(path)
    return written
