"""What every stack costs under both autoscalers, checked line by line against quantities read off the stack files by
hand: a Karpenter NodePool priced at zero, nodes counted at the wrong size, or a total that is not its lines, each fails
here (issue 42). Unit prices are the catalogue's list prices (infra/facts/data/prices-us-east-1.tsv), which
tests/infra check against Karpenter's own table."""

import json
import re
from datetime import date
from pathlib import Path
from typing import NamedTuple

import pytest

from eks_ddp.infra.facts.catalogue import PRICES
from eks_ddp.tools import cost, preview, stack_file
from eks_ddp.engine_models import Deployment
from eks_ddp.tools.mocking import DEPLOYER_ROLE_ARN
from eks_ddp.tools.pulumi_program import Program

ROOT = Path(__file__).resolve().parents[2]
CONTROL_PLANE, NAT_GATEWAY, SCRATCH_2_GIB_MONTH = 0.10, 0.045, 0.140  # AWS's list prices, us-east-1


class Priced(NamedTuple):
    """A stack's priced items as its file says: a new cluster's control plane, NAT gateways, FSx GiB, the system
    group, and each training group's nodes under the Cluster Autoscaler (desired size, or the job's pods where those
    are more) and under Karpenter (only the job's pods: it keeps no idle node)."""

    control_planes: int
    nat_gateways: int
    fsx_gib: int
    system: tuple[str, int]
    training: dict[str, tuple[str, int, int]]


STACKS = {
    # trains on the system group; the model goes to S3, no file system
    "cpu": Priced(1, 1, 0, ("m5.large", 2), {}),
    # workers: desiredSize 2, job of 2 pods; FSx SCRATCH_2 1200 GiB
    "dev": Priced(1, 1, 1200, ("m7g.large", 2), {"workers": ("c7g.16xlarge", 2, 2)}),
    # an existing VPC (no NAT gateway here); p4de 2 for the job, p4d and g4dn at desiredSize 0
    "gpu": Priced(
        1, 0, 1200, ("c5.2xlarge", 2),
        {"gpu": ("p4de.24xlarge", 2, 2), "p4d": ("p4d.24xlarge", 0, 0), "g4dn": ("g4dn.metal", 0, 0)},
    ),
    # an existing VPC and an existing file system, which the stack does not pay for
    "gpu-existing": Priced(1, 0, 0, ("c5.2xlarge", 2), {"gpu": ("p3dn.24xlarge", 2, 2)}),
    # cpu: desiredSize 0 (minSize's default), job of 2 pods: the autoscaler adds 2; EFS is not priced
    "own-code": Priced(1, 1, 0, ("m5.large", 1), {"cpu": ("m5.large", 2, 2)}),
    "trainium": Priced(1, 1, 1200, ("c5.2xlarge", 2), {"trainium": ("trn1.32xlarge", 2, 2)}),
    # cpu: desiredSize 2, the elastic job's 4 pods
    "workshop": Priced(1, 1, 0, ("m5.large", 2), {"cpu": ("c5.4xlarge", 4, 4)}),
}
EXISTING = {"eksctl": {"system": ("c5.2xlarge", 1), "gpu": ("g4dn.metal", 2)}}
"""A cluster eksctl made: only its described groups at their desired sizes; nothing of a cluster made here."""


Line = tuple[float, float]
"""(quantity, unit price per hour)"""


def expected_lines(stack: str, autoscaler: str) -> dict[str, Line]:
    """Item (up to its instance type) -> (quantity, unit price per hour), as the stack file says."""
    if stack in EXISTING:
        return {f"ExistingNodeGroup eks-ddp-{name} ({type_}": (float(n), PRICES[type_])
                for name, (type_, n) in EXISTING[stack].items()}
    priced = STACKS[stack]
    system_type, system_nodes = priced.system
    lines: dict[str, Line] = {f"NodeGroup eks-ddp-cluster-system ({system_type}": (system_nodes, PRICES[system_type])}
    for name, (type_, under_ca, under_karpenter) in priced.training.items():
        if autoscaler == "karpenter":
            lines[f"NodePool eks-ddp-{name}-nodepool ({type_}"] = (under_karpenter, PRICES[type_])
        else:
            lines[f"NodeGroup eks-ddp-{name}-nodes ({type_}"] = (under_ca, PRICES[type_])
    lines["EKS control plane"] = (priced.control_planes, CONTROL_PLANE)
    if priced.nat_gateways:
        lines["NAT gateways"] = (priced.nat_gateways, NAT_GATEWAY)
    if priced.fsx_gib:
        lines["FSx for Lustre SCRATCH_2 (GiB)"] = (priced.fsx_gib, SCRATCH_2_GIB_MONTH / 730)
    return lines


def by_expected_item(lines: list[tuple[str, float, float]], stack: str, autoscaler: str) -> dict[str, Line]:
    """The estimate's lines keyed by the expected item each begins with (a line matching none keeps its own item),
    rounded as `expected` rounds them."""
    items = expected(stack, autoscaler)
    found = {}
    for item, quantity, unit in lines:
        key = next((expected for expected in items if item.startswith(expected)), item)
        assert key not in found, f"two lines for {key}"
        found[key] = _rounded(quantity, unit)
    return found


def expected(stack: str, autoscaler: str) -> dict[str, Line]:
    return {item: _rounded(*line) for item, line in expected_lines(stack, autoscaler).items()}


def _rounded(quantity: float, unit: float) -> Line:
    return round(quantity, 6), round(unit, 8)


CASES = [(s, a) for s in STACKS for a in ("cluster-autoscaler", "karpenter")] + [("eksctl", "none")]


@pytest.mark.parametrize(("stack", "autoscaler"), CASES, ids=[f"{s}-{a}" for s, a in CASES])
def test_each_stack_costs_its_nodes_at_list_price_under_both_autoscalers(stack: str, autoscaler: str) -> None:
    region = stack_file.load(stack)[1] or "us-east-1"
    registrations = Program.at(ROOT).run(stack, {"eks-ddp:autoscaler": autoscaler})
    estimate = cost.estimate(Deployment(registrations, region, DEPLOYER_ROLE_ARN, date(2026, 11, 24)))
    assert all(line.priced for line in estimate)
    found = by_expected_item([(line.item, line.quantity, line.unit_hourly) for line in estimate], stack, autoscaler)
    assert found == expected(stack, autoscaler)


@pytest.mark.parametrize("autoscaler", ["cluster-autoscaler", "karpenter"])
def test_a_job_smaller_than_its_groups_desired_size_pays_for_idle_nodes_only_under_the_cluster_autoscaler(
    autoscaler: str,
) -> None:
    """dev's workers keep desiredSize 2 under the Cluster Autoscaler; Karpenter launches what the one pod needs."""
    job = {**stack_file.load("dev")[0]["job"], "replicas": 1}
    override = {"eks-ddp:autoscaler": autoscaler, "eks-ddp:job": json.dumps(job)}
    registrations = Program.at(ROOT).run("dev", override)
    estimate = cost.estimate(Deployment(registrations, "us-east-1", DEPLOYER_ROLE_ARN, date(2026, 11, 24)))
    (workers,) = [line for line in estimate if "c7g.16xlarge" in line.item]
    assert workers.quantity == (1 if autoscaler == "karpenter" else 2)


@pytest.mark.parametrize("stack", sorted([*STACKS, *EXISTING]))
def test_the_previews_total_is_the_stack_files_items_at_list_price(
    stack: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The preview's JSON against a total summed here from the stack file's quantities, not from its own lines."""
    values, _ = stack_file.load(stack)
    written = values.get("autoscaler", "cluster-autoscaler")
    assert preview.main(["--stack", stack, "--manifests", str(tmp_path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)["cost"]
    lines = [(line["item"], line["quantity"], line["unit_hourly"]) for line in document["lines"]]
    assert by_expected_item(lines, stack, written) == expected(stack, written)
    total = sum(quantity * unit for quantity, unit in expected_lines(stack, written).values())
    assert document["hourly_total"] == pytest.approx(total, abs=1e-4)


@pytest.mark.parametrize("page", ["README.md", "docs/deploy.md"])
def test_the_stack_tables_cost_column_is_each_stacks_total(page: str) -> None:
    """The docs' "USD per hour" column, one row per stack file, against the totals above."""
    rows = re.findall(r"^\| `Pulumi\.([\w-]+)\.yaml` \|(?:[^|]*\|){2} ([\d.]+) \|", (ROOT / page).read_text(), re.M)
    assert sorted(stack for stack, _ in rows) == sorted([*STACKS, *EXISTING])
    for stack, shown in rows:
        written = stack_file.load(stack)[0].get("autoscaler", "cluster-autoscaler")
        total = sum(quantity * unit for quantity, unit in expected_lines(stack, written).values())
        assert shown == f"{total:.2f}", stack
