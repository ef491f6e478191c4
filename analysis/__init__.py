"""attnlab's analysis: run records -> pandas, saturation and complexity studies, figures and the report.

Every result it reads comes from the run folders the experiments write (`runs/<run_id>/`) and the
benchmark CSVs under `runs/bench/`.
"""
