"""attnlab's command line, the door of the house: `attnlab <command>` (or `python -m attnlab <command>`).

It reads what a user types (its flags, an experiment file's keys) and hands each command to the module of its job
in `experiments` (training: runs, sweeps, the benchmark, the fixed plans) and `analysis` (records read back: the
pages, the report); it imports everything below it, and nothing imports it. The modules, by job:

    cli                 the parser, one function per command, and `main`, which turns a bad value into one sentence
    arguments           the flags the commands share (which runs, where, --set, --quiet, the launcher)
    speed_flags         the flags of `attnlab speed` (benchmark, sweep, calibration and reproduce declare theirs
                        as fields of one schema each, `experiments.schemas`, whose flags `common.schema` derives)
    experiment_file     an experiment file (`--config FILE.toml`): a command's options as TOML
    catalogue           `attnlab list` and `attnlab sample`: the variants, tasks and profiles, examples of a task
    data_check          `attnlab data-check`: which LRA data sets a folder holds
    gpu_check           `attnlab gpu-check`: the gpu tests, then a bf16 timing table
    reproduce           `attnlab reproduce`: the claims' runs trained, then their verdicts read from the records
"""
