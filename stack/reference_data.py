"""Upstream facts the engines go by, read from `../shared/reference/` where it is checked out.

`network-cards.tsv` is EC2's own data (extracted from aws/karpenter-provider-aws
v1.14.1, `zz_generated.vpclimits.go`): the authority for how many EFA interfaces an
instance type takes, independent of our catalogue.
"""

from pathlib import Path

from eks_ddp.stack.project_config import ROOT

REFERENCE = ROOT.parent / "shared" / "reference"
NETWORK_CARDS = REFERENCE / "network-cards.tsv"


def read_network_cards(path: Path = NETWORK_CARDS) -> dict[str, int]:
    """Network cards per instance type; empty when the file is absent."""
    if not path.exists():
        return {}
    rows = [line.split("\t") for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return {row[0]: int(row[1]) for row in rows}
