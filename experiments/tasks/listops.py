"""ListOps: the value of a nested expression of MIN, MAX, MED and SM over digits, read at a final query.

The ListOps task of Nangia & Bowman 2018 ("ListOps: A Diagnostic Dataset for Latent Tree Learning") as
Long Range Arena builds it (Tay et al. 2021, "Long Range Arena: A Benchmark for Efficient Transformers";
generator `lra_benchmarks/data/listops.py`), in LRA's notation: `[MAX 2 9 [MIN 4 7 ] 0 ]` is 9.
Operators, each over 2..max_args arguments that are digits or expressions:
    MIN, MAX  the smallest, the largest argument;
    MED       the median exactly as LRA computes it, `int(np.median(args))`: the middle argument for an odd
              count; for an even count the mean of the two middle arguments truncated, which for digits is
              floor((a + b) / 2): `[MED 3 4 ]` is 3, `[MED 2 9 ]` is 5, `[MED 1 2 3 4 ]` is 2;
    SM        the sum of the arguments mod 10.
The answer is the expression's value, a digit: 10 classes. `operators` narrows the four (LRA: all of them).

Trees grow as in LRA's `generate_tree`: a node is an operator with probability operator_probability (LRA's VALUE_P =
0.25, despite its name the chance of an operator), else a digit drawn uniformly; an operator draws its argument count
uniformly from 2..max_args and itself uniformly from the four; nodes at nesting max_depth + 1 are always digits, so
operators nest at most max_depth deep (LRA's max_depth = 10 counts its root as depth 1 and makes depth-10 nodes
digits: our max_depth = 9). As in LRA, trees are drawn until one's token count lies in the window [min_length,
seq_len - 1] (LRA keeps 500 < length < 2000, i.e. min_length = 501, seq_len = 2000). Two shortcuts leave that
distribution unchanged: the root is always an operator (a bare digit is 1 token, never in a window of min_length >=
4), and a tree is abandoned as soon as its tokens plus its pending nodes pass seq_len - 1. One difference: LRA
removes duplicate trees from its fixed data set; here every batch is drawn afresh. Trees grow level by level, every
node of a level of the whole batch at once, so a batch costs O(max_depth) tensor operations; so do their
serialisation and values.

Balanced answers (arrangements > 0: quick, standard): LRA's answer can be read off without the brackets (a flat
`[MAX ...]` is the bag's largest digit): a logistic regression on the bag of tokens and the root operator scores 0.40
and gradient-boosted trees 0.41 on quick (chance, the majority answer, 0.18), 0.63 and 0.57 on standard (chance 0.26).
So a grown tree's digits are shuffled among its digit positions `arrangements` times; it is kept when the shuffles
reach at least `min_answers` distinct answers, its answer is drawn uniformly among those, and it takes a shuffle giving
it. Given its bag and shape the answer is uniform over the >= 6 reached, and both probes
(tests/experiments/test_shortcut_probes.py: bag, root operator, position, last two tokens; fitted on 1,500 examples
of seed 1, scored on 1,500 of seed 2) stay at chance: 0.146 and 0.136 on quick (chance 0.163), 0.149 and 0.147 on
standard (chance 0.163). A flat expression reaches one answer, so every expression nests; a root's answers still
lean (MIN's low, MAX's high, MED's to the middle; SM's are uniform); MED roots 77% of them on quick, 88% on standard.

Layout, left padded: `_ ... _ <expression> =`. The query `=` at position seq_len - 1 is the one scored position, its
target the value; the expression fills the `length` positions just before it. Token ids: digits 0..9 (the answers:
num_classes = 10, the digit d is id d), then `[MIN` `[MAX` `[MED` `[SM` (10-13), `]` (14), the padding `_` (15) and
the query `=` (16); vocab_size = 17. distance: query position - position of the expression's first token = length,
the expression's tokens. Metadata: `length` (tokens of the expression) and `depth` (operator nesting: 1 for
`[SM 3 4 ]`). Distance buckets cover min_length..seq_len-1, the lengths the window allows. chance_accuracy: the
frequency of the most common answer in the test set, the accuracy of always guessing it (LRA's labels are skewed,
balanced ones less); measured (drawing the test set again) when read.

Purpose: hierarchical structure over the whole sequence: the answer depends on every token, through the brackets, so
a variant must combine information from all distances, not retrieve one token. The LRA leaderboard's local attention
scores 15.8%, the full Transformer 36.4%. Cost: one scored position per sequence; a batch is O(batch * seq_len) work
in O(max_depth) tensor operations, with 1 / acceptance times as many trees grown (about 3 for LRA's window), times
`arrangements` (and about 3 times as many again, for min_answers = 6) where answers are balanced.

Profiles: (measured accuracies: docs/calibration.md) quick, seq_len 64 (lengths 16-63), LRA's growth, max_depth 2,
balanced answers, operators MIN, MAX and MED, 3000 steps of 64 (with SM too, dense stayed within chance + 0.10 after
them). standard, seq_len 128 (lengths 48-127), quick's trees, model and budget. Three designs before it left dense
within chance + 0.10 after 5000 steps of 32 at width 128 (test accuracy against chance): LRA's depth 9 with SM at
seq_len 1000 and lr 5e-4, 0.130 against 0.130; up to 20 arguments at lengths 100-255 and lr 1e-3, 0.259 against
0.181; these trees at lr 1e-3, 0.243 against 0.163 with two layers, 0.210 with four. long, LRA's window: seq_len 2000
(lengths 501-1999), LRA's growth and labels (arrangements 0), a test set of 2000 like LRA's test split, LRA's budget
(5000 steps of 32 at 5e-4; LRA reads a pooled token of a bidirectional encoder, here a causal model answers at the
query).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import torch

from common.options import option, require
from experiments.tasks.base import IGNORE, QUICK_EVAL_SIZE, REPORT_BUCKETS, Batch, Profile, Task, distance_buckets
from experiments.tasks.registry import register_task

_QUICK_MODEL = {"dim": 64, "depth": 2, "heads": 4}
_QUICK_TRAIN = {"steps": 3000, "batch_size": 64, "lr": 1e-3, "eval_every": 300}  # quick's and standard's
_LARGER_MODEL = {"dim": 128, "depth": 2, "heads": 4}

DIGITS = 10
OPERATORS = ("[MIN", "[MAX", "[MED", "[SM")  # ids 10..13, LRA's order
CLOSE, PAD, QUERY = 14, 15, 16
_MAX_POOL = 8192  # candidate trees grown at once, bounding memory when few are accepted


def longest_expression(max_depth: int, max_args: int) -> int:
    """Tokens of the largest tree: every operator takes max_args arguments, nested max_depth deep."""
    length = 1  # a digit
    for _ in range(max_depth):
        length = 2 + max_args * length
    return length


@dataclass
class _Level:
    """The nodes at one nesting level of a set of trees, siblings adjacent and in argument order."""

    tree: torch.Tensor  # (nodes,) the tree (candidate, later batch row) each node belongs to
    token: torch.Tensor  # (nodes,) a digit 0-9 or an operator 10-13
    args: torch.Tensor  # (nodes,) arguments of an operator (its children on the next level), 0 for a digit

    def select(self, keep: torch.Tensor, row: torch.Tensor) -> _Level:
        """The nodes of the trees where `keep` (candidates,) holds, their trees renumbered by `row`."""
        mine = keep[self.tree]  # (nodes,)
        return _Level(row[self.tree[mine]], self.token[mine], self.args[mine])


@register_task("listops")
class ListOps(Task):
    """Evaluate a nested expression of MIN, MAX, MED (LRA's, truncated) and SM (sum mod 10) over digits.

    Worked example: the test set of
    `create_task("listops", seq_len=24, min_length=12, max_depth=2, max_args=5, operators=("MIN", "MAX", "MED",
    "SM"), test_size=1)`.

        input:    _ _ _ _ _ _ _ _ [MED [MIN 9 8 9 3 3 ] [SM 0 4 ] 3 1 ] =
        label:    3 (id 3) at position 23, the `=`: MED of 3 (MIN), 4 (SM), 3 and 1 is (3 + 3) // 2; every other
                  position IGNORE (LRA's labels: the same tree grown with digits 3 4 9 3 9, 1 8, 3 0)
        distance: 23 - 8 = 15, the expression's length (metadata: length 15, depth 2)
        task.label_text(batch, 0) == "23: = -> 3"
    """

    suite_position = 5

    @dataclass(frozen=True)
    class Options:
        seq_len: int = option(64, "tokens per example: left padding, the expression, the query `=`; expressions "
                                  "have at most seq_len - 1 tokens")
        min_length: int = option(16, "fewest tokens of an expression (LRA: 501, keeping 500 < length < 2000)")
        max_depth: int = option(2, "deepest operator nesting (LRA's max_depth = 10 is 9 here: its root is depth 1 "
                                   "and its depth-10 nodes are digits)")
        max_args: int = option(10, "most arguments of an operator, drawn uniformly from 2 (LRA: 10)")
        operator_probability: float = option(0.25, "chance that a non-root node within max_depth is an operator "
                                                    "rather than a digit (LRA's VALUE_P: 0.25)")
        operators: tuple[Literal["MIN", "MAX", "MED", "SM"], ...] = option(("MIN", "MAX", "MED", "SM"),
                                                                          "what an operator node draws from")
        arrangements: int = option(32, "random rearrangements of each tree's digits tried to balance the answers "
                                       "(see the module docstring); 0 keeps LRA's labels as the trees grow")
        min_answers: int = option(6, "fewest distinct answers the rearrangements must reach for a tree to be "
                                     "kept; 1 keeps every tree")
        test_size: int = option(QUICK_EVAL_SIZE, "examples in the test set")
        eval_lengths: tuple[int, ...] = option((), "also evaluate at these sequence lengths, which admit "
                                                   "longer expressions (length generalisation)")

        def __post_init__(self) -> None:
            require(self.max_depth >= 1, "max_depth", self.max_depth, "an integer >= 1")
            require(self.max_args >= 2, "max_args", self.max_args, "an integer >= 2")
            require(0 <= self.operator_probability <= 1, "operator_probability", self.operator_probability,
                    "a number from 0 to 1")
            nesting = self.max_depth if self.operator_probability > 0 else 1  # 0: only the root is an operator
            longest = longest_expression(nesting, self.max_args)
            require(4 <= self.min_length <= longest, "min_length", self.min_length,
                    f"an integer from 4 (an operator over two digits) to {longest}, the longest expression "
                    f"max_depth = {self.max_depth}, max_args = {self.max_args} and operator_probability = "
                    f"{self.operator_probability} allow")
            require(self.seq_len >= self.min_length + 1, "seq_len", self.seq_len,
                    f"an integer >= min_length + 1 = {self.min_length + 1}, room for the expression and the query")
            require(len(set(self.operators)) == len(self.operators) >= 1, "operators", self.operators,
                    "MIN, MAX, MED and SM, each at most once")
            require(self.arrangements >= 0, "arrangements", self.arrangements, "an integer >= 0")
            most = min(DIGITS, self.arrangements) if self.arrangements else 1
            require(1 <= self.min_answers <= most, "min_answers", self.min_answers,
                    f"an integer from 1 to {most} (arrangements = {self.arrangements} reach at most that many)")
            require(self.test_size >= 1, "test_size", self.test_size, "an integer >= 1")

    profiles = {
        "quick": Profile(options={"operators": ("MIN", "MAX", "MED")}, model=_QUICK_MODEL, train=_QUICK_TRAIN),
        # quick's trees, model and budget, at twice to four times its lengths
        "standard": Profile(options={"seq_len": 128, "min_length": 48, "operators": ("MIN", "MAX", "MED"),
                                     "test_size": 1024}, model=_QUICK_MODEL, train=_QUICK_TRAIN),
        "long": Profile(options={"seq_len": 2000, "min_length": 501, "max_depth": 9, "max_args": 10,
                                 "arrangements": 0, "min_answers": 1, "test_size": 2000},
                        model=_LARGER_MODEL,
                        train={"steps": 5000, "batch_size": 32, "lr": 5e-4, "eval_every": 500}),
    }

    def __init__(self, options: Options, profile: str) -> None:
        super().__init__(options, profile)
        self.vocabulary = [str(digit) for digit in range(DIGITS)] + list(OPERATORS) + ["]", "_", "="]
        self.num_classes = DIGITS

    @cached_property
    def chance_accuracy(self) -> float:
        """The frequency of the most common answer in the test set: the accuracy of always guessing it."""
        answers = self.test_set("cpu").targets[:, -1]  # (test_size,)
        return torch.bincount(answers, minlength=DIGITS).max().item() / self.test_size

    def text(self, batch: Batch, index: int) -> str:
        """The expression in LRA's notation and its value, e.g. '[MAX 2 9 [MIN 4 7 ] 0 ] -> 9'."""
        tokens = batch.inputs[index]
        expression = tokens[(tokens != PAD) & (tokens != QUERY)]
        return f"{' '.join(self.decode(expression))} -> {batch.targets[index, -1].item()}"

    def report_buckets(self) -> list[tuple[int, int]]:
        """Equal-width buckets over the lengths the window allows, min_length..seq_len-1 (distance = length)."""
        shift = self.options.min_length - 1
        return [(lo + shift, hi + shift) for lo, hi in distance_buckets(self.seq_len - 1 - shift, REPORT_BUCKETS)]

    def sample(self, batch_size: int, generator: torch.Generator, device: torch.device) -> Batch:
        levels = self._draw_trees(batch_size, generator, device)
        return self._serialise(levels, batch_size)

    def _rearrange(self, levels: list[_Level], count: int,
                   generator: torch.Generator) -> tuple[list[_Level], torch.Tensor]:
        """The `count` trees of `levels` with their digits rearranged to give an answer drawn uniformly from those
        `arrangements` random rearrangements reach, and (count,) whether they reach min_answers answers.

        The rearrangements are evaluated at once, as `arrangements` copies of the batch (copy k's trees numbered
        k * count + tree), so the cost is O(max_depth) tensor operations on arrangements times the nodes."""
        copies, device = self.options.arrangements, levels[0].tree.device
        token, tree = torch.cat([level.token for level in levels]), torch.cat([level.tree for level in levels])
        digit = (token < DIGITS).nonzero().flatten()  # (digits,) every digit node, across the levels
        owner = tree[digit].double()  # (digits,)
        slots = digit[torch.argsort(owner, stable=True)]  # (digits,) the digit nodes, grouped by tree
        jitter = torch.rand(copies, digit.shape[0], generator=generator, device=device, dtype=torch.double)
        tried = token.repeat(copies, 1)  # (copies, nodes)
        tried[:, slots] = token[digit[torch.argsort(owner + jitter, dim=1)]]  # a random permutation within each tree
        ends = torch.tensor([level.token.shape[0] for level in levels]).cumsum(0).tolist()
        offset = count * torch.arange(copies, device=device)[:, None]  # (copies, 1)
        copied = [_Level((level.tree + offset).flatten(), tried[:, end - level.token.shape[0] : end].flatten(),
                         level.args.repeat(copies)) for level, end in zip(levels, ends, strict=True)]
        value = _bottom_up(copied, _parents(copied))[1][0].view(copies, count)  # (copies, count) the answers
        hit = value.T[:, :, None] == torch.arange(DIGITS, device=device)  # (count, copies, 10)
        reached = hit.any(1)  # (count, 10)
        pick = torch.rand(count, DIGITS, generator=generator, device=device) * reached
        answer = pick.argmax(1)  # (count,) drawn uniformly among the answers reached
        rows = torch.arange(count, device=device)
        first_reaching = hit.long().argmax(1)[rows, answer]  # (count,) the first copy giving the answer
        chosen = tried.gather(0, first_reaching[tree][None])[0]  # (nodes,)
        return _split(levels, chosen), reached.sum(1) >= self.options.min_answers

    # ----------------------------------------------------------------------------------------------
    # Growing trees: candidates level by level, kept when their length falls in the window.

    def _draw_trees(self, batch_size: int, generator: torch.Generator, device: torch.device) -> list[_Level]:
        """The levels of `batch_size` trees in the length window (their answers balanced, where arrangements > 0),
        trees numbered 0..batch_size-1 in the order they were grown: candidates are drawn in rounds until enough
        are accepted."""
        rounds: list[list[_Level]] = []
        accepted, grown = 0, 0
        while accepted < batch_size:
            remaining = batch_size - accepted
            rate = (accepted + 1) / (grown + 4)  # acceptance so far (a guess of 1/4 at first) sizes the next pool
            pool = min(_MAX_POOL, math.ceil(1.2 * remaining / rate) + 8)
            levels, keep = self._grow(pool, generator, device)
            grown += pool
            if self.options.arrangements and keep.any():  # balance the answers of the trees in the window
                levels = [level.select(keep, keep.cumsum(0) - 1) for level in levels]
                levels, keep = self._rearrange([level for level in levels if level.tree.shape[0]], int(keep.sum()),
                                               generator)
            row = accepted + keep.cumsum(0) - 1  # (candidates,) the batch row of each kept candidate
            keep &= row < batch_size
            accepted += int(keep.sum())
            rounds.append([level.select(keep, row) for level in levels])
            if grown >= 64 * _MAX_POOL and accepted == 0:
                balanced = f" and digits reaching {self.options.min_answers} answers" * bool(self.options.arrangements)
                raise RuntimeError(f"Task 'listops' grew {grown} trees and none had {self.options.min_length} to "
                                   f"{self.seq_len - 1} tokens{balanced}; accepted: options whose window holds more "
                                   f"trees (a lower min_length or min_answers, or a larger operator_probability, "
                                   f"max_depth or max_args).")
        return _merge(rounds)

    def _grow(self, pool: int, generator: torch.Generator, device: torch.device) -> tuple[list[_Level], torch.Tensor]:
        """`pool` candidate trees grown as LRA's generator grows them, and which lie in the length window.

        A candidate is abandoned (and refused) once its tokens so far plus one per pending node pass
        seq_len - 1: it could only grow longer.
        """
        options, longest = self.options, self.seq_len - 1
        tree = torch.arange(pool, device=device)  # (nodes,) the roots
        committed = torch.zeros(pool, dtype=torch.long, device=device)  # (pool,) tokens of decided nodes
        alive = torch.ones(pool, dtype=torch.bool, device=device)  # (pool,)
        kinds = torch.tensor([DIGITS + OPERATORS.index(f"[{name}") for name in options.operators], device=device)
        levels = []
        for depth in range(1, options.max_depth + 2):
            nodes = tree.shape[0]
            if depth == 1:
                operator = torch.ones(nodes, dtype=torch.bool, device=device)  # the root: see the module docstring
            elif depth <= options.max_depth:
                chance = torch.rand(nodes, generator=generator, device=device)  # (nodes,)
                operator = chance < options.operator_probability
            else:
                operator = torch.zeros(nodes, dtype=torch.bool, device=device)
            digit = torch.randint(DIGITS, (nodes,), generator=generator, device=device)
            kind = kinds[torch.randint(len(kinds), (nodes,), generator=generator, device=device)]
            count = torch.randint(2, options.max_args + 1, (nodes,), generator=generator, device=device)
            token = torch.where(operator, kind, digit)  # (nodes,)
            args = torch.where(operator, count, 0)  # (nodes,)
            committed.scatter_add_(0, tree, 1 + operator.long())  # an operator brings its `]`
            pending = torch.zeros_like(committed).scatter_add_(0, tree, args)  # (pool,) children, >= 1 token each
            alive &= committed + pending <= longest
            args = torch.where(alive[tree], args, 0)  # an abandoned tree grows no further
            levels.append(_Level(tree, token, args))
            tree = tree.repeat_interleave(args)  # (children,) in parent order, then argument order
            if tree.shape[0] == 0:
                break
        return levels, alive & (committed >= options.min_length)

    # ----------------------------------------------------------------------------------------------
    # From levels to tokens, values and metadata.

    def _serialise(self, levels: list[_Level], batch_size: int) -> Batch:
        """The left-padded token rows of the trees in `levels`, their values at the query, and metadata."""
        device = levels[0].tree.device
        # parent[d] (nodes of level d + 1,): the index of each node's parent on level d; first[d]: the index
        # on level d + 1 of each node's first child.
        parent = _parents(levels)
        first = [level.args.cumsum(0) - level.args for level in levels]

        size, value = _bottom_up(levels, parent)

        # Top-down: each node's offset from the expression's first token, preorder.
        start = [torch.zeros_like(levels[0].tree)]
        for depth in range(1, len(levels)):
            before = size[depth].cumsum(0) - size[depth]  # (nodes,) tokens of all earlier nodes on this level
            among_siblings = before - before[first[depth - 1][parent[depth - 1]]]
            start.append(start[depth - 1][parent[depth - 1]] + 1 + among_siblings)

        length = size[0]  # (batch,) the roots are rows 0..batch_size-1 in order (see _draw_trees)
        seq_len = self.seq_len
        inputs = torch.full((batch_size, seq_len), PAD, dtype=torch.long, device=device)  # (batch, seq)
        flat = inputs.view(-1)
        rows = torch.arange(batch_size, device=device)
        offset = rows * seq_len + seq_len - 1 - length  # (batch,) flat index of each row's first expression token
        depth_of_tree = torch.zeros(batch_size, dtype=torch.long, device=device)
        for depth, level in enumerate(levels):
            position = offset[level.tree] + start[depth]  # (nodes,) flat index of each node's first token
            flat[position] = level.token
            operator = level.token >= DIGITS
            flat[position[operator] + size[depth][operator] - 1] = CLOSE
            depth_of_tree.scatter_reduce_(0, level.tree, operator.long() * (depth + 1), reduce="amax")
        inputs[:, -1] = QUERY
        targets = torch.full_like(inputs, IGNORE)  # (batch, seq)
        targets[:, -1] = value[0]
        distance = torch.full_like(inputs, -1)  # (batch, seq)
        distance[:, -1] = length
        return Batch(inputs, targets, distance, {"length": length, "depth": depth_of_tree})


def _merge(rounds: list[list[_Level]]) -> list[_Level]:
    """The levels of several rounds of trees (each numbered into the batch already) merged level by level."""
    depth = max(len(levels) for levels in rounds)
    merged = [_Level(*(torch.cat([getattr(levels[index], name) for levels in rounds if index < len(levels)])
                       for name in ("tree", "token", "args")))
              for index in range(depth)]
    return [level for level in merged if level.tree.shape[0]]  # levels only refused trees reached go


def _split(levels: list[_Level], token: torch.Tensor) -> list[_Level]:
    """`levels` with their tokens replaced by `token` (nodes,), the tokens of every level concatenated."""
    ends = torch.tensor([level.token.shape[0] for level in levels]).cumsum(0).tolist()
    return [_Level(level.tree, token[end - level.token.shape[0] : end], level.args)
            for level, end in zip(levels, ends, strict=True)]


def _parents(levels: list[_Level]) -> list[torch.Tensor]:
    """parent[d] (nodes of level d + 1,): the index on level d of each node's parent."""
    return [torch.arange(level.tree.shape[0], device=level.tree.device).repeat_interleave(level.args)
            for level in levels]


def _bottom_up(levels: list[_Level], parent: list[torch.Tensor]) -> tuple[list, list]:
    """(size, value): per level, each node's token count and value (nodes,); value[0] holds the trees' answers.
    `parent` is `_parents(levels)`."""
    size, value = [None] * len(levels), [None] * len(levels)
    for depth in reversed(range(len(levels))):
        level = levels[depth]
        operator = level.token >= DIGITS  # (nodes,)
        size[depth] = 1 + operator.long()
        value[depth] = level.token
        if depth + 1 < len(levels):
            size[depth].scatter_add_(0, parent[depth], size[depth + 1])
            value[depth] = _evaluate(level, parent[depth], value[depth + 1])
    return size, value


def _evaluate(level: _Level, parent: torch.Tensor, arguments: torch.Tensor) -> torch.Tensor:
    """(nodes,) the value of each node of `level`, given its children's values `arguments` (children,):
    all four operators are read off how often each digit occurs among an operator's arguments."""
    operator = level.args > 0  # (nodes,) the nodes with children
    rank = operator.cumsum(0) - 1  # (nodes,) each operator's index among the level's operators
    operators = int(rank[-1]) + 1
    counts = torch.zeros(operators * DIGITS, dtype=torch.long, device=arguments.device)
    counts.scatter_add_(0, rank[parent] * DIGITS + arguments, torch.ones_like(arguments))
    counts = counts.view(operators, DIGITS)  # (operators, 10)
    below = counts.cumsum(1)  # (operators, 10): arguments <= each digit

    def smallest(order: torch.Tensor) -> torch.Tensor:  # (operators,) the argument at 0-based `order`, ascending
        return (below <= order[:, None]).sum(1)

    count = level.args[operator]  # (operators,)
    # int(np.median): the mean of the middle two arguments (one argument for an odd count), truncated.
    median = (smallest((count - 1) // 2) + smallest(count // 2)) // 2
    total = (counts * torch.arange(DIGITS, device=counts.device)).sum(1)  # (operators,)
    by_operator = torch.stack([smallest(torch.zeros_like(count)), smallest(count - 1), median, total % 10])
    value = level.token.clone()  # (nodes,) digits are their own value
    value[operator] = by_operator.gather(0, (level.token[operator] - DIGITS)[None])[0]
    return value
