"""The saturation studies read back: derived tables against a recomputation from the run records, findings
that follow the data, the files `make saturation` leaves, and the report section.

All tests share the tiny study the real runner makes once per session (`saturation_dir`, conftest.py).
"""

import json
import math
import re
import shutil

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import variants
from analysis import build_report
from analysis.report import figures as style
from analysis.report.render import Figure, Table, Text, md_escape
from analysis.report.sections import saturation as saturation_section
from analysis.saturation import figures as saturation_figures
from analysis.saturation import findings as saturation_findings
from analysis.saturation import readback as saturation_readback
from analysis.saturation import study as saturation_study
from analysis.saturation.fading_findings import FADES_LIKE_ONE_OVER_N
from analysis.saturation.findings import CONFIDENCE
from analysis.saturation.study import THRESHOLD
from analysis.saturation.text import number
from experiments.run.attention_stats import SATURATED
from experiments.saturation.tables import VANISHING_DERIVATIVE

NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?:e([-+]?\d+))?(?!\w)")


@pytest.fixture(scope="module")
def study(saturation_dir):
    return saturation_study.load(saturation_dir)


def _records(saturation_dir, part):
    """(config, summary, eval lines) of each run of one study, read with json alone."""
    records = []
    for folder in sorted((saturation_dir / "runs").iterdir()):
        summary = json.loads((folder / "summary.json").read_text())
        if summary["tags"].get("saturation") == part:
            lines = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
            records.append((json.loads((folder / "config.json").read_text()), summary,
                            [line for line in lines if line["kind"] == "eval"]))
    return records


def test_steps_to_accuracy_agree_with_the_eval_lines_of_each_run(study, saturation_dir):
    expected = []
    for config, summary, evals in _records(saturation_dir, "B"):
        steps = config["train"]["steps"]
        reached = [line["step"] for line in evals if line["test_accuracy"] >= THRESHOLD]
        early = [line["test_accuracy"] for line in evals if line["step"] <= steps / 2]
        expected.append({"run_id": summary["run_id"], "variant_name": summary["variant_name"],
                         "head_dim": config["model"]["head_dim"], "seed": config["seed"],
                         "steps_to_threshold": float(reached[0]) if reached else math.nan,
                         "final_accuracy": evals[-1]["test_accuracy"], "early_accuracy": sum(early) / len(early)})
    assert len(expected) == 15  # 6 variants x head dims 8 and 16, and dense with 3 other normalisers at 8; seed 0
    table = study.steps_to_accuracy[list(expected[0])].sort_values("run_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(table, pd.DataFrame(expected).sort_values("run_id").reset_index(drop=True),
                                  check_dtype=False)


def test_learning_rates_agree_with_the_attention_statistics_of_each_run(study, saturation_dir):
    expected = []
    for config, summary, evals in _records(saturation_dir, "C"):
        heads = [entry for line in evals for entry in line["attention"]]
        bounded = [entry for entry in heads if entry["entropy_bound"] is not None]
        expected.append({
            "run_id": summary["run_id"], "variant_name": summary["variant_name"], "lr": config["train"]["lr"],
            "final_loss": evals[-1]["test_loss"], "final_accuracy": evals[-1]["test_accuracy"],
            "max_logit_abs": max(entry["logit_max_abs"] for entry in heads),
            "min_entropy_over_log_n": min(entry["entropy_over_log_n"] for entry in heads),
            "max_sigma": max(entry["sigma"] for entry in heads), "bound_checks": len(bounded),
            "max_entropy_bound": max(entry["entropy_bound"] for entry in bounded) if bounded else math.nan,
            "bound_violations": sum(entry["bound_violations"] for entry in bounded) if bounded else math.nan,
        })
    assert len(expected) == 4  # dense and qknorm x 2 learning rates
    table = study.learning_rates[list(expected[0])].sort_values("run_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(table, pd.DataFrame(expected).sort_values("run_id").reset_index(drop=True),
                                  check_dtype=False)
    dense = table[table["variant_name"] == "dense"]
    assert (dense["bound_checks"] > 0).all() and (dense["bound_violations"] == 0).all()


def test_dynamics_hold_every_head_at_every_evaluation_with_its_run(study, saturation_dir):
    rows = 0
    for part in "BCD":
        for config, summary, evals in _records(saturation_dir, part):
            frame = study.dynamics[study.dynamics["run_id"] == summary["run_id"]]
            entries = [(line["step"], entry) for line in evals for entry in line.get("attention", [])]
            rows += len(entries)
            assert len(frame) == len(entries) == (len(evals) * 2 if part in "BC" else 0)  # 1 layer, 2 heads
            for step, entry in entries:
                row = frame[(frame["step"] == step) & (frame["layer"] == entry["layer"])
                            & (frame["head"] == entry["head"])]
                entropy = math.nan if entry["entropy"] is None else entry["entropy"]  # None: sigmoid's rows
                assert row["entropy"].item() == pytest.approx(entropy, rel=0, abs=0, nan_ok=True)
                assert row["grad_norm_q"].item() == entry["grad_norm_q"]
            assert (frame["part"] == part).all() and (frame["lr"] == config["train"]["lr"]).all()
    assert len(study.dynamics) == rows
    # D runs (trained without attention statistics) leave head_dim to the model: dim 16 over 2 heads.
    assert set(study.runs.loc[study.runs["part"] == "D", "head_dim"]) == {8}


def test_normaliser_dynamics_agree_with_the_zero_fractions_in_the_dense_runs_records(study, saturation_dir):
    expected = {}
    for config, _, evals in _records(saturation_dir, "B"):
        if config["variant"] != "dense" or config["model"]["head_dim"] != 8:
            continue
        first, last = ([entry for entry in line["attention"]] for line in (evals[0], evals[-1]))
        expected[config["variant_options"]["normaliser"]] = [
            np.mean([entry[statistic] for entry in entries]) for entries in (first, last)
            for statistic in ("zero_fraction", "max_weight")]
    table = saturation_study.normaliser_dynamics(study).set_index("normaliser")
    assert set(table.index) == set(expected) == {"softmax", "sparsemax", "entmax15", "sigmoid"}
    for normaliser, values in expected.items():
        row = table.loc[normaliser]
        assert [row["start_zero_fraction"], row["start_max_weight"], row["end_zero_fraction"],
                row["end_max_weight"]] == pytest.approx(values, rel=1e-12), normaliser
    assert table.loc["softmax", "end_zero_fraction"] == table.loc["sigmoid", "end_zero_fraction"] == 0
    assert table.loc["sparsemax", "start_zero_fraction"] > 0 and table.loc["entmax15", "start_zero_fraction"] > 0
    assert math.isnan(table.loc["sigmoid", "end_entropy_over_log_n"])  # rows that do not sum to 1


def test_study_a_reads_the_softmax_rows_as_before_and_every_normaliser_beside_them(tmp_path, saturation_dir, study):
    assert set(study.init["normaliser"]) == set(study.init_model["normaliser"]) == {"softmax"}
    assert set(study.normalisers["normaliser"]) == {"softmax", "sigmoid", "sparsemax", "entmax15", "entmax_adaptive"}
    assert set(study.normalisers["normalisation"]) == {"unscaled", "scaled"}
    drawn = {name: data for name, _, _, data in saturation_figures.figures(study)}
    assert set(drawn["a-init-weights"]["normaliser"]) == {"softmax"}
    assert set(drawn["a-normalisers"]["normaliser"]) == set(study.normalisers["normaliser"])

    for name in ("setting.json", "init_stats.csv"):
        shutil.copy(saturation_dir / name, tmp_path / name)
    table = pd.read_csv(tmp_path / "init_stats.csv")
    cell = ((table["normaliser"] == "sparsemax") & (table["normalisation"] == "unscaled")
            & (table["head_dim"] == table["head_dim"].max()) & (table["num_keys"] == table["num_keys"].max())
            & (table["dtype"] == "float32"))
    table.loc[cell, "zero_fraction"] = 0.4321
    table.to_csv(tmp_path / "init_stats.csv", index=False)
    (cell_sentence,) = [sentence for sentence in saturation_findings.findings(saturation_study.load(tmp_path))
                        if sentence.startswith("Study A, normalisers (init_stats.csv")]
    assert "sparsemax: largest weight" in cell_sentence and "exact zeros 43.2% against" in cell_sentence


def test_lengths_come_from_the_summaries_with_the_training_length_first(study, saturation_dir):
    expected = [{"run_id": summary["run_id"], "length": entry["length"], "accuracy": entry["accuracy"],
                 "trained": index == 0}
                for _, summary, _ in _records(saturation_dir, "D")
                for index, entry in enumerate(summary["accuracy_by_length"])]
    assert {row["length"] for row in expected if row["trained"]} == {12}
    table = study.lengths[["run_id", "length", "accuracy", "trained"]]
    assert table.sort_values(["run_id", "length"]).to_dict("records") == sorted(
        expected, key=lambda row: (row["run_id"], row["length"]))


def _numbers(text):
    """(value, tolerance) of every number written in the text: half a unit of its last digit."""
    text = re.sub(r"et al\. \(\d{4}\)", "et al.", text)  # a citation's year is not a measurement
    found = []
    for mantissa, exponent in NUMBER.findall(text):
        decimals = len(mantissa.partition(".")[2])
        scale = 10.0 ** int(exponent or 0)
        found.append((float(mantissa) * scale, 0.5 * 10.0**-decimals * scale * (1 + 1e-9)))
    return found


def _fading_derived(fading):
    """n times the strong weight, and the slope of log weight against log n over the upper half of the key counts
    (as a magnitude: the text's numbers are read without their sign)."""
    values = list(fading["num_keys"] * fading["strong_weight"])
    key_counts = sorted(fading["num_keys"].unique())
    upper = fading[fading["num_keys"] >= key_counts[min(len(key_counts) // 2, len(key_counts) - 2)]]
    for _, line in upper.groupby(["normaliser", "length_scale", "variant_options"], dropna=False):
        values.append(abs(np.polyfit(np.log(line["num_keys"]), np.log(line["strong_weight"]), 1)[0]))
    return values


def _candidates(study):
    """Every value the findings may state: table cells, their means over seeds, counts and totals,
    the setting, and the thresholds the text names; percentages as x100."""
    speed = saturation_study.learning_speed(study)
    at_model = study.init_model.assign(closed_form=study.init_model["head_dim"] * study.init_model["q_variance"]
                                       * study.init_model["k_variance"])
    frames = [study.init, at_model, study.normalisers, saturation_study.normaliser_dynamics(study), study.variance,
              study.fading, study.steps_to_accuracy, speed,
              study.learning_rates, study.lengths,
              study.learning_rates.groupby(["variant_name", "lr"]).mean(numeric_only=True),
              study.lengths.groupby(["variant_name", "length"]).mean(numeric_only=True),
              study.runs.select_dtypes("number")]
    values = [float(value) for frame in frames for value in frame.select_dtypes("number").to_numpy().ravel()]
    values += list(study.learning_rates[["bound_checks", "bound_violations"]].sum())
    values += [len(study.steps_to_accuracy), len(study.learning_rates), study.lengths["run_id"].nunique()]
    values += [value for field in vars(study.setting).values()
               for value in (field if isinstance(field, tuple) else [field]) if isinstance(value, (int, float))]
    values += [value for _, options in study.setting.fading_kernelised for value in options.values()
               if isinstance(value, (int, float))]  # the options a drawn row names, e.g. num_features=512
    values += [THRESHOLD, CONFIDENCE, SATURATED, VANISHING_DERIVATIVE, FADES_LIKE_ONE_OVER_N, 0, 1]
    values += _fading_derived(study.fading)
    values = [value for value in values if math.isfinite(value)]
    return values + [100 * value for value in values]


def test_every_number_in_the_findings_is_recomputable_from_the_tables(study):
    candidates = _candidates(study)
    sentences = saturation_findings.findings(study)
    assert [sentence[:8] for sentence in sentences].count("Study A ") >= 4
    assert any(sentence.startswith("Study B") for sentence in sentences)
    assert [sentence[:26] for sentence in sentences].count("Study A, normalisers (init") == 1
    assert any(sentence.startswith("Study A, normalisers (float32") for sentence in sentences)
    assert any(sentence.startswith("Study B, normalisers (dense runs") for sentence in sentences)
    assert any(sentence.startswith("Study C") for sentence in sentences)
    assert any(sentence.startswith("Study D, synthetic") for sentence in sentences)
    assert any(sentence.startswith("Study D, trained") for sentence in sentences)
    for sentence in sentences:
        for value, tolerance in _numbers(sentence):
            assert any(abs(candidate - value) <= tolerance for candidate in candidates), (value, sentence)


def test_the_entropy_bound_is_checked_at_every_dense_head_and_never_violated(study, saturation_dir):
    checks = violations = 0
    for _, _, evals in _records(saturation_dir, "C"):
        for entry in (entry for line in evals for entry in line["attention"] if entry["entropy_bound"] is not None):
            checks += 1
            violations += entry["bound_violations"]
            assert entry["entropy_bound"] <= entry["entropy"] + 1e-9
    assert checks > 0 and violations == 0
    text = " ".join(saturation_findings.findings(study))
    assert f"was checked at {checks} (evaluation, layer, head) points of the dense runs" in text
    assert "; 0 rows had an entropy below their bound (as it must be" in text


def test_a_stated_number_follows_its_csv_and_missing_studies_say_how_to_make_them(tmp_path, saturation_dir):
    for name in ("setting.json", "init_stats.csv"):
        shutil.copy(saturation_dir / name, tmp_path / name)
    table = pd.read_csv(tmp_path / "init_stats.csv")
    cell = ((table["normalisation"] == "unscaled") & (table["head_dim"] == table["head_dim"].max())
            & (table["num_keys"] == table["num_keys"].max()) & (table["dtype"] == "float32"))
    before = " ".join(saturation_findings.findings(saturation_study.load(tmp_path)))
    assert "0.12346 ± 0.00079" not in before
    table.loc[cell, ["max_weight", "max_weight_se", "frac_max_above_0.99"]] = [0.123456, 0.00079, 0.25]
    table.to_csv(tmp_path / "init_stats.csv", index=False)

    sentences = saturation_findings.findings(saturation_study.load(tmp_path))
    assert ("at d_k = 64 and n = 256 unscaled attention puts a mean largest weight of 0.12346 ± 0.00079 on one key "
            "and 25.0% of rows above 0.99") in sentences[0]
    assert sentences[0].startswith("Study A (init_stats.csv: 64 samples per cell, seed 0, float32)")
    for study_name in ("Study B (training dynamics)", "Study C (entropy collapse over learning rates)",
                       "Study D, synthetic (fading with n)", "Study D (length generalisation)"):
        missing = next(sentence for sentence in sentences if sentence.startswith(study_name))
        assert "`make saturation`" in missing


@pytest.mark.parametrize(("power", "pace"), [(1.0, "like 1/n"), (0.5, "slower than 1/n"), (1.5, "faster than 1/n")])
def test_the_drawn_fading_lines_are_stated_from_their_numbers_and_drawn(tmp_path, saturation_dir, power, pace):
    for name in ("setting.json", "fading.csv"):
        shutil.copy(saturation_dir / name, tmp_path / name)
    fading = pd.read_csv(tmp_path / "fading.csv")
    linear = fading["normaliser"] == "linear"
    setting = json.loads((saturation_dir / "setting.json").read_text())
    assert set(fading.loc[linear, "draws"]) == {setting["fading_draws"]}
    assert set(fading.loc[linear, "head_dim"]) == {setting["fading_head_dim"]}
    fading.loc[linear, "strong_weight"] = 3.0 * fading.loc[linear, "num_keys"] ** -power
    fading.to_csv(tmp_path / "fading.csv", index=False)

    study = saturation_study.load(tmp_path)
    (drawn,) = [sentence for sentence in saturation_findings.findings(study)
                if sentence.startswith("Study D, synthetic, drawn")]
    largest = fading["num_keys"].max()
    assert f"{number(3.0 * largest ** (1 - power))} times the uniform 1/n" in drawn
    assert f"linear n^{-power:.2f} ({pace})" in drawn
    (fading_figure,) = [data for name, _, _, data in saturation_figures.figures(study) if name == "d-fading"]
    assert "linear" in set(fading_figure["label"])
    absent = [sentence for sentence in saturation_findings.findings(study) if "not in fading.csv" in sentence]
    assert absent == ([] if "performer" in variants.list_variants() else [
        "Study D, synthetic: the setting's performer is not in fading.csv: the version that wrote it registers no "
        "such variant."])


def test_unreadable_pieces_are_skipped_with_their_reason(tmp_path, saturation_dir):
    folder = tmp_path / "quick"
    shutil.copytree(saturation_dir, folder, ignore=shutil.ignore_patterns("checkpoint.pt", "*.png"))
    (folder / "fading.csv").write_text("normaliser,num_keys\nsoftmax,2\n")
    (folder / "runs" / "B-dense-d8-s0" / "metrics.jsonl").write_text('{"kind": "eval", "step": ')
    (folder / "runs" / "C-dense-lr0.1-s0" / "summary.json").write_text("{")
    summary = json.loads((folder / "runs" / "D-dense-s0" / "summary.json").read_text())
    (folder / "runs" / "D-dense-s0" / "summary.json").write_text(json.dumps({**summary, "status": "running"}))

    study = saturation_study.load(folder)
    reasons = {entry["run"]: entry["reason"] for entry in study.skipped}
    assert reasons["fading.csv"].startswith("lacks the columns")
    assert reasons["runs/B-dense-d8-s0"].startswith("metrics.jsonl unreadable")
    assert "summary.json" in reasons["runs/C-dense-lr0.1-s0"]
    assert reasons["runs/D-dense-s0"].startswith("status running: left out of the tables")
    assert study.fading is None
    assert "B-dense-d8-s0" not in set(study.steps_to_accuracy["run_id"]) and len(study.steps_to_accuracy) == 14
    assert "C-dense-lr0.1-s0" not in set(study.learning_rates["run_id"]) and len(study.learning_rates) == 3
    assert "D-dense-s0" not in set(study.lengths["run_id"])
    assert any(sentence.startswith("Study B (14 runs B-*") for sentence in saturation_findings.findings(study))
    assert any(sentence.startswith("Study D, synthetic (fading with n): no fading.csv")
               for sentence in saturation_findings.findings(study))


def test_findings_md_shows_names_from_the_study_folder_as_text(tmp_path, saturation_dir):
    folder = tmp_path / "quick"
    shutil.copytree(saturation_dir, folder, ignore=shutil.ignore_patterns("checkpoint.pt", "*.png"))
    evil = folder / "runs" / '"><img src=x onerror=alert(1)>'
    shutil.copytree(folder / "runs" / "D-dense-s0", evil)
    (evil / "summary.json").write_text("{")  # skipped, and listed under its name
    summary = json.loads((folder / "runs" / "B-dense-d8-s0" / "summary.json").read_text())
    (folder / "runs" / "B-dense-d8-s0" / "summary.json").write_text(
        json.dumps({**summary, "variant_name": "<script>alert(2)</script>"}))

    saturation_readback.write(folder)
    findings = (folder / "findings.md").read_text()
    assert "&lt;img src=x onerror=alert(1)&gt;" in findings and "&lt;script&gt;alert(2)&lt;/script&gt;" in findings
    assert "<img" not in findings and "<script" not in findings


def test_make_saturation_leaves_tables_figures_and_findings_in_the_study_folder(study, saturation_dir):
    for name, table in (("steps_to_accuracy", study.steps_to_accuracy), ("learning_rates", study.learning_rates),
                        ("lengths", study.lengths), ("dynamics", study.dynamics),
                        ("normaliser_dynamics", saturation_study.normaliser_dynamics(study))):
        written = pd.read_csv(saturation_dir / "tables" / f"{name}.csv")
        assert len(written) == len(table) and list(written.columns) == list(table.columns), name
    speed = pd.read_csv(saturation_dir / "tables" / "learning_speed.csv")
    assert speed["runs"].sum() == len(study.steps_to_accuracy)
    names = sorted(path.stem for path in (saturation_dir / "figures").glob("*.png"))
    assert names == sorted(["a-init-weights", "a-vanishing-derivatives", "a-normalisers", "b-learning-curves",
                            "b-entropy-gradients", "b-steps-to-accuracy", "b-normalisers", "c-learning-rates",
                            "c-entropy-bound", "d-fading", "d-lengths"])
    for name in names:
        with Image.open(saturation_dir / "figures" / f"{name}.png") as image:
            assert image.width >= 380 and image.height >= 200, name
    findings = (saturation_dir / "findings.md").read_text()
    for sentence in saturation_findings.findings(study):
        assert f"- {md_escape(sentence)}\n" in findings


def test_the_section_shows_findings_figures_and_tables_and_prefers_the_full_setting(study, saturation_dir, tmp_path):
    runs_dir = saturation_dir.parent.parent
    assert saturation_study.study_folder(runs_dir) == saturation_dir
    with style.style():
        blocks = saturation_section.blocks(runs_dir)
    texts = [block.text for block in blocks if isinstance(block, Text)]
    assert texts[1:] == saturation_findings.findings(study)
    figures = [block for block in blocks if isinstance(block, Figure)]
    assert len(figures) == 11 and all(block.name.startswith("saturation-") for block in figures)
    tables = {block.name: block for block in blocks if isinstance(block, Table)}
    assert set(tables) == {"saturation-learning-speed", "saturation-learning-rates", "saturation-lengths",
                           "saturation-model-variance", "saturation-init-at-model-variance", "saturation-normalisers"}
    assert len(tables["saturation-learning-speed"].frame) == 15  # 6 variants x 2 head dims + 3 normalisers at 8
    assert len(tables["saturation-normalisers"].frame) == 4  # dense with the softmax and 3 others, at head dim 8

    (tmp_path / "saturation" / "quick").mkdir(parents=True)
    (tmp_path / "saturation" / "full" / "runs").mkdir(parents=True)
    assert saturation_study.study_folder(tmp_path) == tmp_path / "saturation" / "quick"  # full has no runs yet
    (tmp_path / "saturation" / "full" / "runs" / "B-dense-d16-s0").mkdir()
    assert saturation_study.study_folder(tmp_path) == tmp_path / "saturation" / "full"


def test_a_report_without_a_saturation_study_says_how_to_make_one(tmp_path):
    (tmp_path / "runs").mkdir()
    page = build_report(tmp_path / "runs", tmp_path / "reports").read_text()
    section = re.search(r'<section id="saturation"><h2>Softmax saturation</h2>(.*?)</section>', page).group(1)
    assert section == (f"<p>No softmax saturation study in {tmp_path / 'runs' / 'saturation'}: `make saturation` "
                       "(SETTING=quick: under 10 minutes on CPU; SETTING=full: the fuller grids) produces one.</p>")
