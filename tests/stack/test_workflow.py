"""The CI workflow runs the README's test command and previews pull requests with the official action."""

from pathlib import Path

import yaml

WORKFLOW = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "ci.yml"


def test_workflow_tests_and_previews() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    test_steps = workflow["jobs"]["test"]["steps"]
    assert any(step.get("run") == "make test" for step in test_steps)
    preview = workflow["jobs"]["preview"]
    assert preview["needs"] == "test" and preview["permissions"]["pull-requests"] == "write"
    (action,) = [step for step in preview["steps"] if str(step.get("uses", "")).startswith("pulumi/actions@")]
    assert action["with"] == {"command": "preview", "stack-name": "dev", "comment-on-pr": True, "diff": True}
