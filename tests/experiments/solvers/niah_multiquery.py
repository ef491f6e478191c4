"""RULER's niah_multiquery: the needle solver of niah_multikey, at sizes of its own."""

from solvers import niah_multikey

SMALL = {"seq_len": 30, "num_needle_keys": 4, "num_queries": 3, "num_keys": 5, "num_values": 5,
         "num_distractors": 3, "test_size": 64}
WORKED = {"seq_len": 16, "num_needle_keys": 2, "num_queries": 2, "num_distractors": 4, "test_size": 1}
solve = niah_multikey.solve
