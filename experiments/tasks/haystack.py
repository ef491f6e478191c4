"""What the needle-in-a-haystack tasks share (passkey, MQAR, RULER's needle and variable-tracking tasks): a haystack
of distractor tokens, and distinct draws (an example's distinct keys, the distinct slots its needles sit in).

Both draw from the generator they are given and nothing else, on its device, vectorised over the batch.
"""

from __future__ import annotations

import torch


def distractor_haystack(batch_size: int, length: int, first_id: int, count: int, generator: torch.Generator,
                        device: torch.device) -> torch.Tensor:
    """(batch, length) long: token ids drawn uniformly from first_id..first_id + count - 1."""
    return first_id + torch.randint(count, (batch_size, length), generator=generator, device=device)


def distinct(batch_size: int, choices: int, count: int, generator: torch.Generator,
             device: torch.device) -> torch.Tensor:
    """(batch, count) long: per row, `count` distinct integers from 0..choices-1 in random order (a random subset
    in a random order, every one equally likely)."""
    scores = torch.rand(batch_size, choices, generator=generator, device=device)  # (batch, choices)
    return scores.argsort(dim=1)[:, :count]
