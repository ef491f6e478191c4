"""attnlab's analysis: run records -> pandas, saturation and complexity studies, figures and the report.

Every result it reads comes from the run folders the experiments write (`runs/<run_id>/`), the sweep
studies beside them (`runs/sweeps/<study>.journal`) and the speed CSVs under `runs/speed/`.

    >>> import analysis
    >>> runs = analysis.load_runs("runs")                       # one row per run
    >>> analysis.build_report("runs", "reports", filters="task=passkey")  # reports/task-passkey/index.html
    >>> analysis.write_table(runs, "runs.parquet")              # or .csv; analysis.read_table gives it back

A report section is one function registered with `analysis.section` (see `analysis.report.sections`). The softmax
saturation studies (`make saturation`) are read back by `analysis.saturation` (the folder read into tables in
`analysis.saturation.study`, its figures drawn in `analysis.saturation.figures`, its findings stated in
`analysis.saturation.findings`, all three written into the study folder by `analysis.saturation.readback`):

    >>> study = analysis.saturation.load("runs/saturation/quick")   # tables
    >>> analysis.saturation.write("runs/saturation/quick")          # tables, figures, findings.md

`make benchmark`'s page (`reports/benchmark-<name>/`) is written by `analysis.benchmark.page.write` from the
benchmark's storage. Protocol 2's contrasts (every variant against dense per task and metric, tiers, the cells that
do not discriminate, the detectable differences) are `analysis.benchmark.contrasts`, read from a tidy frame of the
confirmation results (`analysis.benchmark.contrasts.tidy`); their figures and blocks are
`analysis.benchmark.contrast_page`.
"""

from analysis import saturation
from analysis.report.build import build_report
from analysis.report.sections import SECTIONS, section
from analysis.report.tables import read_table, write_table
from analysis.runs import load_runs, parse_filters, select

__all__ = ["SECTIONS", "build_report", "load_runs", "parse_filters", "read_table", "saturation", "section", "select",
           "write_table"]
