"""Upstream facts the engines go by, shipped with the rehearsal so a user's rehearsal checks what CI checks.

`data/network-cards.tsv` is EC2's own data (extracted from aws/karpenter-provider-aws v1.14.1,
`zz_generated.vpclimits.go`; tests/infra/test_catalogue.py checks it against the repository's copy in
`upstream/reference/`): the authority for how many EFA interfaces an instance type takes, independent of our
catalogue.
"""

from pathlib import Path

NETWORK_CARDS = Path(__file__).resolve().parent / "data" / "network-cards.tsv"


def read_network_cards(path: Path = NETWORK_CARDS) -> dict[str, int]:
    """Network cards per instance type."""
    rows = [line.split("\t") for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return {row[0]: int(row[1]) for row in rows}
