"""A Pulumi project's `__main__.py` run inline by the Automation API, as `pulumi up --client` runs it: the Go module
proxy serves no Python language host (tests/cluster/engines/pulumi), so nothing else runs a Python program here.

Imports only the Pulumi SDK and the standard library: a fresh environment holding an installed eks-ddp wheel runs it
by path, as a user's own program would run (tests/cluster/test_every_stack_on_pulumi.py):

    <python> tests/cluster/pulumi_inline.py up|preview|destroy --project DIR --stack NAME --cli-root ROOT

which prints Pulumi's own output and, last, the change summary as one JSON line ({"create": 37}); the exit code is 1
when Pulumi failed. Pulumi's environment (backend, PULUMI_HOME, ...) is this process's.
"""

import argparse
import json
import os
import runpy
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pulumi
from pulumi import automation as auto


def program(project: Path, transforms: Sequence[pulumi.ResourceTransform] = ()) -> Callable[[], None]:
    """The project's `__main__.py` as `pulumi up` runs it, with `transforms` (faults a test plants) on every
    resource."""
    def run() -> None:
        for transform in transforms:
            pulumi.runtime.register_resource_transform(transform)
        runpy.run_path(str(project / "__main__.py"), run_name="__main__")

    return run


def stack(project: Path, name: str, cli_root: Path, env: dict[str, str],
          transforms: Sequence[pulumi.ResourceTransform] = ()) -> auto.Stack:
    """The project's stack `name`, run by the CLI at <cli_root>/bin/pulumi with `env` (backend, PULUMI_HOME)."""
    options = auto.LocalWorkspaceOptions(
        work_dir=str(project),
        pulumi_home=env.get("PULUMI_HOME"),
        env_vars=env,
        pulumi_command=auto.PulumiCommand(root=str(cli_root)),
    )
    return auto.create_or_select_stack(name, project_name=_project_name(project),
                                       program=program(project, transforms), opts=options)


def _project_name(project: Path) -> str:
    """Pulumi.yaml's `name:` (read without a YAML library: the fresh environment may have none)."""
    for line in (project / "Pulumi.yaml").read_text().splitlines():
        if line.startswith("name:"):
            return line.partition(":")[2].strip().strip("'\"")
    raise SystemExit(f"{project / 'Pulumi.yaml'}: no name: line")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("command", choices=("up", "preview", "destroy"))
    parser.add_argument("--project", type=Path, required=True)
    parser.add_argument("--stack", required=True)
    parser.add_argument("--cli-root", type=Path, required=True, help="the folder whose bin/pulumi is the CLI")
    args = parser.parse_args(argv)
    chosen = stack(args.project.resolve(), args.stack, args.cli_root, dict(os.environ))
    try:
        if args.command == "up":
            changes = chosen.up(on_output=print, color="never").summary.resource_changes
        elif args.command == "preview":
            changes = chosen.preview(diff=True, on_output=print, color="never").change_summary
        else:
            changes = chosen.destroy(on_output=print, color="never").summary.resource_changes
    except auto.CommandError as error:
        print(f"error: pulumi {args.command} of {args.stack} failed: {error}", file=sys.stderr)
        return 1
    print(json.dumps({str(getattr(op, "value", op)): count for op, count in (changes or {}).items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
