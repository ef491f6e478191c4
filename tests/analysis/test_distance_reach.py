"""The reach drawn on the distance curves: a convolution's receptive field, added up over its blocks, as the
run's model built its mixers."""

import variants
from analysis.report.sections.distance import _reach


def reach(variant, depth, seq_len, causal, **options):
    """_reach of an entry as `shared.layout_variants` gives it: each block's module as a model of width 16 builds it."""
    modules = [variants.create_baseline(variant, dim=16, causal=causal, layer=layer, **options)
               for layer in range(depth)]
    return _reach({"variant": variant, "modules": modules, "seq_len": seq_len, "causal": causal, "heads": 0})


def test_a_dilated_convolution_reaches_the_sum_of_its_blocks_spans():
    # kernel 4, dilations 1, 2, 4: (4 - 1) * (1 + 2 + 4) = 21 positions back after three blocks
    assert reach("conv", 3, 100, True, kernel_size=4, dilation_growth=2) == 21
    assert reach("conv", 2, 100, True, kernel_size=4) == 6
    # centred when not causal: floor(span / 2) of each block's span lies in the past
    assert reach("conv", 2, 100, False, kernel_size=4) == 2


def test_a_reach_never_exceeds_the_sequence_and_a_recurrence_has_none():
    assert reach("conv", 4, 50, True, kernel_size=9, dilation_growth=2) == 49
    assert reach("lstm", 2, 100, True) is None
    assert reach("mamba", 2, 100, True) is None
