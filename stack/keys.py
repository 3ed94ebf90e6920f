"""Stack keys: one naming rule from an argument to its key, and the reader that applies it.

A stack key is its argument's name in camelCase (`min_size` -> `minSize`); the few that differ are in RENAMED. The
top-level keys are declared in Pulumi.yaml (type, default, description); a section's keys (`eks-ddp:vpc`, a node
group, `eks-ddp:job`) are the fields of the argument types it becomes (NetworkArgs, NodeGroupShape,
TrainingJobSpec, ...), each with the field's type. Here a value is checked for its type only: what it may be is for
the component or the model that owns it to say, and their refusals name the key by the same rule (`stack_key`).
"""

import collections.abc
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar, get_origin, get_type_hints

import pulumi

from eks_ddp.stack.project_config import PROJECT, closest

RENAMED = {"node_losses": "survivesNodeLosses", "network": "vpc"}
"""Arguments whose key is not their camelCase: a job's restart budget is named for what it buys."""
RETIRED = {
    "hugepagesMiB": "removed: a training pod asking for huge pages never gets a Karpenter node (Karpenter cannot "
    "know them before launch); the NCCL check asks for the EFA software's pages where the autoscaler knows them"
}
"""Keys that existed once, and why they went."""
TYPE_WORDS = {str: "a string", int: "a whole number", bool: "true or false (unquoted)", list: "a list", dict: "a map"}


class ConfigError(ValueError):
    """Bad stack configuration: names the key (`eks-ddp:nodeGroups[1].instanceType`), the value, what is allowed."""

    def __init__(self, key: str, value: object, allowed: str) -> None:
        shown = value.value if isinstance(value, Enum) else value  # a component's choice, as the stack file says it
        super().__init__(f"{key}: {shown!r} is not allowed; {allowed}")
        self.key = key


Kind = TypeVar("Kind", bound=Enum)


def key(name: str) -> str:
    """A top-level key with the project's prefix: `eks-ddp:nodeGroups`."""
    return f"{PROJECT}:{name}"


UNITS = {"gib": "GiB"}
"""Words written as the unit they are: `root_volume_gib` -> `rootVolumeGiB`."""


def stack_word(argument: str) -> str:
    """The key of an argument: `min_size` -> `minSize`, unless RENAMED."""
    if argument in RENAMED:
        return RENAMED[argument]
    first, *rest = argument.split("_")
    return first + "".join(UNITS.get(word) or word[:1].upper() + word[1:] for word in rest)


def argument_of(word: str) -> str:
    """The argument a key names: `minSize` -> `min_size` (the naming rule, backwards)."""
    renamed = {stack: argument for argument, stack in RENAMED.items()}
    if word in renamed:
        return renamed[word]
    for unit, written in UNITS.items():
        word = word.replace(written, f"_{unit}")
    return re.sub(r"[A-Z]", lambda match: f"_{match.group(0).lower()}", word)


def is_a(value: Any, kind: type) -> bool:
    """`value` is of `kind` as YAML gives it: a boolean is not a whole number."""
    return isinstance(value, kind) and not (kind is int and isinstance(value, bool))


def _kind(annotation: Any) -> type:
    """The YAML type a field's annotation takes: `Sequence[...]` a list, `Mapping[...]` a map, an Enum its value's
    type. A field of another type (an output, an optional value) is not a key until its section reads it so."""
    origin = get_origin(annotation)
    if origin in (list, collections.abc.Sequence):
        return list
    if origin in (dict, collections.abc.Mapping):
        return dict
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return str
    if annotation in (str, int, bool):
        return annotation
    raise TypeError(f"no stack type for a field of type {annotation!r}")


_FORWARD = vars(pulumi.output)
"""Where `pulumi.Input[T]`'s forward reference (`Output[T]`) is resolved, for reading the argument types' hints."""


def hints(schema: type) -> dict[str, Any]:
    """A TypedDict's fields and their types, inherited ones included."""
    return get_type_hints(schema, localns=_FORWARD)


def is_unset(value: Any) -> bool:
    """A value that means "not set": a key's absence, or Pulumi.yaml's default for it ("", 0 or an empty list)."""
    return value is None or value == "" or value == [] or (is_a(value, int) and value == 0)


@dataclass(frozen=True)
class Section:
    """A map of keys read as the fields of `schemas` (TypedDicts), less the `hidden` ones the program sets itself."""

    schemas: tuple[type, ...]
    hidden: frozenset[str] = frozenset()

    def fields(self) -> dict[str, tuple[str, type]]:
        """Each key: its argument and its YAML type."""
        return {
            stack_word(argument): (argument, _kind(annotation))
            for schema in self.schemas
            for argument, annotation in hints(schema).items()
            if argument not in self.hidden
        }

    def read(self, raw: Any, where: str) -> dict[str, Any]:
        """The section's values by argument: only known keys, each of its type (a null is unset)."""
        return read(raw, where, self.fields())


def declared(declarations: Mapping[str, Mapping[str, Any]]) -> dict[str, tuple[str, type]]:
    """The top-level keys as Pulumi.yaml declares them: each key's argument, and the type of its default (every key
    has one, or the CLI refuses a stack that leaves it out; a map or a list of maps is undeclared there, since the CLI
    would refuse one set as a string without `--path`)."""
    return {
        word: (argument_of(word), type(declaration.get("default")))
        for word, declaration in ((key.removeprefix(f"{PROJECT}:"), spec) for key, spec in declarations.items())
    }


def read(raw: Any, where: str, fields: Mapping[str, tuple[str, type]]) -> dict[str, Any]:
    """`raw` by argument: only `fields`' keys, each of its type; `where` is the map's own key (or the project)."""
    if not is_a(raw, dict):
        raise ConfigError(where, raw, "give a map")
    values = {}
    for name, value in raw.items():
        full = f"{where}.{name}" if where != PROJECT else key(name)
        if name in RETIRED:
            raise ConfigError(full, value, RETIRED[name])
        if name not in fields:
            raise ConfigError(full, value, f"known keys are {', '.join(sorted(fields))}{closest(name, fields)}")
        argument, kind = fields[name]
        if value is not None and not is_a(value, kind):
            raise ConfigError(full, value, f"give {TYPE_WORDS[kind]}")
        if value is not None:
            values[argument] = value
    return values


def strings(values: list[Any], where: str) -> list[str]:
    """A list's items must be strings (zones, ARNs, arguments): the bad one named by its index."""
    for index, value in enumerate(values):
        if not is_a(value, str):
            raise ConfigError(f"{where}[{index}]", value, "give a string")
    return values


def string_values(values: Mapping[str, Any], where: str) -> Mapping[str, str]:
    """A map's values must be strings (labels, environment variables, subnet ids): the bad one named by its name."""
    for name, value in values.items():
        if not is_a(value, str):
            raise ConfigError(f"{where}.{name}", value, "give a string")
    return values


def choice(word: str, value: str, kind: type[Kind]) -> Kind:
    """`value` as one of `kind`'s members, or an error naming the stack key and the members."""
    allowed = [member.value for member in kind]
    if value not in allowed:
        raise ConfigError(key(word), value, f"use one of {', '.join(allowed)}")
    return kind(value)
