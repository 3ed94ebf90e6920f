"""No operator: the Indexed Job and its headless Service, against Kubernetes' schemas and the Job controller's naming."""

from dataclasses import replace

from eks_ddp.infra.facts.catalogue import EFA_INSTANCE_TYPES
from eks_ddp.workloads import indexed_job
from eks_ddp.workloads.target import NodeTarget
from eks_ddp.workloads.training_pod import TrainingJob
from tests.workloads.schemas import validate_core

GRAVITON = NodeTarget(EFA_INSTANCE_TYPES["c7g.16xlarge"], efa_interfaces=1, labels={"vpc.amazonaws.com/efa.present": "true"})
JOB = TrainingJob(name="mnist-ddp", namespace="training", image="registry/eks-ddp-trainer:1", replicas=3)


def test_service_and_indexed_job_validate_and_find_pod_zero() -> None:
    service, job = indexed_job.render(JOB, GRAVITON)
    validate_core(service)
    validate_core(job)
    assert indexed_job.admission_errors(service, job) == []
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"], spec["backoffLimit"]) == ("Indexed", 3, 3, 4)
    pod = spec["template"]["spec"]
    assert pod["subdomain"] == "mnist-ddp" and pod["restartPolicy"] == "OnFailure"
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    # The Job controller names pod i's host `<job>-<i>`: pod 0 is `mnist-ddp-0.mnist-ddp` through the Service.
    assert env["PET_MASTER_ADDR"]["value"] == "mnist-ddp-0.mnist-ddp" and env["PET_NNODES"]["value"] == "3"
    assert env["PET_NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"].endswith("['batch.kubernetes.io/job-completion-index']")
    assert pod["containers"][0]["command"][:4] == ["torchrun", "-m", "eks_ddp.trainer", "train"]


def test_what_the_api_server_accepts_but_leaves_pod_zero_unfound_is_refused() -> None:
    service, job = indexed_job.render(JOB, GRAVITON)
    not_headless = {**service, "spec": {**service["spec"], "clusterIP": "10.0.0.1"}}
    elsewhere = {**service, "spec": {**service["spec"], "selector": {"app": "other"}}}
    partial = {**job, "spec": {**job["spec"], "parallelism": 1}}
    long_service, long_job = indexed_job.render(replace(JOB, name="n" * 56, replicas=10), GRAVITON)
    for checked, expected in (
        ((not_headless, job), "headless Service"),
        ((elsewhere, job), "selector does not match"),
        ((service, partial), "completions == parallelism"),
        ((long_service, long_job), "exceeds 63 characters"),
    ):
        errors = indexed_job.admission_errors(*checked)
        assert len(errors) == 1 and expected in errors[0], errors
