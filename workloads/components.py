"""Thin components that apply the rendered manifests with the cluster's provider."""

from typing import Any, NotRequired, TypedDict, cast

import pulumi
import pulumi_kubernetes as k8s

from infra.efa_node_group import TrainingNodes
from infra.errors import InvalidArgument
from infra.mpi_operator import MpiOperator
from workloads import batch_jobs, indexed_job, nccl_check, pytorchjob, training_pod, trainjob
from workloads.target import NodeTarget, too_small
from workloads.training_pod import TrainingJob


def target_of(group: TrainingNodes) -> NodeTarget:
    """The facts a pod spec needs from a node group."""
    return NodeTarget(group.instance, group.efa_interfaces, dict(group.labels), [dict(taint) for taint in group.taints])


# Objects that run to completion: `pulumi up` submits them and returns; they are watched with the
# stack's exported commands. pulumi-kubernetes would otherwise wait up to 10 minutes for a Job to
# complete (training, downloads and scale-from-zero take longer), or, under PULUMI_K8S_AWAIT_ALL,
# for a Ready condition a PyTorchJob never has.
SUBMITTED_NOT_AWAITED = {"pulumi.com/skipAwait": "true"}
RUN_TO_COMPLETION = ("Job", pytorchjob.KIND, trainjob.KIND)
# A TrainJob's `spec.trainer` and `spec.runtimeRef` are immutable (its CRD's CEL rules): any change must replace
# it, and its name stays, so the old one goes first. Its runtime is named after its immutable fields
# (workloads.trainjob).
REPLACED_NOT_UPDATED = {trainjob.KIND: pulumi.ResourceOptions(replace_on_changes=["spec"], delete_before_replace=True)}


def apply(
    name: str,
    manifest: dict[str, Any],
    parent: pulumi.Resource,
    provider: k8s.Provider,
    depends_on: list[pulumi.Resource],
) -> pulumi.CustomResource:
    """Create one rendered object as the matching pulumi-kubernetes resource."""
    opts = pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=depends_on)
    if manifest["kind"] in REPLACED_NOT_UPDATED:
        opts = pulumi.ResourceOptions.merge(opts, REPLACED_NOT_UPDATED[manifest["kind"]])
    metadata, spec = cast(Any, dict(manifest["metadata"])), cast(Any, manifest["spec"])
    if manifest["kind"] in RUN_TO_COMPLETION:
        metadata["annotations"] = {**metadata.get("annotations", {}), **SUBMITTED_NOT_AWAITED}
    if manifest["kind"] == "Job":
        return k8s.batch.v1.Job(name, metadata=metadata, spec=spec, opts=opts)
    if manifest["kind"] == "Service":
        return k8s.core.v1.Service(name, metadata=metadata, spec=spec, opts=opts)
    return k8s.apiextensions.CustomResource(
        name, api_version=manifest["apiVersion"], kind=manifest["kind"], metadata=metadata, spec=spec, opts=opts
    )


class TrainingJobArgs(TypedDict):
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    node_group: TrainingNodes
    """The node group the job's pods run on."""
    job: TrainingJob
    """What to train (dataset, epochs, replicas, image, claim, service account)."""
    operator: NotRequired[pulumi.Resource]
    """What installs the job kind's CRD (TrainingPlatform.job_operator); the job waits for it."""
    monitor: NotRequired[pulumi.Resource]
    """Prometheus' operator (TrainingPlatform.prometheus): a PodMonitor then scrapes the trainer's metrics port."""
    depends_on: NotRequired[list[pulumi.Resource]]
    """What the objects wait for (the platform: namespace, claim, service account)."""


def validate_job(component: str, job: TrainingJob, group: TrainingNodes) -> None:
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
    if not 1 <= job.replicas <= group.max_size:
        raise InvalidArgument(
            component,
            "job.replicas",
            job.replicas,
            f"use 1 to the node group's max_size ({group.max_size}): one pod per node",
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
    problem = too_small(group.instance)
    if problem:
        raise InvalidArgument(component, "node_group", group.instance_type, problem)


def _bundled_only(kind: str, job: TrainingJob) -> None:
    """Data preparation and evaluation run the bundled trainer's commands, which a user's own image lacks."""
    if job.code is not None:
        raise InvalidArgument(
            kind,
            "job.code",
            job.code.script,
            "it runs the bundled trainer's command: a job with its own code prepares and evaluates in its own script",
        )


def _validated(kind: str, args: TrainingJobArgs) -> NodeTarget:
    job = args["job"]
    validate_job(kind, job, args["node_group"])
    if job.elastic and kind != "PyTorchJob":
        raise InvalidArgument(
            kind,
            "job.elastic_min_replicas",
            job.elastic_min_replicas,
            "elastic jobs run on the training operator v1 only (PyTorchJob elasticPolicy); leave it unset",
        )
    return target_of(args["node_group"])


def _refuse(kind: str, job: TrainingJob, errors: list[str]) -> None:
    """What the operator's admission would refuse, refused before anything is registered."""
    if errors:
        raise InvalidArgument(kind, "job", job.name, "; ".join(errors))


class _TrainingRun(pulumi.ComponentResource):
    """What every training job component says about its run."""

    run_name: str
    """`<namespace>/<job>/<run id>`: names the run in its checkpoints, summary and model."""
    output_dir: str
    """Where the run's model, summary and plots land on the shared claim."""
    waits_for: list[pulumi.Resource]
    """What the job's objects wait for: `depends_on` and the operator."""

    def _register(
        self, kind: str, name: str, args: TrainingJobArgs, target: NodeTarget, opts: pulumi.ResourceOptions | None
    ) -> None:
        self.run_name = training_pod.run_name(args["job"], target)
        self.output_dir = args["job"].paths(training_pod.run_id(args["job"], target))["output"]
        operator = args.get("operator")
        self.waits_for = [*args.get("depends_on", []), *([operator] if operator else [])]
        super().__init__(f"eksddp:index:{kind}", name, {}, opts)
        monitor = args.get("monitor")
        if monitor is not None:
            after = [*args.get("depends_on", []), monitor]
            apply(f"{name}-monitor", training_pod.pod_monitor(args["job"]), self, args["provider"], after)


class PyTorchJob(_TrainingRun):
    """A Kubeflow PyTorchJob (training operator v1) running the bundled trainer under torchrun."""

    manifest: dict[str, Any]
    """The rendered PyTorchJob (plain; what `pulumi up` applies)."""
    resource: pulumi.CustomResource
    """Escape hatch: the applied custom resource."""

    def __init__(self, name: str, args: TrainingJobArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        target = _validated("PyTorchJob", args)
        self.manifest = pytorchjob.render(args["job"], target)
        _refuse("PyTorchJob", args["job"], pytorchjob.admission_errors(self.manifest))
        self._register("PyTorchJob", name, args, target, opts)
        self.resource = apply(f"{name}-job", self.manifest, self, args["provider"], self.waits_for)
        self.register_outputs({})


class TrainJob(_TrainingRun):
    """A Kubeflow Trainer v2 TrainJob on a ClusterTrainingRuntime of its own, running the bundled trainer."""

    runtime_manifest: dict[str, Any]
    """The rendered ClusterTrainingRuntime: the pod, the restart budget."""
    manifest: dict[str, Any]
    """The rendered TrainJob: image, command, nodes, processes per node."""
    resource: pulumi.CustomResource
    """Escape hatch: the applied TrainJob."""

    def __init__(self, name: str, args: TrainingJobArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        target = _validated("TrainJob", args)
        self.runtime_manifest = trainjob.render_runtime(args["job"], target)
        self.manifest = trainjob.render(args["job"], target)
        _refuse("TrainJob", args["job"], trainjob.admission_errors(self.manifest, self.runtime_manifest))
        self._register("TrainJob", name, args, target, opts)
        runtime = apply(f"{name}-runtime", self.runtime_manifest, self, args["provider"], self.waits_for)
        self.resource = apply(f"{name}-job", self.manifest, self, args["provider"], [*self.waits_for, runtime])
        self.register_outputs({})


class IndexedTrainingJob(_TrainingRun):
    """No operator: an Indexed Job and its headless Service, each pod running torchrun with pod 0 as rendezvous."""

    manifests: list[dict[str, Any]]
    """The rendered Service and Job (plain)."""

    def __init__(self, name: str, args: TrainingJobArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        target = _validated("IndexedTrainingJob", args)
        self.manifests = indexed_job.render(args["job"], target)
        _refuse("IndexedTrainingJob", args["job"], indexed_job.admission_errors(*self.manifests))
        self._register("IndexedTrainingJob", name, args, target, opts)
        for manifest in self.manifests:
            apply(f"{name}-{manifest['kind'].lower()}", manifest, self, args["provider"], self.waits_for)
        self.register_outputs({})


class _BatchJob(pulumi.ComponentResource):
    manifests: list[dict[str, Any]]
    """The rendered objects (plain)."""

    def _apply_all(self, name: str, provider: k8s.Provider, depends_on: list[pulumi.Resource]) -> None:
        for manifest in self.manifests:
            apply(f"{name}-{manifest['kind'].lower()}", manifest, self, provider, depends_on)
        self.register_outputs({})


class DataPrepJob(_BatchJob):
    """The workshop's data download step: `prepare-data` onto the shared claim."""

    def __init__(self, name: str, args: TrainingJobArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        validate_job("DataPrepJob", args["job"], args["node_group"])
        _bundled_only("DataPrepJob", args["job"])
        if args["job"].dataset not in training_pod.DOWNLOADABLE_DATASETS:
            raise InvalidArgument(
                "DataPrepJob",
                "job.dataset",
                args["job"].dataset,
                f"only {', '.join(training_pod.DOWNLOADABLE_DATASETS)} are downloaded",
            )
        self.manifests = [batch_jobs.render_data_preparation(args["job"], target_of(args["node_group"]))]
        super().__init__("eksddp:index:DataPrepJob", name, {}, opts)
        self._apply_all(name, args["provider"], args.get("depends_on", []))


class EvaluationJob(_BatchJob):
    """The workshop's test step: `evaluate` on the trained model (run it after the PyTorchJob succeeds)."""

    def __init__(self, name: str, args: TrainingJobArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        validate_job("EvaluationJob", args["job"], args["node_group"])
        _bundled_only("EvaluationJob", args["job"])
        self.manifests = [batch_jobs.render_evaluation(args["job"], target_of(args["node_group"]))]
        super().__init__("eksddp:index:EvaluationJob", name, {}, opts)
        self._apply_all(name, args["provider"], args.get("depends_on", []))


class FabricCheckArgs(TypedDict):
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    node_group: TrainingNodes
    """An EFA node group with at least two nodes available."""
    namespace: str
    """Namespace for the check's pods."""
    image: NotRequired[str]
    """Image with libfabric's EFA provider for the group's architecture (x86 default: an AWS Deep Learning
    Container from `region`; arm64: required)."""
    region: NotRequired[str]
    """AWS region of the cluster: the default x86 image is pulled from its registry (needed without `image`)."""
    depends_on: NotRequired[list[pulumi.Resource]]
    """What the objects wait for (the platform: namespace, claim, service account)."""


class FabricCheckJob(_BatchJob):
    """The workshop's EFA check: `fi_info -p efa` and `fi_pingpong` between two EFA nodes."""

    def __init__(self, name: str, args: FabricCheckArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        group = args["node_group"]
        if not group.efa_interfaces:
            raise InvalidArgument(
                "FabricCheckJob", "node_group", group.instance_type, "the check needs a node group with EFA"
            )
        if group.max_size < 2:
            raise InvalidArgument(
                "FabricCheckJob",
                "node_group",
                group.max_size,
                "the check needs a group that can hold two nodes (max_size >= 2)",
            )
        architecture = group.instance.architecture.value
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
        self.manifests = batch_jobs.render_fabric_check(name, args["namespace"], target_of(group), image)
        super().__init__("eksddp:index:FabricCheckJob", name, {}, opts)
        self._apply_all(name, args["provider"], args.get("depends_on", []))


class NcclCheckArgs(TypedDict):
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    node_group: TrainingNodes
    """A GPU node group with EFA that can hold two nodes."""
    namespace: str
    """Namespace for the check's pods."""
    mpi_operator: MpiOperator
    """The operator that installs the MPIJob CRD (kubeflow.org/v2beta1); the check waits for it."""
    image: NotRequired[str]
    """An nccl-tests image with OpenMPI, sshd, CUDA, NCCL and aws-ofi-nccl (default nccl_check.IMAGE)."""
    depends_on: NotRequired[list[pulumi.Resource]]
    """What the objects wait for (the platform: namespace, device plugins)."""


class NcclCheckJob(_BatchJob):
    """NCCL's bus bandwidth between two GPU nodes over EFA (nccl-tests all_reduce_perf as an MPIJob)."""

    def __init__(self, name: str, args: NcclCheckArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        group = args["node_group"]
        if not group.instance.is_gpu or not group.efa_interfaces:
            raise InvalidArgument(
                "NcclCheckJob", "node_group", group.instance_type, "the check needs a GPU group with EFA"
            )
        if group.max_size < nccl_check.NODES:
            raise InvalidArgument(
                "NcclCheckJob",
                "node_group",
                group.max_size,
                "the check needs a group that can hold two nodes (max_size >= 2)",
            )
        target = target_of(group)
        self.manifests = [nccl_check.render(name, args["namespace"], target, args.get("image", nccl_check.IMAGE))]
        super().__init__("eksddp:index:NcclCheckJob", name, {}, opts)
        self._apply_all(name, args["provider"], [*args.get("depends_on", []), args["mpi_operator"].manifests])
