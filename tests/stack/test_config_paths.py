"""`CONFIG` / `--config` take every path form `pulumi config set --path` takes, with the CLI's leaf types."""

import pytest

from eks_ddp.tools import stack_file
from eks_ddp.stack.config import ConfigError, parse
from eks_ddp.stack.config_paths import PathError, segments, with_path
from eks_ddp.stack.project_config import StackFileError


@pytest.mark.parametrize(
    ("path", "parts"),
    [
        ("job.replicas", ["job", "replicas"]),
        ("nodeGroups[1].maxSize", ["nodeGroups", 1, "maxSize"]),
        ('["parent.name"]["nested.name"]', ["parent.name", "nested.name"]),
        ('["parent.name"].["nested.name"]', ["parent.name", "nested.name"]),
        ("names[0]", ["names", 0]),
    ],
)
def test_each_path_form_of_the_cli(path: str, parts: list[str | int]) -> None:
    assert segments(path) == parts


def test_leaves_are_typed_as_the_cli_types_them_and_lists_grow_by_one() -> None:
    job = {"name": "x", "replicas": 2}
    assert with_path(job, ["replicas"], "4") == {"name": "x", "replicas": 4}
    assert with_path(job, ["evaluate"], "false")["evaluate"] is False
    assert with_path(job, ["name"], "4a")["name"] == "4a" and job["replicas"] == 2  # a copy
    assert with_path([{"name": "s"}], [1, "name"], "w") == [{"name": "s"}, {"name": "w"}]
    with pytest.raises(PathError, match=r"\[3\] does not fit: the list has 1 items"):
        with_path([{"name": "s"}], [3, "name"], "w")


def test_a_path_override_reaches_the_stack_values_and_a_bad_value_is_named_as_written() -> None:
    values, region = stack_file.load(
        "dev", override={"eks-ddp:job.replicas": "3", "eks-ddp:nodeGroups[1].maxSize": "4"}
    )
    assert values["job"]["replicas"] == 3 and values["nodeGroups"][1]["maxSize"] == 4
    assert values["job"]["name"] == "mnist-ddp"  # the rest of the stack file's job stays
    values, region = stack_file.load("dev", override={"eks-ddp:job.replicas": "0"})
    with pytest.raises(ConfigError, match=r"^eks-ddp:job\.replicas: 0 is not allowed; use a whole number >= 1$"):
        parse(values, region)
    values, region = stack_file.load("dev", override={"eks-ddp:nodeGroups[1].maxSize": "0"})
    with pytest.raises(ConfigError, match=r"^eks-ddp:nodeGroups\[1\]\.maxSize: 0 is not allowed"):
        parse(values, region)
    with pytest.raises(StackFileError, match=r"eks-ddp:nodeGroups\[7\]\.maxSize=3: \[7\] does not fit: the list has 2"):
        stack_file.load("dev", override={"eks-ddp:nodeGroups[7].maxSize": "3"})
