"""Published claims beside attnlab's own measurement (`make reproduce`, docs/reproductions.md): one file each,
registered by `@register_claim`; `analysis.claims.base` says what a claim states and how its verdict is read,
`analysis.claims.reproductions` reads the verdicts from the records and writes the page; the runs are
`experiments.claims`'.

    >>> from analysis import claims
    >>> claims.list_claims()[:2]
"""

from analysis.claims.base import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, Claim, Results, Runs, Verdict
from analysis.claims.registry import CLAIMS, claim_named, list_claims, register_claim
from common.registry import import_modules

import_modules(__name__, __path__)

__all__ = ["CLAIMS", "INCONCLUSIVE", "NOT_REPRODUCED", "REPRODUCED", "Claim", "Results", "Runs", "Verdict",
           "claim_named", "list_claims", "register_claim"]
