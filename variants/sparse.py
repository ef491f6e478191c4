"""Block-sparse attention patterns: strided and fixed (Sparse Transformer), Longformer, BigBird.

    softmax(q k^T / sqrt(d) + M) v,   M_ij = 0 where the pattern allows (i, j), else -inf

- `strided` (Child et al. 2019, "Generating Long Sequences with Sparse Transformers"): j is attended when
  |i - j| < stride or i - j is a multiple of stride. O(n (stride + n / stride)) pairs: O(n sqrt n) for
  stride ~ sqrt n.
- `fixed` (Child et al. 2019): j in i's stride group (floor(j / stride) == floor(i / stride)) or j among the
  last `summary` positions of any group (j mod stride >= stride - summary). O(n (stride + n summary / stride)).
- `longformer` (Beltagy et al. 2020): a window of w = `window` keys as the paper counts them, "1/2 w
  tokens on each side": |i - j| <= window // 2 (the query itself too), plus the first `num_global`
  positions attend to and are attended by every position. O(n (window + num_global)).
- `bigbird` (Zaheer et al. 2020), at block level with blocks of `block_size`: query block I sees key
  block J when |I - J| <= 1, I or J is among the first `num_global_blocks`, or J is one of the
  `num_random_blocks` blocks drawn for I among the others (the past ones when causal; all of them where
  fewer exist). As in the paper the draw differs per head, and per layer: each module draws from the
  run's seed (or `seed`, when given) combined with its layer index, each head from that and its index.
  O(n block_size (3 + globals + random)). On a sequence of at most num_global_blocks + num_random_blocks + 2
  blocks (80 positions at the defaults) those blocks are every key block: it computes dense attention
  (`variants.coverage` gives the share of the pairs a layout attends at a length).

With causal=True every pattern is intersected with j <= i (a window then keeps its half before the
query). All run on the blocked kernel, which gathers only the allowed key blocks (CPU), and on flex,
whose BlockMask skips the tiles of 128 the layout never touches (CUDA); `sdpa` applies the same layout
as a dense mask.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from common.options import fill_choice_defaults, option, require
from variants import layouts
from variants.base import LAYOUT_KERNELS_FIRST, Attention, Choice, NormaliserOptions, Range
from variants.registry import register

# The options each pattern reads, with their defaults; an option given for a pattern that ignores it is an error.
PATTERN_DEFAULTS = {
    "strided": {"stride": 16},
    "fixed": {"stride": 16, "summary": 4},
    "longformer": {"window": 64, "num_global": 1},
    "bigbird": {"block_size": 16, "num_global_blocks": 1, "num_random_blocks": 2, "seed": None},
}


@register("sparse")
class Sparse(Attention):
    """Block-sparse patterns: strided, fixed, longformer or bigbird, on a block-sparse kernel."""

    complexity = None  # the pattern decides: O(n sqrt(n) d) strided, O(n w d) longformer and bigbird

    kernel_preference = LAYOUT_KERNELS_FIRST
    order_aware = True  # every pattern's blocks are ranges of positions
    # Each pattern's own options, searched only when it is chosen. Strides start at 4 so that `fixed`'s
    # summary (1 to 4) never exceeds its stride.
    search_space = {
        "pattern": Choice(("strided", "fixed", "longformer", "bigbird")),
        "stride": Range(4, "seq_len", log=True, when=("pattern", ("strided", "fixed"))),
        "summary": Range(1, 4, when=("pattern", ("fixed",))),
        "window": Range(4, "seq_len*2", log=True, when=("pattern", ("longformer",))),
        "num_global": Range(0, 4, when=("pattern", ("longformer",))),
        "block_size": Range(2, "seq_len", log=True, when=("pattern", ("bigbird",))),
        "num_global_blocks": Range(0, 2, when=("pattern", ("bigbird",))),
        "num_random_blocks": Range(0, 3, when=("pattern", ("bigbird",))),
    }

    @dataclass(frozen=True)
    class Options(NormaliserOptions):
        pattern: Literal["strided", "fixed", "longformer", "bigbird"] = option(
            "longformer", "which sparsity pattern", tag=""
        )
        stride: int | None = option(None, "strided, fixed: period of the pattern (default 16)", tag="s")
        summary: int | None = option(None, "fixed: summary positions at the end of each group (default 4)", tag="c")
        window: int | None = option(None, "longformer: the paper's w, window // 2 keys on each side, "
                                          "|i - j| <= window // 2 (default 64)", tag="w")
        num_global: int | None = option(None, "longformer: leading positions that are global (default 1)", tag="g")
        block_size: int | None = option(None, "bigbird: block size (default 16); dense attention on sequences of "
                                              "at most num_global_blocks + num_random_blocks + 2 blocks", tag="b")
        num_global_blocks: int | None = option(None, "bigbird: leading global blocks (default 1)", tag="g")
        num_random_blocks: int | None = option(None, "bigbird: random key blocks per query block (default 2)",
                                               tag="r")
        seed: int | None = option(None, "bigbird: seed of the random blocks, in place of the run's seed; "
                                        "combined with the layer and head (default: the run's seed)", tag="seed")

        def __post_init__(self) -> None:
            fill_choice_defaults(self, "pattern", PATTERN_DEFAULTS)
            for name in ("stride", "window", "block_size"):
                value = getattr(self, name)
                require(value is None or value >= 1, name, value, "an integer >= 1")
            for name in ("num_global", "num_global_blocks", "num_random_blocks"):
                value = getattr(self, name)
                require(value is None or value >= 0, name, value, "an integer >= 0")
            if self.summary is not None:
                require(1 <= self.summary <= self.stride, "summary", self.summary,
                        f"an integer from 1 to stride = {self.stride}")

    def __init__(self, options: Options, **kwargs) -> None:
        super().__init__(options, **kwargs)
        if options.pattern == "strided":
            self.block_layout = layouts.Strided(options.stride)
        elif options.pattern == "fixed":
            self.block_layout = layouts.Fixed(options.stride, options.summary)
        elif options.pattern == "longformer":
            self.block_layout = layouts.Longformer(options.window, options.num_global)
        else:
            base = self.run_seed if options.seed is None else options.seed
            self.block_layout = layouts.BigBird(options.block_size, options.num_global_blocks,
                                                options.num_random_blocks, layouts.derived_seed(base, self.layer_index),
                                                heads=self.num_heads)
