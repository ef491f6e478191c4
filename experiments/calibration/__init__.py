"""`make calibration`: what each task's profile reaches with the reference variants, measured, not assumed. The runs
it trains are `experiments.calibration.runs`; the table written from them is `analysis.calibration.table`."""

DEFAULT_VARIANTS = ("dense", "local")  # what `attnlab calibration` trains unless --variant says otherwise
