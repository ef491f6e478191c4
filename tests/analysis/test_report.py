import json
import math
import re
import shlex
import shutil

import numpy as np
import optuna
import pandas as pd
import pytest
import torch
from conftest import CORRUPT_RUN, EVIL_ERROR, EVIL_NAME, EVIL_RUN, STUDY
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

import analysis
from analysis import build_report
from analysis.report.render import Text
from analysis.report.sections import registry
from experiments.run import config as configs


def _table(report, name):
    return pd.read_csv(report.parent / "tables" / f"{name}.csv", keep_default_na=False, na_values=[""])


def _ordinary_summaries(runs_dir):
    summaries = []
    for path in sorted(runs_dir.glob("*/summary.json")):
        try:
            summary = json.loads(path.read_text())
        except json.JSONDecodeError:
            continue
        if not summary["tags"]:
            summaries.append(summary)
    return summaries


def test_the_report_has_every_section_in_html_and_markdown_with_a_file_for_every_figure_and_table(report):
    page = report.read_text()
    markdown = (report.parent / "report.md").read_text()
    for builder in registry.SECTIONS:
        assert f'<section id="{builder.key}"><h2>{builder.title}</h2>' in page
        assert f"\n## {builder.title}\n" in markdown
    images = re.findall(r'<img src="([^"]+)"', page)
    links = re.findall(r'<a href="([^"#][^"]*)"', page)
    assert len(images) >= 8  # distance, curves, two attention pictures, layouts, cost, sweep history, importance
    for relative in images + links:
        assert (report.parent / relative).is_file(), relative
    for name in re.findall(r"\]\(((?:figures|tables)/[^)]+)\)", markdown):
        assert (report.parent / name).is_file(), name
    assert sorted(path.name for path in (report.parent / "figures").iterdir()) == sorted(
        relative.removeprefix("figures/") for relative in images)


def test_the_results_table_is_computed_from_the_run_records(report, runs_dir):
    expected = {}
    for summary in _ordinary_summaries(runs_dir):
        cell = expected.setdefault((summary["task"], summary["variant_name"]), {"accuracy": [], "failed": 0})
        if summary["status"] == "completed":
            cell["accuracy"].append(summary["test_accuracy"])
        cell["failed"] += summary["status"] == "failed"
    results = _table(report, "results")
    assert len(results) == len(expected) == 3
    for row in results.itertuples():
        cell = expected[(row.task, row.variant)]
        assert row.seeds == len(cell["accuracy"])
        assert row.failed == cell["failed"]
        if cell["accuracy"]:
            assert row.accuracy_mean == pytest.approx(np.mean(cell["accuracy"]))
            assert row.accuracy_std == pytest.approx(np.std(cell["accuracy"], ddof=1))
            shown = f"{np.mean(cell['accuracy']):.3f} ± {np.std(cell['accuracy'], ddof=1):.3f} (n=2)"
            assert shown in report.read_text()
            assert shown in (report.parent / "report.md").read_text()
        assert row.chance == pytest.approx(0.25)


def test_the_average_column_is_recomputed_from_the_cells(report):
    results = _table(report, "results")
    by_task = _table(report, "results-by-task").set_index("variant")
    for row in results.itertuples():
        assert by_task.loc[row.label, row.task] == pytest.approx(row.accuracy_mean, nan_ok=True)
    for _, row in by_task.iterrows():
        cells = [row[task] for task in results["task"].unique() if not math.isnan(row[task])]
        if cells:
            assert row["average"] == pytest.approx(np.mean(cells))
            assert row["tasks_averaged"] == len(cells)
    assert by_task.loc["chance", "average"] == pytest.approx(0.25)


def test_a_failed_run_is_counted_and_listed_never_dropped(report):
    results = _table(report, "results")
    evil = results[results["variant"] == EVIL_NAME]
    assert list(evil["failed"]) == [1] and list(evil["seeds"]) == [0]
    unfinished = _table(report, "unfinished-runs")
    assert list(unfinished["run_id"]) == [EVIL_RUN] and list(unfinished["error"]) == [EVIL_ERROR]


def test_strings_from_runs_are_shown_as_text_in_html_and_markdown(report):
    page = report.read_text()
    markdown = (report.parent / "report.md").read_text()
    for raw in (EVIL_NAME, EVIL_ERROR):
        assert raw not in page and raw not in markdown
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(2)&gt;" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in markdown
    assert "<script" not in page.lower()


def test_a_corrupt_record_is_listed_as_skipped_with_its_reason(report):
    skipped = _table(report, "skipped-records")
    assert list(skipped["run"]) == [CORRUPT_RUN]
    assert "is not valid UTF-8 JSON" in skipped["reason"].iloc[0]
    assert CORRUPT_RUN in report.read_text()


def test_accuracy_by_distance_averages_the_seeds_and_marks_the_local_reach(report, runs_dir):
    distance = _table(report, "distance-00-passkey")
    expected = {}
    for summary in _ordinary_summaries(runs_dir):
        if summary["status"] == "completed":
            for bucket in summary["accuracy_by_distance"]:
                expected.setdefault((summary["variant_name"], bucket["lo"]), []).append(bucket["accuracy"])
    assert len(distance) == len(expected) == 8  # 2 variants x 4 buckets
    for row in distance.itertuples():
        assert row.accuracy_mean == pytest.approx(np.mean(expected[(row.variant_name, row.lo)]))
        assert row.seeds == 2
    reach = _table(report, "reach-00-passkey")
    # one causal layer with a window of 4, |i - j| <= 2: the last position sees 2 tokens back, and no farther
    assert reach.to_dict("records") == [{"task": "passkey", "variant_name": "local_w4", "depth": 1, "seq_len": 12,
                                         "reach": 2}]


def test_learning_curves_average_the_metrics_streams(report, runs_dir):
    curves = _table(report, "curves-00-passkey")
    losses = {}
    for path in runs_dir.glob("*/metrics.jsonl"):
        summary = json.loads((path.parent / "summary.json").read_text())
        if summary["tags"] or summary["status"] != "completed":
            continue
        for line in map(json.loads, path.read_text().splitlines()):
            if line["kind"] == "train":
                losses.setdefault((summary["variant_name"], line["step"]), []).append(line["loss"])
    train = curves[(curves["kind"] == "train") & (curves["variant_name"] != EVIL_NAME)]
    assert len(train) == len(losses) == 8  # 2 variants x steps 5, 10, 15, 20
    for row in train.itertuples():
        assert row.loss_mean == pytest.approx(np.mean(losses[(row.variant_name, row.step)]))


def test_attention_pictures_are_softmax_weights_of_one_checkpoint_per_variant(report):
    pictures = sorted(path.name for path in (report.parent / "tables").glob("attention-*.csv"))
    assert pictures == ["attention-00-passkey-dense.csv", "attention-01-passkey-local_w4.csv"]
    for name in pictures:
        weights = pd.read_csv(report.parent / "tables" / name)
        assert weights["query"].nunique() == 12 and set(weights["head"]) == {0, 1}
        rows = weights.groupby(["layer", "head", "query"])["weight"].sum()
        assert np.allclose(rows, 1.0, atol=1e-3)
        assert (weights.loc[weights["key"] > weights["query"], "weight"] == 0).all()  # causal
    local = pd.read_csv(report.parent / "tables" / pictures[1])
    assert (local.loc[local["query"] - local["key"] > 2, "weight"] == 0).all()
    layouts = _table(report, "layouts")
    assert set(layouts["variant_name"]) == {"local_w4"}
    assert len(layouts) == 3 * 12 - (1 + 2)  # causal, window 4: 0 <= i - j <= 2 on 12 positions
    assert ((layouts["query"] - layouts["key"]).between(0, 2)).all()


def test_the_cost_section_fits_the_exponent_of_each_line_from_the_speed_csv(report, runs_dir):
    (csv,) = (runs_dir / "speed").glob("variants-*.csv")
    speed = pd.read_csv(csv)
    exponents = _table(report, "cost-exponents")
    assert len(exponents) == speed.groupby(["variant", "kernel"]).ngroups == 2
    for row in exponents.itertuples():
        line = speed[(speed["variant"] == row.variant) & (speed["kernel"] == row.kernel)]
        assert row.time_exponent == pytest.approx(np.polyfit(np.log(line["seq_len"]), np.log(line["ms"]), 1)[0])
        assert row.memory_exponent == pytest.approx(
            np.polyfit(np.log(line["seq_len"]), np.log(line["peak_mib"]), 1)[0])


def test_the_sweep_section_lists_the_trials_best_settings_and_importances(report, runs_dir):
    storage = JournalStorage(JournalFileBackend(str(runs_dir / "sweeps" / f"{STUDY}.journal")))
    study = optuna.load_study(study_name=STUDY, storage=storage)
    trials = _table(report, f"sweep-00-{STUDY}-trials")
    assert list(trials["state"]) == ["complete", "complete", "pruned"]
    assert list(trials["run_id"]) == [trial.user_attrs["run_id"] for trial in study.trials]
    assert list(trials["run status"]) == ["completed", "completed", "pruned"]
    best = _table(report, "best-sweep-settings").iloc[0]
    assert (best["study"], best["best trial"]) == (STUDY, study.best_trial.number)
    assert best["selection value (objective)"] == pytest.approx(study.best_value)
    best_run = json.loads((runs_dir / study.best_trial.user_attrs["run_id"] / "summary.json").read_text())
    assert best["test accuracy (its run's)"] == pytest.approx(best_run["test_accuracy"])
    assert best["confirmation seeds"] == 0
    history = _table(report, f"sweep-00-{STUDY}-history")
    assert len(history) == sum(len(trial.intermediate_values) for trial in study.trials)
    importance = _table(report, f"sweep-00-{STUDY}-importance")
    assert set(importance["param"]) == {"variant.window", "train.lr"}
    assert importance["importance"].sum() == pytest.approx(1.0)


def test_each_runs_provenance_command_reproduces_its_config(report, runs_dir):
    provenance = _table(report, "provenance")
    assert set(provenance["run"]) == {path.name for path in runs_dir.iterdir() if path.name not in
                                      ("speed", "sweeps", "saturation", CORRUPT_RUN)}
    for row in provenance.itertuples():
        words = shlex.split(row.command)
        assert words[:2] == ["make", "experiment"]
        variables = dict(word.split("=", 1) for word in words[2:])
        arguments = shlex.split(variables.get("ARGS", ""))
        sets = [arguments[index + 1] for index, word in enumerate(arguments) if word == "--set"]
        rebuilt = configs.resolve(variant=variables["VARIANT"], task=variables["TASK"], profile=variables["PROFILE"],
                                  seed=int(variables["SEED"]), device=variables["DEVICE"],
                                  overrides=configs.parse_sets(sets))
        saved = json.loads((runs_dir / row.run / "config.json").read_text())
        assert json.loads(configs.to_json(rebuilt)) == saved, row.run
    environment = dict(_table(report, "environment").itertuples(index=False))
    assert {"torch", "optuna", "pandas", "attnlab git commit"} <= set(environment)


def test_an_empty_runs_folder_gives_a_report_that_says_so_in_every_section(tmp_path):
    (tmp_path / "runs").mkdir()
    page = build_report(tmp_path / "runs", tmp_path / "reports").read_text()
    assert f"No runs in {tmp_path / 'runs'}" in page
    for builder in registry.SECTIONS:
        assert f"<h2>{builder.title}</h2>" in page
    assert "<img" not in page


def test_a_missing_runs_folder_or_unknown_study_or_filter_column_is_a_one_sentence_error(tmp_path, runs_dir):
    with pytest.raises(ValueError, match=r"^Runs folder '.*missing' does not exist; accepted: "):
        build_report(tmp_path / "missing", tmp_path / "reports")
    with pytest.raises(ValueError, match=rf"^Study 'nope' has no journal in .*; accepted: {STUDY}\.$"):
        build_report(runs_dir, tmp_path / "reports", study="nope")
    with pytest.raises(ValueError, match=r"^Filter column 'varaint' is not a run column \(did you mean 'variant'"):
        build_report(runs_dir, tmp_path / "reports", filters="varaint=local")
    assert not (tmp_path / "reports").exists() or not any((tmp_path / "reports").iterdir())


@pytest.mark.parametrize("filters, expected", [
    ({"variant": ["sinkhorn", "reformer"], "task": ["passkey"]}, "variant-sinkhorn-or-reformer_task-passkey"),
    ({"variant": ["../up", "a b+c"]}, "variant-.-up-or-a-b-c"),
    ({"variant": ["..."]}, "variant"),
])
def test_a_report_named_after_its_filters_gets_a_plain_name_whatever_the_values(filters, expected):
    from analysis.report.build import REPORT_NAME, default_name

    name = default_name(None, filters)
    assert name == expected and REPORT_NAME.fullmatch(name) and ".." not in name


def test_a_report_filtered_on_two_values_of_a_column_is_written_under_its_derived_name(tmp_path, runs_dir):
    report = build_report(runs_dir, tmp_path / "reports", filters="variant=dense,variant=local")
    assert report.parent.name == "variant-dense-or-local" and report.is_file()


def test_a_folder_that_is_not_a_report_is_never_replaced(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "reports" / "all").mkdir(parents=True)
    (tmp_path / "reports" / "all" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"^Report folder '.*all' exists and is not a report"):
        build_report(tmp_path / "runs", tmp_path / "reports")
    assert (tmp_path / "reports" / "all" / "notes.txt").read_text() == "mine"
    assert [path.name for path in (tmp_path / "reports").iterdir()] == ["all"]


def test_a_new_section_is_one_registered_function(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "SECTIONS", list(registry.SECTIONS))

    @analysis.section("example", "Example")
    def example(context):
        return [Text(f"{len(context.runs)} runs <checked>")]

    with pytest.raises(ValueError, match=r"^Report section 'example' is already registered"):
        analysis.section("example", "Again")(example)
    (tmp_path / "runs").mkdir()
    page = build_report(tmp_path / "runs", tmp_path / "reports", name="with-example").read_text()
    assert '<section id="example"><h2>Example</h2><p>0 runs &lt;checked&gt;</p></section>' in page


EVIL_LABEL = "<script>alert(3)</script>"
EVIL_FOLDER = 'evil-"><img src=x onerror=alert(4)>'
EVIL_STUDY = '"><img src=x onerror=alert(5)><script>alert(6)</script>'


def _evil_runs(runs_dir, folder):
    """A completed run with a checkpoint whose variant name and folder (run id) are HTML, and a sweep study
    whose name is HTML and whose best trial is that run."""
    folder.mkdir()
    source = next(path for path in sorted(runs_dir.iterdir()) if "-dense-" in path.name
                  and json.loads((path / "summary.json").read_text())["status"] == "completed"
                  and not json.loads((path / "summary.json").read_text())["tags"])
    evil = folder / EVIL_FOLDER
    shutil.copytree(source, evil)
    summary = json.loads((evil / "summary.json").read_text())
    summary.update(run_id=EVIL_FOLDER, variant_name=EVIL_LABEL)
    (evil / "summary.json").write_text(json.dumps(summary))
    (folder / "sweeps").mkdir()
    storage = JournalStorage(JournalFileBackend(str(folder / "sweeps" / "evil.journal")))
    study = optuna.create_study(storage=storage, study_name=EVIL_STUDY, direction="maximize")
    study.set_user_attr("definition", {"variant": "dense", "task": "passkey", "profile": "quick", "seed": 0})
    lr = optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)
    for value, rate in ((summary["test_accuracy"], 1e-3), (0.1, 1e-2)):
        study.add_trial(optuna.trial.create_trial(params={"train.lr": rate}, distributions={"train.lr": lr},
                                                  value=value, user_attrs={"run_id": EVIL_FOLDER}))


def test_names_from_runs_and_studies_are_escaped_in_captions_titles_and_tables(runs_dir, tmp_path):
    _evil_runs(runs_dir, tmp_path / "runs")
    page = build_report(tmp_path / "runs", tmp_path / "reports").read_text()
    markdown = (tmp_path / "reports" / "all" / "report.md").read_text()
    pictures = re.findall(r'<figure><img src="figures/attention-[^"]*" alt="([^"]*)">', page)
    assert len(pictures) == 1 and "&lt;script&gt;alert(3)&lt;/script&gt;" in pictures[0]
    assert "evil-&quot;&gt;&lt;img src=x onerror=alert(4)&gt;" in pictures[0]  # the run id, in the alt text
    assert re.search(r'<figcaption>Study &quot;&gt;&lt;img src=x onerror=alert\(5\)&gt;&lt;script&gt;alert\(6\)'
                     r"&lt;/script&gt;: optimisation history", page)
    for text in (page, markdown):
        assert "<script" not in text.lower()
        assert "<img src=x" not in text and '"><img' not in text
    assert "&lt;img src=x onerror=alert(5)&gt;" in markdown


def test_the_results_table_shows_each_rows_position_scheme_from_its_config(report, runs_dir):
    results = _table(report, "results")
    expected = {}
    for path in runs_dir.glob("*/config.json"):
        summary_path = path.parent / "summary.json"
        try:
            summary = json.loads(summary_path.read_text())
        except json.JSONDecodeError:
            continue
        if not summary["tags"]:
            expected.setdefault(summary["variant_name"], set()).add(json.loads(path.read_text())["model"]["positions"])
    assert dict(zip(results["variant"], results["model.positions"], strict=True)) == {
        name: ",".join(sorted(schemes)) for name, schemes in expected.items()}
    assert "<th>model.positions</th>" in report.read_text()


def test_a_study_shows_its_best_trials_selection_value_apart_from_test_accuracy_and_its_confirmation_runs(
        runs_dir, tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(runs_dir, runs, ignore=shutil.ignore_patterns("checkpoint.pt", "saturation", "speed"))
    sources = [path for path in sorted(runs.iterdir()) if "-dense-" in path.name
               and json.loads((path / "summary.json").read_text())["status"] == "completed"][:2]
    for index, (source, accuracy) in enumerate(zip(sources, (0.5, 0.7), strict=True)):
        confirm = runs / f"20260102-000000-confirm-passkey-s{index}-0000"
        shutil.copytree(source, confirm)
        summary = json.loads((confirm / "summary.json").read_text())
        summary.update(run_id=confirm.name, test_accuracy=accuracy, tags={"study": STUDY, "confirm": True})
        (confirm / "summary.json").write_text(json.dumps(summary))
    index = build_report(runs, tmp_path / "reports")
    best = _table(index, "best-sweep-settings").iloc[0]
    assert best["confirmation seeds"] == 2
    assert best["confirmation mean"] == pytest.approx(0.6)
    assert best["confirmation std"] == pytest.approx(np.std([0.5, 0.7], ddof=1))
    page = index.read_text()
    sweeps = re.search(r'<section id="sweeps">(.*?)</section>', page).group(1)
    assert re.search(rf"Study {STUDY}: best trial \d+, selection value \(the sweep&#x27;s objective, which chose it\) "
                     r"[\d.]+; test accuracy of its run \S+ \(that run&#x27;s test accuracy, not used to choose\) "
                     r"[\d.]+; confirmation runs \(tagged with the study and confirm\) test accuracy "
                     r"0\.600 ± 0\.141 \(n=2\)", sweeps)


def test_the_layout_figure_draws_bigbirds_random_blocks_as_the_run_drew_them(tmp_path):
    from types import SimpleNamespace

    from analysis.report.sections import attention
    from experiments.run.build import build
    from experiments.run.model import Transformer

    options = {"pattern": "bigbird", "block_size": 4, "num_global_blocks": 0, "num_random_blocks": 2}
    config = configs.resolve(variant="sparse", task="passkey", profile="quick", seed=3, device="cpu",
                             overrides={"variant": options, "task": {}, "model": {}, "train": {}})
    built = build(config)  # as `shared.layout_variants` builds a run's modules: from its config, seed included
    entry = {"variant_name": "bigbird", "variant": "sparse", "modules": [block.attn for block in built.model.blocks],
             "heads": config.model.heads, "depth": config.model.depth, "causal": False, "seq_len": 48, "seed": 3}
    figure = attention._layout_figure(SimpleNamespace(colour=lambda name: "#123456"), [entry])
    drawn = torch.zeros(48, 48, dtype=torch.bool)
    drawn[figure.data["query"].to_numpy(copy=True), figure.data["key"].to_numpy(copy=True)] = True

    model = Transformer(config.model, vocab_size=8, num_classes=2, max_len=48, variant="sparse",
                        variant_options=config.variant_options, seed=3)
    assert torch.equal(drawn, model.blocks[0].attn.layout(48, 48, head=0))
    other_seed = Transformer(config.model, vocab_size=8, num_classes=2, max_len=48, variant="sparse",
                             variant_options=config.variant_options, seed=4)
    assert not torch.equal(drawn, other_seed.blocks[0].attn.layout(48, 48, head=0))


def test_rows_whose_models_differ_by_more_than_ten_percent_are_flagged():
    from analysis.report.sections import results

    def cell(label, parameters):
        return {"task": "passkey", "label": label, "parameters": parameters}

    assert results.size_warnings(pd.DataFrame([cell("dense", 1000.0), cell("local", 1100.0)])) == []
    (warning,) = results.size_warnings(pd.DataFrame([cell("dense", 1000.0), cell("lstm", 1101.0),
                                                     cell("old", math.nan)]))
    assert warning == "passkey: lstm has 1,101 parameters, 1.10x the 1,000 of dense"
