"""Reading a stack's configuration the way the Pulumi CLI would, without the CLI.

Project defaults from `Pulumi.yaml`, overlaid with `Pulumi.<stack>.yaml`, after the
CLI's own check of the stack's keys against Pulumi.yaml's config schema; used by the
offline preview, the local demo and the rehearsal (the real program reads pulumi.Config).
"""

from pathlib import Path
from typing import Any

import yaml

from stack import project_config
from stack.project_config import PROJECT, ROOT


def stacks(root: Path = ROOT) -> list[str]:
    """The stacks with a `Pulumi.<stack>.yaml` in `root`."""
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in root.glob("Pulumi.*.yaml"))


def load(stack: str, root: Path = ROOT) -> tuple[dict[str, Any], str | None]:
    """(`eks-ddp:*` values without the prefix, as the program reads them; `aws:region`) for `stack`."""
    path = root / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"--stack {stack}: {path.name} not found (stacks here: {', '.join(stacks(root)) or 'none'})")
    declared = project_config.declarations(root)
    stack_config = (yaml.safe_load(path.read_text()) or {}).get("config") or {}
    own = {key.removeprefix(f"{PROJECT}:"): value for key, value in stack_config.items() if key.startswith(f"{PROJECT}:")}
    project_config.check(stack, own, root)
    values = {key: spec.get("default") for key, spec in declared.items()} | own
    read = {key: project_config.as_program_reads(declared[key], value) for key, value in values.items() if value is not None}
    return read, stack_config.get("aws:region")
