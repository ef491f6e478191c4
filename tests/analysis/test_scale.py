"""A runs folder of 1,000 runs: copies of the real tiny runs with their own ids and seeds."""

import json
import os
import shutil
import time

import pandas as pd

from analysis import build_report
from analysis.report.sections import attention
from experiments.run.records import RunRecord

RUNS = 1000


def _fabricate(source_runs, runs_dir):
    models = {}  # variant name -> the completed seed-0 run, outside sweeps
    for path in sorted(source_runs.glob("*/summary.json")):
        try:
            summary = json.loads(path.read_text())
        except json.JSONDecodeError:
            continue
        if summary["status"] == "completed" and not summary["tags"] and summary["seed"] == 0:
            models[summary["variant_name"]] = path.parent
    assert set(models) == {"dense", "local_w4"}
    models = list(models.values())
    runs_dir.mkdir()
    for index in range(RUNS):
        model = models[index % len(models)]
        run_id = f"20260101-000000-copy-passkey-s{index}-{index:04x}"
        folder = runs_dir / run_id
        folder.mkdir()
        config = json.loads((model / "config.json").read_text())
        summary = json.loads((model / "summary.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, "seed": index + 100}))
        (folder / "summary.json").write_text(json.dumps({**summary, "run_id": run_id, "seed": index + 100}))
        shutil.copyfile(model / "metrics.jsonl", folder / "metrics.jsonl")
        os.link(model / "checkpoint.pt", folder / "checkpoint.pt")


def test_a_thousand_runs_report_loading_only_a_handful_of_checkpoints(runs_dir, tmp_path, monkeypatch, capsys):
    _fabricate(runs_dir, tmp_path / "runs")
    loads = []
    original = RunRecord.load_checkpoint
    monkeypatch.setattr(RunRecord, "load_checkpoint", lambda record: loads.append(record.run_id) or original(record))

    started = time.perf_counter()
    index = build_report(tmp_path / "runs", tmp_path / "reports")
    elapsed = time.perf_counter() - started
    with capsys.disabled():
        print(f"\nreport of {RUNS} runs built in {elapsed:.1f} s")

    assert 0 < len(loads) <= attention.MAX_ATTENTION_RUNS
    results = pd.read_csv(index.parent / "tables" / "results.csv")
    assert results["seeds"].sum() == RUNS and sorted(results["seeds"]) == [RUNS // 2, RUNS // 2]
    provenance = pd.read_csv(index.parent / "tables" / "provenance.csv")
    assert len(provenance) == RUNS
