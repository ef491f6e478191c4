"""Protocol 2's suite is chosen by calibration: a candidate row joins where dense's mean over its calibration seeds
lies between chance + 0.2 and 0.95 on some metric (test accuracy, a split, an evaluation length), edges included, and
a candidate outside says why (ceiling, floor, or not calibrated, with the command that calibrates it)."""

import pandas as pd
import pytest

import variants
from analysis.benchmark import suite as benchmark_suite
from analysis.benchmark.contrast_section import MOST_SEEDS
from analysis.calibration.table import RECORD, read_record
from experiments.run import config as configs
from variants.presets import CORE

ROW = "mqar:num_pairs=16"


def record(*rows, steps=benchmark_suite.BUDGET_STEPS):
    """A calibration record of dense's rows of ROW at quick over `steps`: (test accuracy, splits and lengths) each,
    chance 0.125."""
    return pd.DataFrame([{**dict.fromkeys(RECORD, ""), "task": ROW, "variant": "dense", "seed": str(seed),
                          "steps": str(steps),
                          "test accuracy": f"{test:.3f}", "chance": "0.125", "splits and lengths": extras,
                          "command": f"make experiment VARIANT=dense TASK=mqar PROFILE=quick SEED={seed}"}
                         for seed, (test, extras) in enumerate(rows)], columns=list(RECORD))


@pytest.mark.parametrize(("tests", "joins"), [
    ((0.325, 0.325), True),  # exactly chance + 0.2
    ((0.95, 0.95), True),  # exactly the ceiling
    ((0.90, 1.0), True),  # the mean over seeds, 0.95, not each seed
    ((0.951, 0.951), False),
    ((0.324, 0.324), False),
])
def test_a_row_joins_where_dense_lies_between_chance_plus_0_2_and_0_95_edges_included(tests, joins):
    metrics, _ = benchmark_suite.verdict(ROW, record(*((test, "–") for test in tests)))
    assert metrics == (["test accuracy"] if joins else [])


def test_a_split_or_an_evaluation_length_with_room_makes_a_saturated_row_discriminating():
    rows = record((1.0, "n=64 0.900; n=128 0.536"), (1.0, "n=64 0.880; n=128 0.600"))
    metrics, sentence = benchmark_suite.verdict(ROW, rows)
    assert metrics == ["n=64", "n=128"]
    assert "in the suite: dense reads test accuracy 1.000, n=64 0.890, n=128 0.568 (2 seeds" in sentence


def test_a_row_left_out_says_whether_dense_is_at_the_ceiling_or_at_the_floor():
    assert "left out, at the ceiling: dense reads test accuracy 0.990" in benchmark_suite.verdict(
        ROW, record((0.99, "sparse 1.000")))[1]
    assert "left out, at the floor: dense reads test accuracy 0.105" in benchmark_suite.verdict(
        ROW, record((0.105, "–")))[1]


def test_a_candidate_the_record_lacks_at_the_budget_names_the_command_that_calibrates_it():
    command = ('make calibration VARIANT=dense TASK=selective_copy:num_tokens=8 ARGS="--set train.steps=400 --set '
               'train.eval_every=50" measures it')
    metrics, sentence = benchmark_suite.verdict("selective_copy:num_tokens=8", record((0.5, "–")))
    assert metrics == [] and command in sentence
    metrics, sentence = benchmark_suite.verdict(ROW, record((0.5, "–"), steps=1000))  # quick's own budget
    assert metrics == [] and "not calibrated: the record has no dense run of mqar:num_pairs=16 at quick over 400" \
        in sentence


def test_a_record_that_chooses_nothing_is_one_sentence_and_protocol_1_keeps_the_registrys_suite(tmp_path):
    with pytest.raises(ValueError, match="puts no candidate row in the benchmark's suite; accepted: a record with"):
        benchmark_suite.suite(tmp_path / "calibration.csv")

    def given(task, variant, sets, seeds):
        return {"task": task, "variant": variant, "set": sets, "task_seeds": seeds}

    assert benchmark_suite.selection(None, None, ["x.y=1"], None, protocol=1, profile="quick") == given(
        None, None, ["x.y=1"], None)
    assert benchmark_suite.selection(None, "dense", [], "passkey=9", protocol=2, profile="standard") == given(
        None, "dense", [], "passkey=9")


def test_protocol_2_at_quick_runs_the_chosen_rows_at_the_budget_under_the_users_own_sets():
    chosen = benchmark_suite.selection(None, None, ["train.steps=300"], None, protocol=2, profile="quick")
    assert chosen["task"] == ",".join(benchmark_suite.suite())
    assert chosen["set"] == ["train.steps=400", "train.eval_every=50", "train.steps=300"]  # the last given wins
    # the rows whose power check asked for more
    assert chosen["task_seeds"] == "induction=12,mqar:num_pairs=12=12"
    assert benchmark_suite.selection(None, None, [], "induction=8", protocol=2, profile="quick")["task_seeds"] == \
        "induction=8"
    assert benchmark_suite.selection("mqar", None, [], None, protocol=2, profile="quick") == {
        "task": "mqar", "variant": None, "set": [], "task_seeds": None}
    assert benchmark_suite.selection(None, "dense", [], None, protocol=2, profile="quick")["variant"] == "dense"
    variants = chosen["variant"]
    assert variants.split(",") == [*CORE[:5], "sparse:pattern=bigbird:block_size=4", *CORE[6:]]


def test_the_suites_bigbird_attends_at_most_half_the_causal_pairs_on_every_chosen_row_of_64_tokens():
    # (on induction's 32 tokens it is near dense, and its cells say so: analysis.benchmark.coverage)
    for row in benchmark_suite.suite():
        config = configs.resolve(variant=benchmark_suite.SUITE_BIGBIRD, task=row, profile="quick", seed=0,
                                 device="cpu", overrides=configs.parse_sets(list(benchmark_suite.BUDGET)))
        length = config.task_options.seq_len
        if length < 64:
            continue
        found = variants.coverage(config.variant, length, causal=True, num_heads=config.model.heads,
                                  head_dim=config.model.attention_head_dim, layers=config.model.depth, run_seed=0,
                                  options=config.variant_options)
        assert found <= 0.5, (row, found)


def test_the_committed_record_chooses_every_row_of_protocol_2s_default_suite():
    chosen = benchmark_suite.choose(read_record(benchmark_suite.RECORD))
    suite = benchmark_suite.suite()
    assert suite == tuple(chosen.loc[chosen["in suite"], "task"]) and suite
    assert not {"mqar", "passkey"} & set(suite)  # saturated at quick: they leave the default suite


def test_the_suite_takes_the_first_four_candidates_in_range_in_their_order_and_says_so_of_the_fifth():
    rows = [row for row, _ in benchmark_suite.CANDIDATES]
    frame = pd.concat([record((0.5, "–")).assign(task=row) for row in rows], ignore_index=True)
    chosen = benchmark_suite.choose(frame)
    assert list(chosen.loc[chosen["in suite"], "task"]) == rows[:benchmark_suite.MAX_ROWS] and \
        benchmark_suite.MAX_ROWS == 4
    fifth = chosen.iloc[benchmark_suite.MAX_ROWS]
    assert not fifth["in suite"] and fifth["verdict"].startswith("in range, but past the suite's 4 rows: dense reads")
    # a candidate out of range does not take a place: the next one in range joins in its stead
    frame.loc[frame["task"] == rows[1], "test accuracy"] = "0.990"
    chosen = benchmark_suite.choose(frame)
    assert list(chosen.loc[chosen["in suite"], "task"]) == [rows[0], *rows[2:5]]


def test_no_row_of_the_suite_grows_beyond_the_seeds_a_task_of_record_may_take():
    """A row whose aim needs more than MOST_SEEDS is exploratory, not grown (docs/benchmark.md)."""
    assert benchmark_suite.ROW_SEEDS and max(benchmark_suite.ROW_SEEDS.values()) <= MOST_SEEDS
