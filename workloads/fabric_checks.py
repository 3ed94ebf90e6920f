"""The fabric checks as components: EFA between two nodes (fi_pingpong) and NCCL's bandwidth between two GPU nodes."""

from typing import Any, NotRequired, TypedDict, cast

import pulumi
import pulumi_kubernetes as k8s
from pulumi import ResourceOptions

from eks_ddp.infra.aws.efa_node_group import NodeGroupShape
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.node_group import NodeGroup
from eks_ddp.infra.options import waits_for
from eks_ddp.workloads import batch_jobs, nccl_check, queueing
from eks_ddp.workloads.applying import REPLACED_NOT_UPDATED, SUBMITTED, BatchJob, apply, placed_on
from eks_ddp.workloads.target import NodeTarget


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
    target, group = placed_on(component, shape), NodeGroup.of(shape)
    if not target.efa_interfaces:
        raise InvalidArgument(component, "node_group.efa", group.efa, "the check needs a group with EFA")
    if group.max_size < 2:
        raise InvalidArgument(
            component, "node_group.max_size", group.max_size, "the check needs a group that can hold two nodes"
        )
    return target


class FabricCheckJob(BatchJob):
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


class NcclCheckJob(BatchJob):
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
