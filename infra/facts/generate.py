"""`python -m eks_ddp.infra.facts.generate REFERENCE_DIR [--pricing GO_FILE]`: the offline tables, from upstream data.

Writes data/instance-types.tsv beside this module from two generated upstream tables (the repository keeps
copies in upstream/reference/): aws/karpenter-provider-aws v1.14.1 `website/content/en/docs/reference/
instance-types.md` (every EC2 type's vCPUs, memory, architecture, GPUs with maker, model and memory, Neuron
devices, EFA devices; Karpenter generates it from EC2 DescribeInstanceTypes) and `pkg/providers/instancetype/
zz_generated.vpclimits.go` (network cards). With `--pricing`, also data/prices-us-east-1.tsv from the same tag's
`pkg/providers/pricing/zz_generated.pricing_aws.go` (`InitialOnDemandPricesAWS`: EC2's on-demand Linux prices in
us-east-1, which Karpenter generates from the AWS Pricing API; `git show v1.14.1:pkg/providers/pricing/
zz_generated.pricing_aws.go` in a clone of that repository). Rerun it when those move; tests/infra/test_catalogue.py
checks the shipped table against them.
"""

import argparse
import csv
import re
from datetime import date
from pathlib import Path

TABLE = Path(__file__).resolve().parent / "data" / "instance-types.tsv"
PRICE_TABLE = TABLE.with_name("prices-us-east-1.tsv")
PRICING_SOURCE = "aws/karpenter-provider-aws v1.14.1: pkg/providers/pricing/zz_generated.pricing_aws.go"
COLUMNS = (
    "instance_type",
    "architecture",
    "vcpus",
    "memory_mib",
    "network_cards",
    "efa",
    "gpus",
    "gpu_maker",
    "gpu_model",
    "gpu_memory_mib",
    "neuron_devices",
)
SOURCES = (
    "aws/karpenter-provider-aws v1.14.1: website/content/en/docs/reference/instance-types.md and "
    "pkg/providers/instancetype/zz_generated.vpclimits.go, generated from EC2 DescribeInstanceTypes"
)
EC2_ARCHITECTURE = {"amd64": "x86_64", "arm64": "arm64"}


def _rows(path: Path) -> list[dict[str, str]]:
    lines = path.read_text().splitlines()
    header = lines[0].lstrip("# ").split("\t")
    return [dict(zip(header, line.split("\t"))) for line in lines[1:] if line and not line.startswith("#")]


def table(reference: Path) -> list[list[str]]:
    """One row per EC2 instance type, in COLUMNS order, sorted by name."""
    cards = {row["instance_type"]: row["network_cards"] for row in _rows(reference / "network-cards.tsv")}
    # vpclimits lacks 41 types, all with EFA: their EFA interfaces stand in for their cards (the two agree on 248 of
    # the 249 EFA types that have both; p6-b300.48xlarge has 17 cards and 16 EFA interfaces).
    rows = []
    for row in _rows(reference / "instance-types.tsv"):
        name = row["instance_type"]
        efa = "1" if int(row["efa_devices"] or 0) > 0 else "0"
        rows.append(
            [
                name,
                EC2_ARCHITECTURE[row["arch"]],
                row["vcpus"],
                row["memory_mib"],
                cards.get(name) or row["efa_devices"],
                efa,
                row["gpus"] or "0",
                row["gpu_maker"],
                row["gpu_name"].upper(),
                row["gpu_memory_mib"] or "0",
                row["neuron_devices"] or "0",
            ]
        )
    return sorted(rows)


def write(reference: Path, target: Path = TABLE, on: date | None = None) -> int:
    rows = table(reference)
    with target.open("w", newline="") as out:
        out.write(f"# Every EC2 instance type's facts, generated on {(on or date.today()).isoformat()} by\n")
        out.write(f"# `python -m eks_ddp.infra.facts.generate` from {SOURCES}.\n")
        writer = csv.writer(out, delimiter="\t", lineterminator="\n")
        writer.writerow(COLUMNS)
        writer.writerows(rows)
    return len(rows)


def prices(go_source: str, region: str = "us-east-1") -> tuple[str, dict[str, str]]:
    """(The file's own generation note, {type: USD per hour as written}) of one region's map in Karpenter's table."""
    start = re.search(rf'^\s*"{re.escape(region)}":\s*{{\s*$', go_source, re.M)
    if start is None:
        raise ValueError(f"no {region} map in the pricing source (is it zz_generated.pricing_aws.go?)")
    body = go_source[start.end() :]
    end = re.search(r"^\s*},?\s*$", body, re.M)
    pairs = re.findall(r'"([a-z0-9.-]+)":\s*([0-9.]+)', body[: end.start() if end else None])
    note = re.search(r"^// (generated at \S+ for \S+)", go_source, re.M)
    return (note.group(1) if note else "generation date not stated"), dict(pairs)


def write_prices(go_source: str, target: Path = PRICE_TABLE) -> int:
    note, table = prices(go_source)
    with target.open("w") as out:
        out.write(f"# EC2 on-demand Linux prices in us-east-1, USD per hour, from {PRICING_SOURCE}\n")
        out.write(f"# (InitialOnDemandPricesAWS, {note}), by `python -m eks_ddp.infra.facts.generate`.\n")
        out.write("instance_type\tusd_per_hour\n")
        out.writelines(f"{name}\t{price}\n" for name, price in sorted(table.items()))
    return len(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eks_ddp.infra.facts.generate", description=__doc__)
    parser.add_argument("reference", type=Path, help="directory with instance-types.tsv and network-cards.tsv")
    parser.add_argument("--pricing", type=Path, help="Karpenter's pkg/providers/pricing/zz_generated.pricing_aws.go")
    args = parser.parse_args(argv)
    print(f"{write(args.reference)} instance types written to {TABLE}")
    if args.pricing:
        print(f"{write_prices(args.pricing.read_text())} prices written to {PRICE_TABLE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
