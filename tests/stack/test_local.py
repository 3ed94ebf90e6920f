"""`make demo`'s path: the stack's rendered PyTorchJob run locally, on a tiny configuration."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from eks_ddp.infra.facts.catalogue import EFA_INSTANCE_TYPES
from eks_ddp.tools import stack_file
from eks_ddp.tools.local import render_for, replicas
from eks_ddp.tools.local_pods import pod_user
from eks_ddp.workloads.training_pod import TrainingJob
from tests.conftest import ROOT, trainer_env

pytestmark = pytest.mark.slow


def _tiny_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(stack_file.ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    dev = yaml.safe_load((stack_file.ROOT / "Pulumi.dev.yaml").read_text())
    dev["config"]["eks-ddp:job"].update(epochs=3, replicas=2)
    (project / "Pulumi.tiny.yaml").write_text(yaml.safe_dump(dev))
    return project


@pytest.mark.parametrize("operator", ["v1", "v2", "none"])
def test_each_pod_gets_its_engines_variables_pointed_at_this_machine(tmp_path: Path, operator: str) -> None:
    """The variables each engine gives pod i (the training operator's, the Trainer's torch plugin's, the Indexed
    Job's own with its completion index), with only the rendezvous address and port made local."""
    from eks_ddp.infra.addons.training_operator import OperatorKind
    from eks_ddp.tools.local import engine_job
    from eks_ddp.workloads.target import NodeTarget

    target = NodeTarget(EFA_INSTANCE_TYPES["c7g.16xlarge"], efa_interfaces=1, labels={})
    job = engine_job(OperatorKind(operator), TrainingJob(name="mnist-ddp", namespace="training", image="i:1"), target)
    pods = replicas(job, tmp_path, 29511)
    for rank, replica in enumerate(pods):
        variables = ("PET_NNODES", "PET_NODE_RANK", "PET_NPROC_PER_NODE", "PET_MASTER_ADDR", "PET_MASTER_PORT")
        assert {key: replica.env[key] for key in variables} == {
            "PET_NNODES": "2", "PET_NODE_RANK": str(rank), "PET_NPROC_PER_NODE": "1",
            "PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": "29511",
        }
    rendered = job.pods[0]["containers"][0]["command"]
    expected = [
        argument.replace("/shared", str(tmp_path), 1) if argument.startswith("/shared") else argument
        for argument in rendered
    ]
    expected[0] = str(Path(sys.executable).with_name("torchrun"))
    expected[expected.index("--dataset") + 1] = "digits"
    expected += ["--metrics-address", "127.0.0.1"]  # the pod's metrics port, on loopback here, a port of its own
    port = expected.index("--metrics-port") + 1
    expected[port] = pods[0].command[port]
    assert pods[0].command == expected  # the rendered command, with only the documented changes


def test_the_training_operators_own_variables_reach_its_pods() -> None:
    """v1.9.4 envvar.go: WORLD_SIZE counts every process, RANK counts Workers from 1, MASTER_ADDR names the Master."""
    job, _ = render_for("dev")
    master, worker = ({e["name"]: e.get("value") for e in pod["containers"][0]["env"]} for pod in job.pods)
    assert (master["RANK"], worker["RANK"], worker["WORLD_SIZE"]) == ("0", "1", "2")
    assert master["MASTER_ADDR"] == worker["PET_MASTER_ADDR"] == "mnist-ddp-master-0" and master["MASTER_PORT"] == "23456"


@pytest.fixture
def open_workdir() -> Iterator[Path]:
    """A work directory the pods' user (uid 1000) can reach: pytest's own tmp_path is private to root."""
    workdir = Path(tempfile.mkdtemp(prefix="eks-ddp-local-"))
    workdir.chmod(0o755)
    yield workdir
    shutil.rmtree(workdir)


ON_THE_DEMO_RUN = pytest.mark.xdist_group("test_local.demo_run")
"""On the worker that has the run: `make test`'s workers (--dist loadgroup) would each run their own copy."""


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, subprocess.CompletedProcess[str]]]:
    """`make demo`'s command on the tiny stack, in its default work directory (runs/local/tiny under the directory it
    runs from, which the pods' user can reach): the project, that directory and what the run printed. One run serves
    the tests that read its results and the test that a later refused or failed run keeps them."""
    project, cwd = _tiny_project(tmp_path_factory.mktemp("demo")), Path(tempfile.mkdtemp(prefix="eks-ddp-local-"))
    cwd.chmod(0o755)
    command = [sys.executable, "-m", "eks_ddp.tools.local", "--stack", "tiny", "--project-dir", str(project)]
    command += ["--config", "eks-ddp:trainingOperator=v1"]
    yield project, cwd, subprocess.run(command, cwd=cwd, env=trainer_env(), capture_output=True, text=True, timeout=300)
    shutil.rmtree(cwd)


@pytest.mark.parametrize(
    ("operator", "kind"),
    [pytest.param("v1", "PyTorchJob", marks=ON_THE_DEMO_RUN), ("v2", "TrainJob"), ("none", "Indexed Job")],
)
def test_tiny_stack_job_runs_locally_and_is_evaluated(
    tmp_path: Path, open_workdir: Path, request: pytest.FixtureRequest, operator: str, kind: str
) -> None:
    """v1 reads the demo run (the default work directory); the others run with --workdir."""
    if operator == "v1":
        _, cwd, result = request.getfixturevalue("demo_run")
        workdir = cwd / "runs" / "local" / "tiny"
    else:
        project, workdir = _tiny_project(tmp_path), open_workdir / "work"
        command = [sys.executable, "-m", "eks_ddp.tools.local", "--stack", "tiny", "--project-dir", str(project)]
        command += ["--workdir", str(workdir), "--config", f"eks-ddp:trainingOperator={operator}"]
        result = subprocess.run(command, cwd=ROOT, env=trainer_env(), capture_output=True, text=True, timeout=300)
    job, _ = render_for("dev")
    user = pod_user(job.pods[0], open_workdir)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith(f"Running {kind} mnist-ddp of stack tiny locally: 2 replicas")
    (output,) = (workdir / "shared" / "runs" / "mnist-ddp").iterdir()  # the run's own directory, named by its run id
    summary = json.loads((output / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["epochs"] == 3 and summary["dataset"] == "digits"
    assert "Accuracy for class: 0" in result.stdout
    evaluation = json.loads((output / "evaluation.json").read_text())
    assert evaluation["accuracy"] == pytest.approx(summary["test_accuracy"]) and evaluation["run"] == summary["run"]
    # The pods' root step ran first, side by side, and handed the job's directories to the trainer's user.
    assert "Init containers, side by side in 2 pods: volume-permissions (as root)" in result.stdout
    if os.geteuid() == 0:
        assert (workdir / "shared").stat().st_uid == 0
        run = f"mnist-ddp/{output.name}"
        assert all(
            (workdir / "shared" / d).stat().st_uid == 1000
            for d in ("data", "data/mnist", f"runs/{run}", f"checkpoints/{run}")
        )
        # As in the cluster, the trainer wrote as uid 1000 (setpriv is part of util-linux, on every Debian).
        assert user.uid == 1000
        assert (output / "model.pt").stat().st_uid == 1000


def test_a_missing_permissions_step_fails_the_demo_as_it_fails_the_cluster(
    tmp_path: Path, open_workdir: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """One pod shows it (a second would fail the same way, at twice the cost): the trainer's user cannot write."""
    from eks_ddp.tools import local

    project = _tiny_project(tmp_path)
    job, evaluation = render_for("tiny", project, {"eks-ddp:job.replicas": "1"})
    if os.geteuid() != 0:
        pytest.skip("needs root, to run the pods' containers as uid 1000 on a root-owned claim")
    for pod in job.pods:
        pod["initContainers"] = [c for c in pod["initContainers"] if c["name"] != "volume-permissions"]
    monkeypatch.setattr(local, "render_for", lambda stack, project_dir, override: (job, evaluation))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert local.run("tiny", open_workdir / "work", project) == 1
    assert "not writable (Permission denied)" in capfd.readouterr().err


def test_init_containers_run_locally_with_the_claim_mapped(tmp_path: Path) -> None:
    from eks_ddp.tools.local_pods import init_steps

    job, evaluation = render_for("dev")
    assert evaluation is not None
    pod = job.pods[1]
    (step,) = init_steps(pod, tmp_path, skipped={"prepare-data"})
    assert step.name == "volume-permissions" and step.as_root and step.command[:2] == ["sh", "-c"]
    assert (
        f"mkdir -p {tmp_path}/data {tmp_path}/data/mnist {tmp_path}/runs/mnist-ddp/" in step.command[2]
        and "/shared" not in step.command[2]
    )
    assert [s.name for s in init_steps(evaluation["spec"]["template"]["spec"], tmp_path, skipped=set())] == [
        "volume-permissions",
        "wait-for-training",
    ]


def test_a_gpu_jobs_processes_are_scaled_to_this_machine_and_the_output_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A p5 pod runs 8 torchrun workers; 2 such pods on 2 CPUs must not start 16 ranks while printing "2 replicas"."""
    from eks_ddp.infra.addons.training_operator import OperatorKind
    from eks_ddp.tools.local import cluster_processes, describe_ranks, engine_job
    from eks_ddp.workloads.target import NodeTarget

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    p5 = NodeTarget(EFA_INSTANCE_TYPES["p5.48xlarge"], efa_interfaces=32, labels={})
    job = engine_job(OperatorKind.V1, TrainingJob(name="llm", namespace="training", image="img:1"), p5)
    assert cluster_processes(job) == 8
    assert {replica.env["PET_NPROC_PER_NODE"] for replica in replicas(job, tmp_path, 29500)} == {"1"}
    assert (
        describe_ranks(job)
        == "2 replicas x 1 process(es) per pod = 2 ranks; 8 per pod in the cluster (one per GPU), scaled to 2 CPUs here"
    )
    command = replicas(job, tmp_path, 29500)[0].command
    assert command[command.index("--global-batch-size") + 1] == str(128 * 2 * 8)  # the cluster's, kept by accumulation
    assert command[command.index("--device") + 1] == "auto"  # the pod's `cuda` would stop on this CPU machine


def test_the_workshops_elastic_job_trains_through_torchruns_elastic_rendezvous(open_workdir: Path) -> None:
    """`make demo STACK=workshop`: the job's 4 pods meet in torchrun's c10d rendezvous with the job's min and max
    (PET_NNODES=2:4, as the operator sets it), on 127.0.0.1, and train as 4 ranks; the evaluation follows."""
    workdir = open_workdir / "work"
    job, _ = render_for("workshop")
    pods = replicas(job, workdir, 29533)
    assert [(p.env["PET_NNODES"], p.env["PET_RDZV_ENDPOINT"], p.env["PET_RDZV_BACKEND"]) for p in pods] == [
        ("2:4", "127.0.0.1:29533", "c10d")
    ] * 4
    assert not {"RANK", "WORLD_SIZE", "MASTER_ADDR"} & {k for pod in job.pods for k in _variables(pod)}
    command = [sys.executable, "-m", "eks_ddp.tools.local", "--stack", "workshop", "--workdir", str(workdir)]
    command += ["--config", "eks-ddp:job.epochs=2"]
    result = subprocess.run(command, cwd=ROOT, env=trainer_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith(
        "Running PyTorchJob cifar10-elastic of stack workshop locally: 4 replicas x 1 process(es) per pod = 4 ranks; "
        "elastic: torchrun's c10d rendezvous admits 2 to 4 pods"
    )
    (output,) = (workdir / "shared" / "runs" / "cifar10-elastic").iterdir()
    summary = json.loads((output / "summary.json").read_text())
    assert summary["world_size"] == 4 and summary["epochs"] == 2
    assert json.loads((output / "evaluation.json").read_text())["run"] == summary["run"]


def _variables(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["containers"][0].get("env", [])}


def test_a_stack_whose_script_lives_only_in_its_image_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Pulumi.trainium.yaml's Neuron script comes from the user's image: the local run names the key and what to do
    instead of letting torchrun fail in every pod."""
    from eks_ddp.tools import local

    assert local.main(["--stack", "trainium", "--workdir", str(tmp_path / "work")]) == 2
    assert capsys.readouterr().err == (
        f"error: eks-ddp:job.script: 'train_neuron.py' is not allowed; the local run starts it from {Path.cwd()}, "
        "where there is no such file (in the cluster it comes from eks-ddp:image); copy your script here to run the "
        "job locally\n"
    )
    assert not (tmp_path / "work").exists()


def _files(directory: Path) -> dict[str, bytes]:
    """Every file under `directory` with its content: what a user would find there."""
    return {str(path.relative_to(directory)): path.read_bytes() for path in directory.rglob("*") if path.is_file()}


@ON_THE_DEMO_RUN
def test_a_refused_input_or_a_failed_run_never_costs_the_last_good_runs_results(
    demo_run: tuple[Path, Path, subprocess.CompletedProcess[str]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`make demo` after a good run: a refused CONFIG touches no file, and a run that fails leaves the good run's
    model, checkpoints, evaluation and events where they were (the failed one beside them, under `.failed`)."""
    from eks_ddp.tools import local

    project, cwd, result = demo_run
    assert result.returncode == 0, result.stderr[-3000:]
    monkeypatch.chdir(cwd)  # the default work directory, runs/local/<stack>, is relative to it
    demo = ["--stack", "tiny", "--project-dir", str(project), "--config", "eks-ddp:trainingOperator=v1"]
    good = cwd / "runs" / "local" / "tiny"
    kept = _files(good)
    assert {"model.pt", "evaluation.json", "summary.json"} <= {Path(name).name for name in kept}
    assert any("/checkpoints/" in f"/{name}" for name in kept) and any("tfevents" in name for name in kept)

    assert local.main([*demo, "--config", "eks-ddp:job.replicas=two"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "error: eks-ddp:job.replicas: 'two' is not allowed; give a whole number"
    )
    assert _files(good) == kept

    def failing(job: local.EngineJob, shared: Path, port: int) -> list[local.Replica]:
        started = replicas(job, shared, port)
        return [local.Replica(r.index, [sys.executable, "-c", "raise SystemExit(3)"], r.env) for r in started]

    monkeypatch.setattr(local, "replicas", failing)
    assert local.main(demo) == 1
    assert _files(good) == kept
    assert (good.parent / "tiny.failed" / "shared").is_dir()
    assert "runs/local/tiny.failed" in capsys.readouterr().err


def test_a_run_killed_before_it_could_put_the_good_run_back_is_mended_by_the_next(tmp_path: Path) -> None:
    """kill -9 leaves the good run in `.previous` and a partial one in its place: the next run starts from that."""
    from eks_ddp.tools.local import keeping_the_last_good_run

    workdir = tmp_path / "dev"
    (tmp_path / "dev.previous").mkdir()
    (tmp_path / "dev.previous" / "model.pt").write_text("good")
    workdir.mkdir()
    (workdir / "partial").write_text("killed")
    assert keeping_the_last_good_run(workdir, lambda here: 3 if not here.exists() else 0) == 3  # fresh, then fails
    assert (workdir / "model.pt").read_text() == "good" and not (tmp_path / "dev.previous").exists()
    assert [path.name for path in (tmp_path / "dev.failed").iterdir()] == ["partial"]
    assert keeping_the_last_good_run(workdir, lambda here: here.mkdir() or 0) == 0
    assert list(workdir.iterdir()) == [] and not (tmp_path / "dev.previous").exists()


def test_each_pod_serves_its_metrics_on_a_port_of_its_own_here(tmp_path: Path) -> None:
    """In the cluster every pod has its own address for port 9300; here the pods share loopback, so each gets its own
    port, or every pod but the first would warn `metrics are not served: port 9300: Address already in use`."""
    job, _ = render_for("workshop")  # 4 pods
    ports = [pod.command[pod.command.index("--metrics-port") + 1] for pod in replicas(job, tmp_path, 29500)]
    assert len(set(ports)) == len(ports) == 4, ports
    assert {pod.command[pod.command.index("--metrics-address") + 1] for pod in replicas(job, tmp_path, 1)} == {
        "127.0.0.1"
    }
