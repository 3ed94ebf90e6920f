import json
import time
from pathlib import Path

import pytest
import yaml

from infra.platform import StorageKind, TrainingPlatformArgs
from stack import cost, preview, stack_file
from tests.workloads.schemas import validate_pytorchjob


def test_cost_lines_for_the_workshop_shape() -> None:
    platform: TrainingPlatformArgs = {
        "network": {"availability_zones": ["us-east-1a", "us-east-1b"]},
        "node_groups": [{"name": "workers", "instance_type": "c7g.16xlarge", "availability_zone": "us-east-1a", "desired_size": 2}],
        "storage": StorageKind.FSX, "fsx": {"deployment_type": "PERSISTENT_2", "per_unit_storage_throughput": 250, "capacity_gib": 2400},
    }
    lines = {line.item: line for line in cost.estimate(platform)}
    assert lines["EKS control plane"].hourly == pytest.approx(0.10)
    assert lines["workers nodes (c7g.16xlarge, desired size)"].hourly == pytest.approx(2 * 2.32)
    assert lines["NAT gateways"].quantity == 1
    assert lines["FSx for Lustre PERSISTENT_2 (GiB)"].hourly == pytest.approx(2400 * 0.210 / 730)


def test_preview_prints_tree_counts_cost_and_writes_valid_manifests(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    started = time.perf_counter()
    assert preview.main(["--stack", "dev", "--manifests", str(tmp_path)]) == 0
    assert time.perf_counter() - started < 5
    text = capsys.readouterr().out
    assert "eksddp:index:TrainingPlatform  eks-ddp" in text and "  eksddp:index:EfaNodeGroup  eks-ddp-workers" in text
    assert "Resources per type:" in text and "total (about" in text
    job = yaml.safe_load((tmp_path / "pytorchjob-training-mnist-ddp.yaml").read_text())
    validate_pytorchjob(job)


def test_preview_json_is_complete(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert preview.main(["--stack", "dev", "--manifests", str(tmp_path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["counts"]["eksddp:index:PyTorchJob"] == 1
    assert document["cost"]["hourly_total"] == pytest.approx(sum(line["hourly"] for line in document["cost"]["lines"]), abs=1e-3)
    assert len(document["manifests"]) == len(list(tmp_path.glob("*.yaml")))


def test_preview_of_a_missing_stack_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert preview.main(["--stack", "prod"]) == 2
    stacks = ", ".join(stack_file.stacks())
    assert capsys.readouterr().err.strip() == f"error: --stack prod: Pulumi.prod.yaml not found (stacks here: {stacks})"
