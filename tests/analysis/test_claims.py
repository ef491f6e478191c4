"""Published claims (`analysis.claims`, `make reproduce`): each claim states what it must, its verdict rule reads
"reproduced", "not reproduced" and "inconclusive" from intervals as written, a claim runs as benchmarks whose
records give its verdict, and docs/reproductions.md is what the committed records give."""

from pathlib import Path

import pytest

from analysis import claims
from analysis.claims import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, Claim, Results, Runs, Verdict, reproductions
from analysis.claims.base import Estimate, at_edge, decided, within_margin
from attnlab import reproduce
from experiments import tasks
from experiments.claims import parts

ROOT = Path(__file__).resolve().parents[2]
TINY = ("task.seq_len=12", "task.num_keys=4", "task.num_distractors=4", "task.num_buckets=4", "task.test_size=32",
        "model.dim=16", "model.depth=1", "model.heads=2", "train.steps=10", "train.eval_every=5",
        "train.batch_size=8", "train.checkpoint_every=10", "train.log_every=5")


class Fake(Results):
    """Results from figures given by hand: {(part, variant, task): {seed: value}}, the same for every figure."""

    def __init__(self, figures, capacity=None, chance=0.1, size=2432.0):
        super().__init__({})
        self.figures, self.points, self.chance_value, self.size = figures, capacity or {}, chance, size

    def test(self, part, variant, task):
        return self.figures.get((part, variant, task), {})

    def figure(self, part, variant, task, read):
        return self.test(part, variant, task)

    def capacity(self, part, variant, task, axis, value):
        return self.points.get((part, variant, task, axis, value), {})

    def chance(self, part, variant, task, point=None):
        return self.chance_value

    def test_size(self, part, task):
        return self.size


def seeds(*values):
    return dict(enumerate(values, start=1))


def test_every_claim_states_its_source_setting_number_rule_and_runs_and_names_resolve():
    assert len(claims.list_claims()) >= 8
    for name in claims.list_claims():
        claim = claims.claim_named(name)
        assert all(getattr(claim, field) for field in ("source", "claimed", "read", "their_setting", "our_setting",
                                                       "rule")), name
    with pytest.raises(ValueError, match="Unknown claim 'zoology_mqr'.*did you mean 'zoology_mqar'"):
        claims.claim_named("zoology_mqr")


def test_a_claim_without_a_rule_or_a_stated_field_is_refused_when_it_registers():
    class NoRule(Claim):
        source = claimed = read = their_setting = our_setting = rule = "stated"

    with pytest.raises(ValueError, match="'norule' has no verdict rule"):
        claims.register_claim("norule")(NoRule)

    class Unstated(NoRule):
        read = ""

        def verdict(self, results):
            return Verdict(REPRODUCED, "", "")

    with pytest.raises(ValueError, match="'unstated' does not state read"):
        claims.register_claim("unstated")(Unstated)

    class NoEffect(NoRule):
        runs = (Runs("part", ("dense",), ("passkey",)),)

        def verdict(self, results):
            return Verdict(REPRODUCED, "", "")

    with pytest.raises(ValueError, match="'noeffect' does not state the effect its paper reports"):
        claims.register_claim("noeffect")(NoEffect)


def test_a_rule_made_of_checks_fails_on_any_failure_and_waits_on_any_undecided_one():
    assert decided({"a": True, "b": True}) == REPRODUCED
    assert decided({"a": True, "b": None}) == INCONCLUSIVE
    assert decided({"a": None, "b": False}) == NOT_REPRODUCED
    interval = Estimate((0.90, 0.92, 0.94))
    assert interval.mean == pytest.approx(0.92) and interval.half == pytest.approx(4.303 * 0.02 / 3 ** 0.5, rel=1e-3)


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
    claim, part, task = claims.claim_named("zoology_mqar"), "mqar", "mqar"

    def verdict(dense_half, conv_pairs, conv_half):
        figures = {(part, "dense", task): seeds(1.0, 0.99, 1.0), (part, "conv", task): seeds(0.8, 0.82, 0.78)}
        points = {(part, "dense", task, "width", 32): {1: dense_half},
                  (part, "dense", task, "num_pairs", 16): {1: 0.99},
                  (part, "conv", task, "width", 32): {1: conv_half},
                  (part, "conv", task, "num_pairs", 16): {1: conv_pairs}}
        return claim.verdict(Fake(figures, points)).outcome

    assert verdict(0.98, conv_pairs=0.5, conv_half=0.6) == REPRODUCED
    assert verdict(0.60, conv_pairs=0.5, conv_half=0.6) == NOT_REPRODUCED  # attention fails at half width
    assert verdict(0.98, conv_pairs=0.79, conv_half=0.6) == NOT_REPRODUCED  # conv holds its pairs
    assert claim.verdict(Fake({})).outcome == INCONCLUSIVE


def test_zoology_reads_conv_at_the_floor_as_inconclusive_not_as_a_fall_that_did_not_happen():
    claim, part, task = claims.claim_named("zoology_mqar"), "mqar", "mqar"
    figures = {(part, "dense", task): seeds(1.0, 0.99, 1.0), (part, "conv", task): seeds(0.061, 0.06, 0.062)}
    points = {(part, "dense", task, "width", 32): {1: 0.98}, (part, "dense", task, "num_pairs", 16): {1: 0.99},
              (part, "conv", task, "width", 32): {1: 0.06}, (part, "conv", task, "num_pairs", 16): {1: 0.067}}
    verdict = claim.verdict(Fake(figures, points, chance=0.125))
    assert verdict.outcome == INCONCLUSIVE
    assert "conv falls with twice the pairs: inconclusive (floor)" in verdict.why
    assert "conv recovers with width: inconclusive (floor)" in verdict.why
    assert "seeds would detect 0.24" in verdict.why  # an inconclusive verdict names its power
    rule = reproductions.rules([claim]).iloc[0]["rule"]  # the tolerance, stated with the rule
    assert "at most 0.01 above chance (or below it) reads inconclusive (floor)" in rule


def test_a_cell_is_at_the_floor_up_to_the_benchmarks_edge_above_chance_and_at_the_ceiling_within_it_of_one():
    assert at_edge((seeds(0.06, 0.07), 0.125), (seeds(0.135,), 0.125)) == "floor"  # below chance, and chance + 0.01
    assert at_edge((seeds(0.99, 1.0), 0.125), (seeds(1.0,), 0.125)) == "ceiling"
    assert at_edge((seeds(0.06,), 0.125), (seeds(1.0,), 0.125)) is None  # one at each edge: they differ
    assert at_edge((seeds(0.136,), 0.125), (seeds(0.06,), 0.125)) is None
    assert at_edge((seeds(0.06,), 0.125), ({}, 0.125)) is None  # not measured


def test_a_margin_holds_only_where_the_one_sided_tests_show_it_never_for_a_difference_that_is_not_significant():
    def holds(a, b, margin=0.02, one_sided=False):
        return within_margin((seeds(*a), 0.1), (seeds(*b), 0.1), 1_000_000.0, margin, one_sided=one_sided).holds

    assert holds((0.90, 0.91, 0.90), (0.90, 0.90, 0.91)) is True  # tight, inside +-0.02
    assert holds((0.60, 0.95, 0.80), (0.80, 0.70, 0.85)) is None  # not significant, but too wide to be equal
    assert holds((0.80, 0.81, 0.80), (0.90, 0.90, 0.91)) is False  # shown more than 0.02 below
    assert holds((0.95, 0.96, 0.95), (0.90, 0.90, 0.91)) is False  # shown more than 0.02 above: not equal ...
    assert holds((0.95, 0.96, 0.95), (0.90, 0.90, 0.91), one_sided=True) is True  # ... but at least as high
    assert holds((0.885, 0.886, 0.885), (0.90, 0.90, 0.90), one_sided=True) is True  # 0.015 below: inside 0.02
    assert holds((0.87, 0.871, 0.87), (0.90, 0.90, 0.90), one_sided=True) is False  # 0.030 below: beyond 0.02
    assert within_margin((seeds(0.9), 0.1), (seeds(0.9), 0.1), 10_000.0, 0.02).holds is None  # one seed: no test
    assert holds((0.995, 1.0, 0.999), (1.0, 0.998, 0.997)) == "ceiling"  # both within 0.01 of 1: cannot tell


def test_britz_decides_that_scaling_closes_the_gap_by_non_inferiority_and_reads_the_ceiling_as_inconclusive():
    claim, task = claims.claim_named("britz_additive"), "mqar"

    def verdict(dense, additive=(0.80, 0.81, 0.80)):
        figures = {("head16", name, task): seeds(0.7, 0.71, 0.72) for name in ("additive", "unscaled", "dense")}
        figures |= {("head64", "additive", task): seeds(*additive),
                    ("head64", "unscaled", task): seeds(0.5, 0.52, 0.51), ("head64", "dense", task): seeds(*dense)}
        return claim.verdict(Fake(figures, size=100_000.0))

    assert verdict((0.80, 0.80, 0.81)).outcome == REPRODUCED
    wide = verdict((0.60, 0.95, 0.85))  # dense - additive not significant, its interval far wider than the margin
    assert wide.outcome == INCONCLUSIVE and "scaling closes the gap: undecided" in wide.why
    assert verdict((0.70, 0.71, 0.70)).outcome == NOT_REPRODUCED  # dense shown below additive by more than 0.02
    ceiling = verdict((0.995, 1.0, 0.999), additive=(1.0, 0.998, 0.997))
    assert "scaling closes the gap: inconclusive (ceiling)" in ceiling.why


def test_an_inconclusive_verdict_names_the_seeds_its_decisive_comparison_needs():
    claim, task = claims.claim_named("flipflop_lstm"), "flipflop"
    verdict = claim.verdict(Fake({(task, "lstm", task): seeds(1.0, 1.0, 1.0),
                                  (task, "dense", task): seeds(0.90, 0.99, 0.95)}, chance=0.5))
    assert verdict.outcome == INCONCLUSIVE and "the LSTM above dense: undecided" in verdict.why
    # differences 0.10, 0.01, 0.05: sd 0.045; by the normal approximation ((1.96 + 0.84) * 0.045 / 0.01)² = 159 seeds,
    # and Student's t asks a few more
    assert "power: 162 seeds would detect 0.01" in verdict.why and verdict.power in verdict.why
    assert "power:" not in claim.verdict(Fake({(task, "lstm", task): seeds(1.0, 1.0, 1.0),
                                                (task, "dense", task): seeds(0.90, 0.91, 0.90)}, chance=0.5)).why


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


def test_nope_runs_with_no_positions_and_absolute_positions_are_sinusoidal_each_evaluated_at_2x_and_4x(tmp_path):
    claim = claims.claim_named("kazemnejad_nope")
    seen = {}
    for runs in claim.runs:
        benchmark = parts.benchmark_of(claim.name, runs, device="cpu", storage=None, runs_dir=tmp_path,
                                       lr_multiples="1")
        for job in benchmark.planned_jobs():
            config = benchmark.config(job)
            seen[runs.part, job.variant] = (config.model.positions, config.task_options.eval_lengths)
    assert seen["induction", "dense"] == ("none", (64, 128)) and seen["mqar", "dense"] == ("none", (128, 256))
    assert seen["induction_absolute", "dense"] == ("sinusoidal", (64, 128))
    assert seen["mqar", "relative:kind=t5"] == ("none", (128, 256)) and len(seen) == 10
    assert not any(tmp_path.iterdir())  # nothing trained
    # No record yet: the table says so, and how to run it.
    row = reproductions.table([claim], ROOT / reproductions.RECORDS).iloc[0]
    assert row["our measurement"] == "not run yet" and "make reproduce CLAIM=kazemnejad_nope" in row["why"]


def test_listops_reads_no_ordering_where_dense_is_not_clearly_above_chance():
    claim, task = claims.claim_named("lra_listops_order"), "listops"
    above = {(task, name, task): seeds(0.45, 0.47, 0.46) for name in ("dense", "sparse:pattern=bigbird",
                                                                     "sparse:pattern=longformer")}
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


def test_a_claim_runs_as_benchmarks_keeps_their_records_and_reads_its_verdict_from_them(tmp_path, monkeypatch):
    class Tiny(Claim):
        """A tiny claim: dense learns a tiny passkey above chance."""

        source = claimed = read = their_setting = our_setting = "a test"
        rule = "reproduced when dense's mean lies above chance"
        runs = (Runs("tiny", ("dense",), ("passkey",), sets=TINY, seeds=2),)

        def verdict(self, results):
            ours = claims.base.estimate(results.test("tiny", "dense", "passkey"))
            return Verdict(REPRODUCED if ours.mean > results.chance("tiny", "dense", "passkey") else NOT_REPRODUCED,
                           str(ours), self.rule)

    monkeypatch.setitem(claims.CLAIMS.classes, "tinyclaim", Tiny)
    Tiny.name = "tinyclaim"
    records, doc = tmp_path / "records", tmp_path / "reproductions.md"
    assert reproduce.run("tinyclaim", workers=1, device="cpu", storage=None, runs_dir=tmp_path / "runs",
                         out=tmp_path / "reports", quiet=True, records=records, doc=doc) == 0
    assert [path.name for path in records.iterdir()] == ["benchmark-claim-tinyclaim-tiny.journal"]
    results = Results(reproductions.kept(Tiny(), records))
    # One learning rate: tuning selected nothing, so its seed 0 is read beside the confirmation seeds.
    assert set(results.test("tiny", "dense", "passkey")) == {0, 1, 2}
    assert results.figure("tiny", "dense", "passkey", lambda result: result["steps"]) == {0: 10, 1: 10, 2: 10}
    assert results.figure("tiny", "dense", "passkey", lambda result: None) == {}  # not measured: left out
    row = reproductions.table([Tiny()], records).iloc[0]
    assert row["verdict"] in (REPRODUCED, NOT_REPRODUCED) and "(n=3)" in row["our measurement"]
    # With a grid, tuning chose on the validation set: only the fresh confirmation seeds are read.
    grid = tmp_path / "grid"
    assert reproduce.run("tinyclaim", workers=1, device="cpu", storage=None, runs_dir=grid / "runs",
                         out=grid / "reports", quiet=True, records=grid, doc=doc, lr_multiples="0.3,1,3") == 0
    assert set(Results(reproductions.kept(Tiny(), grid)).test("tiny", "dense", "passkey")) == {1, 2}
    assert "tinyclaim" in doc.read_text() and (tmp_path / "reports" / "reproductions" / "index.html").is_file()
    # Without its record a claim is not run yet, and says how to run it.
    other = reproductions.table([Tiny()], tmp_path / "none").iloc[0]
    assert other["verdict"] == INCONCLUSIVE and "make reproduce CLAIM=tinyclaim" in other["why"]


def test_a_claims_setting_states_the_budget_its_runs_resolve_beside_the_papers():
    class Budgeted(Claim):
        runs = (Runs("tiny", ("dense",), ("passkey",), sets=TINY), Runs("quick", ("dense",), ("mqar",)))

    assert reproductions.budget(Budgeted()) == ("passkey: up to 10 steps of 8 (80 examples seen), learning rate 0.001; "
                                            "mqar: up to 1,000 steps of 64 (64,000 examples seen), learning rate 0.001")
    row = reproductions.table([claims.claim_named("zoology_mqar")], ROOT / reproductions.RECORDS).iloc[0]
    assert "64 epochs of 100,000 examples" in row["their setting"] and "(64,000 examples seen)" in row["ours"]


def test_an_unknown_claim_on_the_command_line_is_one_sentence(tmp_path, capsys):
    from attnlab.cli import main

    assert main(["reproduce", "--claim", "zoology_mqr", "--runs-dir", str(tmp_path), "--out", str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "Unknown claim 'zoology_mqr'" in line and "did you mean 'zoology_mqar'" in line
    assert not any(tmp_path.iterdir())


def test_the_committed_reproductions_page_is_what_the_committed_records_give(tmp_path):
    records = reproductions.RECORDS if reproductions.RECORDS.is_absolute() else ROOT / reproductions.RECORDS
    reproductions.write(tmp_path, records, tmp_path / "reproductions.md")
    assert (ROOT / "docs" / "reproductions.md").read_text(encoding="utf-8") == \
        (tmp_path / "reproductions.md").read_text(encoding="utf-8"), "docs/reproductions.md is stale: make results"


def test_the_estimate_of_the_claims_times_every_part_and_trains_nothing(tmp_path, monkeypatch, capsys):
    from experiments.benchmark import estimate

    # Two workers time the sizes in two processes side by side (`estimate.measured`): the timings are given here.
    monkeypatch.setattr(estimate, "measured", lambda runs, **_: [(estimate.Timing(0.1, 1.0, 2.0), None)] * len(runs))
    assert reproduce.run("mamba_selective_copy,flipflop_lstm", workers=2, device="cpu", storage=None,
                         runs_dir=tmp_path, out=tmp_path, quiet=True, estimate_only=True) == 0
    printed = capsys.readouterr().out
    assert "claim-mamba_selective_copy-selective_copy: " in printed and "claim-flipflop_lstm-flipflop: " in printed
    # 3 cells x 3 jobs and 2 cells x 3 jobs (one learning rate, 3 seeds), each 1,000 steps x 0.1 s + 9 interim
    # evaluations x 1 s + the last 2 s.
    assert f"total: {estimate.duration(15 * (100 + 9 + 2))} of runs; with 2 workers" in printed
    written = sorted(path.relative_to(tmp_path).as_posix() for path in tmp_path.rglob("*") if path.is_file())
    assert written == [f"benchmark/claim-{part}/{name}" for part in ("flipflop_lstm-flipflop",
                                                                    "mamba_selective_copy-selective_copy")
                       for name in ("estimate-record.csv", "estimate.csv")]  # nothing trained, no storage


def test_a_part_on_a_task_not_discriminative_at_the_profile_is_not_trained_and_its_claim_says_why(tmp_path,
                                                                                                monkeypatch):
    # No task is declared not discriminative at quick today (ListOps was, before its quick profile left out SM).
    monkeypatch.setattr(tasks.task_class("listops"), "not_discriminative", {"quick": "dense stays near chance"})
    claim = claims.claim_named("lra_listops_order")
    assert reproduce.run("lra_listops_order", workers=1, device="cpu", storage=None, runs_dir=tmp_path / "runs",
                         out=tmp_path / "reports", quiet=True, records=tmp_path / "records",
                         doc=tmp_path / "reproductions.md") == 0
    assert not (tmp_path / "runs").exists()  # nothing trained
    row = reproductions.table([claim], tmp_path / "records").iloc[0]
    assert row["verdict"] == INCONCLUSIVE and row["our measurement"] == "not trained"
    assert "task listops is not discriminative at the quick profile: dense stays near chance" in row["why"]


class Validated(Fake):
    """A Fake whose validation accuracies (`figure`) are given apart from its test accuracies."""

    def __init__(self, figures, validation):
        super().__init__(figures)
        self.validation = validation

    def figure(self, part, variant, task, read):
        return self.validation.get((part, variant, task), {})


def mad_results(dense=None, local=None, fuzzy=0.6):
    """The mad claim's runs: each variant best on validation at weight decay 0, whose test figures are given (by task;
    a task not given scores 0.99 for dense), and worse on validation at weight decay 0.1, whose test figures would
    reproduce whatever the others say (1.0 everywhere): a claim that read them would have chosen on the test set."""
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


def test_mad_chooses_each_grid_point_on_validation_and_reads_its_test_accuracy():
    claim = claims.claim_named("mad")
    verdict = claim.verdict(mad_results())
    # Weight decay 0 is best on validation; chosen on the test set, 0.1 (1.0 everywhere) would solve fuzzy recall.
    assert verdict.outcome == REPRODUCED
    assert "in_context_recall 0.990 ± 0.064 (n=2) at dense_weight_decay_0," in verdict.ours
    assert "dense: MAD score 0.814 over 5 of 5 tasks" in verdict.ours  # (0.99 x 3 + 0.6 + 0.5) / 5
    assert claim.verdict(mad_results(fuzzy=0.99)).outcome == NOT_REPRODUCED  # fuzzy recall solved at its point
    assert claim.verdict(mad_results(local={"in_context_recall": 0.99})).outcome == INCONCLUSIVE  # a tie
    assert claim.verdict(mad_results(local={"in_context_recall": 0.995})).outcome == NOT_REPRODUCED  # local above
    assert claim.verdict(mad_results(dense={"selective_copy": 0.5})).outcome == NOT_REPRODUCED
    assert claim.verdict(Fake({})).outcome == INCONCLUSIVE


def test_a_part_sweeping_its_papers_grid_tunes_it_whatever_the_command_says(tmp_path):
    claim = claims.claim_named("mad")
    swept = next(runs for runs in claim.runs if runs.part == "dense_weight_decay_0.1")
    part = parts.benchmark_of(claim.name, swept, device="cpu", storage=None, runs_dir=tmp_path, lr_multiples="1")
    cell = part.cells[0]
    assert part.learning_rates(cell) == [1e-4, 5e-4, 1e-3]  # MAD's grid at the quick profile's 1e-3
    assert cell.overrides["train"]["weight_decay"] == 0.1
    plain = parts.benchmark_of(claim.name, Runs("plain", ("dense",), ("compression",)), device="cpu", storage=None,
                               runs_dir=tmp_path, lr_multiples="1")
    assert plain.learning_rates(plain.cells[0]) == [1e-3]
    assert "dense_weight_decay_0.1: dense on" in reproductions.rules([claim]).iloc[0]["runs"]
    assert "tuned over 0.1, 0.5, 1 x each task's learning rate" in reproductions.rules([claim]).iloc[0]["runs"]
