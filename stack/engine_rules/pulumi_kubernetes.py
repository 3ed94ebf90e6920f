"""What pulumi-kubernetes does with what a stack registers: awaits, owned objects, replacements."""

import re
from collections.abc import Iterator
from typing import Any

from eks_ddp.stack.engine_rules.base import (
    Deployment,
    Finding,
    annotations,
    located,
)
from eks_ddp.stack.mocking import Registration
from eks_ddp.workloads.batch_jobs import FABRIC_CHECK_LABEL
from eks_ddp.workloads.components import SUBMITTED
from eks_ddp.workloads.training_pod import TRAINER_LABEL

SKIP_AWAIT, TIMEOUT_SECONDS, WAIT_FOR = "pulumi.com/skipAwait", "pulumi.com/timeoutSeconds", "pulumi.com/waitFor"
OPERATOR_JOBS = ("PyTorchJob", "TrainJob", "MPIJob")
COMPLETING = ("Job", *OPERATOR_JOBS)


def _seconds(text: str) -> float:
    """A Pulumi custom timeout ("10m", "1h30m", "90s") in seconds."""
    units = {"h": 3600, "m": 60, "s": 1}
    return sum(float(amount) * units[unit] for amount, unit in re.findall(r"([\d.]+)([hms])", text))


def _await_limit(registration: Registration, default: float) -> float:
    """How long pulumi-kubernetes waits: customTimeouts, then `pulumi.com/timeoutSeconds`, then its default."""
    if "create" in registration.custom_timeouts:
        return _seconds(registration.custom_timeouts["create"])
    annotation = annotations(registration).get(TIMEOUT_SECONDS, "")
    return float(annotation) if annotation.isdigit() else default


# Worst case of each provisioner to bind a new claim, with the reason.
PROVISIONING_SECONDS = {
    # A new FSx for Lustre file system takes 5-10 minutes and more at larger sizes; the
    # FSx CSI driver itself polls for up to 10 minutes (pkg/cloud/cloud.go, v1.x).
    "fsx.csi.aws.com": 15 * 60,
    # An EFS access point on an existing file system: seconds.
    "efs.csi.aws.com": 60,
}


def _awaits_endpoints(spec: dict[str, Any]) -> bool:
    """service.go: a Service is awaited until it has a ready endpoint, unless headless, ExternalName or selectorless."""
    return spec.get("clusterIP") != "None" and spec.get("type") != "ExternalName" and bool(spec.get("selector"))


def kubernetes_awaits(deployment: Deployment) -> Iterator[Finding]:
    """pulumi-kubernetes waits on some kinds before `pulumi up` moves on; the wait must cover the worst case.

    Source: pulumi/pulumi-kubernetes v4.32.0, provider/pkg/await/awaiters.go, await.go and
    metadata/overrides.go. A batch/v1 Job is awaited until Complete (10 minutes unless
    customTimeouts or `pulumi.com/timeoutSeconds`; its worst case is its activeDeadlineSeconds,
    unbounded without one). A PersistentVolumeClaim is awaited until Bound for a fixed 5
    minutes, or only until Pending when its StorageClass binds WaitForFirstConsumer. Custom
    resources are awaited for a Ready condition under PULUMI_K8S_AWAIT_ALL=true; a PyTorchJob
    has none; `pulumi.com/waitFor` (v4.18 and later) awaits any object for a condition or JSONPath value within
    `pulumi.com/timeoutSeconds`. A Service (await/service.go) waits for a ready endpoint unless it is headless.
    `pulumi.com/skipAwait: "true"` opts any of them out, and for a Job its deletion too
    (metadata/overrides.go allowsSkipAwaitWithDelete): replaced for a change to its pods, the Job keeps its name, and
    its successor is created while it still stops (foreground deletion) and fails AlreadyExists (await.go Creation);
    `pulumi.com/waitFor: jsonpath={.metadata}` is met at once and leaves the deletion awaited. Helm releases
    (provider/pkg/provider/helm_release.go) wait 300 s unless `timeout` or `skipAwait` is set.
    """
    classes = {
        r.inputs.get("metadata", {}).get("name"): r.inputs
        for r in deployment.of_type("kubernetes:storage.k8s.io/v1:StorageClass")
    }
    for registration in deployment.kubernetes_objects():
        kind, spec = registration.inputs["kind"], registration.inputs.get("spec", {})
        if kind == "Job" and annotations(registration).get(SKIP_AWAIT) == "true":
            yield Finding(
                "awaits",
                located(registration),
                "metadata.annotations",
                f'{SKIP_AWAIT}: "true" also skips awaiting a Job\'s deletion: replaced for a change to its pods, '
                f"the new Job fails AlreadyExists while the old one stops; set {WAIT_FOR}: {SUBMITTED} instead",
            )
        if annotations(registration).get(SKIP_AWAIT) == "true" or annotations(registration).get(WAIT_FOR) == SUBMITTED:
            continue
        if kind == "Job":
            deadline = spec.get("activeDeadlineSeconds")
            limit = _await_limit(registration, 600)
            if deadline is None or deadline > limit:
                worst = "no activeDeadlineSeconds: unbounded" if deadline is None else f"up to {deadline:g} s"
                yield Finding(
                    "awaits",
                    located(registration),
                    "metadata.annotations",
                    f"pulumi up waits for the Job to complete for {limit:g} s, but it runs {worst}; "
                    f'set {SKIP_AWAIT}: "true" and watch it instead',
                )
        elif kind == "PersistentVolumeClaim":
            storage_class = classes.get(spec.get("storageClassName"), {})
            if storage_class.get("volumeBindingMode") == "WaitForFirstConsumer":
                continue
            worst = PROVISIONING_SECONDS.get(storage_class.get("provisioner", ""), 0)
            if worst > 300:
                yield Finding(
                    "awaits",
                    located(registration),
                    "spec.storageClassName",
                    f"an Immediate claim is awaited until Bound for a fixed 300 s, but "
                    f"{storage_class.get('provisioner')} takes up to {worst} s; bind WaitForFirstConsumer",
                )
        elif kind in OPERATOR_JOBS and WAIT_FOR in annotations(registration):
            deadline = spec.get("runPolicy", {}).get("activeDeadlineSeconds")
            limit = _await_limit(registration, 600)
            if deadline is None or deadline > limit:
                yield Finding(
                    "awaits",
                    located(registration),
                    "spec.runPolicy.activeDeadlineSeconds",
                    f"pulumi up waits {limit:g} s for {annotations(registration)[WAIT_FOR]}, but the {kind} may run "
                    f"{'unbounded' if deadline is None else f'{deadline:g} s'}; bound it within the wait",
                )
        elif kind in OPERATOR_JOBS:
            yield Finding(
                "awaits",
                located(registration),
                "metadata.annotations",
                f"under PULUMI_K8S_AWAIT_ALL=true pulumi up waits 10 minutes for a Ready condition a "
                f'{kind} never has; set {SKIP_AWAIT}: "true"',
            )
        elif kind == "Service" and _awaits_endpoints(spec):
            yield Finding(
                "awaits",
                located(registration),
                "spec.clusterIP",
                "pulumi up waits up to 10 minutes for a ready endpoint, and the pods behind it belong to a job "
                "on nodes that may scale from zero; make it headless (clusterIP: None) or skip the await",
            )
    for release in deployment.of_type("kubernetes:helm.sh/v3:Release"):
        inputs = release.inputs
        if not inputs.get("skipAwait") and "timeout" not in inputs:
            yield Finding(
                "awaits",
                located(release),
                "timeout",
                "Helm waits for every Deployment and DaemonSet within an implicit 300 s; set a timeout "
                "that covers nodes joining during the install, with its reason, or skipAwait",
            )


# Kinds whose spec the API server refuses to change, by the CRD's CEL rules (`self == oldSelf`):
# kubeflow/trainer v2.3.0 manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml makes a TrainJob's
# `spec.trainer` and `spec.runtimeRef` immutable.
IMMUTABLE_SPECS = {"TrainJob"}


def immutable_specs_replaced(deployment: Deployment) -> Iterator[Finding]:
    """An object with an immutable spec must be replaced when it changes, or the next `pulumi up` fails.

    pulumi-kubernetes updates a custom resource in place unless `replaceOnChanges` names the
    changed path; keeping its name, the old object must go first (`deleteBeforeReplace`).
    """
    for registration in deployment.kubernetes_objects():
        if registration.inputs["kind"] not in IMMUTABLE_SPECS:
            continue
        if "spec" not in registration.replace_on_changes or not registration.delete_before_replace:
            yield Finding(
                "immutable",
                located(registration),
                "replaceOnChanges",
                f"a {registration.inputs['kind']}'s spec is immutable: an update fails; replace it "
                "(replaceOnChanges [spec], deleteBeforeReplace)",
            )


def no_ttl_on_owned_objects(deployment: Deployment) -> Iterator[Finding]:
    """Kubernetes must not delete what Pulumi owns: `pulumi up --refresh` would recreate it and re-run it.

    Sources: kubernetes/kubernetes pkg/controller/ttlafterfinished (Jobs, ttlSecondsAfterFinished);
    kubeflow/trainer release-1.9 pkg/controller.v1/common/job.go (runPolicy.ttlSecondsAfterFinished
    deletes the finished PyTorchJob).
    """
    for registration in deployment.kubernetes_objects():
        spec = registration.inputs.get("spec", {})
        if "ttlSecondsAfterFinished" in spec:
            yield Finding(
                "ttl",
                located(registration),
                "spec.ttlSecondsAfterFinished",
                "Kubernetes deletes the finished Job that Pulumi still tracks",
            )
        if "ttlSecondsAfterFinished" in spec.get("runPolicy", {}):
            yield Finding(
                "ttl",
                located(registration),
                "spec.runPolicy.ttlSecondsAfterFinished",
                "the training operator deletes the finished job that Pulumi still tracks",
            )


def awaited_to_completion(registration: Registration) -> bool:
    """pulumi-kubernetes v4.34 awaits a Job until Complete, and any object with `pulumi.com/waitFor`, unless
    `pulumi.com/skipAwait: "true"` (provider/pkg/await)."""
    notes = annotations(registration)
    if notes.get(SKIP_AWAIT) == "true" or registration.inputs.get("kind") not in COMPLETING:
        return False
    if notes.get(WAIT_FOR) == SUBMITTED:  # met as soon as the object exists
        return False
    return registration.inputs.get("kind") == "Job" or WAIT_FOR in notes


def phases(deployment: Deployment) -> dict[str, int]:
    """Each run-to-completion object's phase: one after the latest awaited object it depends on (`pulumi up` creates
    an object only once every object it depends on is created, and, for those it awaits, ended)."""
    objects = [r for r in deployment.kubernetes_objects() if r.inputs.get("kind") in COMPLETING]
    gates = {r.urn: r for r in objects if awaited_to_completion(r)}
    memo: dict[str, int] = {}

    def phase(registration: Registration) -> int:
        if registration.urn not in memo:
            memo[registration.urn] = max(
                (phase(gates[urn]) + 1 for urn in registration.dependencies if urn in gates), default=0
            )
        return memo[registration.urn]

    return {r.urn: phase(r) for r in objects}


def is_training(registration: Registration) -> bool:
    """A PyTorchJob, a TrainJob, or an Indexed Job of training pods (their TRAINER_LABEL)."""
    kind, spec = registration.inputs.get("kind"), registration.inputs.get("spec", {})
    labels = spec.get("template", {}).get("metadata", {}).get("labels") or {}
    return kind in ("PyTorchJob", "TrainJob") or (kind == "Job" and TRAINER_LABEL.items() <= labels.items())


def checks_gate_training(deployment: Deployment) -> Iterator[Finding]:
    """Training starts only after every fabric check ended: the check is awaited (a Job until Complete, the MPIJob
    until `condition=Succeeded`, which a failure never meets) and the training object depends on it, so `pulumi up`
    stops at a failed check (`fabricCheck: gate`) and the check's pods never hold the GPUs and EFA devices the
    training pods wait for (an init container in the training pods would hold them: both would wait for ever)."""
    stages = phases(deployment)
    objects = deployment.kubernetes_objects()
    checks = [
        r
        for r in objects
        if r.inputs.get("kind") in COMPLETING and FABRIC_CHECK_LABEL in r.inputs.get("metadata", {}).get("labels", {})
    ]
    for training in (r for r in objects if r.urn in stages and is_training(r)):
        for check in checks:
            if not awaited_to_completion(check):
                problem = f"the {check.inputs['kind']} {check.name} is not awaited: training starts beside it"
            elif stages[training.urn] <= stages[check.urn]:
                problem = f"created without waiting for {check.inputs['kind']} {check.name}: add it to depends_on"
            else:
                continue
            yield Finding("fabric-gate", located(training), "dependencies", problem)
