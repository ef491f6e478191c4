"""Published claims (`analysis.claims`, `make reproduce`): each claim states what it must, its verdict rule reads
"reproduced", "not reproduced" and "inconclusive" from intervals as written, a claim runs as benchmarks whose
records give its verdict, and docs/reproductions.md is what the committed records give."""

from pathlib import Path

import pytest

from analysis import claims, reproduce
from analysis.claims import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, Claim, Results, Runs, Verdict
from analysis.claims.base import Estimate, decided
from experiments import tasks

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

    def chance(self, part, variant, task):
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
    results = Results(reproduce.kept(Tiny(), records))
    # One learning rate: tuning selected nothing, so its seed 0 is read beside the confirmation seeds.
    assert set(results.test("tiny", "dense", "passkey")) == {0, 1, 2}
    assert results.figure("tiny", "dense", "passkey", lambda result: result["steps"]) == {0: 10, 1: 10, 2: 10}
    assert results.figure("tiny", "dense", "passkey", lambda result: None) == {}  # not measured: left out
    row = reproduce.table([Tiny()], records).iloc[0]
    assert row["verdict"] in (REPRODUCED, NOT_REPRODUCED) and "(n=3)" in row["our measurement"]
    # With a grid, tuning chose on the validation set: only the fresh confirmation seeds are read.
    grid = tmp_path / "grid"
    assert reproduce.run("tinyclaim", workers=1, device="cpu", storage=None, runs_dir=grid / "runs",
                         out=grid / "reports", quiet=True, records=grid, doc=doc, lr_multiples="0.3,1,3") == 0
    assert set(Results(reproduce.kept(Tiny(), grid)).test("tiny", "dense", "passkey")) == {1, 2}
    assert "tinyclaim" in doc.read_text() and (tmp_path / "reports" / "reproductions" / "index.html").is_file()
    # Without its record a claim is not run yet, and says how to run it.
    other = reproduce.table([Tiny()], tmp_path / "none").iloc[0]
    assert other["verdict"] == INCONCLUSIVE and "make reproduce CLAIM=tinyclaim" in other["why"]


def test_an_unknown_claim_on_the_command_line_is_one_sentence(tmp_path, capsys):
    from experiments.cli import main

    assert main(["reproduce", "--claim", "zoology_mqr", "--runs-dir", str(tmp_path), "--out", str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "Unknown claim 'zoology_mqr'" in line and "did you mean 'zoology_mqar'" in line
    assert not any(tmp_path.iterdir())


def test_the_committed_reproductions_page_is_what_the_committed_records_give(tmp_path):
    reproduce.write(tmp_path, reproduce.RECORDS if reproduce.RECORDS.is_absolute() else ROOT / reproduce.RECORDS,
                    tmp_path / "reproductions.md")
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
    row = reproduce.table([claim], tmp_path / "records").iloc[0]
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
    part = reproduce.benchmark_of(claim, swept, device="cpu", storage=None, runs_dir=tmp_path, lr_multiples="1")
    cell = part.cells[0]
    assert part.learning_rates(cell) == [1e-4, 5e-4, 1e-3]  # MAD's grid at the quick profile's 1e-3
    assert cell.overrides["train"]["weight_decay"] == 0.1
    plain = reproduce.benchmark_of(claim, Runs("plain", ("dense",), ("compression",)), device="cpu", storage=None,
                                   runs_dir=tmp_path, lr_multiples="1")
    assert plain.learning_rates(plain.cells[0]) == [1e-3]
    assert "dense_weight_decay_0.1: dense on" in reproduce.rules([claim]).iloc[0]["runs"]
    assert "tuned over 0.1, 0.5, 1 x each task's learning rate" in reproduce.rules([claim]).iloc[0]["runs"]
