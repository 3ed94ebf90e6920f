"""The `config:` schema of Pulumi.yaml, applied the way the Pulumi CLI applies it.

The CLI checks every explicitly typed project key a stack sets against its declared
type before the program runs (pulumi/pulumi sdk/go/common/workspace/config.go
`validateStackConfigValues`, project.go `ValidateConfigValue`, v3.2xx): a string must
be a string; an integer an integer or a string that parses as one; a boolean a
boolean or the string "true" or "false"; an array a list whose items have the
declared item type. Untyped keys (objects) are not checked by the CLI; the stack
config parser checks them. The CLI no longer refuses undeclared project keys (older
releases did); this module does, naming the closest declared key, because the
program would otherwise never read a misspelled one.
"""

import copy
import difflib
import functools
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from pulumi.runtime import config as runtime_config

PROJECT = "eks-ddp"
ROOT = Path(__file__).resolve().parent.parent


BOOL = "tag:yaml.org,2002:bool"
_PARSER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's parser, several times faster, where PyYAML has it (its wheels do); else PyYAML's own."""


class CliYamlLoader(_PARSER):
    """YAML as the Pulumi CLI reads it (gopkg.in/yaml.v3 into untyped values, YAML 1.2's core schema): only true and
    false are booleans and dates stay strings, so `fabricCheck: off` is "off", which PyYAML's YAML 1.1 reads as False."""


CliYamlLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag not in (BOOL, "tag:yaml.org,2002:timestamp")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
CliYamlLoader.add_implicit_resolver(BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))


def read_yaml(path: Path) -> Any:
    """A Pulumi.yaml or stack file, with the CLI's scalar rules (a copy: callers may change it)."""
    return copy.deepcopy(_parse(path.read_text()))


@functools.lru_cache(maxsize=64)
def _parse(text: str) -> Any:
    """A program reads its project and stack files a hundred times in a rehearsal: each text is parsed once."""
    return yaml.load(text, Loader=CliYamlLoader)


class StackFileError(ValueError):
    """A stack file the Pulumi CLI (or this program) would refuse: names the stack and the key."""


def project_file(root: Path = ROOT) -> dict[str, Any]:
    """A program's Pulumi.yaml."""
    path = root / "Pulumi.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"--program {root}: no Pulumi.yaml there (a Pulumi program's directory has one)")
    return read_yaml(path) or {}


def project_name(root: Path = ROOT) -> str:
    return str(project_file(root).get("name", PROJECT))


def declarations(root: Path = ROOT) -> dict[str, dict[str, Any]]:
    """Pulumi.yaml's config declarations by key, without the project prefix (a bare value is a default)."""
    project = project_file(root)
    prefix = f"{project.get('name', PROJECT)}:"
    return {
        key.removeprefix(prefix): spec if isinstance(spec, dict) else {"default": spec}
        for key, spec in (project.get("config") or {}).items()
    }


def closest(name: str, known: Iterable[str]) -> str:
    """' (did you mean X?)' for a near miss, else ''."""
    matches = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {matches[0]}?)" if matches else ""


def _full_type(spec: dict[str, Any]) -> str:
    items = spec.get("items")
    return f"array<{_full_type(items)}>" if items else str(spec.get("type"))


def _matches(spec: dict[str, Any], value: Any) -> bool:
    """project.go ValidateConfigValue: what the CLI accepts for a declared type."""
    kind = spec.get("type")
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        if isinstance(value, str):
            return value.lstrip("+-").isdigit()
        return isinstance(value, int) and not isinstance(value, bool) or isinstance(value, float) and value.is_integer()
    if kind == "boolean":
        return isinstance(value, bool) or value in ("true", "false")
    items = spec.get("items")
    return isinstance(value, list) and items is not None and all(_matches(items, item) for item in value)


def configured_keys() -> list[str]:
    """Every config key the Pulumi engine gave this program.

    The Python language host passes config in the PULUMI_CONFIG environment variable; tests
    and mocks set it in the runtime's map (pulumi sdk/python/lib/pulumi/runtime/config.py).
    """
    return sorted({*runtime_config.get_config_env(), *runtime_config.CONFIG.get()})


def check_declared(
    stack: str, keys: Iterable[str], declared: dict[str, dict[str, Any]], project: str = PROJECT
) -> None:
    """Refuse a project key Pulumi.yaml does not declare (`keys` with or without the project prefix)."""
    for key in sorted(keys):
        if key.startswith(f"{project}:") or ":" not in key:
            name = key.removeprefix(f"{project}:")
            if name not in declared:
                raise StackFileError(
                    f"Stack '{stack}' sets {project}:{name}, which Pulumi.yaml does not declare"
                    f"{closest(name, declared)}; declared keys are {', '.join(sorted(declared))}"
                )


def check(stack: str, values: dict[str, Any], root: Path = ROOT) -> None:
    """Refuse what `pulumi up` would refuse for `stack`'s project keys (values without the prefix)."""
    declared, project = declarations(root), project_name(root)
    if declared:  # a program that declares no config reads whatever it is given
        check_declared(stack, values, declared, project)
    for key, value in sorted(values.items()):
        spec = declared.get(key, {})
        if "type" in spec and not _matches(spec, value):
            raise StackFileError(
                f"Stack '{stack}' with configuration key '{project}:{key}' must be of type "
                f"'{_full_type(spec)}' (got {value!r})"
            )


def as_program_reads(spec: dict[str, Any], value: Any) -> Any:
    """A CLI-accepted value as the program receives it (Config.get_bool / get_int parse the strings)."""
    if spec.get("type") == "boolean" and isinstance(value, str):
        return value == "true"
    if spec.get("type") == "integer" and isinstance(value, (str, float)):
        return int(value)
    return value
