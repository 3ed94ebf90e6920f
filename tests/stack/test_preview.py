import json
import time
from datetime import date
from pathlib import Path

import pytest
import yaml

from eks_ddp.tools import cost, preview, stack_file
from eks_ddp.engine_models import Deployment
from eks_ddp.tools.mocking import DEPLOYER_ROLE_ARN
from eks_ddp.tools.pulumi_program import Program
from tests.workloads.schemas import validate_pytorchjob

ROOT = Path(__file__).resolve().parents[2]


def test_cost_lines_come_from_what_the_program_registers() -> None:
    """Nodes at desired size, or as many as the job's pods need where the autoscaler would add them; FSx from the
    claim on its StorageClass."""
    storage = {"kind": "fsx", "deploymentType": "PERSISTENT_2", "perUnitStorageThroughput": 250, "capacityGiB": 2400}
    job = {**stack_file.load("workshop")[0]["job"], "replicas": 3}
    override = {"eks-ddp:storage": json.dumps(storage), "eks-ddp:job": json.dumps(job)}
    registrations = Program.at(ROOT).run("workshop", override)
    deployment = Deployment(registrations, "us-east-1", DEPLOYER_ROLE_ARN, date(2026, 11, 24))
    lines = {line.item: line for line in cost.estimate(deployment)}
    assert lines["EKS control plane"].hourly == pytest.approx(0.10)
    assert lines["NodeGroup eks-ddp-cluster-system (m5.large, desired size)"].quantity == 2
    assert lines["NodeGroup eks-ddp-cpu-nodes (c5.4xlarge, scaled up for the pods)"].hourly == pytest.approx(3 * 0.68)
    assert lines["NAT gateways"].quantity == 1
    assert lines["FSx for Lustre PERSISTENT_2 (GiB)"].hourly == pytest.approx(2400 * 0.210 / 730)


def test_preview_prints_tree_counts_cost_and_writes_valid_manifests(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    started = time.perf_counter()
    assert preview.main(["--stack", "dev", "--manifests", str(tmp_path)]) == 0
    assert time.perf_counter() - started < 5
    text = capsys.readouterr().out
    assert "eksddp:index:TrainingPlatform  eks-ddp" in text and "  eksddp:index:EfaNodeGroup  eks-ddp-workers" in text
    assert "Resources per type:" in text and "total (about" in text
    images = text.split("Images of the stack's own pods")[1].split("\n\n")[0].splitlines()[1:]
    assert len(images) == 2 and all(line.startswith("  by digest  ") for line in images)  # the trainer's and busybox
    job = yaml.safe_load((tmp_path / "pytorchjob-training-mnist-ddp.yaml").read_text())
    validate_pytorchjob(job)


def test_the_first_lines_say_where_the_stack_runs_and_that_the_account_is_invented(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert preview.main(["--stack", "workshop", "--manifests", str(tmp_path)]) == 0
    first, second = capsys.readouterr().out.splitlines()[:2]
    assert first.startswith("Program eks-ddp, stack workshop: ") and first.endswith("(under mocks; nothing was sent to AWS)")
    assert second == (
        "Region us-west-2; zones us-west-2a, us-west-2b; Kubernetes 1.35; "
        "account 123456789012 (a mock value: every id, ARN and built image's digest below is invented)"
    )


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


def test_a_type_without_a_read_price_is_priced_as_unknown_not_as_zero() -> None:
    groups = stack_file.load("gpu")[0]["nodeGroups"]
    groups[1] = {**groups[1], "instanceType": "p5e.48xlarge"}  # in EC2's table, not in Karpenter's us-east-1 prices
    registrations = Program.at(ROOT).run("gpu", {"eks-ddp:nodeGroups": json.dumps(groups)})
    lines = cost.estimate(Deployment(registrations, "us-east-1", DEPLOYER_ROLE_ARN, date(2026, 11, 24)))
    (workers,) = [line for line in lines if "p5e.48xlarge" in line.item]
    assert (workers.priced, workers.quantity, workers.hourly) == (False, 2, 0.0)
    assert all(line.priced for line in lines if line is not workers)
