"""What `pulumi up` does to what runs when a stack changes: two renderings of one stack, compared object by object.

A change to an object's pods that `pulumi up` accepts must reach the pods, or replace the object. How each engine
treats an object whose pods changed, from its source:
- batch/v1 Job: pulumi/pulumi-kubernetes v4.32.0, provider/pkg/provider/diff.go lists `.spec.template` among a Job's
  force-new properties (JOB_FORCE_NEW), so the provider replaces the Job itself, the old one first as the name stays
  (provider.go Diff, deleteBeforeReplace). The API server refuses the change in place anyway (kubernetes
  pkg/apis/batch/validation/validation.go validatePodTemplateUpdate: immutable but for the scheduling directives of
  a Job that is suspended and never started).
- TrainJob: kubeflow/trainer v2.3.0 builds its pods from its runtime and its `spec.trainer`, once:
  pkg/runtime/framework/plugins/jobset/jobset.go Build does "not update the JobSet if it already exists and is not
  suspended". A runtime changed in place reaches no running TrainJob; only a replaced TrainJob gets a new JobSet.
  The runtime itself runs nothing.
- PyTorchJob: kubeflow/trainer v1.9.4 (the training operator), pkg/controller.v1/common/pod.go ReconcilePods creates
  the pods that are missing and deletes failed or surplus ones; it never compares a pod with its template.
- MPIJob: kubeflow/mpi-operator v0.8.0, pkg/controller/mpi_job_controller.go getOrCreateWorker creates missing
  workers only; the launcher Job is created once and its template synced only when the MPIJob is unsuspended.
An object is replaced when its name or namespace changes (pulumi-kubernetes provider.go Diff: "Changing the identity
of the resource always causes a replacement"), or when its `replaceOnChanges` names a changed input; keeping its
name, that replacement needs `deleteBeforeReplace`, or the new object is created beside the old one and fails
(provider/pkg/await/await.go Creation: "The resource already exists in the cluster"). Apart from changes, a Job with
`pulumi.com/replaceUnready: "true"` that is not Complete is replaced by every `pulumi up` (provider.go Diff reads it
live): what the fabric checks use to run again after a failure (pulumi_kubernetes.runs_again).
"""

from collections.abc import Iterator
from typing import Any

from eks_ddp.engine_models.base import Deployment, Finding, located, pod_specs, runtime_of
from eks_ddp.tools.mocking import Registration
from eks_ddp.workloads import trainjob

RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
JOB_FORCE_NEW = ("spec.completions", "spec.parallelism", "spec.selector", "spec.template")
NOT_APPLIED = {
    trainjob.KIND: "its runtime changed and it did not: Trainer v2.3.0 (jobset.go) does not rebuild a JobSet that "
    "exists, so the running job keeps its old pods; name the runtime after its spec",
    "PyTorchJob": "the training operator v1.9.4 (common/pod.go) never recreates a pod whose template changed; "
    "replace it (replaceOnChanges, deleteBeforeReplace)",
    "MPIJob": "mpi-operator v0.8.0 creates its workers and launcher once; replace it (replaceOnChanges, "
    "deleteBeforeReplace)",
}


def _pods(deployment: Deployment, registration: Registration) -> list[dict[str, Any]]:
    """The pods an object makes, as its controller builds them (a runtime makes none: its TrainJobs do)."""
    kind = registration.inputs["kind"]
    if kind in RUNTIME_KINDS:
        return []
    if kind == trainjob.KIND:
        return [trainjob.pod_spec(registration.inputs, runtime_of(deployment, registration))]
    return pod_specs(registration.inputs)


def changed_pods(before: Deployment, after: Deployment) -> list[tuple[Registration, Registration]]:
    """(before, after) of every object in both renderings whose pods differ."""
    earlier = {r.urn: r for r in before.kubernetes_objects()}
    return [
        (earlier[r.urn], r)
        for r in after.kubernetes_objects()
        if r.urn in earlier and _pods(before, earlier[r.urn]) != _pods(after, r)
    ]


def _changed_inputs(old: Any, new: Any, path: str = "") -> Iterator[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            yield from _changed_inputs(old.get(key), new.get(key), f"{path}.{key}" if path else key)
    elif old != new:
        yield path


def _covered(paths: list[str] | tuple[str, ...], changed: list[str]) -> bool:
    return any(c == p or c.startswith(f"{p}.") for p in paths for c in changed)


def unapplied_pod_changes(before: Deployment, after: Deployment) -> Iterator[Finding]:
    """Every object whose pods changed between the renderings where no engine would apply the change."""
    for old, new in changed_pods(before, after):
        identity = [(r.inputs["metadata"].get("name"), r.inputs["metadata"].get("namespace")) for r in (old, new)]
        changed = list(_changed_inputs(old.inputs, new.inputs))
        if identity[0] != identity[1] or (new.inputs["kind"] == "Job" and _covered(JOB_FORCE_NEW, changed)):
            continue  # a new object, or one pulumi-kubernetes replaces by itself
        kind = new.inputs["kind"]
        if not _covered(new.replace_on_changes, changed):
            key = "spec.runtimeRef" if kind == trainjob.KIND else "replaceOnChanges"
            problem = NOT_APPLIED.get(kind, "updated in place; nothing recreates its pods")
            yield Finding("updates", located(new), key, problem)
        elif not new.delete_before_replace:
            yield Finding(
                "updates",
                located(new),
                "deleteBeforeReplace",
                f"the replacement {kind} of the same name is created before the old one is deleted: AlreadyExists",
            )
