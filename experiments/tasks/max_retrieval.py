"""Max retrieval: a set of items, each with a priority and a class; the query at the end asks for the class of the
item of highest priority.

After Velickovic, Perivolaropoulos, Barbero and Pascanu 2024 ("softmax is not enough (for sharp out-of-distribution)",
arXiv 2410.01104, section 2 and Figure 2): a model with one attention head is trained to predict a feature of the
maximum item of a set of 16, then read on larger sets, where its attention over the items disperses. Here each item
is one token `p<k>c<j>`, priority k and class j; the sequence is seq_len - 1 items, then the query `?`, whose target
is the class of the item of highest priority. Only the query is scored. The maximum is unique: its priority, the
top, is drawn uniformly from 1..num_priorities-1 and every other item's uniformly from 0..top-1 (with repetition);
its position among the items is uniform, and every class is drawn uniformly and independently of the priorities.

Token ids: classes 0..num_classes-1 (the answers; never an input), then the items, id num_classes + k * num_classes
+ j for priority k and class j, then `?`; vocab_size = num_classes * (num_priorities + 1) + 1. chance_accuracy =
1 / num_classes.

Distances: query position - position of the maximum item, uniform over 1..seq_len-1; metadata `distance` holds it.

Item count: `eval_lengths` evaluates the same task at other lengths (`task.at_length(L)`: L - 1 items), where more
items sit below the top, many at the level just below it, so a softmax whose logits were sharp enough among 16
items spreads its weight over the crowd. The quick profile trains at 16 items (the paper's) and evaluates at 32 to
1,024 items. Its model has one layer with one head, as the paper's has one attention head, so the weight the query
gives its items is one row, and no absolute positions: the items are a set, and a learned position table has
untrained rows past seq_len. Eight priority levels rather than 16 is for the budget: a row's logits must step up at
each level, and with 16 levels dense was at 0.73 in distribution after quick's 1500 steps, with 8 at 0.90 by step 1000.

Purpose: whether a sharp selection learned at one size stays sharp at larger sizes (the paper's dispersion), read as
accuracy and as the largest attention weight of the query's row (`train.attention_stats`) against the item count.
Cost: one scored position per sequence; generating a batch is O(batch * seq_len).

Profiles: quick seq_len 17 (16 items), 8 priorities, 8 classes, eval lengths 33 to 1025 (32 to 1,024 items;
dim 64, depth 1, heads 1, no absolute positions; 1500 steps of 64 examples, lr 3e-3, evaluated every 500);
standard 64 items, 32 priorities, 16 classes, eval lengths to 4,096 items (dim 128, depth 1, heads 1, 3000 steps
of 64); long 1,024 items (LRA's scale, like every task's long), eval lengths to 16,384 items (dim 128, depth 1,
heads 1, 4000 steps of 32). Standard and long are sized like the other tasks' and not yet calibrated.

Calibration: not measured yet; `make calibration TASK=max_retrieval` writes the figures to docs/calibration.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from common.options import option, require
from experiments.tasks.base import IGNORE, QUICK_EVAL_SIZE, Batch, Profile, Task
from experiments.tasks.registry import register_task

# One layer, one head, no absolute positions: see "Item count" above.
_QUICK_MODEL = {"dim": 64, "depth": 1, "heads": 1, "positions": "none"}
_LARGER_MODEL = {"dim": 128, "depth": 1, "heads": 1, "positions": "none"}
QUICK_EVAL_LENGTHS = (33, 65, 129, 257, 513, 1025)  # 32 to 1,024 items, and the query


@register_task("max_retrieval")
class MaxRetrieval(Task):
    """Answer the query with the class of the item of highest priority.

    Worked example: the test set of `create_task("max_retrieval", seq_len=7, num_priorities=4, num_classes=3,
    test_size=1)`.

        input:    p0c0 p1c2 p1c2 p2c1 p1c2 p1c2 ?
        label:    c1 (id 1) at position 6, the `?`: the class of p2c1, the only item of priority 2; every other
                  position IGNORE
        distance: 6 - 3 = 3
        task.label_text(batch, 0) == "6: ? -> c1"
    """

    depends_on_order = False  # the items are a set: the highest priority's class is the answer, wherever it sits
    paper = ("Velickovic, Perivolaropoulos, Barbero and Pascanu 2024, \"softmax is not enough (for sharp "
             "out-of-distribution)\", arXiv 2410.01104, section 2 (max retrieval, trained on sets of 16 items)")
    deviations = (
        "an item is one token naming its priority level and its class, embedded by the model's token embedding, where "
        "the paper's items are feature vectors put through a deep MLP before the attention",
        "priorities are num_priorities discrete levels, the top drawn uniformly and the others below it, so that the "
        "maximum is unique at every item count, where the paper's items carry continuous features",
        "the query is a `?` token after the items, attending under the causal mask in attnlab's Transformer (one "
        "layer, one head, its GELU MLP and classifier after it), where the paper's single head feeds a deep MLP "
        "predictor",
        "the quick profile reads sets of 32 to 1,024 items, a range sized for a CPU",
    )

    @dataclass(frozen=True)
    class Options:
        seq_len: int = option(17, "tokens per example: seq_len - 1 items, then the query")
        num_priorities: int = option(8, "priority levels of the items; the maximum is one item at a level drawn "
                                         "from 1 up")
        num_classes: int = option(8, "classes of the items, the answers; chance is 1/num_classes")
        test_size: int = option(QUICK_EVAL_SIZE, "examples in the test set")
        eval_lengths: tuple[int, ...] = option(QUICK_EVAL_LENGTHS, "also evaluate at these sequence lengths (items "
                                                                   "and the query: other item counts)")

        def __post_init__(self) -> None:
            require(self.seq_len >= 3, "seq_len", self.seq_len, "an integer >= 3, room for two items and the query")
            require(self.num_priorities >= 2, "num_priorities", self.num_priorities, "an integer >= 2")
            require(self.num_classes >= 2, "num_classes", self.num_classes, "an integer >= 2")
            require(self.test_size >= 1, "test_size", self.test_size, "an integer >= 1")

    profiles = {
        "quick": Profile(options={}, model=_QUICK_MODEL,
                         train={"steps": 1500, "batch_size": 64, "lr": 3e-3, "eval_every": 500}),
        "standard": Profile(options={"seq_len": 65, "num_priorities": 32, "num_classes": 16, "test_size": 512,
                                     "eval_lengths": (257, 1025, 4097)},
                            model=_LARGER_MODEL,
                            train={"steps": 3000, "batch_size": 64, "lr": 1e-3, "eval_every": 500}),
        "long": Profile(options={"seq_len": 1025, "num_priorities": 32, "num_classes": 16, "test_size": 256,
                                 "eval_lengths": (4097, 16385)},
                        model=_LARGER_MODEL,
                        train={"steps": 4000, "batch_size": 32, "lr": 5e-4, "eval_every": 500}),
    }

    def __init__(self, options: Options, profile: str) -> None:
        super().__init__(options, profile)
        classes, priorities = options.num_classes, options.num_priorities
        self.vocabulary = ([f"c{label}" for label in range(classes)]
                           + [f"p{level}c{label}" for level in range(priorities) for label in range(classes)] + ["?"])
        self.num_classes = classes
        self.chance_accuracy = 1 / classes

    def sample(self, batch_size: int, generator: torch.Generator, device: torch.device) -> Batch:
        items, classes = self.seq_len - 1, self.options.num_classes
        top = 1 + torch.randint(self.options.num_priorities - 1, (batch_size, 1), generator=generator,
                                device=device)  # (batch, 1): the maximum's priority, 1..num_priorities-1
        below = torch.rand(batch_size, items, generator=generator, device=device)  # (batch, items)
        priority = (below * top).long()  # (batch, items): uniform over 0..top-1
        chosen = torch.randint(items, (batch_size, 1), generator=generator, device=device)  # (batch, 1)
        priority.scatter_(1, chosen, top)
        label = torch.randint(classes, (batch_size, items), generator=generator, device=device)  # (batch, items)
        query = torch.full((batch_size, 1), len(self.vocabulary) - 1, dtype=torch.long, device=device)
        inputs = torch.cat([classes + priority * classes + label, query], dim=1)  # (batch, seq)
        targets = torch.full_like(inputs, IGNORE)  # (batch, seq)
        targets[:, -1:] = label.gather(1, chosen)
        distance = items - chosen  # (batch, 1): from the maximum to the query at position `items`
        distances = torch.full_like(inputs, -1)  # (batch, seq)
        distances[:, -1:] = distance
        return Batch(inputs, targets, distances, {"distance": distance[:, 0]})
