"""One run: its config resolved, its task and model built, trained into its folder, started or resumed. Every sweep
trial, benchmark job and planned run is one of these. The modules, by job:

    config           the typed config, resolved from a profile and `--set` before anything trains
    build            the one place a run's task and model are made from its config
    model            the small Transformer whose attention is any registered variant (or a baseline's mixer)
    optimizer        AdamW, with weight decay on the matrices of linear maps
    train            the training loop, read top to bottom
    evaluation       what an evaluation reads (the held-out sets) and whether the run stops there
    attention_stats  attention statistics per layer and head at each evaluation
    checkpoints      what a checkpoint must hold for a run to resume from it
    records          the run's folder: config, metrics stream, summary, checkpoint
    trackers         the run mirrored to Weights & Biases or TensorBoard as it trains
    timing           wall time of a callable on CPU and CUDA
    launch           `attnlab run` and `attnlab resume`: runs started or resumed from their configs and trained
    planned          a fixed plan's named runs (saturation, calibration), each trained once
    rerun            the command that trains a run's config again
"""
