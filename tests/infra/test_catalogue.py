"""The catalogue agrees with EC2's own data (../shared/reference/, read from upstream)."""

from pathlib import Path

import pytest

from eks_ddp.infra.facts import generate
from eks_ddp.infra.facts.catalogue import EFA_INSTANCE_TYPES, INSTANCE_TYPES
from eks_ddp.stack.reference_data import REFERENCE, read_network_cards

# karpenter-provider-aws v1.14.1's generated VPC limits lack 41 types, all with EFA: the table takes their EFA
# interfaces for their cards (infra.facts.generate), as EC2's EFA documentation gives hpc7g (one card each).
ABSENT_FROM_VPC_LIMITS = 41


def _reference(name: str) -> Path:
    path = REFERENCE / name
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared/ is not checked out): catalogue not compared with EC2's data")
    return path


def _network_cards() -> dict[str, int]:
    return read_network_cards(_reference("network-cards.tsv"))


def test_network_cards_match_ec2() -> None:
    """One EFA interface per network card: a wrong count leaves interfaces unattached (p5e has 32, not 16)."""
    cards = _network_cards()
    catalogue = INSTANCE_TYPES
    absent = set(catalogue) - set(cards)
    assert len(absent) == ABSENT_FROM_VPC_LIMITS and all(catalogue[name].efa for name in absent)
    assert {"hpc7g.4xlarge", "hpc7g.8xlarge", "hpc7g.16xlarge"} <= absent
    wrong = {
        name: (facts.network_cards, cards[name])
        for name, facts in catalogue.items()
        if name in cards and facts.network_cards != cards[name]
    }
    assert wrong == {}, f"(catalogue, EC2) network cards differ: {wrong}"


def test_efa_support_matches_the_device_plugins_list() -> None:
    """The plugin's chart v0.5.30 lists the types EFA works on: ours are among them, and a type the
    catalogue marks without EFA is not (the flag decides whether a group may turn EFA on offline)."""
    known = set(_reference("efa-instance-types.txt").read_text().split())
    assert {name for name, facts in INSTANCE_TYPES.items() if not facts.efa} & known == set()
    assert set(EFA_INSTANCE_TYPES) - known == {"dl1.24xlarge"}  # Habana's, which the chart leaves out
    # The chart's list (2026-08) names types newer than Karpenter v1.14.1's table: offline they are refused,
    # `pulumi up` reads their facts from EC2.
    assert {"p6e-gb200.36xlarge", "g7.48xlarge"} <= known - set(INSTANCE_TYPES)


def test_the_shipped_table_is_what_the_generator_makes_of_the_upstream_data(tmp_path: Path) -> None:
    """Every type Karpenter's table lists is known offline with EC2's facts; regenerate after upstream moves."""
    reference = _reference("instance-types.tsv").parent
    generated = tmp_path / "instance-types.tsv"
    generate.write(reference, generated)
    body = [line for line in generated.read_text().splitlines() if not line.startswith("#")]
    assert body == [line for line in generate.TABLE.read_text().splitlines() if not line.startswith("#")]
    assert len(INSTANCE_TYPES) == len(body) - 1 == 1336
