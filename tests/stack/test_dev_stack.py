"""The dev stack program under mocks: every component, and every object it would apply validates."""

import json
import runpy
from pathlib import Path
from typing import Any

import pulumi
import pytest

from eks_ddp.tools import stack_file
from eks_ddp.stack.config import PROJECT, parse
from eks_ddp.tools.preview import kubernetes_objects
from eks_ddp.stack.program import build
from eks_ddp.workloads.pytorchjob import admission_errors
from tests.pulumi_harness import Recorded
from tests.workloads.schemas import validate_core, validate_pytorchjob

ROOT = Path(__file__).resolve().parents[2]
CORE_KINDS = {"Namespace", "ServiceAccount", "StorageClass", "PersistentVolumeClaim", "Job", "Service"}


def _kubernetes_objects(recorded: Recorded) -> list[dict[str, Any]]:
    return kubernetes_objects(recorded.monitor.registrations)


def test_dev_stack_creates_every_component_and_valid_objects(pulumi_mocks: Recorded) -> None:
    values, region = stack_file.load("dev")
    config = parse(values, region)
    pulumi_mocks.run(lambda: build(config))
    components = {r.type.split(":")[-1] for r in pulumi_mocks.monitor.registrations if r.type.startswith("eksddp:index:")}
    assert components == {
        "TrainingPlatform", "Network", "Cluster", "EfaNodeGroup", "EfaDevicePlugin", "ClusterAutoscaler", "MetricsServer", "TrainingOperator",
        "FsxLustreStorage", "ModelBucket", "TrainerImage", "DataPrepJob", "PyTorchJob", "EvaluationJob",
        "PrometheusMonitoring",  # the default for a stack with a job
    }  # no FabricCheckJob: the dev stack's Graviton group names no arm64 EFA test image (a warning says so)
    objects = _kubernetes_objects(pulumi_mocks)
    kinds = sorted(str(o["kind"]) for o in objects)
    assert {"Namespace", "ServiceAccount", "StorageClass", "PersistentVolumeClaim", "Job", "PyTorchJob"} <= set(kinds)
    for manifest in objects:
        if manifest["kind"] == "PyTorchJob":
            validate_pytorchjob(manifest)
            assert admission_errors(manifest) == []
            pod = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]  # type: ignore[index]
            assert pod["containers"][0]["image"].endswith("@sha256:" + "0" * 64)
        elif manifest["kind"] in CORE_KINDS:
            validate_core(manifest)
    operator = pulumi_mocks.named("eks-ddp-training-operator-manifests")
    assert operator.urn in pulumi_mocks.named("eks-ddp-train-job").dependencies


def test_main_program_runs_with_the_dev_stack_config(pulumi_mocks: Recorded) -> None:
    values, region = stack_file.load("dev")
    config = {f"{PROJECT}:{key}": value if isinstance(value, str) else json.dumps(value) for key, value in values.items()}
    pulumi.runtime.set_all_config({**config, "aws:region": region or ""})
    pulumi_mocks.run(lambda: runpy.run_path(str(ROOT / "__main__.py")))
    assert pulumi_mocks.named("eks-ddp-cluster-eks").inputs["name"] == "eks-ddp-dev"


def test_unknown_stack_is_named() -> None:
    with pytest.raises(FileNotFoundError, match=r"--stack prod: Pulumi.prod.yaml not found \(stacks here: ([-\w]+, )*dev(, [-\w]+)*\)"):
        stack_file.load("prod")


def test_fabric_check_runs_with_an_image_for_the_groups_architecture(pulumi_mocks: Recorded) -> None:
    values, region = stack_file.load("dev")
    config = parse({**values, "fabricCheckImage": "registry.example/efa-tools-arm64:1"}, region)
    pulumi_mocks.run(lambda: build(config))
    (job,) = [r for r in pulumi_mocks.of_type("kubernetes:batch/v1:Job") if r.name == "eks-ddp-efa-check-job"]
    assert job.inputs["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.example/efa-tools-arm64:1"
    validate_core(kubernetes_objects([job])[0])
