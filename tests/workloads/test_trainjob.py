"""The Kubeflow Trainer v2 rendering: schemas from upstream/schemas and the controllers' rules (kubeflow/trainer v2.3.0)."""

from dataclasses import replace

from eks_ddp.infra.facts.catalogue import EFA_INSTANCE_TYPES
from eks_ddp.workloads import trainjob
from eks_ddp.workloads.target import NodeTarget
from eks_ddp.workloads.training_pod import TrainingJob
from tests.workloads.schemas import validate_custom

GRAVITON = NodeTarget(EFA_INSTANCE_TYPES["c7g.16xlarge"], efa_interfaces=1, labels={"vpc.amazonaws.com/efa.present": "true"},
                      taints=[{"key": "training", "value": "true", "effect": "NO_SCHEDULE"}])
P5 = NodeTarget(EFA_INSTANCE_TYPES["p5.48xlarge"], efa_interfaces=32, labels={"vpc.amazonaws.com/efa.present": "true"})
JOB = TrainingJob(name="mnist-ddp", namespace="training", image="registry/eks-ddp-trainer:1", replicas=3, node_losses=2)


def test_runtime_and_trainjob_validate_and_carry_what_the_pytorchjob_carries() -> None:
    runtime, job = trainjob.render_runtime(JOB, GRAVITON), trainjob.render(JOB, GRAVITON)
    validate_custom(runtime)
    validate_custom(job)
    assert trainjob.admission_errors(job, runtime) == []
    reference = job["spec"]["runtimeRef"]
    assert (reference["apiGroup"], reference["kind"]) == ("trainer.kubeflow.org", "ClusterTrainingRuntime")
    assert reference["name"] == runtime["metadata"]["name"] and reference["name"].startswith("eks-ddp-training-mnist-ddp-")
    assert job["spec"]["trainer"]["numNodes"] == 3 and job["spec"]["trainer"]["numProcPerNode"] == 1
    pod = trainjob.pod_spec(job, runtime)
    (container,) = pod["containers"]
    assert container["name"] == "node" and container["image"] == "registry/eks-ddp-trainer:1"
    assert container["command"][:4] == ["torchrun", "-m", "eks_ddp.trainer", "train"]
    assert container["resources"]["limits"] == {"cpu": "63", "memory": "96Gi", "vpc.amazonaws.com/efa": "1"}
    assert pod["nodeSelector"] == {"vpc.amazonaws.com/efa.present": "true", "kubernetes.io/arch": "arm64"}
    assert pod["tolerations"] == [{"key": "training", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]
    assert pod["serviceAccountName"] == "trainer" and pod["terminationGracePeriodSeconds"] == 120
    assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in pod["volumes"]
    assert [c["name"] for c in pod["initContainers"]] == ["volume-permissions", "prepare-data"]


def test_the_torch_plugins_variables_reach_the_node_container_as_torchrun_reads_them() -> None:
    runtime, job = trainjob.render_runtime(JOB, GRAVITON), trainjob.render(JOB, GRAVITON)
    env = {e["name"]: e for e in trainjob.pod_spec(job, runtime)["containers"][0]["env"]}
    assert env["PET_NNODES"]["value"] == "3" and env["PET_NPROC_PER_NODE"]["value"] == "1"
    assert env["PET_MASTER_ADDR"]["value"] == "mnist-ddp-node-0-0.mnist-ddp" and env["PET_MASTER_PORT"]["value"] == "29500"
    rank = env["PET_NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert rank == "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    assert "PET_RDZV_CONF" in env  # ours, not reserved: the long rendezvous timeout survives


def test_a_node_loss_restarts_the_whole_jobset_within_the_budget() -> None:
    runtime = trainjob.render_runtime(JOB, GRAVITON)
    spec = runtime["spec"]["template"]["spec"]
    assert spec["failurePolicy"] == {"maxRestarts": 2}
    (replicated,) = spec["replicatedJobs"]
    assert replicated["template"]["spec"]["backoffLimit"] == 0
    assert replicated["template"]["spec"]["template"]["spec"]["restartPolicy"] == "Never"


def test_gpu_nodes_run_one_process_per_gpu() -> None:
    job = trainjob.render(JOB, P5)
    assert job["spec"]["trainer"]["numProcPerNode"] == 8
    limits = trainjob.render_runtime(JOB, P5)["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"][
        "template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "8" and limits["vpc.amazonaws.com/efa"] == "32"


def test_the_controllers_rules_refuse_what_the_schemas_accept() -> None:
    runtime, job = trainjob.render_runtime(JOB, GRAVITON), trainjob.render(JOB, GRAVITON)
    trainer = job["spec"]["trainer"]
    auto = {**job, "spec": {**job["spec"], "trainer": {k: v for k, v in trainer.items() if k != "numProcPerNode"}}}
    reserved = {**job, "spec": {**job["spec"], "trainer": {**trainer, "env": [{"name": "PET_NNODES", "value": "9"}]}}}
    unlabelled = trainjob.render_runtime(JOB, GRAVITON)
    unlabelled["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["metadata"]["labels"] = {}
    long = trainjob.render(replace(JOB, name="n" * 48, replicas=11), GRAVITON)  # "-node-0-10-abcde": 64
    for broken, runtime_used, expected in (
        (auto, runtime, "one process per requested CPU"),
        (reserved, runtime, "must not set ['PET_NNODES']"),
        (job, unlabelled, "nothing receives PET_* variables"),
        (long, runtime, "exceeds 63 characters"),
    ):
        errors = trainjob.admission_errors(broken, runtime_used)
        assert len(errors) == 1 and expected in errors[0], errors


def test_any_change_to_the_pods_is_a_new_runtime_and_the_same_run_resumes() -> None:
    """jobset.go (Trainer v2.3.0) never rebuilds a JobSet that exists: a changed runtime gets a new name, which
    changes the TrainJob's runtimeRef (so it is replaced); a change to the pods alone keeps the run's command and
    directories, so the new pods resume from the old ones' checkpoints."""
    runtime, job = trainjob.render_runtime(JOB, GRAVITON), trainjob.render(JOB, GRAVITON)
    relabelled = replace(GRAVITON, labels={**GRAVITON.labels, "team": "vision"})
    for changed_job, target in ((JOB, relabelled), (replace(JOB, node_losses=3), GRAVITON)):
        new_runtime, new_job = trainjob.render_runtime(changed_job, target), trainjob.render(changed_job, target)
        assert new_runtime["metadata"]["name"] != runtime["metadata"]["name"]
        assert new_job["spec"]["runtimeRef"]["name"] == new_runtime["metadata"]["name"]
        assert new_job["spec"]["trainer"]["command"] == job["spec"]["trainer"]["command"]  # same run id and paths
    assert trainjob.render_runtime(JOB, GRAVITON) == runtime  # and nothing else renames it

