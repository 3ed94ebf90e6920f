"""The plugin package's schema, as `pulumi package add` would get it, checked offline.

Pulumi infers the schema from the components' type hints (pulumi 3.272.0, provider/experimental/analyzer.py); these
tests run that inference, start the plugin's entry point as Pulumi's language host would and ask it over gRPC, and
hold the result to the components' TypedDicts and to the YAML example. Not run here: `pulumi package add` itself and
SDK generation (no Pulumi CLI); test_construct.py constructs the components from the engine's wire format.
"""

import collections.abc
import inspect
import json
import subprocess
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Any

import grpc
import pulumi
import pytest
import yaml
from google.protobuf import empty_pb2
from pulumi.provider.experimental.util import camel_case
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

from eks_ddp import provider

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = provider.schema()
PRIMITIVES = {str: "string", int: "integer", float: "number", bool: "boolean"}
# pulumi.Input[T] names Output by a forward reference: resolving the hints needs it.
HINT_NAMES = {"Output": pulumi.Output, "T": typing.TypeVar("T")}


def _hints(typed: Any) -> dict[str, Any]:
    return typing.get_type_hints(typed, localns=HINT_NAMES, include_extras=True)


def _properties(schema_object: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {key: value for key in keys for key, value in schema_object.get(key, {}).items()}


def _every_property() -> list[tuple[str, str, dict[str, Any]]]:
    found = []
    for token, resource in SCHEMA["resources"].items():
        for name, prop in _properties(resource, "inputProperties", "properties").items():
            found.append((token, name, prop))
    for token, schema_type in SCHEMA["types"].items():
        for name, prop in schema_type.get("properties", {}).items():
            found.append((token, name, prop))
    return found


def test_the_schema_has_no_any_and_describes_every_component_type_and_property() -> None:
    assert set(SCHEMA["resources"]) == {f"eksddp:index:{c.__name__}" for c in provider.COMPONENTS}
    untyped = [f"{token}.{name}" for token, name, prop in _every_property() if "pulumi.json#/Any" in json.dumps(prop)]
    undescribed = [f"{token}.{name}" for token, name, prop in _every_property() if not prop.get("description")]
    described = [*SCHEMA["resources"].items(), *SCHEMA["types"].items()]
    assert not untyped and not undescribed
    assert [token for token, item in described if not item.get("description")] == []
    assert [
        f"{token}.{value['name']}"
        for token, item in SCHEMA["types"].items()
        for value in item.get("enum", [])
        if not value.get("description")
    ] == []
    assert SCHEMA["version"] == provider.version() and SCHEMA["namespace"] == "eks-ddp"  # one SDK name from every source
    assert SCHEMA["dependencies"] == [{"name": "kubernetes", "version": "4.34.2"}]  # the provider input's package


def _unwrapped(hint: Any) -> tuple[Any, bool]:
    """The hint without NotRequired, Optional and pulumi.Input; whether it is optional."""
    optional = False
    while True:
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin is typing.NotRequired:
            hint, optional = args[0], True
        elif origin in (typing.Union, types.UnionType):
            inputs = (collections.abc.Awaitable, pulumi.Output)
            plain = [arg for arg in args if arg is not type(None) and typing.get_origin(arg) not in inputs]
            optional = optional or type(None) in args
            (hint,) = plain
        else:
            return hint, optional


def _expect(hint: Any, prop: Mapping[str, Any], where: str) -> None:
    """The schema property matches the Python hint: primitive type, list, map, enum values or object type."""
    hint, _ = _unwrapped(hint)
    origin = typing.get_origin(hint)
    if hint in PRIMITIVES:
        assert prop.get("type") == PRIMITIVES[hint], where
    elif origin in (list, Sequence, typing.Sequence):
        assert prop.get("type") == "array", where
        _expect(typing.get_args(hint)[0], prop["items"], f"{where}[]")
    elif origin in (dict, Mapping, typing.Mapping):
        assert prop.get("type") == "object", where
        _expect(typing.get_args(hint)[1], prop["additionalProperties"], f"{where}{{}}")
    elif inspect.isclass(hint) and issubclass(hint, Enum):
        schema_type = SCHEMA["types"][prop["$ref"].removeprefix("#/types/")]
        assert [value["value"] for value in schema_type["enum"]] == [member.value for member in hint], where
    elif typing.is_typeddict(hint):
        assert prop["$ref"] == f"#/types/eksddp:index:{hint.__name__}", where
        _expect_object(hint, SCHEMA["types"][f"eksddp:index:{hint.__name__}"], "properties", "required", where)
    else:
        assert prop["$ref"].endswith("/schema.json#/resources/pulumi:providers:kubernetes"), where


def _expect_object(typed: Any, schema_object: Mapping[str, Any], properties: str, required: str, where: str) -> None:
    hints = _hints(typed)
    assert set(schema_object[properties]) == {camel_case(name) for name in hints}, where
    expected_required = {camel_case(name) for name in typed.__required_keys__}
    assert set(schema_object.get(required, [])) == expected_required, where
    for name, hint in hints.items():
        _expect(hint, schema_object[properties][camel_case(name)], f"{where}.{name}")


@pytest.mark.parametrize("component", provider.COMPONENTS, ids=lambda component: component.__name__)
def test_each_components_inputs_are_its_typeddict_field_for_field(component: type) -> None:
    """Names (camelCase), required keys, types down to nested objects and enum values, against the TypedDicts."""
    args = _hints(component.__init__)["args"]
    resource = SCHEMA["resources"][f"eksddp:index:{component.__name__}"]
    _expect_object(args, resource, "inputProperties", "requiredInputs", component.__name__)


def test_the_plugin_entry_point_serves_that_schema_over_grpc(tmp_path: Path) -> None:
    """As Pulumi's language host starts it: from another directory, with the engine's address; it prints its port."""
    plugin = subprocess.Popen(
        [sys.executable, str(ROOT / "provider"), "127.0.0.1:1"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "stderr").open("w"),
    )
    try:
        port = int(plugin.stdout.readline())  # type: ignore[union-attr]
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = provider_pb2_grpc.ResourceProviderStub(channel)
            served = json.loads(stub.GetSchema(provider_pb2.GetSchemaRequest(version=0), timeout=60).schema)
            info = stub.GetPluginInfo(empty_pb2.Empty(), timeout=60)
    finally:
        plugin.kill()
        plugin.wait()
    assert served == SCHEMA
    assert info.version == provider.version()


def test_the_plugin_is_a_directory_pulumis_python_host_runs_as_the_provider() -> None:
    """Rules of pulumi/pulumi at 1b594989 (2026-08-21): PulumiPlugin.yaml is read into PluginProject
    (sdk/go/common/workspace/project.go: runtime, packages, requiredPulumiVersion, template; no `main`), and the
    Python host's RunPlugin runs the plugin root's __main__.py. At the repository's root that would be the stack
    program, and beside Pulumi.yaml LoadBaseProjectFrom (sdk/go/common/workspace/loaders.go: `pulumi install`,
    `pulumi package add`) fails with "detected both PulumiPlugin.yaml and Pulumi.yaml"."""
    assert not (ROOT / "PulumiPlugin.yaml").exists() and (ROOT / "__main__.py").exists()
    manifest = yaml.safe_load((ROOT / "provider" / "PulumiPlugin.yaml").read_text())
    assert set(manifest) <= {"runtime", "packages", "requiredPulumiVersion", "template"}
    assert manifest["runtime"]["name"] == "python" and (ROOT / "provider" / "__main__.py").is_file()
    # The pip toolchain installs the plugin directory's requirements.txt: the program's pinned set.
    assert (ROOT / "provider" / "requirements.txt").read_text().splitlines()[-1] == "-r ../requirements.txt"
    assert "pulumi==3.272.0" in (ROOT / "requirements.txt").read_text()


def test_the_yaml_example_uses_only_what_the_schema_declares() -> None:
    """Every resource type, property name, required input and enum value the example writes exists in the schema."""
    example = ROOT / "examples" / "yaml_platform"
    program = yaml.safe_load((example / "Pulumi.yaml").read_text())
    # project.json (pulumi/pulumi 1b594989): a package is a source string (or a spec); ours is the plugin directory.
    assert (example / program["packages"][provider.PACKAGE]).resolve() == ROOT / "provider"
    variables = program["variables"]
    for name, resource in program["resources"].items():
        declared = SCHEMA["resources"][resource["type"]]
        given = resource["properties"]
        assert set(given) <= set(declared["inputProperties"]), name
        assert set(declared.get("requiredInputs", [])) <= set(given), name
        for key, value in given.items():
            _check_value(value, declared["inputProperties"][key], variables, f"{name}.{key}")


def _check_value(value: Any, prop: Mapping[str, Any], variables: Mapping[str, Any], where: str) -> None:
    if isinstance(value, str) and value.startswith("${"):
        reference = value[2:-1]
        if reference in variables:
            _check_value(variables[reference], prop, variables, where)
        return  # another resource's output: its type is the schema's
    ref = prop.get("$ref", "")
    if ref.startswith("#/types/"):
        schema_type = SCHEMA["types"][ref.removeprefix("#/types/")]
        if "enum" in schema_type:
            assert value in [member["value"] for member in schema_type["enum"]], where
            return
        assert isinstance(value, dict) and set(value) <= set(schema_type["properties"]), where
        assert set(schema_type.get("required", [])) <= set(value), where
        for key, item in value.items():
            _check_value(item, schema_type["properties"][key], variables, f"{where}.{key}")
    elif prop.get("type") == "array":
        for item in value:
            _check_value(item, prop["items"], variables, f"{where}[]")
    elif prop.get("type") in ("string", "integer", "boolean", "number"):
        expected = {"string": str, "integer": int, "boolean": bool, "number": (int, float)}[prop["type"]]
        assert isinstance(value, expected), where


def test_the_plugin_needs_only_what_requirements_txt_installs() -> None:
    """Pulumi installs requirements.txt for the plugin: the trainer's and the tests' packages must not be needed."""
    blocked = ["torch", "numpy", "sklearn", "matplotlib", "tensorboard", "boto3", "prometheus_client", "tqdm"]
    blocked += ["jsonschema", "kubernetes_validate", "moto", "pytest"]
    script = f"import sys\nfor name in {blocked!r}: sys.modules[name] = None\nimport eks_ddp.provider as provider\nprovider.schema()\n"
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=True, timeout=120)
