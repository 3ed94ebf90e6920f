"""One args style across the library: every component takes one TypedDict named `args`, each field documented, and
Pulumi's schema inference (pulumi 3.272.0, provider/experimental/analyzer.py) accepts each, with no `Any`: what a
component waits for is `opts.depends_on`, never an argument, so nothing in args is a resource of our own."""

import ast
import importlib
import inspect
import json
import pkgutil
import sys
import typing

import pulumi
import pytest
from pulumi.provider.experimental.analyzer import Analyzer
from pulumi.provider.experimental.schema import generate_schema

from eks_ddp import infra, workloads


def _components() -> list[type[pulumi.ComponentResource]]:
    found = {}
    for package in (infra, workloads):
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            loaded = importlib.import_module(module.name)
            for _, value in inspect.getmembers(loaded, inspect.isclass):
                if issubclass(value, pulumi.ComponentResource) and value.__module__ == loaded.__name__:
                    if "__init__" in vars(value):  # a base such as TrainingNodes is not constructed itself
                        found[value.__qualname__] = value
    return sorted(found.values(), key=lambda component: component.__name__)


def _field_docstrings(typed: type) -> dict[str, str]:
    """Field -> the string literal right after it, in the TypedDict or the TypedDicts it extends (read from the
    source: at run time a TypedDict keeps its bases' fields, not the bases)."""
    definition = ast.parse(inspect.getsource(typed)).body[0]
    assert isinstance(definition, ast.ClassDef)
    documented = {}
    body = definition.body
    for statement, following in zip(body, body[1:]):
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant):
                documented[statement.target.id] = following.value.value
    namespace = vars(sys.modules[typed.__module__])
    for base in definition.bases:
        extended = namespace.get(base.id) if isinstance(base, ast.Name) else None
        if extended is not None and typing.is_typeddict(extended):
            documented = {**_field_docstrings(extended), **documented}
    return documented


COMPONENTS = _components()


def test_the_library_has_the_components_we_expect_to_check() -> None:
    names = {component.__name__ for component in COMPONENTS}
    assert {"TrainingPlatform", "Network", "Cluster", "EfaNodeGroup", "KarpenterNodePool", "PyTorchJob"} <= names
    assert len(COMPONENTS) >= 25


@pytest.mark.parametrize("component", COMPONENTS, ids=lambda component: component.__name__)
def test_each_component_takes_one_documented_typeddict(component: type) -> None:
    parameters = list(inspect.signature(component.__init__).parameters)
    assert parameters[:3] == ["self", "name", "args"], parameters
    args = inspect.get_annotations(component.__init__, eval_str=True)["args"]
    assert typing.is_typeddict(args), f"{component.__name__}(args: {args})"
    fields = set(typing.get_type_hints(args, localns={"Output": pulumi.Output, "T": typing.TypeVar("T")}))
    undocumented = fields - set(_field_docstrings(args))
    assert not undocumented, f"{args.__name__}: {sorted(undocumented)}"


@pytest.mark.parametrize("component", COMPONENTS, ids=lambda component: component.__name__)
def test_pulumis_schema_inference_accepts_each_component_with_no_any(component: type) -> None:
    inferred = Analyzer("eksddp").analyze([component])
    schema = generate_schema(
        "eksddp", "0.0.0", None, inferred["component_definitions"], inferred["type_definitions"], []
    ).to_json()
    assert "pulumi.json#/Any" not in json.dumps(schema)
    assert schema["resources"][f"eksddp:index:{component.__name__}"]["inputProperties"]
