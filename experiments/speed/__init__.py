"""Speed: how fast attention and the harness run, measured (`make speed`, `make speed-train`, and the timing half of
`make gpu-check`). Not the benchmark (`experiments.benchmark`), which measures what variants learn.

    kernels   `attnlab speed`: forward+backward time and peak memory per variant and kernel in three sweeps
              (`run`, `run_and_print`; `contenders`, `parse_spec` and `predicted_too_costly`, which gpu-check uses)
    plan      what is timed (`Contender`) and where: the `TimedCase`s of the three sweeps
    fits      what a speed table says: slopes, measured exponents against the claimed complexity, the goals
              (the report's cost section computes its tables with it)
    training  `attnlab speed-train`: the harness's training throughput against a minimal PyTorch loop
    memory    peak memory of a callable on CPU and CUDA (`peak_memory_bytes`)

    >>> from experiments.speed import kernels
    >>> table, path = kernels.run(specs=["dense"], kernels=["auto"], lengths=[512], causal_modes=[True], batch=1,
    ...                           heads=4, head_dim=64, repeats=3, budget=30.0, device=torch.device("cpu"),
    ...                           out_dir=Path("runs/speed"), quiet=True)

Importing the package imports none of them: importing `memory` tells glibc to map every large allocation afresh
(for its CPU peak readings), which the report, reading `fits`, and anything that times training must not inherit.
"""
