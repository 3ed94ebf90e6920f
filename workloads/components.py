"""Thin components that apply the rendered manifests with the cluster's provider.

Their args are plain data and the cluster's Kubernetes provider, so Pulumi can infer a schema from them and other
languages can use them (provider/): a node group is given by its shape, what it waits for by `opts.depends_on`.
"""

from collections.abc import Sequence
from typing import Any, NotRequired, TypedDict, cast

import pulumi
import pulumi_kubernetes as k8s
from pulumi import ResourceOptions

from eks_ddp.infra.args import check_keys
from eks_ddp.infra.aws.efa_node_group import NodeGroupShape
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.facts import instance_facts
from eks_ddp.infra.facts.catalogue import InstanceType
from eks_ddp.infra.options import waits_for
from eks_ddp.workloads import (
    batch_jobs,
    indexed_job,
    nccl_check,
    pytorchjob,
    queueing,
    training_pod,
    trainjob,
)
from eks_ddp.workloads.target import NodeTarget, target_of, too_small
from eks_ddp.workloads.training_pod import TrainingJob, TrainingJobSpec


def placed_on(component: str, shape: NodeGroupShape) -> NodeTarget:
    """The target of the group a job runs on, from its shape and EC2's facts of its type (as the group has them)."""
    instance_facts.check_name(component, "node_group.instance_type", shape.get("instance_type", ""))
    return target_of(shape, instance_facts.describe(shape["instance_type"]))


# Objects that run to completion: `pulumi up` submits them and returns; they are watched with the
# stack's exported commands. pulumi-kubernetes would otherwise wait up to 10 minutes for a Job to
# complete (training, downloads and scale-from-zero take longer), or, under PULUMI_K8S_AWAIT_ALL,
# for a Ready condition a PyTorchJob never has. A condition every object meets at once (pulumi-kubernetes
# v4.32.0's own tests use it: provider/pkg/await/await_test.go withWaitFor) rather than `skipAwait`, which
# for a batch/v1 Job also skips awaiting its deletion (metadata/overrides.go allowsSkipAwaitWithDelete): a Job
# replaced by a change to its pods would then be applied onto the old one while it still stops, and fail (an apply
# conflict: tests/cluster/test_every_stack_on_pulumi.py shows it on the real provider).
SUBMITTED = "jsonpath={.metadata}"
SUBMITTED_NOT_AWAITED = {"pulumi.com/waitFor": SUBMITTED}
RUN_TO_COMPLETION = ("Job", pytorchjob.KIND, trainjob.KIND)
QUEUED_KINDS = ("Job", pytorchjob.KIND, trainjob.KIND, nccl_check.KIND)
"""What Kueue queues of what the stack submits (infra.addons.kueue FRAMEWORKS)."""
# Kinds whose controllers never apply a change to pods they have made: a change to what defines the pods replaces
# the object, and its name stays, so the old one goes first (pulumi-kubernetes would create the new one beside it,
# and fail: AlreadyExists). A training job's pods stop with a SIGTERM checkpoint; the new ones resume the same run
# (training_pod.run_id reads only the run's arguments).
# - TrainJob: `spec.trainer` and `spec.runtimeRef` are immutable (its CRD's CEL rules), and Trainer v2.3.0 never
#   rebuilds a JobSet that exists (jobset.go); its runtime is named after its spec (trainjob.runtime_name).
# - PyTorchJob: the training operator v1.9.4 never recreates a pod whose template changed (pytorchjob.POD_FIELDS).
# - MPIJob: mpi-operator v0.8.0 creates the worker pods and the launcher Job once (pkg/controller/mpi_job_controller.go
#   getOrCreateWorker; the launcher's template is synced only when the job is unsuspended). The NCCL check's also
#   runs again when its attempt Job is replaced (its annotations carry that Job's uid: nccl_check.render_attempt).
REPLACED_NOT_UPDATED = {
    kind: pulumi.ResourceOptions(replace_on_changes=list(paths), delete_before_replace=True)
    for kind, paths in (
        (trainjob.KIND, ["spec"]),
        (pytorchjob.KIND, pytorchjob.POD_FIELDS),
        (nccl_check.KIND, ["spec", "metadata.annotations"]),
    )
}


QUEUE_CHANGE_REPLACES = pulumi.ResourceOptions(replace_on_changes=["metadata.labels"], delete_before_replace=True)
"""For a kind Kueue queues: a job moved into, out of or between queues is replaced. Kueue's webhook refuses a change
of its queue label (QUEUE_LABEL) on a job that is not suspended, running or finished (sigs.k8s.io/kueue v0.17.0
pkg/controller/jobframework/validation.go validateUpdateForQueueName: "field is immutable"), which failed the real
`pulumi up` turning eks-ddp:queueing on for a deployed stack (tests/cluster/test_every_stack_on_pulumi.py). The
whole map: the provider reports a job that had no labels as `metadata.labels` changed, and Pulumi replaces only where
the option's path holds the changed one (pulumi v3.274.1 pkg/resource/deploy/step_generator.go
applyReplaceOnChanges)."""


def apply(
    name: str,
    manifest: dict[str, Any],
    parent: pulumi.Resource,
    provider: k8s.Provider,
    depends_on: list[pulumi.Resource],
    extra: pulumi.ResourceOptions | None = None,
) -> pulumi.CustomResource:
    """Create one rendered object as the matching pulumi-kubernetes resource (with `extra` options, if any)."""
    opts = pulumi.ResourceOptions.merge(
        pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=depends_on), extra
    )
    if manifest["kind"] in REPLACED_NOT_UPDATED:
        opts = pulumi.ResourceOptions.merge(opts, REPLACED_NOT_UPDATED[manifest["kind"]])
    if manifest["kind"] in QUEUED_KINDS:
        opts = pulumi.ResourceOptions.merge(opts, QUEUE_CHANGE_REPLACES)
    metadata, spec = cast(Any, dict(manifest["metadata"])), cast(Any, manifest["spec"])
    own = metadata.get("annotations", {})
    if manifest["kind"] in RUN_TO_COMPLETION and not {"pulumi.com/skipAwait", "pulumi.com/waitFor"} & own.keys():
        metadata["annotations"] = {**SUBMITTED_NOT_AWAITED, **own}  # a gating check states its own await
    if manifest["kind"] == "Job":
        return k8s.batch.v1.Job(name, metadata=metadata, spec=spec, opts=opts)
    if manifest["kind"] == "Service":
        return k8s.core.v1.Service(name, metadata=metadata, spec=spec, opts=opts)
    if manifest["kind"] == "NetworkPolicy":
        return k8s.networking.v1.NetworkPolicy(name, metadata=metadata, spec=spec, opts=opts)
    return k8s.apiextensions.CustomResource(
        name, api_version=manifest["apiVersion"], kind=manifest["kind"], metadata=metadata, spec=spec, opts=opts
    )


class TrainingJobArgs(TypedDict):
    provider: k8s.Provider
    """Kubernetes provider of the cluster (TrainingPlatform.provider)."""
    node_group: NodeGroupShape
    """The shape of the node group the pods run on, as given to the platform (TrainingNodes.shape)."""
    job: TrainingJobSpec
    """What to train, with which image and code, on how many pods."""
    pod_monitor: NotRequired[bool]
    """Add a PodMonitor for the trainer's metrics port (needs the Prometheus operator: put the platform in
    `depends_on`; default false)."""


def validate_job(component: str, job: TrainingJob, max_size: int, instance: InstanceType) -> None:
    """The job against the group it runs on; raises InvalidArgument naming the field."""
    problem = training_pod.validate_name(job.name)
    if problem:
        raise InvalidArgument(component, "job.name", job.name, problem)
    if not job.claim_name and job.artifact_bucket is None:
        raise InvalidArgument(
            component,
            "job.claim_name",
            None,
            f"without a claim {training_pod.SHARED_MOUNT} is "
            "scratch space lost with the pod: give a ReadWriteMany claim, or job.artifact_bucket "
            "(the model bucket) for the results and checkpoints",
        )
    if not 1 <= job.replicas <= max_size:
        raise InvalidArgument(
            component,
            "job.replicas",
            job.replicas,
            f"use 1 to the node group's max_size ({max_size}): one pod per node",
        )
    if job.elastic_min_replicas is not None and not 1 <= job.elastic_min_replicas <= job.replicas:
        raise InvalidArgument(
            component, "job.elastic_min_replicas", job.elastic_min_replicas, f"use 1 to replicas ({job.replicas})"
        )
    if job.dataset not in training_pod.DATASETS:
        raise InvalidArgument(component, "job.dataset", job.dataset, f"use one of {', '.join(training_pod.DATASETS)}")
    if job.epochs < 1 or job.batch_size < 1:
        raise InvalidArgument(component, "job.epochs/batch_size", (job.epochs, job.batch_size), "both must be >= 1")
    for field_name, problem in (job.code.problems() if job.code else {}).items():
        raise InvalidArgument(component, f"job.code.{field_name}", getattr(job.code, field_name), problem)
    problem = too_small(instance)
    if problem:
        raise InvalidArgument(component, "node_group", instance.name, problem)


JOB_MIGRATION = (
    "since 0.3.0 `job` takes a TrainingJobSpec dict ({'name': ..., 'namespace': ..., 'image': ...}), not the "
    "TrainingJob dataclass"
)
NODE_GROUP_MIGRATION = "since 0.3.0 `node_group` takes the group's shape (platform.node_groups[name].shape)"


def resolved(component: str, args: TrainingJobArgs) -> tuple[TrainingJob, NodeTarget]:
    """The job with its defaults and the target it runs on, both checked."""
    check_keys(component, "", args, TrainingJobArgs)
    check_keys(component, "job.", args["job"], TrainingJobSpec, JOB_MIGRATION)
    check_keys(component, "node_group.", args["node_group"], NodeGroupShape, NODE_GROUP_MIGRATION)
    job, target = training_pod.resolve(args["job"]), placed_on(component, args["node_group"])
    validate_job(component, job, args["node_group"].get("max_size", 2), target.instance)
    return job, target


def _bundled_only(kind: str, job: TrainingJob) -> None:
    """Data preparation and evaluation run the bundled trainer's commands, which a user's own image lacks."""
    if job.code is not None:
        raise InvalidArgument(
            kind,
            "job.code",
            job.code.script,
            "it runs the bundled trainer's command: a job with its own code prepares and evaluates in its own script",
        )


def _validated(kind: str, args: TrainingJobArgs) -> tuple[TrainingJob, NodeTarget]:
    job, target = resolved(kind, args)
    if job.elastic and kind != "PyTorchJob":
        raise InvalidArgument(
            kind,
            "job.elastic_min_replicas",
            job.elastic_min_replicas,
            "elastic jobs run on the training operator v1 only (PyTorchJob elasticPolicy); leave it unset",
        )
    return job, target


def _refuse(kind: str, job: TrainingJob, errors: list[str]) -> None:
    """What the operator's admission would refuse, refused before anything is registered."""
    if errors:
        raise InvalidArgument(kind, "job", job.name, "; ".join(errors))


class _TrainingRun(pulumi.ComponentResource):
    """What every training job component says about its run. Each subclass declares these outputs again: Pulumi's
    schema inference reads a property's docstring from the class it analyses only (pulumi 3.272.0,
    provider/experimental/analyzer.py `get_docstring`)."""

    run_name: str
    output_dir: str

    def _register(self, kind: str, name: str, job: TrainingJob, target: NodeTarget, opts: ResourceOptions) -> None:
        self.run_name = training_pod.run_name(job, target)
        self.output_dir = job.paths(training_pod.run_id(job, target))["output"]
        super().__init__(f"eksddp:index:{kind}", name, {}, opts)

    def _apply(
        self,
        name: str,
        manifest: dict[str, Any],
        args: TrainingJobArgs,
        opts: ResourceOptions,
        after: Sequence[pulumi.Resource] = (),
    ) -> pulumi.CustomResource:
        return apply(name, manifest, self, args["provider"], [*waits_for(opts), *after])

    def _monitor(self, name: str, job: TrainingJob, args: TrainingJobArgs, opts: ResourceOptions) -> None:
        if args.get("pod_monitor", False):
            self._apply(f"{name}-monitor", training_pod.pod_monitor(job), args, opts)


class PyTorchJob(_TrainingRun):
    """A Kubeflow PyTorchJob (training operator v1) running the bundled trainer, or the job's own code, under
    torchrun on a training node group."""

    run_name: str
    """`<namespace>/<job>/<run id>`: names the run in its checkpoints, summary and model."""
    output_dir: str
    """Where the run's model, summary and plots land on the shared claim (or in the bucket, under the same path)."""

    def __init__(self, name: str, args: TrainingJobArgs, opts: ResourceOptions | None = None) -> None:
        opts = opts or ResourceOptions()
        job, target = _validated("PyTorchJob", args)
        self.manifest: dict[str, Any] = queueing.queued(queueing.placed(pytorchjob.render(job, target),
                                                                        job.queue_placement), job.queue)
        """The rendered PyTorchJob (plain; what `pulumi up` applies)."""
        _refuse("PyTorchJob", job, pytorchjob.admission_errors(self.manifest))
        self._register("PyTorchJob", name, job, target, opts)
        self.resource = self._apply(f"{name}-job", self.manifest, args, opts)
        """Escape hatch: the applied custom resource."""
        self._monitor(name, job, args, opts)
        self.register_outputs({})


class TrainJob(_TrainingRun):
    """A Kubeflow Trainer v2 TrainJob on a ClusterTrainingRuntime of its own, running the bundled trainer or the
    job's own code."""

    run_name: str
    """`<namespace>/<job>/<run id>`: names the run in its checkpoints, summary and model."""
    output_dir: str
    """Where the run's model, summary and plots land on the shared claim (or in the bucket, under the same path)."""

    def __init__(self, name: str, args: TrainingJobArgs, opts: ResourceOptions | None = None) -> None:
        opts = opts or ResourceOptions()
        job, target = _validated("TrainJob", args)
        self.runtime_manifest: dict[str, Any] = queueing.placed(trainjob.render_runtime(job, target),
                                                                job.queue_placement)
        """The rendered ClusterTrainingRuntime: the pod, the restart budget."""
        self.manifest: dict[str, Any] = queueing.queued(trainjob.render(job, target), job.queue)
        """The rendered TrainJob: image, command, nodes, processes per node."""
        _refuse("TrainJob", job, trainjob.admission_errors(self.manifest, self.runtime_manifest))
        self._register("TrainJob", name, job, target, opts)
        runtime = self._apply(f"{name}-runtime", self.runtime_manifest, args, opts)
        self.resource = self._apply(f"{name}-job", self.manifest, args, opts, after=[runtime])
        """Escape hatch: the applied TrainJob."""
        self._monitor(name, job, args, opts)
        self.register_outputs({})


class IndexedTrainingJob(_TrainingRun):
    """No operator: an Indexed Job and its headless Service, each pod running torchrun with pod 0 as rendezvous."""

    run_name: str
    """`<namespace>/<job>/<run id>`: names the run in its checkpoints, summary and model."""
    output_dir: str
    """Where the run's model, summary and plots land on the shared claim (or in the bucket, under the same path)."""

    def __init__(self, name: str, args: TrainingJobArgs, opts: ResourceOptions | None = None) -> None:
        opts = opts or ResourceOptions()
        job, target = _validated("IndexedTrainingJob", args)
        service, indexed = indexed_job.render(job, target)
        self.manifests: list[dict[str, Any]] = [
            service, queueing.queued(queueing.placed(indexed, job.queue_placement), job.queue)]
        """The rendered Service and Job (plain)."""
        _refuse("IndexedTrainingJob", job, indexed_job.admission_errors(*self.manifests))
        self._register("IndexedTrainingJob", name, job, target, opts)
        for manifest in self.manifests:
            self._apply(f"{name}-{manifest['kind'].lower()}", manifest, args, opts)
        self._monitor(name, job, args, opts)
        self.register_outputs({})


class _BatchJob(pulumi.ComponentResource):
    def _apply_all(
        self, name: str, manifests: list[dict[str, Any]], provider: k8s.Provider, opts: ResourceOptions | None
    ) -> None:
        self.manifests = manifests
        """The rendered objects (plain)."""
        super().__init__(f"eksddp:index:{type(self).__name__}", name, {}, opts)
        for manifest in manifests:
            apply(f"{name}-{manifest['kind'].lower()}", manifest, self, provider, waits_for(opts))
        self.register_outputs({})


class DataPrepJob(_BatchJob):
    """The workshop's data download step: the bundled trainer's `prepare-data` onto the shared claim."""

    def __init__(self, name: str, args: TrainingJobArgs, opts: ResourceOptions | None = None) -> None:
        job, target = resolved("DataPrepJob", args)
        _bundled_only("DataPrepJob", job)
        if job.dataset not in training_pod.DOWNLOADABLE_DATASETS:
            raise InvalidArgument(
                "DataPrepJob",
                "job.dataset",
                job.dataset,
                f"only {', '.join(training_pod.DOWNLOADABLE_DATASETS)} are downloaded",
            )
        self._apply_all(name, [batch_jobs.render_data_preparation(job, target)], args["provider"], opts)


class EvaluationJob(_BatchJob):
    """The workshop's test step: the bundled trainer's `evaluate` on the trained model (run it after the job)."""

    def __init__(self, name: str, args: TrainingJobArgs, opts: ResourceOptions | None = None) -> None:
        job, target = resolved("EvaluationJob", args)
        _bundled_only("EvaluationJob", job)
        self._apply_all(name, [batch_jobs.render_evaluation(job, target)], args["provider"], opts)


class FabricCheckArgs(TypedDict):
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    node_group: NodeGroupShape
    """The shape of an EFA node group that can hold two nodes."""
    namespace: str
    """Namespace for the check's pods."""
    image: NotRequired[str]
    """Image with libfabric's EFA provider for the group's architecture (x86 default: an AWS Deep Learning
    Container from `region`; arm64: required)."""
    region: NotRequired[str]
    """AWS region of the cluster: the default x86 image is pulled from its registry (needed without `image`)."""
    on_failure: NotRequired[batch_jobs.OnFailure]
    """What a failed check does: gate (default: `pulumi up` stops before training) or report (logged only)."""
    queue: NotRequired[str]
    """The Kueue LocalQueue the check waits in (TrainingPlatform.submission of its group; default: none)."""
    queue_placement: NotRequired[str]
    """With `queue`: `required` or `preferred`, both pods under one EC2 network node."""


def two_efa_nodes(component: str, shape: NodeGroupShape) -> NodeTarget:
    """The target of a group a fabric check can run on: EFA, room for two nodes."""
    target = placed_on(component, shape)
    if not target.efa_interfaces:
        raise InvalidArgument(component, "node_group.efa", shape.get("efa", True), "the check needs a group with EFA")
    if shape.get("max_size", 2) < 2:
        raise InvalidArgument(
            component, "node_group.max_size", shape.get("max_size"), "the check needs a group that can hold two nodes"
        )
    return target


class FabricCheckJob(_BatchJob):
    """The workshop's EFA check: `fi_info -p efa` and `fi_pingpong` between two EFA nodes."""

    def __init__(self, name: str, args: FabricCheckArgs, opts: ResourceOptions | None = None) -> None:
        target = two_efa_nodes("FabricCheckJob", args["node_group"])
        architecture = target.instance.architecture.value
        image = args.get("image")
        if image is None and "region" not in args:
            raise InvalidArgument("FabricCheckJob", "region", None, "give the cluster's region (or an image)")
        image = image or batch_jobs.default_fabric_image(architecture, args.get("region", ""))
        if image is None:
            raise InvalidArgument(
                "FabricCheckJob",
                "image",
                None,
                f"give an {architecture} image with libfabric's EFA provider (fi_info, fi_pingpong)",
            )
        on_failure = args.get("on_failure", batch_jobs.OnFailure.GATE)
        manifests = [queueing.queued(queueing.placed(m, args.get("queue_placement")), args.get("queue"))
                     if m["kind"] == "Job" else m
                     for m in batch_jobs.render_fabric_check(name, args["namespace"], target, image, on_failure)]
        self._apply_all(name, manifests, args["provider"], opts)


class NcclCheckArgs(TypedDict):
    provider: k8s.Provider
    """Kubernetes provider of the cluster; the MPI operator (MPIJob CRD kubeflow.org/v2beta1) must be in
    `depends_on` (TrainingPlatform installs it for a GPU group with EFA)."""
    node_group: NodeGroupShape
    """The shape of a GPU node group with EFA that can hold two nodes."""
    namespace: str
    """Namespace for the check's pods."""
    image: NotRequired[str]
    """An nccl-tests image with OpenMPI, sshd, CUDA, NCCL and aws-ofi-nccl (default nccl_check.IMAGE)."""
    on_failure: NotRequired[batch_jobs.OnFailure]
    """What a failed check does: gate (default: `pulumi up` stops before training) or report (logged only)."""
    queue: NotRequired[str]
    """The Kueue LocalQueue the MPIJob waits in (TrainingPlatform.submission of its group; default: none)."""
    queue_placement: NotRequired[str]
    """With `queue`: `required` or `preferred`, both workers under one EC2 network node."""


class CheckFailed(pulumi.RunError):
    """A fabric check's verdict: `pulumi up` prints a RunError's message alone, with no traceback (pulumi/pulumi
    sdk/python/cmd/pulumi-language-python-exec)."""


class _ObservedResource(pulumi.CustomResource):
    """A Kubernetes object whose `status` is an output: pulumi-kubernetes' CustomResource declares only apiVersion,
    kind, metadata and spec, and the SDK resolves only what a resource declares (pulumi 3.272.0 runtime/rpc.py
    resolve_properties); a declared None is not sent (serialize_properties)."""

    status: pulumi.Output[Any]

    def __init__(self, name: str, manifest: dict[str, Any], opts: ResourceOptions) -> None:
        props = {key: manifest.get(key) for key in ("apiVersion", "kind", "metadata", "spec")}
        kind = f"kubernetes:{manifest['apiVersion']}:{manifest['kind']}"
        super().__init__(kind, name, {**props, "status": None}, opts)


def _passed(name: str, namespace: str, status: dict[str, Any] | None) -> str:
    """The verdict `pulumi up` goes on with, or the check's failure as its one-line error."""
    failed = nccl_check.failure(name, namespace, status)
    if failed:
        raise CheckFailed(failed)
    return "passed"


class NcclCheckJob(_BatchJob):
    """NCCL's bus bandwidth between two GPU nodes over EFA (nccl-tests all_reduce_perf as an MPIJob).

    `pulumi up` waits for the MPIJob to end, stops with its verdict when it failed, and the next `pulumi up` runs a
    check that did not pass again: its attempt Job completes only after a passed verdict (nccl_check.render_attempt).
    """

    def __init__(self, name: str, args: NcclCheckArgs, opts: ResourceOptions | None = None) -> None:
        target = two_efa_nodes("NcclCheckJob", args["node_group"])
        if not target.instance.is_gpu:
            raise InvalidArgument(
                "NcclCheckJob", "node_group.instance_type", target.instance.name, "the check needs a GPU group"
            )
        image, on_failure = args.get("image", nccl_check.IMAGE), args.get("on_failure", batch_jobs.OnFailure.GATE)
        namespace, provider = args["namespace"], args["provider"]
        manifest = queueing.queued(queueing.placed(nccl_check.render(name, namespace, target, image, on_failure),
                                                   args.get("queue_placement")), args.get("queue"))
        attempt_manifest = nccl_check.render_attempt(name, namespace, target, manifest)
        self.manifests = [attempt_manifest, manifest]
        """The rendered objects (plain; the MPIJob's attempt annotation is the attempt Job's uid once applied)."""
        super().__init__("eksddp:index:NcclCheckJob", name, {}, opts)
        after = waits_for(opts)
        # The patch that completes the attempt changes completions and parallelism: not a change to undo.
        kept = pulumi.ResourceOptions(ignore_changes=["spec.completions", "spec.parallelism"])
        attempt = cast(k8s.batch.v1.Job, apply(f"{name}-attempt", attempt_manifest, self, provider, after, kept))
        uid = attempt.metadata.apply(lambda meta: meta.uid or "")
        metadata = {**manifest["metadata"]}
        metadata["annotations"] = {**metadata["annotations"], nccl_check.ATTEMPT_ANNOTATION: uid}
        mpijob_opts = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=after)
        mpijob = _ObservedResource(
            f"{name}-mpijob",
            {**manifest, "metadata": metadata},
            pulumi.ResourceOptions.merge(mpijob_opts, REPLACED_NOT_UPDATED[nccl_check.KIND]),
        )
        passed = mpijob.status.apply(lambda status: _passed(name, namespace, status))
        k8s.batch.v1.JobPatch(
            f"{name}-passed",
            metadata={
                "name": attempt.metadata.apply(lambda meta: str(meta.name)),
                "namespace": namespace,
                "annotations": {
                    # The attempt Job's own field manager set completions and parallelism: this patch takes them
                    # (provider/pkg/await/await.go patchForce); and is awaited as that Job is, not at all.
                    "pulumi.com/patchForce": "true",
                    "pulumi.com/waitFor": SUBMITTED,
                    nccl_check.ATTEMPT_ANNOTATION: uid,
                    nccl_check.VERDICT_ANNOTATION: passed,
                },
            },
            spec=k8s.batch.v1.JobSpecPatchArgs(
                completions=nccl_check.PASSED["completions"], parallelism=nccl_check.PASSED["parallelism"]
            ),
            # Kept in the cluster on delete: the provider refuses to delete a Patch that manages a required field
            # (spec.completions), which failed every `pulumi destroy` of a GPU stack (found by make deploy-local);
            # the attempt Job it patched is deleted as its own resource.
            opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[mpijob], retain_on_delete=True),
        )
        self.register_outputs({})
