"""Independent solvers of the tasks, one module per registered task, for the shared task tests.

Each module `solvers/<task>.py` defines:
    SMALL:  task options for small sizes (fast for the plain-Python solver)
    WORKED: the task options of the worked example in the task class's docstring (its test set's first example)
    solve(task, tokens) -> {scored position: (answer, distance)}: computed from the token list alone,
            in plain Python, without calling the generator's code
"""

import importlib


def solver(name):
    """The solver module of task `name`, or None when there is none."""
    try:
        return importlib.import_module(f"solvers.{name}")
    except ModuleNotFoundError as error:
        if error.name != f"solvers.{name}":
            raise
        return None
