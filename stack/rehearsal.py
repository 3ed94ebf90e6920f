"""`python -m eks_ddp.stack.rehearsal`: the first `pulumi up` of every stack, rehearsed against the engines' rules.

Runs each `Pulumi.<stack>.yaml` through the stack program under mocks, twice, and
applies stack.engine_rules to what it registers: one line per broken rule, exit 1.
The two runs must register identical inputs (nothing derived from time or
randomness), or the second `pulumi up` would change what the first one made.
A third run with a change to the pods alone must change them through some engine.
Use it on your own program with `--program` (its directory or file), or call `rehearse()`.
"""

import argparse
import json
import sys
import time
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

from pulumi.output import Unknown

from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.stack import project_config, stack_file
from eks_ddp.stack.cluster.failures import rehearse_bad_node
from eks_ddp.stack.cluster.placement import rehearse_placement
from eks_ddp.stack.config import SYSTEM_GROUP, ConfigError, parse
from eks_ddp.stack.engine_rules import RULES, Deployment, check, unapplied_pod_changes, waits_for_what_it_names
from eks_ddp.stack.mocked import run_under_mocks
from eks_ddp.stack.mocking import DEPLOYER_ROLE_ARN, Registration
from eks_ddp.stack.programs import Program
from eks_ddp.stack.project_config import PROJECT, StackFileError
from eks_ddp.stack.reference_data import read_network_cards
from eks_ddp.trainer.errors import OneLineParser
from eks_ddp.trainer.startup import freeze_imports


def _comparable(value: Any) -> Any:
    """Inputs as plain data: an output unknown during preview compares equal to another unknown."""
    if isinstance(value, Unknown):
        return "<computed>"
    if isinstance(value, dict):
        return {key: _comparable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_comparable(item) for item in value]
    return value


def differences(first: list[Registration], second: list[Registration]) -> list[str]:
    """Where two runs of one program registered different resources or inputs."""
    before, after = ({r.urn: r for r in run} for run in (first, second))
    lines = [f"idempotence: {urn} is registered by only one of two runs" for urn in sorted(set(before) ^ set(after))]
    for urn in sorted(set(before) & set(after)):
        old, new = before[urn], after[urn]
        old_inputs, new_inputs = _comparable(old.inputs), _comparable(new.inputs)
        changed = sorted(key for key in set(old_inputs) | set(new_inputs) if old_inputs.get(key) != new_inputs.get(key))
        lines += [
            f"idempotence: {old.type.split(':')[-1]} {old.name} {key}: differs between two runs of the same "
            f"stack ({old.inputs.get(key)!r} then {new.inputs.get(key)!r})"
            for key in changed
        ]
        if sorted(old.dependencies) != sorted(new.dependencies):
            lines.append(f"idempotence: {old.type.split(':')[-1]} {old.name} dependencies: differ between two runs")
    return lines


def findings_of(
    first: list[Registration],
    second: list[Registration],
    region: str,
    today: date,
    changed: list[Registration] | None = None,
) -> list[str]:
    """The rules, idempotence (two runs), the updates (a run whose pods alone changed, where there is one), and the
    cluster rehearsal with a bad GPU node, over what a program registered."""
    deployment = Deployment(first, region, DEPLOYER_ROLE_ARN, today, read_network_cards())
    findings = [str(finding) for finding in check(deployment)] + differences(first, second)
    if changed is not None:
        after = replace(deployment, registrations=changed)
        findings += [str(finding) for finding in unapplied_pod_changes(deployment, after)]
    return findings + [str(finding) for finding in [*rehearse_placement(deployment), *rehearse_bad_node(deployment)]]


def configured_by_eks_ddp(program: Program) -> bool:
    """A program that reads eks-ddp's stack keys (this repository's): its variants and pod change are config."""
    return program.project == PROJECT and "nodeGroups" in project_config.declarations(program.directory)


def rehearse(
    stack: str, root: Path = stack_file.ROOT, today: date | None = None, override: dict[str, str] | None = None
) -> list[str]:
    """One line per rule the program at `root` (a directory or a file) breaks for `stack`; empty when its first
    `pulumi up` would go through."""
    program, override = Program.at(root), dict(override or {})
    first, second = program.run(stack, override), program.run(stack, override)
    region = program.region(stack, override)
    if not configured_by_eks_ddp(program):
        return findings_of(first, second, region, today or date.today())
    values, _ = stack_file.load(stack, program.directory, override)
    changed = program.run(
        stack, {**override, f"{PROJECT}:nodeGroups": json.dumps(with_pod_change(values)["nodeGroups"])}
    )
    findings = findings_of(first, second, region, today or date.today(), changed)
    return findings + placement_elsewhere(program, stack, values, override)


def rehearse_values(
    values: dict[str, Any], region: str | None, stack: str = "dev", today: date | None = None
) -> list[str]:
    """The same for eks-ddp's stack config values (`eks-ddp:*` keys without the prefix) and a region."""
    config = parse(values, region)
    first, second = run_under_mocks(config, stack=stack), run_under_mocks(config, stack=stack)
    changed = run_under_mocks(parse(with_pod_change(values), region), stack=stack)
    return findings_of(first, second, config.region, today or date.today(), changed)


# Every autoscaler and operator a stack file could switch to: the cluster rehearsal places every pod under each.
VARIANTS = [
    {"autoscaler": autoscaler, "trainingOperator": operator}
    for autoscaler in ("cluster-autoscaler", "karpenter")
    for operator in ("v1", "v2", "none")
]


def placement_elsewhere(program: Program, stack: str, values: dict[str, Any], override: dict[str, str]) -> list[str]:
    """The cluster rehearsal (stack.cluster.placement) and the dependency rule (what each variant adds must wait for
    what it names) of a stack file under every other VARIANT it can take (an elastic job runs only under v1, so its
    other operators are not rehearsed); rehearse checks it as written."""
    findings: list[str] = []
    defaults = {"autoscaler": "cluster-autoscaler", "trainingOperator": "v1"}
    written = {key: values.get(key, default) for key, default in defaults.items()}
    elastic = "elasticMinReplicas" in (values.get("job") or {})
    region = program.region(stack, override)
    for variant in VARIANTS:
        if variant == written or (elastic and variant["trainingOperator"] != "v1"):
            continue
        keys = {f"{PROJECT}:{key}": value for key, value in variant.items()}
        registrations = program.run(stack, {**override, **keys})
        label = ", ".join(f"{key} {value}" for key, value in variant.items())
        deployment = Deployment(registrations, region, DEPLOYER_ROLE_ARN, date.today())
        placed = [*rehearse_placement(deployment), *waits_for_what_it_names(deployment)]  # Karpenter adds resources
        findings += [f"[{label}] {finding}" for finding in placed]
    return findings


# A change to the pods alone: every workload's pods select their group's labels (workloads.target.NodeTarget), under
# every operator, and no run's arguments read them (training_pod.run_id), so a running job must take it and resume.
LABEL = {"eks-ddp/rehearsed-update": "true"}


CHANGED_IMAGE = "registry.example/eks-ddp-rehearsal:changed"


def with_pod_change(values: dict[str, Any]) -> dict[str, Any]:
    """The stack's values with LABEL on every node group but the system one; a job on the system group (whose nodes
    take no labels of ours) gets another image instead, the other change that reaches its pods alone."""
    if (values.get("job") or {}).get("nodeGroup") == SYSTEM_GROUP:
        return {**values, "image": CHANGED_IMAGE}
    groups = [
        group if group.get("name") == SYSTEM_GROUP else {**group, "labels": {**group.get("labels", {}), **LABEL}}
        for group in values.get("nodeGroups", [])
    ]
    return {**values, "nodeGroups": groups}


def _day(text: str) -> date:
    """`--on`'s date, or one line saying what it takes."""
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed; give a date as YYYY-MM-DD") from None


def main(argv: list[str] | None = None) -> int:
    summary = __doc__.split("\n", 1)[0] if __doc__ else None
    parser = OneLineParser(prog="python -m eks_ddp.stack.rehearsal", description=summary)
    parser.add_argument(
        "--stack", action="append", help="a stack to rehearse (repeatable; default every Pulumi.*.yaml)"
    )
    parser.add_argument(
        "--program",
        type=Path,
        default=Path("."),
        help="a Pulumi program: its directory (with Pulumi.yaml) or its Python file (default: this directory)",
    )
    parser.add_argument("--on", type=_day, help="rehearse as of this date, YYYY-MM-DD (default today)")
    args = parser.parse_args(argv)
    try:
        program = Program.at(args.program)
        for stack in args.stack or []:
            if program.stacks():  # a program without stack files runs with no config under any name
                stack_file.stack_path(stack, program.directory)
        steps = "updates, placement under 6 variants" if configured_by_eks_ddp(program) else "placement"
    except (FileNotFoundError, StackFileError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    stacks = args.stack or program.stacks() or ["offline"]
    broken = 0
    for stack in stacks:
        started = time.perf_counter()
        try:
            findings = rehearse(stack, program.entry if args.program.is_file() else program.directory, args.on)
        except (FileNotFoundError, ConfigError, InvalidArgument, StackFileError) as error:
            findings = [f"config: {error}"]
        for finding in findings:
            print(f"{stack}: {finding}")
        status = f"{len(findings)} broken rule(s)" if findings else "every rule holds"
        print(
            f"{program.project} {stack}: {len(RULES)} rules, idempotence, {steps} and a bad GPU node, {status} "
            f"({time.perf_counter() - started:.1f} s)",
            file=sys.stderr,
        )
        broken += bool(findings)
    return 1 if broken else 0


if __name__ == "__main__":
    freeze_imports()  # the Pulumi SDKs' objects, never examined again by the collector
    raise SystemExit(main())
