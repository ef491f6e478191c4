"""The calibration read back (`make calibration`): the table of what each task's profile reaches, and its sections of
docs/results.md. The modules, by job:

    table  docs/calibration.md and its record, docs/calibration.csv, written from the calibration's runs
    doc    the record's sections of docs/results.md, its rows grouped by what they are
"""
