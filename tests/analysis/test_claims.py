"""Published claims (`analysis.claims`, `make reproduce`): each claim states what it must, the checks of a rule
read their intervals as written (each claim's own rule: `test_claim_rules`), a claim runs as benchmarks under protocol
2 at its stated budget whose records give its verdict (marked stale where kept under another definition), and
docs/reproductions.md is what the committed records give."""

import datetime
from pathlib import Path

import pandas as pd
import pytest
from claim_fakes import Fake, seeds

import variants
from analysis import claims
from analysis.benchmark.coverage import DENSE_COVERAGE
from analysis.claims import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Claim,
    Results,
    Runs,
    Verdict,
    lra_listops_order,
    reproductions,
)
from analysis.claims.base import Estimate, at_edge, decided, within_margin
from attnlab import reproduce
from experiments import tasks
from experiments.claims import parts, training
from experiments.claims.parts import SweptRuns
from experiments.run import config as configs

ROOT = Path(__file__).resolve().parents[2]
TINY = ("task.seq_len=12", "task.num_keys=4", "task.num_distractors=4", "task.num_buckets=4", "task.test_size=32",
        "model.dim=16", "model.depth=1", "model.heads=2", "train.steps=10", "train.eval_every=5",
        "train.batch_size=8", "train.checkpoint_every=10", "train.log_every=5")


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

    class NoBudget(NoEffect):
        effect, effect_why = 0.1, "a test"

    with pytest.raises(ValueError, match="'nobudget' does not say why its runs train the budget they do"):
        claims.register_claim("nobudget")(NoBudget)
    assert all(claim.budget_why for claim in map(claims.claim_named, claims.list_claims()) if claim.runs)


def test_a_rule_made_of_checks_fails_on_any_failure_and_waits_on_any_undecided_one():
    assert decided({"a": True, "b": True}) == REPRODUCED
    assert decided({"a": True, "b": None}) == INCONCLUSIVE
    assert decided({"a": None, "b": False}) == NOT_REPRODUCED
    interval = Estimate((0.90, 0.92, 0.94))
    assert interval.mean == pytest.approx(0.92) and interval.half == pytest.approx(4.303 * 0.02 / 3 ** 0.5, rel=1e-3)


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
    row = reproductions.table([claim], tmp_path / "no records").iloc[0]
    assert row["our measurement"] == "not run yet" and "make reproduce CLAIM=kazemnejad_nope" in row["why"]


@pytest.mark.parametrize("name", ["velickovic_softmax", "ssmax_fading", "mamba_induction_length"])
def test_a_claim_whose_long_evaluations_are_its_cost_reads_a_quarter_of_the_test_set_at_each_length(name):
    (runs,) = claims.claim_named(name).runs
    bench = parts.benchmark_of(name, runs, device="cpu", storage=None, runs_dir=Path("runs"),
                               lr_multiples=parts.LR_MULTIPLES)
    (job, *_) = [job for job in bench.planned_jobs() if job.variant == runs.variants[0]]
    config = bench.config(job)
    assert config.task_options.test_size == 608 and config.train.steps == (runs.steps or config.train.steps)
    assert "608 examples, a quarter of the profile's" in claims.claim_named(name).budget_why
    if runs.steps is not None:  # its own budget: evaluated halfway and at its end, the end all its rule reads
        assert config.train.eval_every == runs.steps // 2


def test_listops_runs_bigbird_and_longformer_where_they_attend_at_most_half_the_causal_pairs():
    (runs,) = lra_listops_order.LRAListOpsOrder.runs
    for variant in (lra_listops_order.BIGBIRD, lra_listops_order.LONGFORMER, "local"):
        config = configs.resolve(variant=variant, task="listops", profile="quick", seed=0, device="cpu",
                                 overrides={section: {} for section in configs.SECTIONS}, trains_here=False)
        share = variants.coverage(config.variant, config.task_options.seq_len, causal=config.model.causal,
                                  num_heads=config.model.heads, head_dim=config.model.attention_head_dim,
                                  layers=config.model.depth, run_seed=0, options=config.variant_options)
        assert config.model.causal and 0.4 < share <= DENSE_COVERAGE, (variant, share)  # a sparse contender
        assert variant in runs.variants
    assert runs.steps == lra_listops_order.BUDGET


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
    # Protocol 2 at one fixed learning rate: nothing screened, every seed from 0 a confirmation seed, each run its
    # whole budget.
    ledger = reproductions.kept(Tiny(), records)["tiny"]
    assert (ledger.benchmark.protocol, ledger.benchmark.fixed_rate, ledger.benchmark.target) == (2, True, None)
    assert set(results.test("tiny", "dense", "passkey")) == {0, 1}
    assert results.figure("tiny", "dense", "passkey", lambda result: result["steps"]) == {0: 10, 1: 10}
    assert results.figure("tiny", "dense", "passkey", lambda result: None) == {}  # not measured: left out
    row = reproductions.table([Tiny()], records).iloc[0]
    assert row["verdict"] in (REPRODUCED, NOT_REPRODUCED) and "(n=2)" in row["our measurement"]
    assert "stale" not in row["verdict"]  # kept under the definition the claim has today
    # With a grid, the screen chose on the validation set over seeds 0 and 1: only the fresh seeds are read.
    grid = tmp_path / "grid"
    assert reproduce.run("tinyclaim", workers=1, device="cpu", storage=None, runs_dir=grid / "runs",
                         out=grid / "reports", quiet=True, records=grid, doc=doc, lr_multiples="0.3,1,3") == 0
    assert set(Results(reproductions.kept(Tiny(), grid)).test("tiny", "dense", "passkey")) == {2, 3}
    # A record kept under another definition (here, the grid) keeps its verdict, marked stale with what differs.
    stale = reproductions.table([Tiny()], grid).iloc[0]
    assert stale["verdict"].endswith(" (stale record)") and "tiny (lr_multiples)" in stale["why"]
    assert "make reproduce CLAIM=tinyclaim` trains today" in stale["why"] and "As recorded: " in stale["why"]
    # One whose cells changed (another variant) has no verdict to keep: its record lacks today's cells.
    monkeypatch.setattr(Tiny, "runs", (Runs("tiny", ("dense", "local"), ("passkey",), sets=TINY, seeds=2),))
    changed = reproductions.table([Tiny()], records).iloc[0]
    assert (changed["verdict"], changed["our measurement"]) == (f"{INCONCLUSIVE} (stale record)",
                                                                "not run yet under today's definition")
    assert "tiny (variants)" in changed["why"] and "As recorded" not in changed["why"]
    assert "tinyclaim" in doc.read_text() and (tmp_path / "reports" / "reproductions" / "index.html").is_file()
    # Without its record a claim is not run yet, and says how to run it.
    other = reproductions.table([Tiny()], tmp_path / "none").iloc[0]
    assert other["verdict"] == INCONCLUSIVE and "make reproduce CLAIM=tinyclaim" in other["why"]


def test_a_claims_setting_states_the_budget_its_runs_resolve_beside_the_papers():
    class Budgeted(Claim):
        runs = (Runs("tiny", ("dense",), ("passkey",), sets=TINY), Runs("quick", ("dense",), ("mqar",), steps=400),
                SweptRuns("mqar", ("dense",), ("mqar",), seeds=4, lr_multiples=(0.5, 1.0, 2.0)))

    assert reproductions.budget(Budgeted()) == (
        "tiny on passkey: 10 steps of 8 (80 examples seen), learning rate 0.001, 3 paired seeds; "
        "quick on mqar: 400 steps of 64 (25,600 examples seen), learning rate 0.001, 3 paired seeds; "
        "mqar: 1,000 steps of 64 (64,000 examples seen), learning rates 0.0005, 0.001, 0.002 screened, "
        "4 paired seeds")  # a part named as its task: the task alone
    bench = parts.benchmark_of("budgeted", Budgeted.runs[1], device="cpu", storage=None, runs_dir=Path("runs"),
                               lr_multiples=parts.LR_MULTIPLES)
    assert bench.sets[0] == "train.steps=400" and bench.confirmation_seeds() == [0, 1, 2]
    row = reproductions.table([claims.claim_named("zoology_mqar")], ROOT / reproductions.RECORDS).iloc[0]
    assert "64 epochs of 100,000 examples" in row["their setting"] and "examples seen)" in row["ours"]
    assert "protocol 2: every run its whole budget" in row["ours"]
    assert claims.claim_named("zoology_mqar").budget_why in row["ours"]


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
    # One fixed learning rate, 3 paired seeds: selective copying's 3 cells x 3 jobs at its budget of 400 steps x 0.1 s
    # + 1 interim evaluation (its budget's evaluations: halfway and at the end) x 1 s + the last 2 s; flip-flop's 2
    # cells x 3 jobs at the profile's 1,000 steps, 9 interim evaluations.
    copy, flipflop = 9 * (40 + 1 + 2), 6 * (100 + 9 + 2)
    assert f"total: {estimate.duration(copy + flipflop)} of runs; with 2 workers" in printed
    written = sorted(path.relative_to(tmp_path).as_posix() for path in tmp_path.rglob("*") if path.is_file())
    assert written == [f"benchmark/claim-{part}/{name}" for part in ("flipflop_lstm-flipflop",
                                                                    "mamba_selective_copy-selective_copy")
                       for name in ("estimate-record.csv", "estimate.csv")] + [
        f"benchmark/{training.ESTIMATE_RECORD}"]  # nothing trained, no storage; the whole as one record
    whole = pd.read_csv(tmp_path / "benchmark" / training.ESTIMATE_RECORD, dtype=str).set_index("what")
    assert whole.loc["part claim-mamba_selective_copy-selective_copy", "jobs"] == "9"
    assert whole.loc["every job", "jobs"] == "15"
    assert whole.loc["every job", "hours"] == f"{(copy + flipflop) / 3600:.2f}"
    assert float(whole.loc["wall time with 2 workers", "hours"]) == pytest.approx((copy + flipflop) / 7200, abs=0.01)
    assert whole["command"].eq("attnlab reproduce --estimate --workers 2").all()


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


def test_the_claims_cost_sets_the_wall_time_their_records_took_against_the_estimate_made_before(tmp_path,
                                                                                               monkeypatch):
    """The union of every job's span over every claim's records (a job that starts as another ends adds its own
    length, overlapping ones count once, a pause counts nothing) against `attnlab reproduce --estimate`'s record;
    nothing while that record is missing, or a claim's records are missing or stale."""
    start = datetime.datetime(2026, 1, 1)

    def at(*seconds: int) -> list[tuple[datetime.datetime, datetime.datetime]]:
        return [(start + datetime.timedelta(seconds=a), start + datetime.timedelta(seconds=b))
                for a, b in zip(seconds[::2], seconds[1::2], strict=True)]

    class Spanned:
        def __init__(self, spans):
            self._spans = spans

        def spans(self):
            return self._spans

    class Two(Claim):
        runs = (Runs("a", ("dense",), ("mqar",)), Runs("b", ("dense",), ("mqar",)))

    ledgers = {"a": Spanned(at(0, 600, 300, 1200)), "b": Spanned(at(1200, 1800, 3000, 3600))}  # 1,800 s + 600 s
    monkeypatch.setattr(reproductions, "chosen", lambda names: [Two()])
    monkeypatch.setattr(reproductions, "kept", lambda claim, records: ledgers)
    monkeypatch.setattr(reproductions, "stale", lambda claim, found: {})
    assert reproductions.cost(tmp_path) == ""  # no estimate made before
    pd.DataFrame([{"what": "part claim-two-a", "jobs": "3", "hours": "0.60"},
                  {"what": "every job", "jobs": "6", "hours": "1.00"},
                  {"what": "wall time with 2 workers", "jobs": "", "hours": "0.50"}]).to_csv(
        tmp_path / reproductions.ESTIMATE, index=False)
    assert reproductions.cost(tmp_path) == (
        "Their runs cost, estimated before they ran (`make reproduce ARGS=--estimate WORKERS=2`, "
        "[records/claims/estimate.csv](records/claims/estimate.csv)), 1.00 hours of runs, 0.50 hours of wall time with "
        "2 workers; measured, 0.67 hours of wall time (1.33 of the estimate; while at least one of their jobs ran).")
    monkeypatch.setattr(reproductions, "stale", lambda claim, found: {"a": ["sets"]})
    assert reproductions.cost(tmp_path) == ""  # not the runs that were estimated
    monkeypatch.setattr(reproductions, "stale", lambda claim, found: {})
    del ledgers["b"]
    assert reproductions.cost(tmp_path) == ""  # a part not run yet
