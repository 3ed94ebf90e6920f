"""The catalogue agrees with EC2's own data (upstream/reference/, copied from upstream)."""

from pathlib import Path

import pytest

from eks_ddp.infra.facts import generate
from eks_ddp.infra.facts.catalogue import EFA_INSTANCE_TYPES, INSTANCE_TYPES
from eks_ddp.tools.reference_data import read_network_cards
from tests.upstream import REFERENCE

# karpenter-provider-aws v1.14.1's generated VPC limits lack 41 types, all with EFA: the table takes their EFA
# interfaces for their cards (infra.facts.generate), as EC2's EFA documentation gives hpc7g (one card each).
ABSENT_FROM_VPC_LIMITS = 41


def _network_cards() -> dict[str, int]:
    return read_network_cards(REFERENCE / "network-cards.tsv")


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
    known = set((REFERENCE / "efa-instance-types.txt").read_text().split())
    assert {name for name, facts in INSTANCE_TYPES.items() if not facts.efa} & known == set()
    assert set(EFA_INSTANCE_TYPES) - known == {"dl1.24xlarge"}  # Habana's, which the chart leaves out
    # The chart's list (2026-08) names types newer than Karpenter v1.14.1's table: offline they are refused,
    # `pulumi up` reads their facts from EC2.
    assert {"p6e-gb200.36xlarge", "g7.48xlarge"} <= known - set(INSTANCE_TYPES)


def test_the_shipped_table_is_what_the_generator_makes_of_the_upstream_data(tmp_path: Path) -> None:
    """Every type Karpenter's table lists is known offline with EC2's facts; regenerate after upstream moves."""
    generated = tmp_path / "instance-types.tsv"
    generate.write(REFERENCE, generated)
    body = [line for line in generated.read_text().splitlines() if not line.startswith("#")]
    assert body == [line for line in generate.TABLE.read_text().splitlines() if not line.startswith("#")]
    assert len(INSTANCE_TYPES) == len(body) - 1 == 1336


GO_SOURCE = """// generated at 2026-07-06T14:20:29Z for us-east-1

var InitialOnDemandPricesAWS = map[string]map[ec2types.InstanceType]float64{
	// us-east-1
	"us-east-1": {
		// g4dn family
		"g4dn.metal": 7.824000, "g4dn.xlarge": 0.526000,
		// p6-b200 family
		"p6-b200.48xlarge": 113.932800,
	},
}
"""


def test_prices_come_from_karpenters_generated_table_as_written() -> None:
    note, prices = generate.prices(GO_SOURCE)
    assert note == "generated at 2026-07-06T14:20:29Z for us-east-1"
    assert prices == {"g4dn.metal": "7.824000", "g4dn.xlarge": "0.526000", "p6-b200.48xlarge": "113.932800"}
    with pytest.raises(ValueError, match="no eu-west-1 map in the pricing source"):
        generate.prices(GO_SOURCE, "eu-west-1")


def test_every_type_a_stack_or_the_issue_names_has_its_list_price() -> None:
    """Karpenter v1.14.1's us-east-1 table (2026-07-06); types it lacks (not sold on demand there) stay unknown."""
    expected = {"p6-b200.48xlarge": 113.9328, "g4dn.metal": 7.824, "g6e.12xlarge": 10.49264, "trn1.32xlarge": 21.5,
                "p3dn.24xlarge": 31.212, "p4d.24xlarge": 21.957642, "c5.2xlarge": 0.34, "m5.large": 0.096}
    assert {name: INSTANCE_TYPES[name].hourly_usd for name in expected} == expected
    unpriced = {name for name, facts in INSTANCE_TYPES.items() if facts.hourly_usd is None}
    assert len(unpriced) == 18 and {"p5e.48xlarge", "trn2.48xlarge", "hpc7a.96xlarge"} <= unpriced


def test_the_shipped_network_cards_are_ec2s_as_upstream_publishes_them() -> None:
    """tools/data/network-cards.tsv, which the rehearsal reads, is the upstream table row for row."""
    from eks_ddp.tools.reference_data import NETWORK_CARDS

    upstream = [line for line in (REFERENCE / "network-cards.tsv").read_text().splitlines() if not line.startswith("#")]
    shipped = [line for line in NETWORK_CARDS.read_text().splitlines() if not line.startswith("#")]
    assert shipped == upstream and len(shipped) == 1346
