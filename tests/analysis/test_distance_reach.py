"""The reach drawn on the distance curves: a convolution's receptive field, added up over its blocks."""

import json

from analysis.sections.distance import _reach


def test_a_dilated_convolution_reaches_the_sum_of_its_blocks_spans():
    # kernel 4, dilations 1, 2, 4: (4 - 1) * (1 + 2 + 4) = 21 positions back after three blocks
    options = json.dumps({"kernel_size": 4, "dilation_growth": 2})
    assert _reach("conv", options, 0, 0, 3, 100, True, 0, 16) == 21
    assert _reach("conv", json.dumps({"kernel_size": 4}), 0, 0, 2, 100, True, 0, 16) == 6
    # centred when not causal: floor(span / 2) of each block's span lies in the past
    assert _reach("conv", json.dumps({"kernel_size": 4}), 0, 0, 2, 100, False, 0, 16) == 2


def test_a_reach_never_exceeds_the_sequence_and_a_recurrence_has_none():
    assert _reach("conv", json.dumps({"kernel_size": 9, "dilation_growth": 2}), 0, 0, 4, 50, True, 0, 16) == 49
    assert _reach("lstm", json.dumps({}), 0, 0, 2, 100, True, 0, 16) is None
    assert _reach("mamba", json.dumps({}), 0, 0, 2, 100, True, 0, 16) is None
