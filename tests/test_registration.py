"""Registration by discovery: a registry's package imports every module it holds (`common.registry.import_modules`),
so a variant, baseline or task registers by its decorator alone; and a class that one of those modules defines and
that could be registered is, so that a forgotten decorator fails here, naming the class, rather than leaving the
class out of `attnlab list`, the registry-wide tests and the default suite without a word."""

import importlib
import inspect
import pkgutil
import subprocess
import sys

import pytest

from experiments.tasks import Task
from experiments.tasks.registry import TASKS
from variants import Attention, Baseline
from variants.registry import VARIANTS

# (a registry's package, the base class of what it registers, the registry)
REGISTRIES = [("variants", Attention, VARIANTS), ("variants.baselines", Baseline, VARIANTS),
              ("experiments.tasks", Task, TASKS)]


def modules_of(package: str) -> list[str]:
    """The modules of `package` that `import_modules` imports: not its subpackages, not names starting with "_"."""
    path = importlib.import_module(package).__path__
    return sorted(f"{package}.{info.name}" for info in pkgutil.iter_modules(path)
                  if not info.ispkg and not info.name.startswith("_"))


def unregistered(package: str, base: type, registered: tuple[type, ...]) -> list[str]:
    """The classes that the package's modules define, subclasses of `base`, that are not registered, beyond the two
    kinds a registered class brings with it: the classes it builds per option or layer (`Attention.class_for`:
    relative's Shaw, T5, ALiBi and Rope, Based's two kinds of layer), which subclass it, and a base that registered
    classes share (the baselines' Recurrent, under LSTM and GRU), which they subclass."""
    found = []
    for name in modules_of(package):
        for cls in vars(importlib.import_module(name)).values():
            if (isinstance(cls, type) and issubclass(cls, base) and cls is not base and cls.__module__ == name
                    and not inspect.isabstract(cls)
                    and not any(issubclass(cls, other) or issubclass(other, cls) for other in registered)):
                found.append(f"{name}.{cls.__qualname__}")
    return found


@pytest.mark.parametrize("package", [package for package, _, _ in REGISTRIES])
def test_importing_a_registry_package_imports_every_module_it_holds(package):
    # In a fresh interpreter: here other tests may have imported a module the package itself would leave out.
    code = f"import sys, {package}; print('\\n'.join(sys.modules))"
    listed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    imported = set(listed.split())
    assert [name for name in modules_of(package) if name not in imported] == []


@pytest.mark.parametrize("package, base, registry", REGISTRIES, ids=[package for package, _, _ in REGISTRIES])
def test_every_class_a_registry_package_defines_is_registered(package, base, registry):
    assert unregistered(package, base, tuple(registry.classes.values())) == []


def test_a_class_without_its_decorator_is_named_and_so_are_the_classes_it_builds():
    from variants.dense import Dense
    from variants.relative import Relative

    registered = tuple(cls for cls in VARIANTS.classes.values() if cls not in (Dense, Relative))
    assert sorted(unregistered("variants", Attention, registered)) == [
        "variants.dense.Dense", *(f"variants.relative.{name}" for name in ("ALiBi", "Relative", "Rope", "Shaw", "T5"))]
