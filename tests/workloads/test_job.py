"""The job model's own parts: the user's code as torchrun runs it, its environment's names, a spec resolved."""

from eks_ddp.workloads.job import TrainingJobSpec, UserCode, resolve


def test_the_users_code_is_a_file_or_a_module() -> None:
    assert UserCode("train.py").launch() == ["train.py"]
    assert UserCode("-m team.train").launch() == ["-m", "team.train"]
    assert UserCode("src/-m.py").launch() == ["src/-m.py"]


def test_environment_names_are_the_users_own_and_valid() -> None:
    assert UserCode("t.py", env=(("lower_case", "1"), ("_X2", "2"))).problems() == {}
    reserved = UserCode("t.py", env=(("NCCL_DEBUG", "INFO"), ("RANK", "0"))).problems()
    assert reserved == {"env": "NCCL_DEBUG, RANK are set by the engines, torchrun or the pod: use other names"}
    invalid = UserCode("t.py", env=(("1ST", "a"), ("A-B", "b"), ("ok", "c"))).problems()
    assert invalid == {"env": "1ST, A-B are not environment variable names"}


def test_a_spec_resolves_with_its_trainer_arguments() -> None:
    spec: TrainingJobSpec = {"name": "j", "namespace": "n", "image": "i", "extra_args": ["--lr", "0.1"]}
    assert resolve(spec).extra_args == ("--lr", "0.1")
    assert resolve({"name": "j", "namespace": "n", "image": "i"}).extra_args == ()
