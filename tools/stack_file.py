"""Reading a stack's configuration the way the Pulumi CLI would, without the CLI.

Project defaults from `Pulumi.yaml`, overlaid with `Pulumi.<stack>.yaml`, after the
CLI's own check of the stack's keys against Pulumi.yaml's config schema; used by the
offline preview, the local demo and the rehearsal (the real program reads pulumi.Config).
"""

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eks_ddp.stack import config_paths, project_config
from eks_ddp.stack.project_config import PROJECT, ROOT


def stacks(root: Path = ROOT) -> list[str]:
    """The stacks with a `Pulumi.<stack>.yaml` in `root`."""
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in root.glob("Pulumi.*.yaml"))


def overrides(pairs: Sequence[str]) -> dict[str, str]:
    """`--config KEY=VALUE` pairs, as `pulumi up --config` takes them (plain strings, the key with its namespace)."""
    parsed = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or ":" not in key:
            raise project_config.StackFileError(
                f"--config {pair!r} is not allowed; give NAMESPACE:KEY=VALUE, e.g. {PROJECT}:trainingOperator=v2"
            )
        parsed[key] = value
    return parsed


def stack_path(stack: str, root: Path = ROOT) -> Path:
    """`root`'s `Pulumi.<stack>.yaml`, or one line naming the stacks there."""
    path = root / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        raise FileNotFoundError(
            f"--stack {stack}: {path.name} not found (stacks here: {', '.join(stacks(root)) or 'none'})"
        )
    return path


def settings(path: Path) -> dict[str, Any]:
    """A stack file's `config:` map (full keys), or one line saying what the file holds instead."""
    content = project_config.a_map(
        project_config.read_yaml(path), project_config.shown(path), "a stack file is a map with a config: map"
    )
    return project_config.a_map(content.get("config"), f"{project_config.shown(path)}: config", "give a map of keys")


def load(stack: str, root: Path = ROOT, override: dict[str, str] | None = None) -> tuple[dict[str, Any], str | None]:
    """(`eks-ddp:*` values without the prefix, as the program reads them; `aws:region`) for `stack`,
    with `override` (full keys) in place of the file's values, as `pulumi up --config` would set them."""
    path = stack_path(stack, root)
    declared, project = project_config.declarations(root), project_config.project_name(root)
    defaults = {f"{project}:{key}": spec.get("default") for key, spec in declared.items()}
    try:
        stack_config = config_paths.merged(settings(path), override or {}, defaults)
    except config_paths.PathError as error:
        raise project_config.StackFileError(f"--config: {error}") from None
    own = {
        key.removeprefix(f"{project}:"): value
        for key, value in stack_config.items()
        if key.startswith(f"{project}:") or ":" not in key
    }
    # What a --config flag set is its fault, not the stack file's.
    given = {
        config_paths.top_key(key).removeprefix(f"{project}:"): f"{key}={value}"
        for key, value in (override or {}).items()
    }
    project_config.check(stack, own, root, given)
    values = {key: spec.get("default") for key, spec in declared.items()} | own
    read = {
        key: project_config.as_program_reads(declared.get(key, {}), value)
        for key, value in values.items()
        if value is not None
    }
    return read, stack_config.get("aws:region")


def cli_config(stack: str, root: Path = ROOT, override: dict[str, str] | None = None) -> dict[str, str]:
    """Every key the Pulumi CLI gives the program for `stack` (its PULUMI_CONFIG): the project's keys with their
    declared defaults, then every other namespace's keys of the stack file, then `override`; structured values as
    JSON and scalars as strings, as the CLI sends them."""
    values, _ = load(stack, root, override)
    project = project_config.project_name(root)
    stack_config = settings(root / f"Pulumi.{stack}.yaml")
    others = {key: value for key, value in config_paths.merged(stack_config, override or {}, {}).items() if ":" in key}
    merged = {**others, **{f"{project}:{key}": value for key, value in values.items()}}
    return {key: value if isinstance(value, str) else json.dumps(value) for key, value in merged.items()}
