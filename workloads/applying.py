"""How a rendered object becomes a resource: the pulumi-kubernetes type for its kind, the await and replace options
its engine needs, and the group's target a component's pods run on. Shared by every workloads component."""

from typing import Any, cast

import pulumi
import pulumi_kubernetes as k8s
from pulumi import ResourceOptions

from eks_ddp.infra.aws.efa_node_group import NodeGroupShape
from eks_ddp.infra.facts import instance_facts
from eks_ddp.infra.options import waits_for
from eks_ddp.workloads import nccl_check, pytorchjob, trainjob
from eks_ddp.workloads.target import NodeTarget, target_of


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



class BatchJob(pulumi.ComponentResource):
    """A component of objects that run once (data, evaluation, the fabric checks): applied together."""

    def _apply_all(
        self, name: str, manifests: list[dict[str, Any]], provider: k8s.Provider, opts: ResourceOptions | None
    ) -> None:
        self.manifests = manifests
        """The rendered objects (plain)."""
        super().__init__(f"eksddp:index:{type(self).__name__}", name, {}, opts)
        for manifest in manifests:
            apply(f"{name}-{manifest['kind'].lower()}", manifest, self, provider, waits_for(opts))
        self.register_outputs({})
