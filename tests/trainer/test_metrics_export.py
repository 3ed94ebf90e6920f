"""The trainer's Prometheus metrics, scraped from real runs on 127.0.0.1 and parsed with prometheus_client's own
parser of the exposition format: the values move while the run trains, the names follow Prometheus' conventions,
and every pod the stack's PodMonitor selects serves the port it declares."""

import math
import re
import socket
import statistics
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from eks_ddp.tools.local import EngineJob, engine_job, local_job, replicas
from eks_ddp.trainer.metrics_export import PREFIX, MetricsExport, scrape
from eks_ddp.workloads import pytorchjob
from eks_ddp.workloads.training_pod import METRICS_PORT, pod_monitor
from tests.conftest import ROOT, free_port, run_trainer, trainer_command, trainer_env

pytestmark = pytest.mark.slow

ARGS = ["train", "--dataset", "digits", "--epochs", "4", "--batch-size", "16", "--log-every", "2",
        "--checkpoint-every", "40", "--metrics-address", "127.0.0.1"]


def _scrape(port: int) -> tuple[dict[str, float], float] | None:
    """One scrape and how long it took; None if nobody listens yet."""
    started = time.perf_counter()
    try:
        samples = scrape(f"http://127.0.0.1:{port}/metrics")
    except OSError:
        return None
    return samples, time.perf_counter() - started


def test_a_training_run_exposes_metrics_that_move(tmp_path: Path) -> None:
    port = free_port()
    command = trainer_command([*ARGS, "--output-dir", str(tmp_path / "run"), "--metrics-port", str(port)], nproc=2)
    log = (tmp_path / "stderr.log").open("w+")  # a pipe nobody reads while polling would fill and stop the run
    process = subprocess.Popen(command, env=trainer_env(), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log, text=True)
    scrapes, latencies = [], []
    deadline = time.monotonic() + 240
    while process.poll() is None and time.monotonic() < deadline:
        result = _scrape(port)
        if result is not None and result[0].get(f"{PREFIX}_step", 0) > 0:
            scrapes.append(result[0])
            latencies.append(result[1])
        time.sleep(0.05)
    process.wait(timeout=60)
    log.seek(0)
    stderr = log.read()
    log.close()
    assert process.returncode == 0, stderr[-3000:]
    assert f"metrics: http://127.0.0.1:{port}/metrics" in stderr
    assert len(scrapes) >= 5, f"only {len(scrapes)} scrapes during the run"
    first, last = scrapes[0], scrapes[-1]
    steps = [s[f"{PREFIX}_step"] for s in scrapes]
    assert steps == sorted(steps) and last[f"{PREFIX}_step"] > first[f"{PREFIX}_step"]
    assert last[f"{PREFIX}_images_total"] > first[f"{PREFIX}_images_total"]
    assert last[f"{PREFIX}_eta_seconds"] < first[f"{PREFIX}_eta_seconds"]
    assert last[f"{PREFIX}_steps"] == first[f"{PREFIX}_steps"] > last[f"{PREFIX}_step"] - 1
    assert all(math.isfinite(s[f"{PREFIX}_loss"]) and s[f"{PREFIX}_loss"] > 0 for s in scrapes)
    assert last[f"{PREFIX}_loss"] < first[f"{PREFIX}_loss"]  # it learns
    assert first[f"{PREFIX}_last_checkpoint_step"] == -1 and last[f"{PREFIX}_last_checkpoint_step"] >= 40
    assert 0 < last[f"{PREFIX}_test_accuracy_ratio"] <= 1
    assert last[f"{PREFIX}_restarts_total"] == 0
    assert last[f'{PREFIX}_run_info{{node_rank=0,run_name={tmp_path / "run"},world_size=2}}'] == 1
    print(f"\n{len(scrapes)} scrapes, {len(last)} samples each; latency median "
          f"{1000 * statistics.median(latencies):.2f} ms, max {1000 * max(latencies):.2f} ms")


def test_the_names_follow_prometheus_conventions() -> None:
    metrics = MetricsExport(0, "127.0.0.1", "run", 2, 1, 1, 100, 64)
    try:
        metrics.interval(10, 1, 0.5, 0.001, 640.0, 10)
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics.port}/metrics", timeout=2) as response:
            families = list(text_string_to_metric_families(response.read().decode()))
    finally:
        metrics.close()
    samples = {sample.name: sample.value for family in families for sample in family.samples}
    assert all(name.startswith(f"{PREFIX}_") for name in samples)
    assert {f.name for f in families if f.type == "counter"} == {f"{PREFIX}_images", f"{PREFIX}_restarts"}
    assert samples[f"{PREFIX}_restarts_total"] == 1 and samples[f"{PREFIX}_images_total"] == 640
    assert samples[f"{PREFIX}_eta_seconds"] == pytest.approx(90 * 64 / 640.0)
    assert 0 <= samples[f"{PREFIX}_last_checkpoint_age_seconds"] < 60


def test_a_port_in_use_is_a_warning_and_the_run_trains(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_trainer(["train", "--dataset", "digits", "--epochs", "1", "--output-dir", str(tmp_path / "run"),
                              "--metrics-port", str(port), "--metrics-address", "127.0.0.1"])
    assert result.returncode == 0, result.stderr
    assert f"metrics are not served: port {port}: Address already in use" in result.stderr
    assert (tmp_path / "run" / "model.pt").exists()


def _selected_pods() -> EngineJob:
    """The dev stack's training pods as its PyTorchJob makes them (Master, then Workers) and the local run starts
    them, each checked to be selected by the job's PodMonitor, to declare the monitor's port and to pass it on."""
    local = local_job("dev")
    templates = pytorchjob.render(local.job, local.target)["spec"]["pytorchReplicaSpecs"]
    templates = [templates["Master"]["template"]] + [templates["Worker"]["template"]] * templates["Worker"]["replicas"]
    monitor = pod_monitor(local.job)["spec"]
    (endpoint,) = monitor["podMetricsEndpoints"]
    selected = [t for t in templates if monitor["selector"]["matchLabels"].items() <= t["metadata"]["labels"].items()]
    assert len(selected) == len(templates) == 2
    for template in selected:
        (container,) = template["spec"]["containers"]
        (port,) = [p["containerPort"] for p in container["ports"] if p["name"] == endpoint["port"]]
        assert port == METRICS_PORT == int(container["command"][container["command"].index("--metrics-port") + 1])
    return engine_job(local.operator, local.job, local.target)


def _node_rank(samples: dict[str, float]) -> str | None:
    found = (re.match(rf"{PREFIX}_run_info{{node_rank=(\d+),", name) for name in samples)
    return next((match.group(1) for match in found if match), None)


def test_every_pod_the_pod_monitor_selects_serves_the_port_it_declares(tmp_path: Path) -> None:
    """kube-prometheus-stack's TargetDown fires when a selected pod's port does not answer. The dev stack's 2-pod
    job runs here as stack.local runs it; the pods share this machine's loopback, so each one's declared port is
    given its own local port (in the cluster each pod has its own address)."""
    engine = _selected_pods()
    ports = [free_port() for _ in engine.pods]
    running, logs = [], []
    for replica, port in zip(replicas(engine, tmp_path, free_port()), ports, strict=True):
        command = [*replica.command]
        command[command.index("--metrics-port") + 1] = str(port)
        logs.append((tmp_path / f"pod-{replica.index}.log").open("w+"))  # a pipe nobody reads would stop the run
        env = {**trainer_env(), **replica.env}
        running.append(subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=logs[-1]))
    rounds, steps = 0, [0.0] * len(ports)
    deadline = time.monotonic() + 240
    while any(process.poll() is None for process in running) and time.monotonic() < deadline:
        scrapes = [_scrape(port) for port in ports]
        if all(scrapes):  # every target up at once
            samples = [result[0] for result in scrapes if result]
            assert [_node_rank(pod) for pod in samples] == ["0", "1"]  # Master, then Worker
            steps = [max(step, pod.get(f"{PREFIX}_step", 0)) for step, pod in zip(steps, samples)]
            rounds += 1
        time.sleep(0.05)
    codes = [process.wait(timeout=60) for process in running]
    stderr = ""
    for log in logs:
        log.seek(0)
        stderr += log.read()[-2000:]
        log.close()
    assert codes == [0, 0], stderr
    assert "metrics are not served" not in stderr
    assert rounds >= 3, f"both targets up in only {rounds} scrape rounds"
    assert min(steps) >= 10, steps  # every pod's values move, not only rank 0's
