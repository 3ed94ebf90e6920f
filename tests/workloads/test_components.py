"""Workload components under mocks: what they apply, what they wait for, what they refuse."""

import json
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from eks_ddp.infra.addons.training_operator import TrainingOperator
from eks_ddp.infra.aws.efa_node_group import EfaNodeGroupArgs, shape_of
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.facts.catalogue import Architecture
from eks_ddp.tools.mocking import RecordingMocks
from eks_ddp.workloads import pytorchjob
from eks_ddp.workloads.batch_jobs import FABRIC_IMAGE_KEY
from eks_ddp.workloads.components import (
    QUEUE_CHANGE_REPLACES, DataPrepJob, EvaluationJob, FabricCheckJob, NcclCheckJob, PyTorchJob,
)
from eks_ddp.workloads.image import CONTEXT, TrainerImage, content_tag, lifecycle_policy
from eks_ddp.workloads.security import CHECKOV_SKIPS, unpinned_image_skips
from eks_ddp.workloads.training_pod import TrainingJob, TrainingJobSpec
from tests.pulumi_harness import Recorded, mocked

GROUP: EfaNodeGroupArgs = {
    "cluster_name": "training", "vpc_id": "vpc-1", "cluster_security_group_id": "sg-1", "instance_type": "c7g.16xlarge",
    "availability_zone": "us-east-1a", "subnet_id": "subnet-a", "min_size": 0, "max_size": 4,
}
SHAPE = shape_of(GROUP)
JOB: TrainingJobSpec = {"name": "mnist-ddp", "namespace": "training", "image": "img:1", "replicas": 2}


def test_pytorchjob_waits_for_the_operator(pulumi_mocks: Recorded) -> None:
    components: list[PyTorchJob] = []

    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="{}")
        operator = TrainingOperator("operator", {"provider": provider})
        after = pulumi.ResourceOptions(depends_on=[operator.manifests])
        components.append(PyTorchJob("train", {"provider": provider, "node_group": SHAPE, "job": JOB}, after))

    pulumi_mocks.run(program)
    (component,) = components
    command = component.manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"]
    assert command[command.index("--run-name") + 1] == component.run_name  # what the stack exports as runName
    assert command[command.index("--output-dir") + 1] == component.output_dir  # and as runDirectory
    job = pulumi_mocks.named("train-job")
    assert job.type == "kubernetes:kubeflow.org/v1:PyTorchJob"
    assert pulumi_mocks.named("operator-manifests").urn in job.dependencies
    assert job.inputs["spec"]["nprocPerNode"] == "1"
    assert job.inputs["metadata"]["annotations"] == {"pulumi.com/waitFor": "jsonpath={.metadata}"}  # submitted
    # The operator never recreates a pod whose template changed: what defines the pods replaces the job, old one first.
    assert job.replace_on_changes == [*pytorchjob.POD_FIELDS, *(QUEUE_CHANGE_REPLACES.replace_on_changes or [])]
    assert job.delete_before_replace


def test_batch_jobs_apply_their_objects(pulumi_mocks: Recorded) -> None:
    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="{}")
        DataPrepJob("data", {"provider": provider, "node_group": SHAPE, "job": JOB})
        EvaluationJob("evaluate", {"provider": provider, "node_group": SHAPE, "job": JOB})
        FabricCheckJob("efa-check", {"provider": provider, "node_group": SHAPE, "namespace": "training", "image": "registry.example/efa-tools:1"})

    pulumi_mocks.run(program)
    jobs = {r.name: r for r in pulumi_mocks.of_type("kubernetes:batch/v1:Job")}
    assert set(jobs) == {"data-job", "evaluate-job", "efa-check-job"}
    # pulumi up returns once they are submitted: a Job is otherwise awaited until Complete for 10 minutes.
    submitted = {"pulumi.com/waitFor": "jsonpath={.metadata}"}  # met at once; a replaced Job's deletion is awaited
    assert all(jobs[n].inputs["metadata"]["annotations"] == submitted | CHECKOV_SKIPS for n in ("data-job", "evaluate-job"))
    # the fabric check gates training: pulumi up waits for it, within the check's own deadline, and the next one
    # replaces it unless it completed
    gate = jobs["efa-check-job"]
    gate_keys = {"pulumi.com/skipAwait": "false", "pulumi.com/timeoutSeconds": "1800", "pulumi.com/replaceUnready": "true"}
    assert gate.inputs["metadata"]["annotations"] == gate_keys | unpinned_image_skips("registry.example/efa-tools:1", FABRIC_IMAGE_KEY)
    assert gate.inputs["spec"]["activeDeadlineSeconds"] == 1500
    assert all("ttlSecondsAfterFinished" not in job.inputs["spec"] for job in jobs.values())
    assert pulumi_mocks.named("efa-check-service").type == "kubernetes:core/v1:Service"


@pytest.mark.parametrize(
    ("job", "message"),
    [
        ({**JOB, "name": "MNIST"}, "job.name='MNIST' is not allowed; must be a DNS-1035 label"),
        ({**JOB, "replicas": 5}, "job.replicas=5 is not allowed; the node group holds at most 4 pods, one per node"),
        ({**JOB, "elastic_min_replicas": 3}, "job.elastic_min_replicas=3 is not allowed"),
        ({**JOB, "epochs": 0}, "job.epochs=0 is not allowed; use a whole number >= 1"),
        ({**JOB, "dataset": "imagenet"}, "job.dataset='imagenet' is not allowed"),
        ({**JOB, "code": {"script": "-m"}}, "job.code.script='-m' is not allowed; name a Python file in the image"),
    ],
)
def test_bad_jobs_are_refused_before_anything_is_applied(pulumi_mocks: Recorded, job: TrainingJobSpec, message: str) -> None:
    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="{}")
        with pytest.raises(InvalidArgument) as raised:
            PyTorchJob("train", {"provider": provider, "node_group": SHAPE, "job": job})
        assert message in str(raised.value)

    pulumi_mocks.run(program)
    assert not [r for r in pulumi_mocks.monitor.registrations if r.type.startswith("kubernetes:kubeflow.org")]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda args: {**args, "depends_on": ["crd"]},
            "PyTorchJob: depends_on=['crd'] is not allowed; TrainingJobArgs has no such key; removed in 0.3.0: "
            "pass opts=pulumi.ResourceOptions(depends_on=[...]) instead",
        ),
        (
            lambda args: {**args, "job": TrainingJob(name="mnist-ddp", namespace="training", image="img:1")},
            "PyTorchJob: job='TrainingJob' is not allowed; since 0.3.0 `job` takes a TrainingJobSpec dict",
        ),
        (
            lambda args: {**args, "job": {**JOB, "epoch": 3}},
            "PyTorchJob: job.epoch=3 is not allowed; TrainingJobSpec has no such key; did you mean epochs?",
        ),
    ],
)
def test_an_earlier_releases_arguments_are_refused_naming_their_replacement(
    pulumi_mocks: Recorded, edit: Any, message: str
) -> None:
    """0.2's args were accepted and ignored (`depends_on`), or failed with a bare AttributeError (the dataclass)."""

    def program() -> None:
        args = edit({"provider": k8s.Provider("k8s", kubeconfig="{}"), "node_group": SHAPE, "job": JOB})
        with pytest.raises(InvalidArgument) as raised:
            PyTorchJob("train", args)
        assert str(raised.value).startswith(message)

    pulumi_mocks.run(program)
    assert not [r for r in pulumi_mocks.monitor.registrations if r.type.startswith("kubernetes:kubeflow.org")]


def test_data_preparation_only_for_downloadable_datasets(pulumi_mocks: Recorded) -> None:
    def program() -> None:
        with pytest.raises(InvalidArgument, match="DataPrepJob: job.dataset='digits' is not allowed; only mnist, cifar10 are downloaded"):
            DataPrepJob("data", {"provider": k8s.Provider("k8s", kubeconfig="{}"), "node_group": SHAPE,
                                 "job": {**JOB, "dataset": "digits"}})

    pulumi_mocks.run(program)


def test_fabric_check_needs_an_efa_group_with_room_for_two(pulumi_mocks: Recorded) -> None:
    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="{}")
        with pytest.raises(InvalidArgument, match="node_group.efa=False is not allowed; the check needs a group with EFA"):
            FabricCheckJob("c1", {"provider": provider, "node_group": {**SHAPE, "efa": False, "instance_type": "m7g.large"}, "namespace": "t"})
        with pytest.raises(InvalidArgument, match="node_group.max_size=1 is not allowed; the check needs a group that can hold two"):
            FabricCheckJob("c2", {"provider": provider, "node_group": {**SHAPE, "max_size": 1}, "namespace": "t"})
        with pytest.raises(InvalidArgument, match=r"FabricCheckJob: image=None is not allowed; give an arm64 image with libfabric's EFA provider"):
            FabricCheckJob("c3", {"provider": provider, "node_group": SHAPE, "namespace": "t",
                                  "region": "us-east-1"})
        with pytest.raises(InvalidArgument, match=r"FabricCheckJob: region=None is not allowed; give the cluster's region"):
            FabricCheckJob("c4", {"provider": provider, "node_group": {**SHAPE, "instance_type": "g6.8xlarge"},
                                  "namespace": "t"})

    pulumi_mocks.run(program)


def test_trainer_image_repository_is_scanned_immutable_and_pruned(pulumi_mocks: Recorded) -> None:
    pulumi_mocks.run(lambda: TrainerImage("image", {"architectures": [Architecture.ARM64]}))
    repository = pulumi_mocks.named("image-repository").inputs
    assert repository["imageScanningConfiguration"] == {"scanOnPush": True} and repository["imageTagMutability"] == "IMMUTABLE"
    rules = json.loads(pulumi_mocks.named("image-lifecycle").inputs["policy"])["rules"]
    assert rules == json.loads(lifecycle_policy(20))["rules"]
    build = pulumi_mocks.named("image-build").inputs
    assert build["platforms"] == ["linux/arm64"] and build["push"] is True
    assert build["tags"] == [f"123456789012.dkr.ecr.us-east-1.amazonaws.com/image-repository:{content_tag(['linux/arm64'])}"]
    assert build["context"]["location"] == str(CONTEXT) and build["dockerfile"]["location"] == str(CONTEXT / "Dockerfile")


def test_given_image_uri_builds_nothing(pulumi_mocks: Recorded) -> None:
    pulumi_mocks.run(lambda: TrainerImage("image", {"architectures": [Architecture.ARM64], "image_uri": "public.ecr.aws/x/trainer:1"}))
    assert [r.type for r in pulumi_mocks.monitor.registrations] == ["eksddp:index:TrainerImage"]


def test_a_job_with_its_own_image_and_code_runs_them_with_what_the_group_implies(pulumi_mocks: Recorded) -> None:
    own: TrainingJobSpec = {
        **JOB,
        "image": "registry.example/team/llm:7",
        "code": {"script": "-m team.train", "args": ["--steps", "100"], "env": {"TEAM_DATA": "/shared/data"}},
    }
    pulumi_mocks.run(lambda: PyTorchJob("own", {"provider": k8s.Provider("k8s", kubeconfig="{}"), "node_group": SHAPE, "job": own}))
    spec = pulumi_mocks.named("own-job").inputs["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    (container,) = spec["containers"]
    assert container["image"] == "registry.example/team/llm:7"
    command = " ".join(container["command"])
    assert "torchrun" in command and command.endswith("-m team.train --steps 100") and "trainer" not in command
    assert {"name": "TEAM_DATA", "value": "/shared/data"} in container["env"]
    assert container["resources"]["limits"]["vpc.amazonaws.com/efa"] == "1"  # c7g.16xlarge: one EFA device


GPU_GROUP: EfaNodeGroupArgs = {**GROUP, "instance_type": "p4d.24xlarge", "max_size": 2}
GPU_SHAPE = shape_of(GPU_GROUP)
FAILED = {
    "conditions": [
        {"type": "Created", "status": "True"},
        {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"},
    ]
}
SUCCEEDED = {"conditions": [{"type": "Created", "status": "True"}, {"type": "Succeeded", "status": "True"}]}


def _nccl_check_ending(status: dict[str, Any]) -> list[Any]:
    """NcclCheckJob under mocks whose MPIJob ends with `status`, as pulumi-kubernetes returns it once its await ended:
    the registrations, and the error the program ended with (None if it went on)."""
    class Ended(RecordingMocks):
        def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
            physical_id, outputs = super().new_resource(args)
            if args.typ == "kubernetes:kubeflow.org/v2beta1:MPIJob":
                outputs["status"] = status
            if args.typ == "kubernetes:batch/v1:Job":
                outputs["metadata"] = {**outputs["metadata"], "uid": f"uid-of-{args.name}"}
            return physical_id, outputs

    error = None
    with mocked(Ended()) as recorded:
        provider = k8s.Provider("k8s", kubeconfig="{}")
        try:
            pulumi.runtime.test(
                lambda: NcclCheckJob("nccl", {"provider": provider, "node_group": GPU_SHAPE, "namespace": "training"})
            )()
        except pulumi.RunError as raised:  # what `pulumi up` prints alone
            error = raised
    return [{r.name: r for r in recorded.monitor.registrations}, error]


def test_a_failed_nccl_check_stops_with_its_verdict_and_leaves_its_attempt_to_run_again() -> None:
    """pulumi-kubernetes' await ends on the failure (the MPIJob's waitFor selects Succeeded or Failed): the program
    reads the status and stops `pulumi up` with one line, so the attempt Job stays incomplete and the next
    `pulumi up` replaces it, and the MPIJob that carries its uid (nccl_check.render_attempt)."""
    registered, error = _nccl_check_ending(FAILED)
    assert isinstance(error, pulumi.RunError), error
    assert str(error) == (
        "NCCL check training/nccl failed (BackoffLimitExceeded: Job has reached the specified backoff limit); its "
        "verdict is the last line of `kubectl -n training logs job/nccl-launcher`; the next `pulumi up` runs it again"
    )
    assert "nccl-passed" not in registered  # nothing completes the attempt
    mpijob, attempt = registered["nccl-mpijob"], registered["nccl-attempt"]
    assert mpijob.inputs["metadata"]["annotations"]["eks-ddp/attempt"] == "uid-of-nccl-attempt"
    assert "metadata.annotations" in mpijob.replace_on_changes and mpijob.delete_before_replace
    assert attempt.inputs["metadata"]["annotations"]["pulumi.com/replaceUnready"] == "true"
    assert (attempt.inputs["spec"]["completions"], attempt.inputs["spec"]["parallelism"]) == (1, 0)


def test_a_passed_nccl_check_completes_its_attempt_so_the_next_pulumi_up_changes_nothing() -> None:
    registered, error = _nccl_check_ending(SUCCEEDED)
    assert error is None
    patch = registered["nccl-passed"]
    assert patch.type == "kubernetes:batch/v1:JobPatch" and patch.inputs["spec"] == {"completions": 0, "parallelism": 0}
    assert patch.inputs["metadata"]["name"] == "nccl-attempt" and registered["nccl-mpijob"].urn in patch.dependencies
    assert patch.inputs["metadata"]["annotations"]["eks-ddp/verdict"] == "passed"
