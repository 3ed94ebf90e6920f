"""Thin components that apply the rendered manifests with the cluster's provider.

Their args are plain data and the cluster's Kubernetes provider, so Pulumi can infer a schema from them and other
languages can use them (provider/): a node group is given by its shape, what it waits for by `opts.depends_on`.
"""

from collections.abc import Sequence
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from pulumi import ResourceOptions

from eks_ddp.infra.args import check_keys
from eks_ddp.infra.aws.efa_node_group import NodeGroupShape
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.facts.catalogue import InstanceType
from eks_ddp.infra.node_group import NodeGroup
from eks_ddp.infra.options import waits_for
from eks_ddp.workloads import batch_jobs, indexed_job, pytorchjob, queueing, training_pod, trainjob
from eks_ddp.workloads.applying import QUEUE_CHANGE_REPLACES, SUBMITTED, BatchJob, apply, placed_on
from eks_ddp.workloads.fabric_checks import FabricCheckArgs, FabricCheckJob, NcclCheckArgs, NcclCheckJob
from eks_ddp.workloads.job import SHARED_MOUNT, TrainingJob, TrainingJobSpec, problems, resolve
from eks_ddp.workloads.target import NodeTarget

__all__ = [  # the stable API (docs/api.md); `apply` and the options for programs that apply objects of their own
    "QUEUE_CHANGE_REPLACES", "SUBMITTED", "DataPrepJob", "EvaluationJob", "FabricCheckArgs", "FabricCheckJob",
    "IndexedTrainingJob", "NcclCheckArgs", "NcclCheckJob", "PyTorchJob", "TrainJob", "TrainingJobArgs", "apply",
]


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


def validate_job(component: str, job: TrainingJob, shape: NodeGroupShape, instance: InstanceType) -> None:
    """The job against the group it runs on (workloads.job.problems, the first one), and where its results last;
    raises InvalidArgument naming the argument's path."""
    if not job.claim_name and job.artifact_bucket is None:
        raise InvalidArgument(
            component,
            "job.claim_name",
            None,
            f"without a claim {SHARED_MOUNT} is "
            "scratch space lost with the pod: give a ReadWriteMany claim, or job.artifact_bucket "
            "(the model bucket) for the results and checkpoints",
        )
    group = NodeGroup.of(shape)
    for problem in problems(job, group.name, group.max_size, instance)[:1]:
        where = "node_group" if problem.field == "node_group" else f"job.{problem.field}"
        raise InvalidArgument(component, where, problem.value, problem.allowed)


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
    job, target = resolve(args["job"]), placed_on(component, args["node_group"])
    validate_job(component, job, args["node_group"], target.instance)
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



class DataPrepJob(BatchJob):
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


class EvaluationJob(BatchJob):
    """The workshop's test step: the bundled trainer's `evaluate` on the trained model (run it after the job)."""

    def __init__(self, name: str, args: TrainingJobArgs, opts: ResourceOptions | None = None) -> None:
        job, target = resolved("EvaluationJob", args)
        _bundled_only("EvaluationJob", job)
        self._apply_all(name, [batch_jobs.render_evaluation(job, target)], args["provider"], opts)
