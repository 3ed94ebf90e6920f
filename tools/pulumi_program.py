"""A Pulumi program on disk, run offline as the Pulumi CLI runs it: its own entry point, project and stack config.

eks-ddp's own stack is one such program (this repository's `Pulumi.yaml` and `__main__.py`); a user's program in
its own directory is another, and the preview and the rehearsal treat both alike.
"""

from dataclasses import dataclass
from pathlib import Path

import pulumi

from eks_ddp.stack import project_config
from eks_ddp.tools import stack_file
from eks_ddp.tools.mocking import Registration, run_offline
from eks_ddp.stack.project_config import StackFileError

DEFAULT_REGION = "us-east-1"


@dataclass(frozen=True)
class Program:
    directory: Path
    """Where its Pulumi.yaml and stack files are (a lone file's own directory)."""
    entry: Path
    """The file the Python language host runs."""
    project: str

    @classmethod
    def at(cls, path: Path) -> "Program":
        """A directory with a Pulumi.yaml (its `main` option, else `__main__.py`), or a program's Python file."""
        path = path.resolve()
        if path.is_file():
            has_project = (path.parent / "Pulumi.yaml").is_file()
            project = project_config.project_name(path.parent) if has_project else path.stem
            return cls(path.parent, path, project)
        main = path / str(project_config.project_file(path).get("main") or ".")
        entry = main if main.is_file() else main / "__main__.py"
        if not entry.is_file():
            raise FileNotFoundError(f"--program {path}: {entry} not found (the file `pulumi up` would run)")
        return cls(path, entry, project_config.project_name(path))

    def stacks(self) -> list[str]:
        return stack_file.stacks(self.directory)

    def config(self, stack: str, override: dict[str, str] | None = None) -> dict[str, str]:
        """What the CLI would give the program for `stack`; no stack file, then no config but `override`."""
        if not (self.directory / f"Pulumi.{stack}.yaml").is_file() and not self.stacks():
            return dict(override or {})
        return stack_file.cli_config(stack, self.directory, override)

    def region(self, stack: str, override: dict[str, str] | None = None) -> str:
        """The stack's `aws:region` (the mocks' default where it sets none)."""
        return self.config(stack, override).get("aws:region") or DEFAULT_REGION

    def run(self, stack: str, override: dict[str, str] | None = None) -> list[Registration]:
        """What the program registers for `stack`, under the mocks; a key it requires and is not given, or cannot
        read as the type it asks for, is one line naming the stack file (or the `--config` flag) and the key."""
        config = self.config(stack, override)
        try:
            return run_offline(self.entry, self.region(stack, override), self.project, stack, config)
        except pulumi.ConfigMissingError as error:
            raise StackFileError(
                f"{self._stack_file(stack)}: {error.key} is not set, and the program requires it; set it with "
                f"`pulumi config set {error.key} <value>`"
            ) from None
        except pulumi.ConfigTypeError as error:
            where = f"--config {error.key}={error.value}" if error.key in (override or {}) else self._stack_file(stack)
            raise StackFileError(
                f"{where}: {error.key}: {error.value!r} is not allowed; the program reads it as {error.expect_type}"
            ) from None

    def _stack_file(self, stack: str) -> str:
        """The stack file a key of `stack` belongs in, as a user here would name it."""
        return project_config.shown(self.directory / f"Pulumi.{stack}.yaml")
