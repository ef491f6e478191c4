"""The guides of docs/guides/ are worked examples that run: each guide's marked code blocks are put in place for one
test (`Example`), and the tests the guide says pick the extension up run on it; a guide whose code drifts from the
library fails here, and nothing it registers outlives its test."""

import ast
import importlib
import importlib.util
import inspect
import itertools
import re
import sys
import textwrap
import typing
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDES = ROOT / "docs" / "guides"
# The registry-wide tests run on each example, and their helpers: on the path as pytest puts their folders there
# when it collects them.
sys.path.extend(str(ROOT / "tests" / folder) for folder in ("variants", "experiments", "analysis"))

import cases  # noqa: E402
import test_claims  # noqa: E402
import test_hooks_and_kernels  # noqa: E402
import test_kernels_match_reference  # noqa: E402
import test_registry_and_errors  # noqa: E402
import test_shortcut_probes  # noqa: E402
import test_sweep  # noqa: E402
import test_tasks  # noqa: E402
import test_variant_behaviour  # noqa: E402

from analysis import claims  # noqa: E402
from attnlab import reproduce  # noqa: E402
from attnlab.cli import main  # noqa: E402
from experiments import tasks  # noqa: E402
from experiments.benchmark import definition, estimate, stages  # noqa: E402
from experiments.run import trackers  # noqa: E402
from experiments.run.config import TrainConfig  # noqa: E402
from variants.registry import VARIANTS  # noqa: E402

BLOCK = re.compile(r"```python\n# guide: (.+?)\n(.*?)```", re.DOTALL)
PLACE = re.compile(r"(?P<how>new file|add to) (?P<path>\S+)|(?P<entry>entry|field) of (?P<name>\w+) in (?P<in>\S+)")
REGISTRIES = (VARIANTS, tasks.registry.TASKS, claims.CLAIMS)
TINY_RUN = ["--task", "passkey", *(f"--set={setting}" for setting in (
    "task.seq_len=12", "task.num_keys=4", "task.test_size=64", "task.num_buckets=4", "model.dim=32", "model.depth=1",
    "model.heads=2", "train.steps=10", "train.batch_size=16", "train.eval_every=10", "train.log_every=5"))]


def module_at(path: str):
    """The module a guide names by its file: a test module by its name (its folder is on the path), any other by
    its dotted path."""
    if path.startswith("tests/"):
        return importlib.import_module(Path(path).stem)
    return importlib.import_module(path.removesuffix(".py").replace("/", "."))


class Example:
    """A guide's `# guide:` blocks put in place, in order, until the test ends (monkeypatch undoes every change):

    - `new file PATH`: written under `folder` and imported as a module of its own;
    - `add to PATH`: run in a copy of that module's namespace (its blocks share one); for a module of the library,
      what the blocks bind is bound there, and a dict they rebind gains the new entries in place (every module that
      imported it sees them), once sure the guide's dict keeps every entry the library's has;
    - `entry of NAME in PATH`: the dict items added to the dict NAME of that module;
    - `field of CLASS in PATH`: the dataclass field's annotation put in place of the one CLASS has.

    The registries of variants, tasks and claims are copies for the test, so a registration leaks into no other."""

    def __init__(self, guide: str, monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
        self.guide, self.monkeypatch, self.folder = guide, monkeypatch, folder
        self.text = (GUIDES / f"{guide}.md").read_text()
        self.modules: dict[str, object] = {}  # new file -> its module
        self.namespaces: dict[str, dict] = {}  # added-to file -> the namespace its blocks ran in
        self.registered = {registry.kind: set(registry.classes) for registry in REGISTRIES}
        for registry in REGISTRIES:
            monkeypatch.setattr(registry, "classes", dict(registry.classes))
        for place, code in BLOCK.findall(self.text):
            found = PLACE.fullmatch(place)
            assert found, f"docs/guides/{guide}.md: a block marked '# guide: {place}', which names no place"
            if found["how"] == "new file":
                self.new_file(found["path"], code)
            elif found["how"] == "add to":
                self.add_to(found["path"], code)
            elif found["entry"] == "entry":
                for key, value in ast.literal_eval("{" + code + "}").items():
                    monkeypatch.setitem(getattr(module_at(found["in"]), found["name"]), key, value)
            else:
                self.replace_field(getattr(module_at(found["in"]), found["name"]), code)

    def new_file(self, path: str, code: str) -> None:
        file = self.folder / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(code)
        name = "guide_" + "_".join(Path(path).with_suffix("").parts)
        spec = importlib.util.spec_from_file_location(name, file)
        self.modules[path] = module = importlib.util.module_from_spec(spec)
        self.monkeypatch.setitem(sys.modules, name, module)  # where dataclasses and inspect look a class's module up
        spec.loader.exec_module(module)

    def add_to(self, path: str, code: str) -> None:
        module = module_at(path)
        namespace = self.namespaces.setdefault(path, dict(vars(module)))
        before = dict(namespace)
        exec(compile(code, f"docs/guides/{self.guide}.md", "exec"), namespace)
        if path.startswith("tests/"):
            return
        for name, value in namespace.items():
            if name in before and before[name] is value:
                continue
            library = getattr(module, name, None)
            if isinstance(library, dict):
                assert set(library) <= set(value), f"the guide's {name} lacks {set(library) - set(value)}"
                for key in set(value) - set(library):
                    self.monkeypatch.setitem(library, key, value[key])
            else:
                self.monkeypatch.setattr(module, name, value, raising=False)

    def replace_field(self, cls: type, code: str) -> None:
        code = textwrap.dedent(code)
        (field,) = ast.parse(code).body
        self.monkeypatch.setitem(cls.__annotations__, field.target.id, ast.get_source_segment(code, field.annotation))

    def new_names(self, registry) -> list[str]:
        """The names the guide's code registered in `registry`."""
        return sorted(set(registry.classes) - self.registered[registry.kind])

    def run_added_tests(self, request: pytest.FixtureRequest) -> list[str]:
        """Run the tests the guide adds to a test module, with the fixtures they ask for; their names."""
        added = []
        for path, namespace in self.namespaces.items():
            if path.startswith("tests/"):
                for name, test in namespace.items():
                    if name.startswith("test_") and name not in vars(module_at(path)):
                        fixtures = inspect.signature(test).parameters
                        test(**{fixture: request.getfixturevalue(fixture) for fixture in fixtures})
                        added.append(name)
        return added


def parametrised(test) -> list[tuple[list[str], list]]:
    """A test's parametrize marks: (argument names, values) each."""
    return [([name.strip() for name in mark.args[0].split(",")], list(mark.args[1]))
            for mark in getattr(test, "pytestmark", []) if mark.name == "parametrize"]


def run_over_its_grid(test, **given) -> None:
    """Call `test` as pytest would over every combination of its own parameters, but with `given` in place of those
    it names (the example for the registry's entries) and of fixtures."""
    axes = [(names, [value if len(names) > 1 else (value,) for value in values])
            for names, values in parametrised(test) if not set(names) & set(given)]
    wanted = inspect.signature(test).parameters
    for point in itertools.product(*(values for _, values in axes)):
        arguments = {name: value for (names, _), values in zip(axes, point, strict=True)
                     for name, value in zip(names, values, strict=True)}
        test(**arguments, **{name: value for name, value in given.items() if name in wanted})


def listed(capsys) -> str:
    """What `attnlab list` prints."""
    assert main(["list"]) == 0
    return capsys.readouterr().out


def test_every_guide_is_in_the_index_and_every_file_a_guide_names_is_in_the_repository():
    index = (GUIDES / "README.md").read_text()
    guides = sorted(path.stem for path in GUIDES.glob("*.md") if path.name != "README.md")
    assert guides == ["claim", "stage", "task", "tracker", "variant"]
    for guide in guides:
        text = (GUIDES / f"{guide}.md").read_text()
        assert f"]({guide}.md)" in index
        written = {place.split()[-1] for place, _ in BLOCK.findall(text) if place.startswith("new file")}
        named = set(re.findall(r"`((?:variants|experiments|analysis|common|tests)/[\w/]+\.py)`", text)) - written
        assert [path for path in sorted(named) if not (ROOT / path).is_file()] == [], guide


def example_cases(test, name: str) -> list[tuple]:
    """The cases a registry-wide variant test would give variant `name` had it been registered when the test's module
    was imported: (name, options), or (name, options, kernel) for every kernel it lists that trains on this CPU
    (the reference kernel too where the test takes it), as `cases` builds them for every registered variant."""
    ((_, values),) = [(names, values) for names, values in parametrised(test) if names == ["case"]]
    if len(values[0]) == 2:
        return [case for case in cases.variant_cases() if case[0] == name]
    reference = [(*case, "reference") for case in cases.variant_cases()] if any(
        case[2] == "reference" for case in values) else []
    return [case for case in cases.kernel_cases() + reference if case[0] == name]


def test_the_variant_guide_builds_a_variant_the_registry_wide_tests_pass_and_attnlab_runs(tmp_path, monkeypatch,
                                                                                         capsys):
    example = Example("variant", monkeypatch, tmp_path)
    (name,) = example.new_names(VARIANTS)
    cases.force_small_chunks(monkeypatch)
    modules = (test_kernels_match_reference, test_variant_behaviour, test_hooks_and_kernels)
    checks = [test for module in modules for attribute, test in vars(module).items() if attribute.startswith("test_")
              and any(names == ["case"] for names, _ in parametrised(test))]
    assert len(checks) >= 8
    for test in checks:
        found = example_cases(test, name)
        assert len(found) >= 2, test.__name__  # the defaults and the options the guide names, at least
        for case in found:
            run_over_its_grid(test, case=case, small_chunks=None, monkeypatch=monkeypatch)
    test_registry_and_errors.test_every_variant_has_frozen_documented_options_and_a_docstring()
    (tmp_path / "sweep").mkdir()  # a folder the sweep's check finds empty
    test_sweep.test_every_variant_declares_a_space_of_its_own_options_that_yields_runnable_configs(tmp_path / "sweep",
                                                                                                   name)
    assert f"\n{name}: {VARIANTS.summary(name)}\n" in listed(capsys)
    assert main(["run", "--variant", name, *TINY_RUN, "--runs-dir", str(tmp_path / "runs"), "--quiet"]) == 0


def test_the_task_guide_builds_a_task_its_solver_and_probes_pass_and_attnlab_samples(tmp_path, monkeypatch, capsys):
    example = Example("task", monkeypatch, tmp_path)
    (name,) = example.new_names(tasks.registry.TASKS)
    solver = example.modules[f"tests/experiments/solvers/{name}.py"]
    for table, value in ((test_tasks.SOLVERS, solver), (test_tasks.SMALL, solver.SMALL),
                         (test_tasks.WORKED, solver.WORKED)):
        monkeypatch.setitem(table, name, value)
    checks = [test for test_name, test in vars(test_tasks).items() if test_name.startswith("test_")
              and any(names == ["name"] for names, _ in parametrised(test))
              and not any(mark.name == "gpu" for mark in test.pytestmark)]
    assert len(checks) >= 7
    for test in checks:
        run_over_its_grid(test, name=name)
    _, profiles, *_ = test_shortcut_probes.SEQUENCE_TASKS[name]
    probe_sets = {(name, profile): test_shortcut_probes.probe_set(name, profile) for profile in profiles}
    probe_checks = (test_shortcut_probes.test_bag_position_and_last_tokens_predict_no_better_than_the_bound,
                    test_shortcut_probes.test_the_sequence_probe_finds_a_label_planted_in_some_rows)
    for test, profile, probe in itertools.product(probe_checks, profiles, test_shortcut_probes.PROBES):
        test(probe_sets, name, profile, probe)
    assert f"\n{name}: {tasks.registry.TASKS.summary(name)}\n" in listed(capsys)
    assert main(["sample", name, "--count", "3", "--set", "task.seq_len=24"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3


def test_the_claim_guide_builds_a_claim_whose_rule_reads_each_outcome_and_whose_runs_are_estimated(
        tmp_path, monkeypatch, capsys, request):
    example = Example("claim", monkeypatch, tmp_path)
    (name,) = example.new_names(claims.CLAIMS)
    test_claims.test_every_claim_states_its_source_setting_number_rule_and_runs_and_names_resolve()
    assert len(example.run_added_tests(request)) == 1
    assert f"  {name}: {claims.CLAIMS.summary(name)}\n" in listed(capsys)
    monkeypatch.setattr(estimate, "measured", lambda runs, **_: [(estimate.Timing(0.1, 1.0, 2.0), None)] * len(runs))
    assert reproduce.run(name, workers=1, device="cpu", storage=None, runs_dir=tmp_path / "runs", out=tmp_path,
                         quiet=True, estimate_only=True) == 0
    printed = capsys.readouterr().out
    assert all(f"claim-{name}-{runs.part}: " in printed for runs in claims.claim_named(name).runs)


def test_the_tracker_guide_builds_a_tracker_named_alike_in_its_three_places_and_read_back_from_its_files(
        tmp_path, monkeypatch, request):
    example = Example("tracker", monkeypatch, tmp_path)
    annotation = typing.get_type_hints(TrainConfig)["tracker"]
    assert typing.get_args(typing.get_args(typing.get_args(annotation)[0])[0]) == tuple(trackers.PACKAGES) == \
        tuple(trackers.TRACKERS)
    assert len(trackers.TRACKERS) > 2
    assert len(example.run_added_tests(request)) == 1


def test_the_stage_guide_builds_a_stage_that_attnlab_benchmark_plans_estimates_and_shows(tmp_path, monkeypatch,
                                                                                        request):
    built_in = [stage.name for stage in definition.build.__kwdefaults__["stages"]]
    example = Example("stage", monkeypatch, tmp_path)
    named = [stage.name for stage in example.namespaces["experiments/benchmark/stages.py"]["DEFAULT_STAGES"]]
    assert named[:-1] == built_in and named[-1] in stages.STAGES
    # `attnlab benchmark` builds a benchmark with the default stages `build` takes, bound when it was defined
    monkeypatch.setitem(definition.build.__kwdefaults__, "stages", tuple(stages.STAGES[name] for name in named))
    assert len(example.run_added_tests(request)) == 1
