"""A model whose training turns NaN at one forward call: what the divergence tests of sweeps and benchmarks use."""

from experiments.run.model import Transformer


def poison_forward(monkeypatch, at_call: int = 3) -> None:
    """Every Transformer's forward call number `at_call` (counted over all models from now on) returns NaN
    logits; the others are untouched."""
    calls = {"count": 0}
    forward = Transformer.forward

    def poisoned(self, tokens, return_weights=False):
        calls["count"] += 1
        logits = forward(self, tokens, return_weights)
        return logits * float("nan") if calls["count"] == at_call else logits

    monkeypatch.setattr(Transformer, "forward", poisoned)
