"""Each command's options, declared once as a typed dataclass (`common.schema`): its flags, the keys of its experiment
files, and where it has them, its stored definition and the command that runs it again, all come from the fields.

    benchmark    `attnlab benchmark`: what a benchmark is (`BenchmarkOptions`, which `experiments.benchmark` builds)
    sweep        `attnlab sweep`: what a sweep searches and where its study lives (`SweepOptions`)
    calibration  `attnlab calibration`: which runs the calibration table measures (`CalibrationOptions`)
    reproduce    `attnlab reproduce`: which published claims, and how their runs are tuned (`ReproduceOptions`)
    shared       the fields several of them declare alike (the profile, the kernel, --set, the storage)

They import neither optuna nor the modules that run the commands, so that building the command line stays quick.
"""
