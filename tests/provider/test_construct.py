"""The plugin's components constructed from the wire format the engine sends, under the mocks.

pulumi 3.272.0's provider server (provider/server.py Construct) gets a component's inputs as a protobuf Struct and
deserializes them with rpc.deserialize_properties: every number arrives as a float. These tests send the YAML
example's properties that way through the plugin's provider (provider/wire_inputs.py) and read what the
components registered. Not run here: the engine itself (no Pulumi CLI).
"""

import json
import re
from pathlib import Path
from typing import Any, cast

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml
from google.protobuf import struct_pb2
from pulumi.errors import InputPropertyError
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.runtime import rpc

from eks_ddp.provider import COMPONENTS, NAMESPACE, PACKAGE, version
from eks_ddp.provider.wire_inputs import ComponentsProvider
from eks_ddp.tools.mocking import Registration, run_offline

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "yaml_platform" / "Pulumi.yaml"


def _wire(properties: dict[str, Any]) -> dict[str, Any]:
    """What the provider server hands to `construct`: the properties through a Struct, as the engine sends them."""
    struct = struct_pb2.Struct()
    struct.update(properties)
    return rpc.deserialize_properties(struct, keep_unknowns=True)


def _example() -> dict[str, Any]:
    """The YAML example's resources, its variables substituted (references to other resources left as they are)."""
    program = yaml.safe_load(EXAMPLE.read_text())
    text = yaml.safe_dump(program["resources"])
    for name, value in program["variables"].items():
        text = text.replace(f"${{{name}}}", yaml.safe_dump(value, default_flow_style=True).strip())
    return yaml.safe_load(text)


def _constructed(provider: ComponentProvider, edit: Any = None) -> list[Registration]:
    resources = _example()
    if edit is not None:
        edit(resources)

    def program() -> None:
        platform = provider.construct(
            "platform", "eksddp:index:TrainingPlatform", _wire(resources["platform"]["properties"])
        )
        image = provider.construct("image", "eksddp:index:TrainerImage", _wire(resources["image"]["properties"]))
        job = _wire({**resources["train"]["properties"], "provider": None})
        job["provider"] = platform.state["provider"]  # a resource reference arrives as the resource
        job["job"]["image"] = image.state["imageUri"]
        provider.construct("train", "eksddp:index:PyTorchJob", job, pulumi.ResourceOptions())

    return run_offline(program)


def test_the_sdks_own_mapping_loses_whole_numbers_and_arrays_of_enums() -> None:
    """Why the plugin has its own provider: pulumi 3.272.0's map_inputs, on the wire format of the example."""
    plain = ComponentProvider(COMPONENTS, PACKAGE, None, version())
    definitions = plain._component_defs
    wired = {name: _wire(resource["properties"]) for name, resource in _example().items()}
    train = cast(dict[str, Any], plain.map_inputs(wired["train"], definitions["PyTorchJob"]))
    assert train["job"]["epochs"] == 10.0 and isinstance(train["job"]["epochs"], float)
    image = cast(dict[str, Any], plain.map_inputs(wired["image"], definitions["TrainerImage"]))
    assert image["architectures"] == [{}]


def test_the_yaml_example_constructs_and_its_job_trains_ten_epochs() -> None:
    provider = ComponentsProvider(COMPONENTS, PACKAGE, NAMESPACE, version())
    registrations = _constructed(provider)
    job = next(r for r in registrations if r.inputs.get("kind") == "PyTorchJob")
    command = job.inputs["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"]
    epochs = command[command.index("--epochs") + 1]
    assert epochs == "10", command
    builds = [r for r in registrations if r.type.startswith("docker-build:")]
    assert builds and builds[0].inputs["platforms"] == ["linux/arm64"]
    types = {r.type for r in registrations}
    assert {"eksddp:index:TrainingPlatform", "eksddp:index:TrainerImage", "eksddp:index:PyTorchJob"} <= types


def test_a_fractional_number_where_a_whole_one_is_declared_is_refused_naming_it() -> None:
    provider = ComponentsProvider(COMPONENTS, PACKAGE, NAMESPACE, version())
    properties = _example()["train"]["properties"]
    train = _wire({**properties, "job": {**properties["job"], "epochs": 10.5}})
    with pytest.raises(InputPropertyError, match=re.escape("job.epochs: 10.5 is not a whole number; use an integer")):
        provider.map_inputs(train, provider._component_defs["PyTorchJob"])


# A GPU group as the engine sends it: whole numbers as floats, an enum, an array of nested types with enums.
GPU_GROUP = {
    "name": "gpu",
    "instanceType": "p4de.24xlarge",
    "availabilityZone": "us-east-1a",
    "minSize": 0,
    "maxSize": 2,
    "capacityType": "ON_DEMAND",
    "taints": [{"key": "team", "value": "research", "effect": "NO_SCHEDULE"}],
}
# During a preview the image of a TrainerImage built in the same run is unknown.
JOB = {"name": "llm", "namespace": "training", "image": rpc.UNKNOWN, "dataset": "mnist", "epochs": 3, "replicas": 2}
HOSTED_JOBS = {
    "PyTorchJob": ({"nodeGroup": GPU_GROUP, "job": JOB}, "PyTorchJob"),
    "TrainJob": ({"nodeGroup": GPU_GROUP, "job": JOB}, "ClusterTrainingRuntime"),
    "IndexedTrainingJob": ({"nodeGroup": GPU_GROUP, "job": JOB}, "Job"),
    "DataPrepJob": ({"nodeGroup": GPU_GROUP, "job": JOB}, "Job"),
    "EvaluationJob": ({"nodeGroup": GPU_GROUP, "job": JOB}, "Job"),
    "FabricCheckJob": ({"nodeGroup": GPU_GROUP, "namespace": "training", "image": "efa-tools:1"}, "Job"),
    "NcclCheckJob": ({"nodeGroup": GPU_GROUP, "namespace": "training"}, "MPIJob"),
}


def test_every_hosted_component_is_constructed_from_the_wire_format() -> None:
    """The platform and the image through the YAML example; every job component here, with enums, nested types,
    an array of them, floats for whole numbers and an unknown image."""
    assert {c.__name__ for c in COMPONENTS} == {"TrainingPlatform", "TrainerImage", *HOSTED_JOBS}
    provider = ComponentsProvider(COMPONENTS, PACKAGE, NAMESPACE, version())
    for component, (properties, kind) in HOSTED_JOBS.items():

        def program(component: str = component, properties: dict[str, Any] = properties) -> None:
            inputs = _wire({**properties, "provider": None})
            inputs["provider"] = k8s.Provider("cluster")  # a resource reference arrives as the resource
            provider.construct(component.lower(), f"eksddp:index:{component}", inputs, pulumi.ResourceOptions())

        registered = [r.inputs for r in run_offline(program) if r.type.startswith("kubernetes:")]
        assert [inputs for inputs in registered if inputs.get("kind") == kind], component
        sent = json.dumps(registered, sort_keys=True, default=lambda unknown: "<unknown>")  # the image is unknown
        assert not re.findall(r'"\d+\.0"', sent), component  # no `--epochs 3.0`, no `"2.0"` replicas
        if component in ("DataPrepJob", "EvaluationJob"):  # side steps run on the system nodes
            assert '"eks-ddp/node-group": "system", "kubernetes.io/arch": "amd64"}' in sent, component
            continue
        toleration = {"key": "team", "operator": "Equal", "value": "research", "effect": "NoSchedule"}
        assert json.dumps(toleration, sort_keys=True) in sent and '"eks-ddp/node-group": "gpu"' in sent, component
        if component in ("PyTorchJob", "TrainJob", "IndexedTrainingJob"):
            assert '"--epochs", "3"' in sent, component
