"""What pulumi-kubernetes does with what a stack registers: awaits, owned objects, replacements."""

import re
from collections.abc import Iterator
from typing import Any

from eks_ddp.engine_models.base import (
    Deployment,
    Finding,
    annotations,
    located,
    pod_specs,
)
from eks_ddp.tools.mocking import Registration
from eks_ddp.workloads.batch_jobs import FABRIC_CHECK_LABEL, REPLACE_UNREADY, STEP_LABEL, VERDICT_IN_STATUS
from eks_ddp.workloads.components import SUBMITTED
from eks_ddp.workloads.nccl_check import ENDED
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


def kubernetes_awaits(deployment: Deployment) -> Iterator[Finding]:
    """pulumi-kubernetes waits on some kinds before `pulumi up` moves on; the wait must cover the worst case.

    Source: pulumi/pulumi-kubernetes provider/v4 at f47bc2d6f199 (the provider built here; tests/cluster/engines/
    pulumi-kubernetes): metadata/overrides.go, await/await.go, await/job.go. Kept as a fast pre-check (the rehearsal
    of a program of your own) where the real provider is shown to agree (tests/cluster/test_every_stack_on_pulumi.py,
    `make test-pulumi`):
    - a batch/v1 Job is awaited until Complete for 10 minutes unless customTimeouts or `pulumi.com/timeoutSeconds`
      say otherwise, and `pulumi up` fails at that limit when its pods run on (..._on_a_job_awaited_past_its_limit);
    - `pulumi.com/skipAwait: "true"` on a Job also skips awaiting its deletion (allowsSkipAwaitWithDelete): replaced
      for a change to its pods, the Job keeps its name, and its successor is applied (server-side apply: await.go
      Creation patches, never creates) onto it while it still stops (foreground deletion), which the API server refuses
      as an apply conflict on the changed fields (..._on_a_job_replaced_while_it_stops);
      `pulumi.com/waitFor: jsonpath={.metadata}` is met at once and leaves the deletion awaited.
    One more has no engine here: a PersistentVolumeClaim is awaited until Bound for a fixed 5 minutes, or only until
    Pending when its StorageClass binds WaitForFirstConsumer, and how long the FSx CSI driver takes to provision is
    AWS's (PROVISIONING_SECONDS). The awaits this rule once modelled beyond these (an operator's job under
    PULUMI_K8S_AWAIT_ALL, a Service's endpoints, a Helm release's implicit timeout) had no agreement test and went;
    the stack's own objects are deployed by the real provider in that tier.
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
                f"the new Job is applied onto the old one while it stops, which fails (an apply conflict on the "
                f"changed fields); set {WAIT_FOR}: {SUBMITTED} instead",
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
                    f"set {WAIT_FOR}: {SUBMITTED} and watch it instead",
                )
        elif kind == "PersistentVolumeClaim":
            yield from _claim_awaits(registration, classes.get(spec.get("storageClassName"), {}))


def _claim_awaits(claim: Registration, storage_class: dict[str, Any]) -> Iterator[Finding]:
    """A claim bound at once is awaited until Bound for a fixed 5 minutes, however long its provisioner takes."""
    if storage_class.get("volumeBindingMode") == "WaitForFirstConsumer":
        return
    worst = PROVISIONING_SECONDS.get(storage_class.get("provisioner", ""), 0)
    if worst > 300:
        yield Finding(
            "awaits",
            located(claim),
            "spec.storageClassName",
            f"an Immediate claim is awaited until Bound for a fixed 300 s, but "
            f"{storage_class.get('provisioner')} takes up to {worst} s; bind WaitForFirstConsumer",
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
    """pulumi-kubernetes awaits a Job until Complete, and any object with `pulumi.com/waitFor`, unless
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


def waits_for_the_checks(registration: Registration) -> bool:
    """Training, and the evaluation of its model: neither may start before the fabric checks passed."""
    labels = registration.inputs.get("metadata", {}).get("labels") or {}
    evaluation = registration.inputs.get("kind") == "Job" and labels.get(STEP_LABEL) == "evaluate"
    return is_training(registration) or evaluation


# What ends pulumi-kubernetes' await of a fabric check, and what the next `pulumi up` does with a failed one.
# - A batch/v1 Job without waitFor: the Job await (provider/pkg/await/job.go, checker/job/check.go) fails as soon as
#   the Job's Failed condition is True with reason BackoffLimitExceeded or DeadlineExceeded (any other reason, such as
#   a podFailurePolicy's, leaves it waiting for the timeout); the error lists the pods' errors, a terminated
#   container's termination message among them (checker/pod/check.go containerTerminatedError).
# - `pulumi.com/waitFor`: condition/custom.go and kubectl.go wait for a condition to have a status, jsonpath.go for a
#   JSONPath to select a value; internal/awaiter.go ignores what a condition reports until `timeoutSeconds` runs out,
#   so an object that failed in a way the expression does not select is reported only then.
# - An await that failed leaves the object with init errors; the next `pulumi up` gives it an empty update that awaits
#   the same object again ("continue awaiting initialization", pulumi/pulumi pkg/resource/deploy/step_generator.go),
#   which fails at once on a Job's Failed condition, unless its replaceOnChanges covers them (`*`,
#   applyReplaceOnChanges) or the provider's Diff replaces it: `pulumi.com/replaceUnready: "true"` on a Job that is
#   not Complete (provider/pkg/provider/provider.go Diff; for any other kind it only warns "not supported").
# Which conditions of an MPIJob (mpi-operator v0.8.0 types.go: Created, Running, Restarting, Succeeded, Suspended,
# Failed) meet each waitFor the stacks use. The JSONPath was run with theory/jsonpath v0.9.0, as the provider parses
# it, against statuses with each condition True (here, not in the tests: it needs Go).
WAIT_FOR_MET_BY = {ENDED: {"Succeeded", "Failed"}}
VERDICT_MINUTE = 60.0
"""How soon after a check's verdict `pulumi up` must report it."""


def _met_by(wait_for: str) -> set[str]:
    """The MPIJob conditions (True) that meet `wait_for`: `condition=<type>` as kubectl's, or a known JSONPath."""
    if wait_for.startswith("condition="):
        kind, _, status = wait_for.removeprefix("condition=").partition("=")
        return {kind} if status in ("", "True") else set()
    return WAIT_FOR_MET_BY.get(wait_for, set())


def _retries(registration: Registration) -> int:
    """How many times the verdict is run again after it failed: the Job's (default 6) or the launcher's backoffLimit."""
    spec = registration.inputs.get("spec", {})
    if registration.inputs.get("kind") == "Job":
        return int(spec.get("backoffLimit", 6))
    return int(spec.get("runPolicy", {}).get("backoffLimit", 6))


def reported_after(registration: Registration, failed_at: float) -> float:
    """When, after a check object is created, `pulumi up` reports its verdict that failed `failed_at` seconds in.

    Each retry runs the same test again and fails the same way; the object's own deadline ends it first if shorter.
    """
    spec, limit = registration.inputs.get("spec", {}), _await_limit(registration, 600)
    deadline = spec.get("activeDeadlineSeconds") or spec.get("runPolicy", {}).get("activeDeadlineSeconds") or limit
    wait_for = annotations(registration).get(WAIT_FOR)
    if wait_for is not None and "Failed" not in _met_by(wait_for):
        return limit
    return min(failed_at * (_retries(registration) + 1), float(deadline), limit)


def _attempt_of(deployment: Deployment, registration: Registration) -> Registration | None:
    """The replaceUnready Job whose uid this object's metadata takes (nccl_check.render_attempt), if any."""
    urns = set(registration.property_dependencies.get("metadata", []))
    return next(
        (
            r
            for r in deployment.kubernetes_objects()
            if r.urn in urns and r.inputs.get("kind") == "Job" and annotations(r).get(REPLACE_UNREADY) == "true"
        ),
        None,
    )


def _completed_after(deployment: Deployment, attempt: Registration, check: Registration) -> bool:
    """Whether a patch that waits for `check` scales `attempt` to no completions (nccl_check.PASSED)."""
    return any(
        r.type == "kubernetes:batch/v1:JobPatch"
        and attempt.urn in r.property_dependencies.get("metadata", [])
        and check.urn in r.dependencies
        and r.inputs.get("spec", {}).get("completions") == 0 == r.inputs.get("spec", {}).get("parallelism")
        for r in deployment.registrations
    )


def _replaces_on(registration: Registration, path: str) -> bool:
    return any(path == p or path.startswith(f"{p}.") or p == "*" for p in registration.replace_on_changes)


def runs_again(deployment: Deployment, registration: Registration, passed: bool) -> bool:
    """Whether the next `pulumi up` runs a check object again (replaces it) after it passed or failed."""
    notes, kind = annotations(registration), registration.inputs.get("kind")
    if kind == "Job" and WAIT_FOR not in notes:  # the Job await: a failure leaves init errors, a pass Complete
        return not passed and (notes.get(REPLACE_UNREADY) == "true" or _replaces_on(registration, "#initerror"))
    attempt = _attempt_of(deployment, registration)
    if attempt is not None and _replaces_on(registration, "metadata.annotations"):
        return not (passed and _completed_after(deployment, attempt, registration))
    init_errors = not passed and "Failed" not in _met_by(notes.get(WAIT_FOR, ""))
    return init_errors and _replaces_on(registration, "#initerror")


def _unbounded_workers(registration: Registration) -> bool:
    """mpi-operator v0.8.0 puts runPolicy.activeDeadlineSeconds on the launcher Job only (mpi_job_controller.go
    newLauncherJob), which it creates once every worker is Ready: a worker pod needs its own deadline."""
    workers = registration.inputs.get("spec", {}).get("mpiReplicaSpecs", {}).get("Worker")
    limit = _await_limit(registration, 600)
    return workers is not None and not workers["template"]["spec"].get("activeDeadlineSeconds", limit + 1) <= limit


def gate_problems(deployment: Deployment, check: Registration, failed_at: float = 120.0) -> list[str]:
    """What keeps a check from gating as a user expects: a verdict reported later than a minute after it (for one
    that failed `failed_at` seconds in), without the check's own words, a check the next `pulumi up` does not run
    again after a failure, or again after a pass, or workers nothing stops."""
    problems = []
    late = reported_after(check, failed_at) - failed_at
    if late > VERDICT_MINUTE:
        problems.append(f"a verdict that failed {failed_at:g} s in is reported {late:g} s later")
    pods = [c for pod in pod_specs(check.inputs) for c in pod.get("containers", [])]
    if check.inputs.get("kind") == "Job" and any(c.get("terminationMessagePolicy") != VERDICT_IN_STATUS for c in pods):
        problems.append(f"its failure does not say the verdict: terminationMessagePolicy {VERDICT_IN_STATUS}")
    if not runs_again(deployment, check, passed=False):
        problems.append("the next pulumi up awaits the failed object again instead of running the check again")
    if runs_again(deployment, check, passed=True):
        problems.append("the next pulumi up runs it again after it passed")
    if _unbounded_workers(check):
        problems.append("its workers run unbounded: give their pods an activeDeadlineSeconds within the wait")
    return problems


def checks_gate_training(deployment: Deployment) -> Iterator[Finding]:
    """Training and its evaluation start only after every fabric check ended: the check is awaited (a Job until
    Complete, the MPIJob until it succeeded or failed) and they depend on it, so `pulumi up` stops at a failed check
    (`fabricCheck: gate`) and the check's pods never hold the GPUs and EFA devices the training pods wait for (an
    init container in the training pods would hold them: both would wait for ever). Each check also gates as a user
    expects (`gate_problems`)."""
    stages = phases(deployment)
    objects = deployment.kubernetes_objects()
    checks = [
        r
        for r in objects
        if r.inputs.get("kind") in COMPLETING and FABRIC_CHECK_LABEL in r.inputs.get("metadata", {}).get("labels", {})
    ]
    for check in checks:
        for problem in gate_problems(deployment, check):
            yield Finding("fabric-gate", located(check), "metadata.annotations", problem)
    for gated in (r for r in objects if r.urn in stages and waits_for_the_checks(r)):
        for check in checks:
            if not awaited_to_completion(check):
                problem = f"the {check.inputs['kind']} {check.name} is not awaited: it starts beside it"
            elif stages[gated.urn] <= stages[check.urn]:
                problem = f"created without waiting for {check.inputs['kind']} {check.name}: add it to depends_on"
            else:
                continue
            yield Finding("fabric-gate", located(gated), "dependencies", problem)
