"""The claims' registry: `@register_claim("name")` adds one, `claim_named` finds it, `list_claims` lists them."""

from __future__ import annotations

import math

from analysis.claims.base import Claim
from common.registry import Registry

_STATED = ("source", "claimed", "read", "their_setting", "our_setting", "rule")


def _check_claim(name: str, cls: type) -> None:
    if not issubclass(cls, Claim):
        raise ValueError(f"Claim {name!r} is not a Claim subclass.")
    missing = [field for field in _STATED if not getattr(cls, field, "")]
    if missing:
        raise ValueError(f"Claim {name!r} does not state {', '.join(missing)}; every claim states "
                         f"{', '.join(_STATED)}.")
    if cls.runs and (math.isnan(cls.effect) or not cls.effect_why):
        raise ValueError(f"Claim {name!r} does not state the effect its paper reports; every claim with runs states "
                         "effect (in accuracy at its setting) and effect_why.")
    if cls.runs and not cls.budget_why:
        raise ValueError(f"Claim {name!r} does not say why its runs train the budget they do; every claim with runs "
                         "states budget_why beside the paper's budget (its their_setting).")
    if cls.verdict is Claim.verdict:
        raise ValueError(f"Claim {name!r} has no verdict rule; accepted: a verdict(results) method.")
    parts = [runs.part for runs in cls.runs]
    if len(set(parts)) < len(parts):
        raise ValueError(f"Claim {name!r} names a part of its runs twice; accepted: each part once.")


CLAIMS = Registry("claim", _check_claim)
register_claim = CLAIMS.register


def claim_named(name: str) -> Claim:
    """The claim registered as `name`, or a one-sentence error naming the closest and every claim."""
    return CLAIMS.get(name)()


def list_claims(pattern: str = "*") -> list[str]:
    return CLAIMS.names(pattern)
