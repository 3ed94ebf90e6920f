"""Reading a stack's configuration the way the Pulumi CLI would, without the CLI.

Project defaults from `Pulumi.yaml`, overlaid with `Pulumi.<stack>.yaml`; used by
the offline preview and the local demo (the real program reads pulumi.Config).
"""

from pathlib import Path
from typing import Any

import yaml

from stack.config import PROJECT

ROOT = Path(__file__).resolve().parent.parent


def stacks(root: Path = ROOT) -> list[str]:
    """The stacks with a `Pulumi.<stack>.yaml` in `root`."""
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in root.glob("Pulumi.*.yaml"))


def load(stack: str, root: Path = ROOT) -> tuple[dict[str, Any], str | None]:
    """(`eks-ddp:*` values without the prefix, `aws:region`) for `stack`."""
    path = root / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"--stack {stack}: {path.name} not found (stacks here: {', '.join(stacks(root)) or 'none'})")
    project = yaml.safe_load((root / "Pulumi.yaml").read_text())
    values = {key.removeprefix(f"{PROJECT}:"): spec.get("default") for key, spec in project.get("config", {}).items()}
    stack_config = (yaml.safe_load(path.read_text()) or {}).get("config", {})
    values.update({key.removeprefix(f"{PROJECT}:"): value for key, value in stack_config.items() if key.startswith(f"{PROJECT}:")})
    return {key: value for key, value in values.items() if value is not None}, stack_config.get("aws:region")
