"""The `config:` schema of Pulumi.yaml, applied the way the Pulumi CLI applies it.

The CLI checks every explicitly typed project key a stack sets against its declared
type before the program runs (pulumi/pulumi sdk/go/common/workspace/config.go
`validateStackConfigValues`, project.go `ValidateConfigValue`, v3.2xx): a string must
be a string; an integer an integer or a string that parses as one; a boolean a
boolean or the string "true" or "false"; an object a map; an array a list whose
items have the declared item type. What is inside a map the stack config parser
checks (stack.keys). The CLI no longer refuses undeclared project keys (older
releases did); this module does, naming the closest declared key, because the
program would otherwise never read a misspelled one.
"""

import copy
import difflib
import functools
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pulumi.runtime import config as runtime_config

PROJECT = "eks-ddp"
ROOT = Path(__file__).resolve().parent.parent


class StackFileError(ValueError):
    """A project or stack file (or a `--config` key) the Pulumi CLI or this program would refuse: names the file or
    the flag, the key and what is allowed."""


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


def shown(path: Path) -> str:
    """`path` as a user here would type it: relative to the working directory when inside it."""
    relative = os.path.relpath(path)
    return str(path) if relative.startswith("..") else relative


def read_yaml(path: Path) -> Any:
    """A Pulumi.yaml or stack file, with the CLI's scalar rules (a copy: callers may change it). A file that is not
    YAML is one line naming it, where (line:column) and what YAML found there."""
    try:
        return copy.deepcopy(_parse(path.read_text()))
    except yaml.MarkedYAMLError as error:
        raise StackFileError(_not_yaml(path, error)) from None
    except UnicodeDecodeError as error:
        raise StackFileError(f"{shown(path)}: byte {error.start} is not allowed; give UTF-8 text") from None


def _not_yaml(path: Path, error: yaml.MarkedYAMLError) -> str:
    """`Pulumi.dev.yaml:5:4: not valid YAML: did not find expected key (while parsing a block mapping at 2:3)`."""
    mark, start = error.problem_mark, error.context_mark
    where = f"{shown(path)}:{mark.line + 1}:{mark.column + 1}" if mark else shown(path)
    context = f" ({error.context} at {start.line + 1}:{start.column + 1})" if error.context and start else ""
    return f"{where}: not valid YAML: {error.problem}{context}"


def kind_of(value: Any) -> str:
    """What a YAML value is, in a user's words: 'a list', 'a string'."""
    words = {list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number", dict: "a map"}
    return words.get(type(value), type(value).__name__)


def a_map(value: Any, where: str, allowed: str) -> dict[str, Any]:
    """`value` (None as an empty map), refused in one line unless it is a map."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise StackFileError(f"{where}: {kind_of(value)} is not allowed; {allowed}")
    return value


@functools.lru_cache(maxsize=64)
def _parse(text: str) -> Any:
    """A program reads its project and stack files a hundred times in a rehearsal: each text is parsed once."""
    return yaml.load(text, Loader=CliYamlLoader)




def project_file(root: Path = ROOT) -> dict[str, Any]:
    """A program's Pulumi.yaml."""
    path = root / "Pulumi.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"--program {root}: no Pulumi.yaml there (a Pulumi program's directory has one)")
    return a_map(read_yaml(path), shown(path), "Pulumi.yaml is a map (name:, runtime:, config:)")


def project_name(root: Path = ROOT) -> str:
    return str(project_file(root).get("name", PROJECT))


def declarations(root: Path = ROOT) -> dict[str, dict[str, Any]]:
    """Pulumi.yaml's config declarations by key, without the project prefix (a bare value is a default)."""
    project = project_file(root)
    prefix = f"{project.get('name', PROJECT)}:"
    config = a_map(project.get("config"), f"{shown(root / 'Pulumi.yaml')}: config", "give a map of keys")
    return {
        key.removeprefix(prefix): spec if isinstance(spec, dict) else {"default": spec} for key, spec in config.items()
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
    if kind == "object":
        return isinstance(value, dict)
    items = spec.get("items")
    return isinstance(value, list) and items is not None and all(_matches(items, item) for item in value)


def configured_keys() -> list[str]:
    """Every config key the Pulumi engine gave this program.

    The Python language host passes config in the PULUMI_CONFIG environment variable; tests
    and mocks set it in the runtime's map (pulumi sdk/python/lib/pulumi/runtime/config.py).
    """
    return sorted({*runtime_config.get_config_env(), *runtime_config.CONFIG.get()})


def check_declared(
    stack: str,
    keys: Iterable[str],
    declared: dict[str, dict[str, Any]],
    project: str = PROJECT,
    given: Mapping[str, str] | None = None,
) -> None:
    """Refuse a project key Pulumi.yaml does not declare (`keys` with or without the project prefix); a key that
    `given` maps to the `--config KEY=VALUE` that set it is blamed on that flag, not on the stack file."""
    for key in sorted(keys):
        if key.startswith(f"{project}:") or ":" not in key:
            name = key.removeprefix(f"{project}:")
            if name not in declared:
                known = f"{closest(name, declared)}; declared keys are {', '.join(sorted(declared))}"
                if given and name in given:
                    flag = f"--config {given[name]}: {project}:{name}"
                    raise StackFileError(f"{flag} is not allowed; Pulumi.yaml does not declare it{known}")
                stack_key = f"Stack '{stack}' sets {project}:{name}"
                raise StackFileError(f"{stack_key}, which Pulumi.yaml does not declare{known}")


def check(stack: str, values: dict[str, Any], root: Path = ROOT, given: Mapping[str, str] | None = None) -> None:
    """Refuse what `pulumi up` would refuse for `stack`'s project keys (values without the prefix); `given`: the
    `--config KEY=VALUE` that set a key, by its name, to blame the flag instead of the file."""
    declared, project = declarations(root), project_name(root)
    if declared:  # a program that declares no config reads whatever it is given
        check_declared(stack, values, declared, project, given)
    for key, value in sorted(values.items()):
        spec = declared.get(key, {})
        if "type" in spec and not _matches(spec, value):
            if given and key in given:
                raise StackFileError(
                    f"--config {given[key]}: {value!r} is not allowed; {project}:{key} must be of type "
                    f"'{_full_type(spec)}'"
                )
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
