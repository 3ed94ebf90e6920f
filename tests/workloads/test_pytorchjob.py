from dataclasses import replace

import jsonschema
import pytest

from eks_ddp.infra.facts.catalogue import EFA_INSTANCE_TYPES
from eks_ddp.workloads.pytorchjob import admission_errors, pod_specs, render
from eks_ddp.workloads.target import NodeTarget
from eks_ddp.workloads.job import TrainingJob, validate_name
from eks_ddp.workloads.training_pod import run_id, trainer_command
from tests.workloads.schemas import validate_pytorchjob

GRAVITON = NodeTarget(EFA_INSTANCE_TYPES["c7g.16xlarge"], efa_interfaces=1, labels={"vpc.amazonaws.com/efa.present": "true"},
                      taints=[{"key": "training", "value": "true", "effect": "NO_SCHEDULE"}])
P5 = NodeTarget(EFA_INSTANCE_TYPES["p5.48xlarge"], efa_interfaces=32, labels={"vpc.amazonaws.com/efa.present": "true"})
JOB = TrainingJob(name="mnist-ddp", namespace="training", image="123456789012.dkr.ecr.us-east-1.amazonaws.com/eks-ddp-trainer:1", replicas=3)


def test_static_job_on_graviton_validates_and_is_shaped_for_cpu() -> None:
    manifest = render(JOB, GRAVITON)
    validate_pytorchjob(manifest)
    assert admission_errors(manifest) == []
    spec = manifest["spec"]
    assert spec["nprocPerNode"] == "1"
    # One node loss restarts every replica's torchrun once, in the operator's counting: 3 replicas, 3 restarts.
    assert spec["runPolicy"] == {"cleanPodPolicy": "Running", "backoffLimit": 4}
    assert spec["pytorchReplicaSpecs"]["Master"]["replicas"] == 1 and spec["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    pod = spec["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["name"] == "pytorch" and container["command"][:4] == ["torchrun", "-m", "eks_ddp.trainer", "train"]
    assert not any(flag in container["command"] for flag in ("--nnodes", "--master-addr", "--nproc-per-node"))
    assert container["resources"]["requests"] == {"cpu": "63", "memory": "3015Mi", "vpc.amazonaws.com/efa": "1"}
    assert container["resources"]["limits"] == {"cpu": "63", "memory": "96Gi", "vpc.amazonaws.com/efa": "1"}
    assert {"name": "OMP_NUM_THREADS", "value": "63"} in container["env"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in pod["volumes"]
    assert pod["nodeSelector"] == {"vpc.amazonaws.com/efa.present": "true", "kubernetes.io/arch": "arm64"}
    assert pod["tolerations"] == [{"key": "training", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]
    assert pod["serviceAccountName"] == "trainer" and pod["terminationGracePeriodSeconds"] >= 60
    assert spec["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "OnFailure"


def test_gpu_job_runs_one_process_per_gpu_with_every_efa_interface() -> None:
    manifest = render(TrainingJob(name="llm", namespace="training", image="img:1"), P5)
    validate_pytorchjob(manifest)
    assert manifest["spec"]["nprocPerNode"] == "8"
    container = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["vpc.amazonaws.com/efa"] == "32" and container["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert not any(name.startswith("hugepages-") for name in container["resources"]["limits"])  # no node allocates them
    assert not any(variable["name"] == "OMP_NUM_THREADS" for variable in container["env"])
    env = {variable["name"]: variable["value"] for variable in container["env"]}
    assert env["FI_PROVIDER"] == "efa" and env["FI_EFA_USE_DEVICE_RDMA"] == "1"  # no silent TCP; GPUDirect RDMA
    assert env["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1" and int(env["TORCH_FR_BUFFER_SIZE"]) > 0
    assert env["TORCH_FR_DUMP_TEMP_FILE"].startswith("/shared/runs/llm/")  # the run's directory on the claim
    assert container["command"][-2:] == ["--device", "cuda"]  # no CUDA in the pod: one line, not CPU training


def test_rdma_only_where_efa_supports_rdma_read() -> None:
    """p3dn's and g5's EFA has no RDMA read: FI_EFA_USE_DEVICE_RDMA=1 there makes libfabric fail."""
    from eks_ddp.infra.facts.catalogue import INSTANCE_TYPES

    for name, expected in (("p3dn.24xlarge", False), ("g5.8xlarge", False), ("p4de.24xlarge", True), ("p5en.48xlarge", True)):
        target = NodeTarget(INSTANCE_TYPES[name], efa_interfaces=INSTANCE_TYPES[name].network_cards)
        spec = render(TrainingJob(name="g", namespace="training", image="i"), target)["spec"]
        env = {v["name"]: v["value"] for v in spec["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["env"]}
        assert ("FI_EFA_USE_DEVICE_RDMA" in env) is expected, name
        assert env["FI_PROVIDER"] == "efa" and spec["nprocPerNode"] == str(INSTANCE_TYPES[name].gpus)


def test_elastic_job_has_workers_only_and_c10d_rendezvous() -> None:
    manifest = render(TrainingJob(name="elastic", namespace="training", image="img:1", replicas=4, elastic_min_replicas=2), GRAVITON)
    validate_pytorchjob(manifest)
    assert admission_errors(manifest) == []
    assert list(manifest["spec"]["pytorchReplicaSpecs"]) == ["Worker"]
    policy = manifest["spec"]["elasticPolicy"]
    assert policy == {"rdzvBackend": "c10d", "rdzvId": "training-elastic", "minReplicas": 2, "maxReplicas": 4, "maxRestarts": 3}


def test_an_elastic_jobs_pods_get_the_operators_rendezvous_variables_and_no_ranks() -> None:
    """training operator v1.9.4 elastic.go and envvar.go: no Master, so no MASTER_*, RANK or WORLD_SIZE; torchrun's
    c10d rendezvous on Worker-0's pytorchjob-port (23456) with PET_NNODES=min:max."""
    job = TrainingJob(name="elastic", namespace="training", image="img:1", replicas=4, elastic_min_replicas=2)
    pods = pod_specs(render(job, GRAVITON))
    injected = {
        "PYTHONUNBUFFERED": "1", "PET_NPROC_PER_NODE": "1", "PET_RDZV_ENDPOINT": "elastic-worker-0:23456",
        "PET_RDZV_BACKEND": "c10d", "PET_NNODES": "2:4", "PET_MAX_RESTARTS": "3", "PET_RDZV_ID": "training-elastic",
    }
    assert len(pods) == 4
    for pod in pods:
        env = [(e["name"], e.get("value")) for e in pod["containers"][0]["env"]]
        assert env[-len(injected):] == list(injected.items())  # appended after the pod's own, in the operator's order
        assert not {"MASTER_ADDR", "RANK", "WORLD_SIZE", "PET_NODE_RANK"} & {name for name, _ in env}


def test_schema_rejects_an_integer_nproc_per_node() -> None:
    manifest = render(JOB, GRAVITON)
    manifest["spec"]["nprocPerNode"] = 1
    with pytest.raises(jsonschema.ValidationError):
        validate_pytorchjob(manifest)


@pytest.mark.parametrize(
    ("mutate", "error"),
    [
        (lambda m: m["spec"]["pytorchReplicaSpecs"].update(Chief={"replicas": 1}), "replica types ['Chief'] are not Master or Worker"),
        (lambda m: m["spec"]["pytorchReplicaSpecs"]["Master"].update(replicas=2), "Master must have exactly 1 replica"),
        (lambda m: m["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0].update(name="main"), "Master has no container named pytorch"),
        (lambda m: m["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0].update(image=""), "Worker has a container without an image"),
        (lambda m: m["spec"]["pytorchReplicaSpecs"].pop("Master"), "a static job needs exactly one Master"),
        (lambda m: m["spec"].update(nprocPerNode=1), "nprocPerNode must be a string"),
        (lambda m: m["spec"].pop("nprocPerNode"), "nprocPerNode is 'auto' (on CPU nodes torchrun then starts one process per host vCPU)"),
        (lambda m: m["spec"].update(elasticPolicy={"standalone": True}) or m["spec"]["pytorchReplicaSpecs"].pop("Worker"), "an elastic job needs Workers"),
    ],
)
def test_admission_rules(mutate, error: str) -> None:  # noqa: ANN001
    manifest = render(JOB, GRAVITON)
    mutate(manifest)
    assert error in admission_errors(manifest)


@pytest.mark.parametrize(("name", "ok"), [("mnist-ddp", True), ("MNIST", False), ("1job", False), ("a" * 48, True), ("a" * 49, False), ("job_1", False)])
def test_job_names(name: str, ok: bool) -> None:
    assert (validate_name(name) is None) is ok


def test_command_uses_the_shared_claim_for_data_checkpoints_and_model() -> None:
    command = trainer_command(JOB, GRAVITON)
    run = run_id(JOB, GRAVITON)
    assert command[command.index("--data-dir") + 1] == "/shared/data/mnist"
    assert command[command.index("--checkpoint-dir") + 1] == f"/shared/checkpoints/mnist-ddp/{run}"
    assert command[command.index("--output-dir") + 1] == f"/shared/runs/mnist-ddp/{run}"
    assert command[command.index("--run-name") + 1] == f"training/mnist-ddp/{run}"


def test_the_global_batch_is_the_full_sized_jobs_and_fixed_for_the_run() -> None:
    """3 pods x 1 process x 128 on Graviton; 2 pods x 8 GPUs x 128 on p5: the trainer keeps it on fewer ranks."""
    for job, target, expected in ((JOB, GRAVITON, 384), (TrainingJob(name="llm", namespace="training", image="i"), P5, 2048)):
        command = trainer_command(job, target)
        assert command[command.index("--global-batch-size") + 1] == str(expected)


def test_a_deploy_that_redefines_the_run_starts_a_new_one_beside_the_old() -> None:
    """Same definition, same run (a restart resumes it); another epochs, batch, replica count or extra
    argument is another run in its own directories, so the trainer never has to refuse a changed resume."""
    same = run_id(replace(JOB, image="another:2", checkpoint_every=10, node_losses=2), GRAVITON)
    assert same == run_id(JOB, GRAVITON)
    changed = [replace(JOB, epochs=11), replace(JOB, batch_size=64), replace(JOB, replicas=2), replace(JOB, extra_args=("--lr", "0.01"))]
    assert len({run_id(job, GRAVITON) for job in changed} | {same}) == 5


def test_dataset_choices_match_the_trainers_command_line() -> None:
    from eks_ddp.trainer.datasets import DATASETS as TRAINER_DATASETS
    from eks_ddp.trainer.sources import SOURCES
    from eks_ddp.workloads.job import DATASETS, DOWNLOADABLE_DATASETS

    assert DATASETS == TRAINER_DATASETS and DOWNLOADABLE_DATASETS == tuple(SOURCES)


def test_pods_fetch_or_verify_their_data_before_training() -> None:
    pod = render(JOB, GRAVITON)["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    permissions, init = pod["initContainers"]
    assert permissions["name"] == "volume-permissions"  # first: the directories exist and are the trainer's
    assert init["command"] == ["python", "-m", "eks_ddp.trainer", "prepare-data", "--dataset", "mnist", "--data-dir", "/shared/data/mnist"]
    offline = render(TrainingJob(name="d", namespace="training", image="img", dataset="digits"), GRAVITON)
    assert [c["name"] for c in offline["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["initContainers"]] == [
        "volume-permissions"
    ]


def test_training_pods_fit_what_each_engine_leaves_them_with_a_whole_cpu() -> None:
    """Sized from the node's allocatable (infra.facts.allocatable) less the daemon sets: the CPU tutorial's 2-vCPU m5.large
    gets 1 CPU and 5 GiB; c7g.16xlarge 114 GiB on a managed node but 109 on Karpenter's (its efa-only interface on
    card 0 leaves 688 ENI-limited pods to reserve for), 14,082 MiB less with EFA (its pre-allocated huge pages);
    a 2-GiB type is refused, never cpu "0"."""
    from eks_ddp.infra.facts.allocatable import NodeLauncher
    from eks_ddp.infra.facts.catalogue import INSTANCE_TYPES
    from eks_ddp.infra.facts.node_room import pod_room
    from eks_ddp.workloads.target import too_small

    m5 = INSTANCE_TYPES["m5.large"]  # 2000 - 70 - 400 m; (8192 - 615) - (11 x 29 + 255) - 100 - 768 MiB
    assert (pod_room(m5), too_small(m5)) == ((1, 5), None)
    graviton = INSTANCE_TYPES["c7g.16xlarge"]  # 64000 - 230 - 400 m; 121182 - 3005 (or 7823) - 100 - 768 MiB
    assert pod_room(graviton, NodeLauncher.MANAGED_NODE_GROUP, 0) == (63, 114)
    assert pod_room(graviton, NodeLauncher.MANAGED_NODE_GROUP, 1) == (63, 100)  # 114 GiB less 14,082 MiB of pages
    assert pod_room(graviton, NodeLauncher.KARPENTER, 1) == pod_room(graviton, None, 1) == (63, 96)
    assert too_small(INSTANCE_TYPES["t4g.small"]) is not None


def test_a_training_pod_asks_for_the_memory_its_ranks_need_and_may_use_its_room() -> None:
    """The pods asked for their whole room (c7g.16xlarge 96 GiB, p5 1,960 GiB), within a few per cent of an estimate
    real nodes differ from. Now: torchrun, each rank's measured peak with its dataset (and 4 GiB per GPU process), and
    half as much again, requested; the room is the limit. CPUs and devices still keep the node to the pod."""
    from eks_ddp.infra.facts.catalogue import INSTANCE_TYPES
    from eks_ddp.infra.facts.node_room import pod_room
    from eks_ddp.workloads.job import UserCode

    def memory(job: TrainingJob, target: NodeTarget) -> tuple[str, str]:
        container = render(job, target)["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
        return container["resources"]["requests"]["memory"], container["resources"]["limits"]["memory"]

    m5 = NodeTarget(INSTANCE_TYPES["m5.large"], efa_interfaces=0)
    assert memory(JOB, m5) == ("3015Mi", "5Gi")  # (650 + 1,360) x 1.5 MiB
    assert memory(replace(JOB, dataset="cifar10"), m5) == ("4455Mi", "5Gi")  # (650 + 2,320) x 1.5
    assert memory(replace(JOB, dataset="digits"), GRAVITON) == ("2235Mi", "96Gi")  # (650 + 840) x 1.5
    assert memory(JOB, P5) == ("66447Mi", f"{pod_room(P5.instance, None, 32)[1]}Gi")  # (8 x (1,360 + 4,096) + 650) x 1.5
    assert memory(replace(JOB, code=UserCode("train.py")), GRAVITON) == ("2235Mi", "96Gi")  # bare ranks: the user knows


def test_the_restart_budget_counts_node_losses_and_rendezvous_outlasts_a_scale_up() -> None:
    """backoffLimit must be one more than the restarts 2 node losses cost (the operator fails at >=); 600 s was
    shorter than a scale-up."""
    import dataclasses

    manifest = render(dataclasses.replace(JOB, node_losses=2), GRAVITON)
    assert manifest["spec"]["runPolicy"]["backoffLimit"] == 7
    env = {e["name"]: e["value"] for e in manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["env"]}
    assert env["PET_RDZV_CONF"] == "timeout=1800,join_timeout=1800"
    # torchrun SIGKILLs its workers 30 s after SIGTERM unless told otherwise: the pod grants 120 s for the checkpoint.
    grace = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert 30 < int(env["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"]) < grace


def test_the_memory_figures_hold_every_measured_run() -> None:
    """The figures come from benchmarks/pod_memory.py's runs (results file named in workloads.target): each is at least
    what was measured, and a pod's figure before its margin holds the whole measured pod, 2-rank pods included."""
    import json
    from pathlib import Path

    from eks_ddp.infra.facts.catalogue import INSTANCE_TYPES
    from eks_ddp.workloads.target import MEMORY_MARGIN, PROCESS_MIB, TORCHRUN_MIB, pod_memory_mib
    from eks_ddp.workloads.training_pod import DATASET_RANK_MIB, RANK_PEAK_MIB

    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "2026-11-25-pod-memory.jsonl"
    runs = [json.loads(line) for line in results.read_text().splitlines()]
    assert {run["dataset"] for run in runs} == set(RANK_PEAK_MIB) and RANK_PEAK_MIB["digits"] == PROCESS_MIB
    cpu = INSTANCE_TYPES["m5.large"]
    for run in runs:
        assert TORCHRUN_MIB >= run["torchrun_peak_mib"] and RANK_PEAK_MIB[run["dataset"]] >= run["rank_peak_mib"], run
        unmargined = pod_memory_mib(cpu, run["nproc"], DATASET_RANK_MIB[run["dataset"]]) / (1 + MEMORY_MARGIN)
        assert unmargined >= run["pod_peak_mib"], run
