"""Each published claim's verdict rule (`analysis.claims`) on figures given by hand, one case per outcome, before
any run: "reproduced", "not reproduced" and "inconclusive" read from intervals as the rule is written."""


from claim_fakes import Fake, seeds

from analysis import claims
from analysis.claims import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Results,
    lra_listops_order,
    reproductions,
    zoology_mqar,
)


def test_mamba_selective_copy_reads_each_outcome_from_paired_intervals():
    claim, task = claims.claim_named("mamba_selective_copy"), "selective_copy"

    def verdict(mamba, conv, lstm):
        return claim.verdict(Fake({(task, "mamba", task): seeds(*mamba), (task, "conv", task): seeds(*conv),
                                   (task, "lstm", task): seeds(*lstm)})).outcome

    assert verdict((0.97, 0.96, 0.98), (0.40, 0.42, 0.38), (0.60, 0.58, 0.61)) == REPRODUCED
    assert verdict((0.40, 0.41, 0.39), (0.97, 0.96, 0.98), (0.30, 0.31, 0.29)) == NOT_REPRODUCED
    assert verdict((0.50, 0.90, 0.20), (0.50, 0.40, 0.60), (0.30, 0.31, 0.29)) == INCONCLUSIVE  # seeds disagree
    assert verdict((0.97, 0.96, 0.98), (), (0.30, 0.31, 0.29)) == INCONCLUSIVE  # conv not measured


def test_zoology_reads_attention_at_every_size_and_conv_falling_with_pairs_and_recovering_with_width():
    claim, part, task, conv = claims.claim_named("zoology_mqar"), "mqar", "mqar", zoology_mqar.CONV

    def verdict(dense_half, conv_pairs, conv_half, capacity_seed=2):
        # Conv's own size read on the seed its capacity points trained with: 0.8 on seed 2, 0.5 on the others.
        figures = {(part, "dense", task): seeds(1.0, 0.99, 1.0),
                   (part, conv, task): {seed: 0.8 if seed == 2 else 0.5 for seed in (1, 2, 3)}}
        points = {(part, "dense", task, "width", 32): {capacity_seed: dense_half},
                  (part, "dense", task, "num_pairs", 16): {capacity_seed: 0.99},
                  (part, conv, task, "width", 32): {capacity_seed: conv_half},
                  (part, conv, task, "num_pairs", 16): {capacity_seed: conv_pairs}}
        return claim.verdict(Fake(figures, points)).outcome

    assert verdict(0.98, conv_pairs=0.5, conv_half=0.6) == REPRODUCED
    assert verdict(0.98, conv_pairs=0.5, conv_half=0.6, capacity_seed=3) == NOT_REPRODUCED  # seed 3's own: 0.5
    assert verdict(0.60, conv_pairs=0.5, conv_half=0.6) == NOT_REPRODUCED  # attention fails at half width
    assert verdict(0.98, conv_pairs=0.79, conv_half=0.6) == NOT_REPRODUCED  # conv holds its pairs
    assert claim.verdict(Fake({})).outcome == INCONCLUSIVE


def test_zoology_reads_conv_at_the_floor_as_inconclusive_not_as_a_fall_that_did_not_happen():
    claim, part, task, conv = claims.claim_named("zoology_mqar"), "mqar", "mqar", zoology_mqar.CONV
    figures = {(part, "dense", task): seeds(1.0, 0.99, 1.0), (part, conv, task): seeds(0.061, 0.06, 0.062)}
    points = {(part, "dense", task, "width", 32): {1: 0.98}, (part, "dense", task, "num_pairs", 16): {1: 0.99},
              (part, conv, task, "width", 32): {1: 0.06}, (part, conv, task, "num_pairs", 16): {1: 0.067}}
    verdict = claim.verdict(Fake(figures, points, chance=0.125))
    assert verdict.outcome == INCONCLUSIVE
    assert "conv falls with twice the pairs: inconclusive (floor)" in verdict.why
    assert "conv recovers with width: inconclusive (floor)" in verdict.why
    assert "seeds would detect 0.24" in verdict.why  # an inconclusive verdict names its power
    rule = reproductions.rules([claim]).iloc[0]["rule"]  # the tolerance, stated with the rule
    assert "at most 0.01 above chance (or below it) reads inconclusive (floor)" in rule


def test_britz_decides_that_scaling_closes_the_gap_by_non_inferiority_and_reads_the_ceiling_as_inconclusive():
    claim, task = claims.claim_named("britz_additive"), "mqar"

    def verdict(dense, additive=(0.80, 0.81, 0.80)):
        figures = {("head64", "additive", task): seeds(*additive),
                    ("head64", "unscaled", task): seeds(0.5, 0.52, 0.51), ("head64", "dense", task): seeds(*dense)}
        return claim.verdict(Fake(figures, size=100_000.0))

    assert verdict((0.80, 0.80, 0.81)).outcome == REPRODUCED
    wide = verdict((0.60, 0.95, 0.85))  # dense - additive not significant, its interval far wider than the margin
    assert wide.outcome == INCONCLUSIVE and "scaling closes the gap: undecided" in wide.why
    assert verdict((0.70, 0.71, 0.70)).outcome == NOT_REPRODUCED  # dense shown below additive by more than 0.02
    ceiling = verdict((0.995, 1.0, 0.999), additive=(1.0, 0.998, 0.997))
    assert "scaling closes the gap: inconclusive (ceiling)" in ceiling.why


NOPE_ROWS = {"NoPE": ("", "dense"), "absolute": ("_absolute", "dense"), "alibi": ("", "relative:kind=alibi"),
             "rope": ("", "relative:kind=rope"), "t5": ("", "relative:kind=t5")}


def nope_figures(nope, others):
    """Fake figures of the NoPE claim: NoPE's seeds and every other scheme's, the same on both tasks and lengths."""
    return {(task + suffix, variant, task): seeds(*(nope if scheme == "NoPE" else others))
            for task in ("induction", "mqar") for scheme, (suffix, variant) in NOPE_ROWS.items()}


def test_nope_at_least_as_good_as_every_position_scheme_is_a_non_inferiority_at_the_stated_margin():
    claim = claims.claim_named("kazemnejad_nope")
    assert "margin of 0.05" in claim.rule and "non-inferiority" in claim.rule

    def verdict(nope, others):
        return claim.verdict(Fake(nope_figures(nope, others), chance=0.1, size=100_000.0))

    assert verdict((0.60, 0.61, 0.60), (0.60, 0.60, 0.61)).outcome == REPRODUCED  # level, shown within 0.05
    assert verdict((0.80, 0.81, 0.80), (0.60, 0.60, 0.61)).outcome == REPRODUCED  # ahead: at least as good
    assert verdict((0.57, 0.575, 0.57), (0.60, 0.60, 0.61)).outcome == REPRODUCED  # 0.032 behind: inside 0.05
    assert verdict((0.53, 0.535, 0.53), (0.60, 0.60, 0.61)).outcome == NOT_REPRODUCED  # 0.072 behind: beyond it
    wide = verdict((0.30, 0.90, 0.60), (0.60, 0.60, 0.61))  # not significantly behind, which is not "at least as"
    assert wide.outcome == INCONCLUSIVE and "induction 2x NoPE at least as alibi: undecided" in wide.why
    assert "seeds would detect 0.05" in wide.why
    floor = verdict((0.10, 0.105, 0.10), (0.10, 0.10, 0.105))
    assert floor.outcome == INCONCLUSIVE and "mqar 4x NoPE at least as t5: inconclusive (floor)" in floor.why


def test_listops_reads_no_ordering_where_dense_is_not_clearly_above_chance():
    claim, task = claims.claim_named("lra_listops_order"), "listops"
    above = {(task, name, task): seeds(0.45, 0.47, 0.46) for name in lra_listops_order.OTHERS}
    learned = {**above, (task, "local", task): seeds(0.20, 0.21, 0.19)}
    assert claim.verdict(Fake(learned, chance=0.13)).outcome == REPRODUCED
    near_chance = {key: seeds(0.20, 0.21, 0.19) for key in learned}
    verdict = claim.verdict(Fake(near_chance, chance=0.13))
    assert verdict.outcome == INCONCLUSIVE and "dense clearly above chance: undecided" in verdict.why
    reversed_order = {**above, (task, "local", task): seeds(0.60, 0.61, 0.62)}
    assert claim.verdict(Fake(reversed_order, chance=0.13)).outcome == NOT_REPRODUCED


class FakeRuns(Fake):
    """Results whose runs' results are given by hand, {(part, variant, task): {seed: result}}, each figure read from
    them as a claim's reader reads a run's result."""

    def __init__(self, results, chance=0.125):
        super().__init__({}, chance=chance)
        self.results = results

    def figure(self, part, variant, task, read):
        values = {seed: read(result) for seed, result in self.results.get((part, variant, task), {}).items()}
        return {seed: value for seed, value in values.items() if value is not None}


def test_velickovic_reads_the_fall_of_accuracy_and_largest_weight_from_16_to_1024_items_per_fixed_temperature():
    from analysis.claims import velickovic_softmax as claim_module

    claim, task = claims.claim_named("velickovic_softmax"), "max_retrieval"
    counts = (claim_module.TRAINED, *claim_module.ITEMS)

    def runs(accuracy, weight):  # each a function of the item count; seeds differ a little
        return {seed: {"accuracy_by_length": [{"length": items + 1, "accuracy": accuracy(items) + 0.01 * seed,
                                               "scored_max_weight": weight(items) - 0.01 * seed} for items in counts]}
                for seed in (0, 1, 2)}

    dispersing = runs(lambda items: 0.95 if items == 16 else 0.5, lambda items: 16 / (16 + items))
    kept = runs(lambda items: 0.95, lambda items: 0.9)
    every = {(task, variant, task): dispersing for variant in (*claim_module.FIXED, claim_module.SCALED)}
    verdict = claim.verdict(FakeRuns(every))
    assert verdict.outcome == REPRODUCED, verdict.why
    assert "dense largest weight falls: yes" in verdict.why and "ssmax" not in verdict.why  # ssmax: shown only
    assert "fall of the largest weight, ssmax - dense +0.000" in verdict.ours
    rising = runs(lambda items: 0.95, lambda items: 0.5 if items == 16 else 0.9)
    verdict = claim.verdict(FakeRuns({**every, (task, "additive", task): rising}))
    assert verdict.outcome == NOT_REPRODUCED and "additive largest weight falls: no" in verdict.why
    verdict = claim.verdict(FakeRuns({**every, (task, "unscaled", task): kept}))  # holds: the fall not shown
    assert verdict.outcome == INCONCLUSIVE and "unscaled accuracy falls: undecided" in verdict.why
    at_chance = runs(lambda items: 0.13, lambda items: 16 / (16 + items))
    verdict = claim.verdict(FakeRuns({**every, (task, "dense", task): at_chance}))
    assert verdict.outcome == INCONCLUSIVE and "dense largest weight falls: undecided" in verdict.why
    assert claim.verdict(FakeRuns({})).outcome == INCONCLUSIVE  # not measured


def test_the_scaling_claim_measures_the_variance_of_q_dot_k_and_fails_when_it_is_not_d(monkeypatch):
    claim = claims.claim_named("vaswani_scaling")
    verdict = claim.verdict(Results({}))
    assert verdict.outcome == REPRODUCED and "d_k 1024: var(q.k) 10" in verdict.ours
    from analysis.claims import vaswani_scaling

    real = vaswani_scaling.init_table

    def doubled(*args, **kwargs):  # a formula whose dot products had twice the variance
        table = real(*args, **kwargs)
        return table.assign(qk_variance=2 * table["qk_variance"])

    monkeypatch.setattr(vaswani_scaling, "init_table", doubled)
    assert claim.verdict(Results({})).outcome == NOT_REPRODUCED


class Validated(Fake):
    """A Fake whose validation accuracies (`figure`) are given apart from its test accuracies."""

    def __init__(self, figures, validation):
        super().__init__(figures)
        self.validation = validation

    def figure(self, part, variant, task, read):
        return self.validation.get((part, variant, task), {})


OTHER_DECAY = "weight_decay_0"  # a second grid point of MAD's weight decay, one part of its own (`mad_results`)


def mad_results(dense=None, local=None, fuzzy=0.6):
    """The mad claim's runs: each variant best on validation at its weight decay (0.1), whose test figures are given (by
    task; a task not given scores 0.99 for dense), and worse on validation at a second weight decay (0, the part
    OTHER_DECAY, which the tests add to the claim's parts), whose test figures would reproduce whatever the others say
    (1.0 everywhere): a claim that read them would have chosen on the test set."""
    from analysis.claims import mad

    own = {"dense": {**{task: 0.99 for task in mad.TASKS["dense"]}, "fuzzy_in_context_recall": fuzzy,
                     "compression": 0.5, **(dense or {})},
           "local": {task: 0.7 for task in mad.TASKS["local"]} | (local or {})}
    figures, validation = {}, {}
    for variant, tasks_of in mad.TASKS.items():
        chosen, other = mad.PARTS[variant]
        for task in tasks_of:
            figures[chosen, variant, task] = seeds(own[variant][task] - 0.005, own[variant][task] + 0.005)
            figures[other, variant, task] = seeds(1.0, 1.0)
            validation[chosen, variant, task], validation[other, variant, task] = seeds(0.9, 0.9), seeds(0.1, 0.1)
    return Validated(figures, validation)


def test_mad_chooses_each_grid_point_on_validation_and_reads_its_test_accuracy(monkeypatch):
    from analysis.claims import mad

    for variant, (part,) in mad.PARTS.items():  # a second weight decay, one part of its own, as MAD's grid has
        monkeypatch.setitem(mad.PARTS, variant, (part, f"{variant}_{OTHER_DECAY}"))
    claim = claims.claim_named("mad")
    verdict = claim.verdict(mad_results())
    # Weight decay 0.1 is best on validation; chosen on the test set, 0 (1.0 everywhere) would solve fuzzy recall.
    assert verdict.outcome == REPRODUCED
    assert "in_context_recall 0.990 ± 0.064 (n=2) at dense_weight_decay_0.1," in verdict.ours
    assert "dense: MAD score 0.814 over 5 of 5 tasks" in verdict.ours  # (0.99 x 3 + 0.6 + 0.5) / 5
    assert claim.verdict(mad_results(fuzzy=0.99)).outcome == NOT_REPRODUCED  # fuzzy recall solved at its point
    assert claim.verdict(mad_results(local={"in_context_recall": 0.99})).outcome == INCONCLUSIVE  # a tie
    assert claim.verdict(mad_results(local={"in_context_recall": 0.995})).outcome == NOT_REPRODUCED  # local above
    assert claim.verdict(mad_results(dense={"selective_copy": 0.5})).outcome == NOT_REPRODUCED
    assert claim.verdict(Fake({})).outcome == INCONCLUSIVE
