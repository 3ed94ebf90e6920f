"""The catalogue agrees with EC2's own data (../shared/reference/, read from upstream)."""

from pathlib import Path

import pytest

from eks_ddp.infra.facts.catalogue import EFA_INSTANCE_TYPES, INSTANCE_TYPES
from eks_ddp.stack.reference_data import REFERENCE, read_network_cards

# karpenter-provider-aws v1.14.1's generated VPC limits have no hpc7g rows; EC2's EFA
# documentation and the device plugin's list (below) both name them, with one card.
ABSENT_FROM_VPC_LIMITS = {"hpc7g.4xlarge", "hpc7g.8xlarge", "hpc7g.16xlarge"}


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
    assert set(catalogue) - set(cards) == ABSENT_FROM_VPC_LIMITS
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
    assert set(EFA_INSTANCE_TYPES) - known == set()
    assert {name for name, facts in INSTANCE_TYPES.items() if not facts.efa} & known == set()
