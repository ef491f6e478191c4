"""Noisy in-context recall: in-context recall's answers, noise pairs skipped."""

from solvers.in_context_recall import solve

SMALL = {"seq_len": 24, "vocab_size": 12, "noise_vocab_size": 3, "frac_noise": 0.5, "test_size": 64}
WORKED = {"seq_len": 16, "frac_noise": 0.5, "test_size": 1}

__all__ = ["SMALL", "WORKED", "solve"]
