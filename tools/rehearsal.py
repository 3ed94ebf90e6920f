"""`python -m eks_ddp.tools.rehearsal`: the first `pulumi up` of every stack, rehearsed against the engines' rules.

Runs each `Pulumi.<stack>.yaml` through the stack program under mocks, twice, and
applies engine_models to what it registers: one line per broken rule, exit 1.
The two runs must register identical inputs (nothing derived from time or
randomness), or the second `pulumi up` would change what the first one made.
A third run with a change to the pods alone must change them through some engine.
Use it on your own program with `--program` (its directory or file), or call `rehearse()`.
What the program warns is printed once, with the stacks and variants it came up under,
and one summary line per stack file ends the output.
"""

import argparse
import contextlib
import json
import logging
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

from pulumi.output import Unknown

from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.stack import project_config
from eks_ddp.tools import stack_file
from eks_ddp.stack.config import SYSTEM_GROUP, ConfigError, parse
from eks_ddp.engine_models import RULES, Deployment, check, unapplied_pod_changes, waits_for_what_it_names
from eks_ddp.tools.mocking import run_under_mocks
from eks_ddp.tools.mocking import DEPLOYER_ROLE_ARN, Registration
from eks_ddp.tools.pulumi_program import Program
from eks_ddp.stack.project_config import PROJECT, StackFileError
from eks_ddp.tools.reference_data import read_network_cards
from eks_ddp.trainer.errors import OneLineParser
from eks_ddp.trainer.startup import freeze_imports


def comparable(value: Any) -> Any:
    """Inputs as plain data: an output unknown during preview compares equal to another unknown."""
    if isinstance(value, Unknown):
        return "<computed>"
    if isinstance(value, dict):
        return {key: comparable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [comparable(item) for item in value]
    return value


def differences(first: list[Registration], second: list[Registration]) -> list[str]:
    """Where two runs of one program registered different resources or inputs."""
    before, after = ({r.urn: r for r in run} for run in (first, second))
    lines = [f"idempotence: {urn} is registered by only one of two runs" for urn in sorted(set(before) ^ set(after))]
    for urn in sorted(set(before) & set(after)):
        old, new = before[urn], after[urn]
        old_inputs, new_inputs = comparable(old.inputs), comparable(new.inputs)
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
    """The rules, idempotence (two runs) and the updates (a run whose pods alone changed, where there is one), over
    what a program registered. Where the pods land and what a bad node does, the engines decide: `make cluster-up`."""
    deployment = Deployment(first, region, DEPLOYER_ROLE_ARN, today, read_network_cards())
    findings = [str(finding) for finding in check(deployment)] + differences(first, second)
    if changed is not None:
        after = replace(deployment, registrations=changed)
        findings += [str(finding) for finding in unapplied_pod_changes(deployment, after)]
    return findings


Variant = tuple[tuple[str, str], ...]
"""A variant's stack keys, (("autoscaler", "karpenter"), ("trainingOperator", "v2")); () for a program's only one."""


class Warnings(logging.Handler):
    """What a program warns while it is rehearsed (pulumi.log.warn, which the mocks' engine logs to the root logger)
    instead of printing it on every run: each message with the variants it came up under, to print it once."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.variants: list[Variant] = []
        """Every variant rehearsed, in order."""
        self.seen: dict[str, list[Variant]] = {}
        """Each message, with the variants it came up under."""
        self._variant: Variant = ()

    def emit(self, record: logging.LogRecord) -> None:
        under = self.seen.setdefault(record.getMessage(), [])
        if self._variant not in under:
            under.append(self._variant)

    @contextlib.contextmanager
    def under(self, variant: Mapping[str, str]) -> Iterator[None]:
        """What is logged meanwhile is `variant`'s, collected instead of printed."""
        self._variant = tuple(variant.items())
        if self._variant not in self.variants:
            self.variants.append(self._variant)
        logging.getLogger().addHandler(self)
        try:
            yield
        finally:
            logging.getLogger().removeHandler(self)

    def where(self, message: str) -> str:
        """Where `message` came up: 'every variant', 'autoscaler karpenter only', ...; '' for a program's only one."""
        seen = set(self.seen[message])
        if seen == set(self.variants):
            return "every variant" if len(self.variants) > 1 else ""
        for key, value in self.seen[message][0]:
            if seen == {variant for variant in self.variants if (key, value) in variant}:
                return f"{key} {value} only"
        return "; ".join(", ".join(f"{k} {v}" for k, v in variant) for variant in self.seen[message]) + " only"


def _under(warnings: Warnings | None, variant: Mapping[str, str]) -> contextlib.AbstractContextManager[None]:
    """`warnings.under(variant)`, or nothing to collect them in (they are printed as they come)."""
    return warnings.under(variant) if warnings is not None else contextlib.nullcontext()


def written_variant(values: Mapping[str, Any]) -> dict[str, str]:
    """The autoscaler and operator a stack file's values choose (the project's defaults where it sets none)."""
    defaults = {"autoscaler": "cluster-autoscaler", "trainingOperator": "v1"}
    return {key: values.get(key) or default for key, default in defaults.items()}


def configured_by_eks_ddp(program: Program) -> bool:
    """A program that reads eks-ddp's stack keys (this repository's): its variants and pod change are config."""
    return program.project == PROJECT and "nodeGroups" in project_config.declarations(program.directory)


def rehearse(
    stack: str,
    root: Path = stack_file.ROOT,
    today: date | None = None,
    override: dict[str, str] | None = None,
    warnings: Warnings | None = None,
) -> list[str]:
    """One line per rule the program at `root` (a directory or a file) breaks for `stack`; empty when its first
    `pulumi up` would go through. What it warns goes to `warnings` when given."""
    program, override = Program.at(root), dict(override or {})
    ours = configured_by_eks_ddp(program)
    values = stack_file.load(stack, program.directory, override)[0] if ours else {}
    with _under(warnings, written_variant(values) if ours else {}):
        first, second = program.run(stack, override), program.run(stack, override)
        pods_changed = {f"{PROJECT}:nodeGroups": json.dumps(with_pod_change(values)["nodeGroups"])}
        changed = program.run(stack, {**override, **pods_changed}) if ours else None
    region = program.region(stack, override)
    findings = findings_of(first, second, region, today or date.today(), changed)
    return findings + dependencies_elsewhere(program, stack, values, override, warnings) if ours else findings


def rehearse_values(
    values: dict[str, Any],
    region: str | None,
    stack: str = "dev",
    today: date | None = None,
    first: list[Registration] | None = None,
) -> list[str]:
    """The same for eks-ddp's stack config values (`eks-ddp:*` keys without the prefix) and a region. `first` is a
    run of them already made, for a caller that checks more of what they register: the second run is still made."""
    config = parse(values, region)
    first = first if first is not None else run_under_mocks(config, stack=stack)
    second = run_under_mocks(config, stack=stack)
    changed = run_under_mocks(parse(with_pod_change(values), region), stack=stack)
    return findings_of(first, second, config.region, today or date.today(), changed)


def variants(values: Mapping[str, Any]) -> list[dict[str, str]]:
    """Every autoscaler and operator a stack file could switch to (what each adds must wait for what it names): on a
    cluster made elsewhere, whose groups keep what scales them, the operators alone (`autoscaler` none); an elastic
    job runs only under v1."""
    autoscalers = ("none",) if values.get("existingCluster") else ("cluster-autoscaler", "karpenter")
    operators = ("v1",) if "elasticMinReplicas" in (values.get("job") or {}) else ("v1", "v2", "none")
    return [{"autoscaler": autoscaler, "trainingOperator": operator}
            for autoscaler in autoscalers for operator in operators]


def dependencies_elsewhere(
    program: Program, stack: str, values: dict[str, Any], override: dict[str, str], warnings: Warnings | None = None
) -> list[str]:
    """The dependency rule (what each variant adds, Karpenter's resources for one, must wait for what it names) of a
    stack file under every other of its `variants`; rehearse checks it as written."""
    findings: list[str] = []
    region = program.region(stack, override)
    for variant in variants(values):
        if variant == written_variant(values):
            continue
        keys = {f"{PROJECT}:{key}": value for key, value in variant.items()}
        with _under(warnings, variant):
            registrations = program.run(stack, {**override, **keys})
        label = ", ".join(f"{key} {value}" for key, value in variant.items())
        deployment = Deployment(registrations, region, DEPLOYER_ROLE_ARN, date.today())
        findings += [f"[{label}] {finding}" for finding in waits_for_what_it_names(deployment)]
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
    parser = OneLineParser(prog="python -m eks_ddp.tools.rehearsal", description=summary)
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
        ours = configured_by_eks_ddp(program)
    except (FileNotFoundError, StackFileError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    root = program.entry if args.program.is_file() else program.directory
    warned: dict[str, list[tuple[str, str]]] = {}
    summaries, broken = [], 0
    for stack in args.stack or program.stacks() or ["offline"]:
        started, warnings, steps = time.perf_counter(), Warnings(), ""
        try:
            values = stack_file.load(stack, program.directory)[0] if ours else {}
            steps = f", updates, dependencies under {len(variants(values))} variants" if ours else ""
            findings, status = rehearse(stack, root, args.on, warnings=warnings), ""
        except (FileNotFoundError, ConfigError, InvalidArgument, StackFileError) as error:
            findings, status = [f"config: {error}"], "its config is refused (the line above)"
        for finding in findings:
            print(f"{stack}: {finding}", flush=True)
        for message in warnings.seen:
            warned.setdefault(message, []).append((stack, warnings.where(message)))
        status = status or (f"{len(findings)} broken rule(s)" if findings else "every rule holds")
        summaries.append(
            f"{program.project} {stack}: {len(RULES)} rules, idempotence{steps}, {status} "
            f"({time.perf_counter() - started:.1f} s)"
        )
        broken += bool(findings)
    for message, places in warned.items():
        print(f"warning: {message} [{_places(places)}]", file=sys.stderr)
    print("\n".join(summaries), file=sys.stderr)
    return 1 if broken else 0


def _places(places: list[tuple[str, str]]) -> str:
    """'dev, gpu: every variant; cpu: autoscaler karpenter only': the stacks that share a description, together."""
    stacks_by_where: dict[str, list[str]] = {}
    for stack, where in places:
        stacks_by_where.setdefault(where, []).append(stack)
    return "; ".join(f"{', '.join(stacks)}{': ' + where if where else ''}" for where, stacks in stacks_by_where.items())


if __name__ == "__main__":
    freeze_imports()  # the Pulumi SDKs' objects, never examined again by the collector
    raise SystemExit(main())
