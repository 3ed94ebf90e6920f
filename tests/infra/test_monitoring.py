"""eks-ddp:monitoring: what each choice installs, the dashboards checked against what the stack's exporters export,
the PodMonitor against prometheus-operator's CRD, and bad input refused in one line."""

import csv
import io
import json
import re
from datetime import date
from typing import Any

import pytest

from eks_ddp.infra.addons.prometheus_monitoring import (
    DCGM_COUNTERS,
    EFA_COUNTERS,
    dashboards,
    dcgm_values,
    efa_exporter_values,
)
from eks_ddp.tools import stack_file
from eks_ddp.stack.config import ConfigError, parse
from eks_ddp.tools.mocking import run_under_mocks
from eks_ddp.tools.mocking import Registration
from eks_ddp.tools.rehearsal import rehearse_values
from eks_ddp.trainer.metrics_export import PER_POD, PREFIX, MetricsExport
from eks_ddp.workloads.training_pod import METRICS_PORT_NAME
from tests.upstream import validate_against_crd

# PromQL words that are not metric names: functions, aggregations and their modifiers.
PROMQL_WORDS = {
    "sum",
    "by",
    "without",
    "rate",
    "increase",
    "avg",
    "max",
    "min",
    "count",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "label_values",
}


def exported_metrics() -> set[str]:
    """Every metric name something in the stack exports: the trainer (from its own registry), the DCGM fields the
    stack configures, and AWS's EFA collector's counters."""
    trainer = MetricsExport(0, "127.0.0.1", "run", 1, 0, 0, 1, 1)
    try:
        names = {sample.name for family in trainer.registry.collect() for sample in family.samples}
    finally:
        trainer.close()
    return names | {row[0] for row in DCGM_COUNTERS} | {f"node_amazonefa_{counter}" for counter in EFA_COUNTERS}


def metric_names(expression: str) -> set[str]:
    """The metric names a PromQL expression reads: identifiers outside label matchers, `by (...)` lists,
    ranges and template variables that are not functions or keywords."""
    stripped = re.sub(r"\{[^}]*\}|\[[^\]]*\]|\b(by|without|on|ignoring)\s*\([^)]*\)|\$\w+", " ", expression)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", stripped):
        called = stripped[match.end() :].lstrip().startswith("(")
        if not called and match.group() not in PROMQL_WORDS:
            names.add(match.group())
    return names


def _queries(dashboard: dict[str, Any]) -> list[str]:
    panels = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    variables = [re.sub(r"label_values\((\w+),.*", r"\1", v["query"]["query"]) for v in dashboard["templating"]["list"]]
    return panels + variables


def test_every_dashboard_query_names_a_metric_the_stack_exports() -> None:
    exported, boards = exported_metrics(), dashboards()
    assert set(boards) == {"training.json", "gpu.json", "fabric.json"}
    for file_name, dashboard in boards.items():
        for query in _queries(dashboard):
            names = metric_names(query)
            assert names, f"{file_name}: {query!r} names no metric"
            assert names <= exported, f"{file_name}: {query!r} reads {sorted(names - exported)}, which nothing exports"


def test_the_training_dashboard_draws_each_job_once_however_many_pods_serve_it() -> None:
    """Every pod of a job serves the job's values (trainer.metrics_export): a panel takes their max per job; the
    raw series would draw the job once per pod, and a sum would count it as many times."""
    for query in _queries(dashboards()["training.json"])[:-1]:
        job_wide = {name for name in metric_names(query) if name.startswith(PREFIX)} - set(PER_POD)
        assert set(re.findall(r"max by \(eks_ddp_job\) \((\w+)\{", query)) == job_wide, query
    assert metric_names("increase(eksddp_trainer_restarts_total[1h])") <= set(PER_POD)  # per pod: by pod


def test_the_check_catches_a_metric_nobody_exports() -> None:
    assert metric_names('sum by (instance) (rate(node_amazonefa_rx_bytes{instance=~"$node"}[1m]))') == {
        "node_amazonefa_rx_bytes"
    }
    assert metric_names("eksddp_trainer_step / eksddp_trainer_steps") == {"eksddp_trainer_step", "eksddp_trainer_steps"}
    assert not metric_names("DCGM_FI_DEV_GPU_UTILIZATION") <= exported_metrics()  # a misspelt field


def _registrations(stack: str, **config: object) -> list[Registration]:
    values, region = stack_file.load(stack)
    return run_under_mocks(parse({**values, **config}, region), stack=stack)


def _by_chart(registrations: list[Registration]) -> dict[str, Registration]:
    return {str(r.inputs["chart"]): r for r in registrations if r.type == "kubernetes:helm.sh/v3:Release"}


def test_prometheus_watches_the_training_pods_the_gpus_and_provisions_the_dashboards() -> None:
    registrations = _registrations("gpu")  # a stack with a job: prometheus by default
    charts = _by_chart(registrations)
    stack = charts["kube-prometheus-stack"]
    assert stack.inputs["version"] == "88.5.3" and stack.inputs["namespace"] == "monitoring"
    spec = stack.inputs["values"]["prometheus"]["prometheusSpec"]
    assert (
        spec["podMonitorSelectorNilUsesHelmValues"] is False
        and spec["serviceMonitorSelectorNilUsesHelmValues"] is False
    )
    assert "adminPassword" not in stack.inputs["values"]["grafana"]  # the chart generates one
    dcgm = charts["dcgm-exporter"]
    assert dcgm.inputs["version"] == "4.8.2" and stack.urn in dcgm.dependencies  # its ServiceMonitor needs the CRD
    assert dcgm.inputs["values"]["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in dcgm.inputs["values"][
        "tolerations"
    ]
    assert [line.split(",")[0] for line in dcgm.inputs["values"]["customMetrics"].splitlines()] == [
        row[0] for row in DCGM_COUNTERS
    ]
    maps = [r for r in registrations if r.type == "kubernetes:core/v1:ConfigMap" and "dashboard" in r.name]
    assert sorted(key for m in maps for key in m.inputs["data"]) == ["fabric.json", "gpu.json", "training.json"]
    assert all(m.inputs["metadata"]["labels"] == {"grafana_dashboard": "1"} for m in maps)
    (monitor,) = [r for r in registrations if r.inputs.get("kind") == "PodMonitor"]
    assert stack.urn in monitor.dependencies
    pods = [r for r in registrations if r.inputs.get("kind") == "PyTorchJob"][0]
    master = pods.inputs["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
    assert master["metadata"]["labels"].items() >= monitor.inputs["spec"]["selector"]["matchLabels"].items()
    ports = {p["name"]: p["containerPort"] for p in master["spec"]["containers"][0]["ports"]}
    command = master["spec"]["containers"][0]["command"]
    assert ports[METRICS_PORT_NAME] == int(command[command.index("--metrics-port") + 1])
    # The training dashboard selects on eks_ddp_job: Prometheus' sanitised name of the pod label the monitor keeps.
    assert monitor.inputs["spec"]["podTargetLabels"] == ["eks-ddp/job"]
    assert all('{eks_ddp_job=~"$job"}' in query for query in _queries(dashboards()["training.json"])[:-1])
    validate_against_crd(
        {k: monitor.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")},
        "monitoring.coreos.com_podmonitors-v0.93.0.yaml",
    )


# NVIDIA/dcgm-exporter chart 4.8.2 (tag 4.5.3-4.8.2), deployment/values.yaml: the exporter reads the file its `-f`
# argument names, and the chart mounts its ConfigMap's `metrics` key (templates/metrics-configmap.yaml: our
# `customMetrics`) over that very file (extraConfigMapVolumes, extraVolumeMounts: "mount ConfigMap by default", #351).
# templates/daemonset.yaml mounts the pod's API token only with pod labels, pod UIDs or DRA.
DCGM_DEFAULT_FILE = "/etc/dcgm-exporter/default-counters.csv"  # pkg/cmd/app.go: the `-f` flag's default
DCGM_CHART = {
    "arguments": ["-f", DCGM_DEFAULT_FILE],
    "extraConfigMapVolumes": [
        {
            "name": "exporter-metrics-volume",
            "configMap": {
                "name": "exporter-metrics-config-map",
                "items": [{"key": "metrics", "path": "default-counters.csv"}],
            },
        }
    ],
    "extraVolumeMounts": [
        {"name": "exporter-metrics-volume", "mountPath": DCGM_DEFAULT_FILE, "subPath": "default-counters.csv"}
    ],
    "kubernetes": {"enablePodLabels": False, "enablePodUID": False},
    "kubernetesDRA": {"enabled": False},
}


def _dcgm_counters_read(values: dict[str, Any]) -> list[list[str]]:
    """The rows the exporter reads with `values` over the chart's (Helm replaces lists; the maps read here are not in
    our values, so a shallow merge is Helm's). internal/pkg/counters/
    counter_config.go GetCounterSet: `-m <namespace>:<configmap>` reads through the API, and without a mounted token
    (rest.InClusterConfig) the exporter exits; else the `-f` file, ours only where the ConfigMap is mounted on it."""
    merged = {**DCGM_CHART, **values}
    arguments = merged["arguments"]
    token = merged["kubernetes"]["enablePodLabels"] or merged["kubernetes"]["enablePodUID"]
    assert "-m" not in arguments or token or merged["kubernetesDRA"]["enabled"], "-m without an API token: it exits"
    path = arguments[arguments.index("-f") + 1] if "-f" in arguments else DCGM_DEFAULT_FILE
    volumes = {v["name"]: v["configMap"] for v in merged["extraConfigMapVolumes"]}
    mounted = [m for m in merged["extraVolumeMounts"] if m["mountPath"] == path and m["name"] in volumes]
    assert mounted, f"{path} is the image's own file, not the stack's counters"
    config_map = volumes[mounted[0]["name"]]
    item = next(i for i in config_map["items"] if i["path"] == mounted[0]["subPath"])
    assert (config_map["name"], item["key"]) == ("exporter-metrics-config-map", "metrics")
    return [row for row in csv.reader(io.StringIO(merged["customMetrics"])) if row and not row[0].startswith("#")]


def test_the_dcgm_exporter_reads_the_counters_the_stack_sets() -> None:
    """The chart's own mount hands the exporter our `customMetrics`: no `-m` (which would need the API token the
    chart does not mount), three fields a row as the exporter's CSV reader wants (ExtractCounters)."""
    rows = _dcgm_counters_read(dcgm_values([]))
    assert [[field.strip() for field in row] for row in rows] == [list(row) for row in DCGM_COUNTERS]
    with pytest.raises(AssertionError, match="without an API token"):
        _dcgm_counters_read({**dcgm_values([]), "arguments": ["-m", "monitoring:exporter-metrics-config-map"]})
    with pytest.raises(AssertionError, match="the image's own file"):
        _dcgm_counters_read({**dcgm_values([]), "extraVolumeMounts": []})


def test_efa_counters_come_from_awss_exporter_when_its_image_is_given() -> None:
    image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/efa-node-exporter:1.0.0"
    values = efa_exporter_values(image, [])
    assert values["image"] == {
        "registry": "123456789012.dkr.ecr.us-east-1.amazonaws.com",
        "repository": "efa-node-exporter",
        "tag": "1.0.0",
    }
    assert values["extraArgs"] == ["--collector.disable-defaults", "--collector.amazonefa"]
    charts = _by_chart(_registrations("dev", efaExporterImage=image))
    exporter = charts["prometheus-node-exporter"]
    assert exporter.inputs["values"]["nodeSelector"] == {"vpc.amazonaws.com/efa.present": "true"}
    assert exporter.inputs["values"]["service"]["port"] != 9100  # beside the stack's own node exporter
    assert "prometheus-node-exporter" not in _by_chart(_registrations("dev"))


def test_the_efa_exporter_renders_with_a_tag_that_is_not_a_version() -> None:
    """prometheus-node-exporter 4.56.1 templates/daemonset.yaml: inside `if .Values.hostRootFsMount.enabled` (true by
    default) it runs `semverCompare ">=1.4.0-0" (coalesce .Values.version .Values.image.tag .Chart.AppVersion)`,
    which fails the render for `latest`, the tag AWS's Makefile gives the EFA exporter's image."""
    values = efa_exporter_values("123456789012.dkr.ecr.us-east-1.amazonaws.com/efa-node-exporter:latest", [])
    compared = values.get("hostRootFsMount", {}).get("enabled", True)
    version = values.get("version") or values["image"]["tag"]
    assert not compared or re.fullmatch(r"v?\d+\.\d+\.\d+.*", version), version


def test_cloudwatch_installs_the_add_on_with_its_agents_role() -> None:
    registrations = _registrations("dev", monitoring="cloudwatch")
    (addon,) = [
        r
        for r in registrations
        if r.type == "aws:eks/addon:Addon" and r.inputs["addonName"] == "amazon-cloudwatch-observability"
    ]
    role = next(r for r in registrations if r.type == "aws:iam/role:Role" and r.name == "eks-ddp-cloudwatch-role")
    assert addon.inputs["serviceAccountRoleArn"] == role.inputs["arn"]
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]["Condition"]["StringEquals"]
    assert "system:serviceaccount:amazon-cloudwatch:cloudwatch-agent" in trust.values()
    assert not _by_chart(registrations).get("kube-prometheus-stack")
    assert not [r for r in registrations if r.inputs.get("kind") == "PodMonitor"]


@pytest.mark.parametrize("stack", ["dev", "gpu"])
@pytest.mark.parametrize("monitoring", ["prometheus", "cloudwatch"])
def test_each_monitoring_passes_the_rehearsal(stack: str, monitoring: str) -> None:
    values, region = stack_file.load(stack)
    assert rehearse_values({**values, "monitoring": monitoring}, region, stack, date(2026, 11, 22)) == []


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "monitoring",
            "grafana",
            "eks-ddp:monitoring: 'grafana' is not allowed; use one of none, prometheus, cloudwatch",
        ),
        (
            "efaExporterImage",
            "efa-exporter",
            "eks-ddp:efaExporterImage: 'efa-exporter' is not allowed; use "
            "REGISTRY/REPOSITORY:TAG, such as 123456789012.dkr.ecr.us-east-1.amazonaws.com/efa-node-exporter:1.0.0",
        ),
    ],
)
def test_bad_monitoring_input_is_one_line_naming_the_key(key: str, value: str, message: str) -> None:
    values, region = stack_file.load("dev")
    with pytest.raises(ConfigError) as error:
        parse({**values, key: value}, region)
    assert str(error.value) == message


def test_the_watch_picture_evaluates_the_dashboards_expressions_on_a_scrape() -> None:
    from eks_ddp.tools.watch_picture import PANELS, value

    samples = {"eksddp_trainer_step": 30.0, "eksddp_trainer_steps": 120.0, "eksddp_trainer_loss": 0.5}
    assert (
        value('eksddp_trainer_step{eks_ddp_job=~"$job"} / eksddp_trainer_steps{eks_ddp_job=~"$job"}', samples) == 0.25
    )
    assert value('eksddp_trainer_loss{eks_ddp_job=~"$job"}', samples) == 0.5
    assert value("eksddp_trainer_eta_seconds", samples) is None
    expressions = [panel["targets"][0]["expr"] for panel in dashboards()["training.json"]["panels"][:PANELS]]
    assert all(value(e, {name: 1.0 for name in metric_names(e)}) is not None for e in expressions)


def test_managed_prometheus_gets_every_sample_through_an_irsa_role() -> None:
    registrations = _registrations("dev", managedPrometheus=True)
    (workspace,) = [r for r in registrations if r.type == "aws:amp/workspace:Workspace"]
    role = next(r for r in registrations if r.type == "aws:iam/role:Role" and r.name == "eks-ddp-monitoring-writer")
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]["Condition"]["StringEquals"]
    assert "system:serviceaccount:monitoring:kube-prometheus-stack-prometheus" in trust.values()
    prometheus = _by_chart(registrations)["kube-prometheus-stack"].inputs["values"]["prometheus"]
    (target,) = prometheus["prometheusSpec"]["remoteWrite"]
    assert target["url"].endswith("api/v1/remote_write") and target["sigv4"] == {"region": "us-east-1"}
    assert prometheus["serviceAccount"]["annotations"]["eks.amazonaws.com/role-arn"] == role.inputs["arn"]
    assert workspace.inputs["alias"] == "eks-ddp-monitoring"
    values, region = stack_file.load("dev")
    with pytest.raises(ConfigError) as error:
        parse({**values, "managedPrometheus": True, "monitoring": "cloudwatch"}, region)
    assert str(error.value) == ("eks-ddp:managedPrometheus: True is not allowed; it writes Prometheus' samples: "
                                "needs eks-ddp:monitoring prometheus, not cloudwatch")
