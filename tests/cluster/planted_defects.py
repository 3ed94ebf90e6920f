"""Defects the cluster tests must catch, planted one at a time: proof that the harness can fail.

Each defect is a plausible one-line bug in the program, put into a git worktree of HEAD, and the test named for it
is run there: the defect is caught when that test fails. The same tests run first on the unchanged worktree and must
pass, or a failure would prove nothing. The Cluster Autoscaler cannot be built here (the module proxy refuses
k8s.io/autoscaler/cluster-autoscaler), so its RBAC is checked by a table read from its source, not by the engine.

    python -m tests.cluster.planted_defects [name ...]     (make planted-defects)
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STACK_TEST = ("tests/cluster/test_stacks_on_engines.py::"
              "test_every_pod_is_admitted_and_runs_and_training_runs_on_its_group")


@dataclass(frozen=True)
class Defect:
    name: str
    path: str
    old: str
    new: str
    test: str
    """The pytest node id that must fail with the defect in place."""


DEFECTS = (
    Defect(
        "training pod asking for its instance's whole memory, more than its node offers",
        "workloads/target.py",
        "    request = pod_memory_mib(target.instance, devices) if memory_mib is None else memory_mib\n",
        "    request = int(target.instance.memory_gib * 1024)\n",
        f"{STACK_TEST}[gpu]",
    ),
    Defect(
        "privileged container in the training namespace",
        "workloads/security.py",
        '    "allowPrivilegeEscalation": False,\n    "capabilities": {"drop": ["ALL"]},\n',
        '    "privileged": True,\n    "capabilities": {"drop": ["ALL"]},\n',
        "tests/cluster/test_pod_security_on_engines.py::"
        "test_every_pod_of_every_stack_passes_its_namespaces_level_and_restricted_but_for_the_root_steps",
    ),
    Defect(
        "PyTorchJob with an unknown field",
        "workloads/pytorchjob.py",
        '"runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": backoff_limit(job)},',
        '"runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": backoff_limit(job), "ttlSecondsAfterFinish": 60},',
        f"{STACK_TEST}[dev]",
    ),
    Defect(
        "restart budget off by one",
        "workloads/training_pod.py",
        "    return max(1, job.node_losses) * job.replicas + 1\n",
        "    return max(1, job.node_losses) * job.replicas\n",
        "tests/cluster/test_failures_on_engines.py::"
        "test_the_pytorchjob_survives_its_budget_of_events_and_fails_on_the_next_crash",
    ),
    Defect(
        "Cluster Autoscaler chart whose ClusterRole has no resource.k8s.io",
        "infra/facts/versions.py",
        '("cluster-autoscaler", "9.59.0",',
        '("cluster-autoscaler", "9.47.0",',
        "tests/infra/test_cluster_autoscaler_rbac.py::test_the_stack_grants_everything_the_image_it_runs_watches",
    ),
    Defect(
        "side Job competing with training for the GPU nodes",
        "workloads/batch_jobs.py",
        '        "nodeSelector": side_step_selector(target),\n',
        '        "nodeSelector": target.node_selector(),\n        "tolerations": target.tolerations(),\n',
        f"{STACK_TEST}[gpu]",
    ),
)


def _plant(tree: Path, defect: Defect) -> None:
    path = tree / defect.path
    text = path.read_text()
    if text.count(defect.old) != 1:
        raise SystemExit(f"error: {defect.path}: the text the defect {defect.name!r} replaces is not there once; "
                         "update DEFECTS in tests/cluster/planted_defects.py")
    path.write_text(text.replace(defect.old, defect.new))


def _pytest(tree: Path, tests: list[str]) -> tuple[bool, float, str]:
    """Whether every test passed, how long it took, and what pytest said last (with -ra, why a test failed)."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], cwd=tree,
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "1000"})
    lines = done.stdout.splitlines()
    why = [line.split(" - ", 1)[-1] for line in lines if line.startswith(("FAILED", "ERROR"))]
    summary = [line.strip("= ") for line in lines if re.search(r"\d+ (passed|failed|error)", line)][-1:]
    return done.returncode == 0, time.monotonic() - started, " / ".join(line[:400] for line in [*why, *summary])


def main(argv: list[str] | None = None) -> int:
    summary = (__doc__ or "").split("\n")[0]
    parser = argparse.ArgumentParser(prog="python -m tests.cluster.planted_defects", description=summary)
    parser.add_argument("names", nargs="*", metavar="name", help="defects to plant (default: all)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - {d.name for d in DEFECTS})
    if unknown:
        parser.error(f"name {unknown[0]!r}: not a defect; one of {', '.join(repr(d.name) for d in DEFECTS)}")
    chosen = [d for d in DEFECTS if not args.names or d.name in args.names]
    missed = 0
    with tempfile.TemporaryDirectory(prefix="planted-") as scratch:
        tree = Path(scratch) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(tree), "HEAD"],
                       check=True)
        try:
            tests = sorted({d.test for d in chosen})
            passed, took, said = _pytest(tree, tests)
            print(f"unchanged HEAD: {'passed' if passed else 'FAILED'} in {took:.0f} s ({said})", flush=True)
            if not passed:
                print("error: the named tests fail without any defect; a failure with one would prove nothing",
                      file=sys.stderr)
                return 1
            for defect in chosen:
                _plant(tree, defect)
                passed, took, said = _pytest(tree, [defect.test])
                subprocess.run(["git", "-C", str(tree), "checkout", "--quiet", "--", defect.path], check=True)
                missed += passed
                print(f"{defect.name}: {'NOT CAUGHT' if passed else 'caught'} by {defect.test} in {took:.0f} s "
                      f"({said})", flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
    print(f"{len(chosen) - missed} of {len(chosen)} defects caught")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
