"""The KWOK stage that holds an operator's pod not Ready until its process serves names every operator's namespace."""

from pathlib import Path

import yaml

from tests.cluster.operators import OPERATORS

STAGES = Path(__file__).resolve().parent / "stages" / "operator-pod.yaml"


def test_the_operator_pod_stage_covers_the_namespace_of_every_operator() -> None:
    start = next(s for s in yaml.safe_load_all(STAGES.read_text()) if s["metadata"]["name"].endswith("pod-start"))
    namespaces = next(e["values"] for e in start["spec"]["selector"]["matchExpressions"]
                      if e["key"] == ".metadata.namespace")
    assert set(namespaces) == {operator.namespace for operator in OPERATORS}
