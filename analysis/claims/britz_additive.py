"""Britz et al. 2017: additive attention beats unscaled multiplicative attention as the dimension grows, and scaling
the dot product closes the gap."""

from __future__ import annotations

from analysis.claims.base import Claim, Results, Runs, Verdict, checks_text, decided, estimate, paired, shown, sign
from analysis.claims.registry import register_claim

TASK = "mqar"
SMALL, LARGE = "head16", "head64"
VARIANTS = ("additive", "unscaled", "dense")


@register_claim("britz_additive")
class BritzAdditive(Claim):
    """Additive above unscaled dot product at a large d_k; scaling closes the gap (Britz et al. 2017)."""

    source = ("Britz, Goldie, Luong and Le 2017, \"Massive Exploration of Neural Machine Translation Architectures\", "
              "Table 6 and section 4.5 (scaling: Vaswani et al. 2017, section 3.2.1)")
    claimed = ("additive attention slightly but consistently above multiplicative (unscaled dot product) attention "
               "in BLEU, the gap growing with the attention's dimension; Vaswani et al. attribute it to the unscaled "
               "dot products' growth and close it by scaling")
    read = "Table 6 (BLEU, newstest2013), and the text of both papers for the trend with dimension"
    their_setting = "German-English translation, LSTM encoder-decoder, attention dimensions 128 to 1,024"
    our_setting = (f"the quick profile's MQAR, where recall needs sharp attention; 4 heads of dimension 16 (width 64, "
                   f"part {SMALL}) and of dimension 64 (model.head_dim=64, part {LARGE}); accuracy, not BLEU")
    rule = ("reproduced when at head dimension 64 additive lies above unscaled by a paired difference whose interval "
            "lies above 0, and dense (scaled) does not lie below additive (the interval of dense - additive reaches 0 "
            "or above); not reproduced when additive lies at or below unscaled throughout, or dense below additive "
            "throughout; inconclusive otherwise. The head dimension 16 part shows the trend beside it")
    runs = (Runs(SMALL, VARIANTS, (TASK,)), Runs(LARGE, VARIANTS, (TASK,), sets=("model.head_dim=64",)))

    def verdict(self, results: Results) -> Verdict:
        size = results.test_size(LARGE, TASK)
        scores = {(part, variant): results.test(part, variant, TASK) for part in (SMALL, LARGE) for variant in VARIANTS}
        above = paired(scores[LARGE, "additive"], scores[LARGE, "unscaled"], size)
        closed = paired(scores[LARGE, "dense"], scores[LARGE, "additive"], size)
        checks = {"additive above unscaled at head dimension 64": None if sign(above) in (None, 0) else sign(above) > 0,
                  "scaling closes the gap": None if closed is None else sign(closed) >= 0}
        gaps = {part: paired(scores[part, "additive"], scores[part, "unscaled"], results.test_size(part, TASK))
                for part in (SMALL, LARGE)}
        ours = "; ".join([*(f"{part} {variant} {estimate(scores[part, variant])}" for part in (SMALL, LARGE)
                            for variant in VARIANTS),
                          *(f"{part} additive - unscaled {shown(gap)}" for part, gap in gaps.items()),
                          f"{LARGE} dense - additive {shown(closed)}"])
        return Verdict(decided(checks), ours, checks_text(checks))
