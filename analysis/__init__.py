"""attnlab's analysis: run records -> pandas, saturation and complexity studies, figures and the report.

Every result it reads comes from the run folders the experiments write (`runs/<run_id>/`), the sweep
studies beside them (`runs/sweeps/<study>.journal`) and the benchmark CSVs under `runs/bench/`.

    >>> import analysis
    >>> runs = analysis.load_runs("runs")                       # one row per run
    >>> analysis.build_report("runs", "reports", filters="task=passkey")  # reports/task-passkey/index.html

A report section is one function registered with `analysis.section` (see `analysis.sections`). The softmax
saturation studies (`make saturation`) are read back by `analysis.saturation_study` (its figures drawn in
`analysis.saturation_figures`, its findings stated in `analysis.saturation_findings`, all three written into
the study folder by `analysis.saturation_readback`):

    >>> study = analysis.saturation_study.load("runs/saturation/quick")   # tables
    >>> analysis.saturation_readback.write("runs/saturation/quick")       # tables, figures, findings.md

`make benchmark`'s page (`reports/benchmark-<name>/`) is written by `analysis.benchmark.write` from the
benchmark's storage.
"""

from analysis import saturation_readback, saturation_study
from analysis.report import build_report
from analysis.runs import load_runs, parse_filters, select
from analysis.sections import SECTIONS, section

__all__ = ["SECTIONS", "build_report", "load_runs", "parse_filters", "saturation_readback", "saturation_study",
           "section", "select"]
