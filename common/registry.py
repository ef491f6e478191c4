"""A registry of named classes, shared by variants and tasks: one decorator adds a class, `get` finds it, and
`import_modules` imports a package's files so that each registers by its decorator alone."""

from __future__ import annotations

import fnmatch
import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterable

from common.options import closest


class Registry:
    """Names -> classes. A name registers once; a lookup of an unknown name suggests the closest one.

    Shared by variants and tasks: `kind` names what is registered in messages, and `check` rejects a
    class that lacks what its kind requires, when it registers.
    """

    def __init__(self, kind: str, check: Callable[[str, type], None]) -> None:
        self.kind = kind
        self.check = check
        self.classes: dict[str, type] = {}

    def register(self, name: str) -> Callable[[type], type]:
        """Class decorator: `@register("dense")`."""

        def add(cls: type) -> type:
            if name in self.classes:
                raise ValueError(f"{self.kind.capitalize()} {name!r} is already registered "
                                 f"(by {self.classes[name].__qualname__}).")
            self.check(name, cls)
            cls.name = name
            self.classes[name] = cls
            return cls

        return add

    def names(self, pattern: str = "*") -> list[str]:
        """Registered names matching a shell-style pattern, sorted."""
        return sorted(name for name in self.classes if fnmatch.fnmatchcase(name, pattern))

    def get(self, name: str) -> type:
        """The class registered as `name`, or a ValueError naming the closest match and the full list."""
        if name not in self.classes:
            raise ValueError(f"Unknown {self.kind} {name!r}{closest(str(name), self.classes)}; "
                             f"available: {', '.join(self.names())}.")
        return self.classes[name]

    def summary(self, name: str) -> str:
        """The first line of the class's docstring."""
        return inspect.getdoc(self.get(name)).splitlines()[0]


def import_modules(package: str, path: Iterable[str]) -> list[str]:
    """Import every module of `package` (whose `__path__` is `path`), in name order, and return their names:
    importing a module runs its `@register` decorators, so a registry's package calls this from its
    `__init__.py` and a new file registers by the decorator alone. Subpackages and modules whose names start
    with "_" are left out (a subpackage imports its own modules)."""
    names = sorted(info.name for info in pkgutil.iter_modules(path) if not info.ispkg and not info.name.startswith("_"))
    for name in names:
        importlib.import_module(f"{package}.{name}")
    return names
