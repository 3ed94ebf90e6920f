"""A pytest plugin for mutmut's runs: `eks_ddp.<package>` is the top-level `<package>` itself, one module under two
names. mutmut names a mutant after its file's path (`trainer.atomic`), the code imports `eks_ddp.trainer.atomic`
(a symlink in the checkout), and a mutant only runs when the two names agree."""

import importlib
import importlib.abc
import importlib.util
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType

PACKAGES = frozenset({"trainer", "infra", "workloads", "stack", "tools", "engine_models", "policy", "provider"})


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: object = None, target: object = None) -> ModuleSpec | None:
        head, _, rest = fullname.partition(".")
        if head == "eks_ddp" and rest.split(".")[0] in PACKAGES:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        return importlib.import_module(spec.name.removeprefix("eks_ddp."))

    def exec_module(self, module: ModuleType) -> None:
        """The module ran under its own name already."""


sys.meta_path.insert(0, _Alias())
