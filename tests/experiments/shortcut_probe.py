"""Shortcut probes: a logistic regression and gradient-boosted trees over statistics that need no attention to
a task's evidence.

`sequence_rows` turns a batch into one row per scored position: the bag of tokens seen up to it (the
inputs a causal model has at that position), its position, and the one-hot last `context` tokens (the
query included). Rows whose evidence lies within those last tokens are dropped: there the evidence is
local and reading it is the task, not a shortcut. `probe_accuracy` (linear) and `boosted_probe_accuracy`
(non-linear: thresholds on counts, interactions between features) fit a probe on one set of rows and score
it on another; `PROBES` names both. `leak_label` plants the answer in some rows, to check a probe finds a
label where there is one. A task that rebuilds its scored positions from the last one (`Task.bottleneck`,
compression) is read there, where its model reads, with the position asked for.
"""

import numpy as np
import torch
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from experiments.tasks import IGNORE


def sequence_rows(task, batch, context, bag_tokens=None):
    """(features, labels) for every scored position whose evidence lies `context` or more tokens back.

    Features: counts of each token id in `bag_tokens` (default every id) among the inputs up to the
    position the model reads (the scored one, or the last for a bottleneck task), the scored position itself,
    and the one-hot ids of the last `context` inputs up to the position read.
    """
    vocab = task.vocab_size
    bag_tokens = list(range(vocab)) if bag_tokens is None else list(bag_tokens)
    examples, positions = (batch.targets != IGNORE).nonzero(as_tuple=True)  # (rows,) each
    keep = batch.distance[examples, positions] >= context
    examples, positions = examples[keep], positions[keep]
    read = torch.full_like(positions, batch.inputs.shape[1] - 1) if task.bottleneck else positions  # (rows,)
    one_hot = torch.nn.functional.one_hot(batch.inputs, vocab).double()  # (batch, seq, vocab)
    prefix_counts = one_hot.cumsum(1)[examples, read][:, bag_tokens]  # (rows, bag) counts up to the position read
    offsets = torch.arange(context)  # the query and the context - 1 tokens before it
    last = batch.inputs[examples[:, None], (read[:, None] - offsets).clamp(min=0)]  # (rows, context)
    last_one_hot = torch.nn.functional.one_hot(last, vocab).flatten(1).double()  # (rows, context * vocab)
    features = torch.cat([prefix_counts, positions[:, None].double(), last_one_hot], 1)
    return features.numpy(), batch.targets[examples, positions].numpy()


def probe_accuracy(train, test):
    """Held-out accuracy of a standardised logistic regression fitted on `train` = (features, labels)."""
    probe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=300))
    return probe.fit(*train).score(*test)


def boosted_probe_accuracy(train, test):
    """Held-out accuracy of gradient-boosted trees fitted on `train` = (features, labels).

    It reads what a linear probe cannot: a label carried by a count's threshold, a parity, or a pair of
    features together. A tenth of `train` is held back to stop boosting once it stops helping, so the trees
    do not memorise small row sets; the seed fixes that split, so the accuracy is reproducible. Leaves of 5
    rows (scikit-learn's default is 20) let it isolate a shortcut that only a few rows of a class carry.
    One thread: on a busy machine OpenMP's threads wait on each other, and a second-long fit takes minutes.
    """
    probe = HistGradientBoostingClassifier(max_iter=200, min_samples_leaf=5, early_stopping=True, random_state=0)
    with threadpool_limits(limits=1):
        return probe.fit(*train).score(*test)


PROBES = {"linear": probe_accuracy, "boosted": boosted_probe_accuracy}  # name -> accuracy(train, test)


def leak_label(rows, num_classes, fraction, seed=0):
    """`rows` = (features, labels) with the label's one-hot appended in a random `fraction` of the rows
    (zeros elsewhere): a shortcut that lifts a perfect probe from chance c to about c + fraction * (1 - c)."""
    features, labels = rows
    chosen = np.random.default_rng(seed).random(len(labels)) < fraction
    planted = np.eye(num_classes)[labels] * chosen[:, None]  # (rows, classes)
    return np.concatenate([features, planted], 1), labels
