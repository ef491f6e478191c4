"""The shape of the code: imports point one way, and files and functions stay small enough to read.

Layers, lowest first: `common` (helpers that know nothing of attention) < `variants` < `experiments` <
`analysis` < `attnlab`, the command line (the door: its parser, options, experiment files and the checks it alone
runs). A module may import its own layer or a lower one, never a higher one, so nothing imports the command line;
and no chain of imports between modules may come back to where it started. Every import counts, also one inside a
function (a "lazy import to avoid a cycle" is still a cycle) and one under `if TYPE_CHECKING:` (a type that two
modules need of each other is a sign that one of them holds what belongs in a third).

A run is built in one place: `experiments.run.build` turns a resolved config into the task and the model, and the
model's blocks (`experiments.run.model`) are the only callers of `variants.create` and `variants.create_baseline` that
serve a run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("common", "variants", "experiments", "analysis", "attnlab")  # the layers, lowest first
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60
MAX_TOP_LEVEL_FILES = 6  # of experiments/ and analysis/, __init__.py counted: the rest sits in a room named by its job


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def source_files() -> dict[str, Path]:
    return {module_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


def layer(module: str) -> int:
    return PACKAGES.index(module.split(".")[0])


def imports_of(module: str, path: Path, modules: set[str]) -> set[str]:
    """The project's modules that `module` imports. `from package import name` depends on the submodule
    `package.name` when there is one, else on the package itself (its __init__ defines the name)."""
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                package = module.split(".")[: len(module.split(".")) - node.level + (path.name == "__init__.py")]
                base = ".".join([*package, *([base] if base else [])])
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return {name for name in found if name in modules and name != module}


def import_graph() -> dict[str, set[str]]:
    files = source_files()
    return {module: imports_of(module, path, set(files)) for module, path in files.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a path that starts and ends at the same module, or None."""
    state: dict[str, str] = {}  # "open" while on the current path, "done" once fully explored
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = "open"
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                return [*path[path.index(target):], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        state[module] = "done"
        path.pop()
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)):
            return cycle
    return None


def test_the_graph_walker_sees_a_cycle_a_lazy_import_and_a_type_only_one(tmp_path):
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    lazy = tmp_path / "lazy.py"
    lazy.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import typed\n"
                    "def f():\n    from pkg import sub\n    import other\n")
    assert imports_of("lazy", lazy, {"pkg", "pkg.sub", "other", "typed"}) == {"pkg.sub", "other", "typed"}


def test_no_module_imports_a_chain_that_comes_back_to_it():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_module_imports_a_higher_layer():
    upward = [f"{module} -> {target}" for module, targets in import_graph().items() for target in sorted(targets)
              if layer(target) > layer(module)]
    assert not upward, "imports up a layer (common < variants < experiments < analysis < attnlab): " + "; ".join(upward)


def reaching(graph: dict[str, set[str]], target: str) -> set[str]:
    """The modules from which a chain of imports leads to `target`, `target` included."""
    found, grown = {target}, True
    while grown:
        grown = False
        for module, targets in graph.items():
            if module not in found and targets & found:
                found.add(module)
                grown = True
    return found


def test_the_reach_of_a_module_follows_chains_of_imports():
    graph = {"loop": set(), "worker": {"loop"}, "package": {"worker", "ledger"}, "ledger": set(), "page": {"ledger"}}
    assert reaching(graph, "loop") == {"loop", "worker", "package"}


TRAINING_LOOP = "experiments.run.train"
# What trains or starts training, each of which reaches the training loop: a run started or resumed, a plan's runs,
# a sweep's trials, workers and confirmation, a benchmark's worker, command and estimate (which times training steps),
# the calibration's, the saturation studies' and the claims' runs, the training throughput, the SLURM launcher.
TRAINERS = ("experiments.run.launch", "experiments.run.planned", "experiments.sweep.objective",
            "experiments.sweep.pool", "experiments.sweep.confirm", "experiments.sweep.command",
            "experiments.sweep.worker", "experiments.benchmark.worker", "experiments.benchmark.command",
            "experiments.benchmark.estimate", "experiments.calibration.runs", "experiments.saturation.runs",
            "experiments.claims.training", "experiments.speed.training", "experiments.slurm")


def test_no_module_of_analysis_trains():
    """analysis reads what the experiments wrote and never trains: no module of it reaches the training loop
    (`experiments.run.train`) through its imports, lazy ones included. Every module that trains or starts training
    (TRAINERS) reaches the loop, and so does a package whose __init__ re-exports one of them (`experiments.benchmark`,
    `experiments.sweep`, `experiments.saturation`), so analysis imports what it reads (a ledger, a definition, a
    config, a setting) from the module that holds it; `make reproduce`, which trains the claims and then writes their
    page, is the command line's (`attnlab.reproduce`)."""
    graph = import_graph()
    trains = reaching(graph, TRAINING_LOOP)
    assert set(TRAINERS) <= trains, sorted(set(TRAINERS) - trains)
    reaching_it = [module for module in sorted(graph) if module.split(".")[0] == "analysis" and module in trains]
    leaving = {module: sorted(target for target in graph[module] & trains if target.split(".")[0] != "analysis")
               for module in reaching_it}
    assert not reaching_it, ("analysis reaches the training loop; the imports out of it that lead there: "
                             f"{ {module: targets for module, targets in leaving.items() if targets} }")


@pytest.mark.parametrize("package", ["experiments", "analysis"])
def test_the_top_of_experiments_and_analysis_holds_a_handful_of_files(package):
    top = sorted(path.name for path in (ROOT / package).glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_FILES, f"{package}/ holds {len(top)} files at its top: {', '.join(top)}"


@pytest.mark.parametrize("module", sorted(source_files()))
def test_files_and_functions_stay_short_enough_to_read(module):
    path = source_files()[module]
    text = path.read_text()
    assert text.count("\n") <= MAX_FILE_LINES, f"{module} has {text.count(chr(10))} lines; at most {MAX_FILE_LINES}"
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines)" for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"{module}: functions over {MAX_FUNCTION_LINES} lines: {', '.join(long)}"


def test_no_two_test_files_share_a_name():
    """tests/ has no __init__.py files, so pytest imports each test file by its bare name: two files of one name
    in different folders stop the whole collection with an import mismatch."""
    names = [path.name for path in (ROOT / "tests").rglob("test_*.py")]
    assert sorted({name for name in names if names.count(name) > 1}) == []


# Modules that build attention modules or token mixers that serve no run: the kernel timing and the GPU check
# time bare modules at sizes of their own, the saturation study's fading table weighs one query against n keys,
# and the results page lists the kernels a variant runs on. Everything that serves a run builds it through
# `experiments.run.build`, whose model blocks (`experiments.run.model`) call `variants.create`.
BARE_MODULE_BUILDERS = {"experiments.run.model", "experiments.speed.kernels", "attnlab.gpu_check",
                        "experiments.saturation.tables", "analysis.calibration.doc"}


def calls_of(path: Path) -> set[str]:
    """The dotted names a module calls: `variants.create(...)` -> "variants.create", `Transformer(...)`."""
    return {ast.unparse(node.func) for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Call)}


def test_a_run_is_built_in_one_place():
    calls = {module: calls_of(path) for module, path in source_files().items()}
    building_models = sorted(module for module, called in calls.items() if "Transformer" in called)
    assert building_models == ["experiments.run.build"], building_models
    building_modules = sorted(module for module, called in calls.items()
                              if called & {"variants.create", "variants.create_baseline", "create", "create_baseline"}
                              and not module.startswith("variants"))
    assert set(building_modules) <= BARE_MODULE_BUILDERS, building_modules
    reading_run_folders = sorted(module for module, called in calls.items() if module.startswith("analysis")
                                 and module != "analysis.runs" and called & {"RunRecord", "RunRecord.open"})
    assert reading_run_folders == [], f"read runs through analysis.runs (load_runs, its handles): {reading_run_folders}"
