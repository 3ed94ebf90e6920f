"""Bad input: one line naming the flag or file, a non-zero exit, and nothing good overwritten."""

import argparse
from pathlib import Path

import pytest
import torch

from eks_ddp.trainer import flags
from tests.conftest import run_trainer
from tests.trainer.in_process import tiny_run, train_epochs


def _assert_one_line_error(stderr: str, *fragments: str) -> None:
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (
            ["train", "--dataset", "imagenet"],
            ("--dataset", "'imagenet'", "choose from 'digits', 'mnist', 'cifar10', 'synthetic'"),
        ),
        (
            ["train", "--dataset", "mnist", "--data-dir", "/nonexistent/mnist"],
            ("--data-dir /nonexistent/mnist: no such directory", "prepare-data"),
        ),
        (["train", "--batch-size", "0"], ("--batch-size", "0 is not allowed (must be >= 1)")),
        (["train", "--epochs", "-3"], ("--epochs", "-3 is not allowed (must be >= 1)")),
        (["train", "--lr", "0"], ("--lr", "0 is not allowed (must be > 0)")),
        (["train", "--synthetic-shape", "3x32"], ("--synthetic-shape", "'3x32' is not CxHxW")),
        (["evaluate", "--model-file", "/nonexistent/model.pt"], ("--model-file /nonexistent/model.pt: no such file",)),
    ],
)
def test_bad_flags(args: list[str], fragments: tuple[str, ...], tmp_path: Path) -> None:
    result = run_trainer([*args, *(["--output-dir", str(tmp_path / "out")] if args[0] == "train" else [])])
    assert result.returncode == 2
    _assert_one_line_error(result.stderr, *fragments)


ZERO_REFUSED = [
    ("train", "--epochs", "0 is not allowed (must be >= 1)"),
    ("train", "--batch-size", "0 is not allowed (must be >= 1)"),
    ("train", "--global-batch-size", "0 is not allowed (must be >= 1)"),
    ("train", "--keep-checkpoints", "0 is not allowed (must be >= 1)"),
    ("train", "--log-every", "0 is not allowed (must be >= 1)"),
    ("train", "--synthetic-size", "0 is not allowed (must be >= 1)"),
    ("train", "--synthetic-classes", "0 is not allowed (must be >= 2)"),
    ("train", "--synthetic-shape", "'3x0x32' is not CxHxW with positive integers"),
    ("train", "--lr", "0 is not allowed (must be > 0)"),
    ("train", "--timeout-minutes", "0 is not allowed (must be > 0)"),
    ("evaluate", "--batch-size", "0 is not allowed (must be >= 1)"),
]
ZERO_MEANS = {  # what zero means: a setting as good as any other
    ("train", "--checkpoint-every"): "checkpoints at epoch ends only",
    ("train", "--metrics-port"): "serves no metrics",
    ("train", "--seed"): "a seed like any other",
    ("train", "--weight-decay"): "no weight decay",
    ("train", "--warmup-fraction"): "no warm-up",
    ("evaluate", "--wait-minutes"): "no wait for the model (the default)",
}


def _numeric_flags() -> set[tuple[str, str]]:
    """Every flag of every command that takes a number (its type neither a path nor a plain string)."""
    (commands,) = (action for action in flags.build_parser()._actions if isinstance(action, argparse._SubParsersAction))
    return {
        (name, action.option_strings[-1])
        for name, parser in commands.choices.items()
        for action in parser._actions
        if action.type not in (None, Path)
    }


def test_zero_is_decided_for_every_numeric_flag() -> None:
    """A new count flag must say here whether zero is refused or means something."""
    decided = {(command, flag) for command, flag, _ in ZERO_REFUSED} | set(ZERO_MEANS)
    assert _numeric_flags() == decided


def _argv(command: str, flag: str, value: str) -> list[str]:
    return [command, flag, value, *(["--model-file", "model.pt"] if command == "evaluate" else [])]


@pytest.mark.parametrize(("command", "flag", "message"), ZERO_REFUSED, ids=[f"{c} {f}" for c, f, _ in ZERO_REFUSED])
def test_zero_is_refused_where_it_means_nothing(
    command: str, flag: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Parsed only, in this process: were zero accepted, `cli.main` would go on to train."""
    with pytest.raises(SystemExit) as exit_:
        flags.build_parser().parse_args(_argv(command, flag, "3x0x32" if flag == "--synthetic-shape" else "0"))
    assert exit_.value.code == 2
    _assert_one_line_error(capsys.readouterr().err, f"argument {flag}: {message}")


@pytest.mark.parametrize(("command", "flag"), ZERO_MEANS, ids=[f"{c} {f} 0: {m}" for (c, f), m in ZERO_MEANS.items()])
def test_zero_is_accepted_where_it_means_something(command: str, flag: str) -> None:
    args = flags.build_parser().parse_args(_argv(command, flag, "0"))
    assert getattr(args, flag.removeprefix("--").replace("-", "_")) == 0


@pytest.mark.parametrize(("every", "saved_after"), [("0", []), ("2", [2])])
def test_checkpoint_every_zero_checkpoints_at_epoch_ends_only(
    tmp_path: Path, every: str, saved_after: list[int]
) -> None:
    """An epoch of 3 steps: no checkpoint inside it with 0, one after step 2 with 2 (the epoch's end saves too, in
    Run.execute, whatever the flag)."""
    run = tiny_run(tmp_path, "--checkpoint-every", every, "--synthetic-size", "12", "--global-batch-size", "4")
    run.resume()
    periodic: list[int] = []
    run.save_checkpoint = lambda: periodic.append(run.progress.step)  # type: ignore[method-assign]
    train_epochs(run)
    assert periodic == saved_after, f"checkpoints after steps {periodic}"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA; the refusal is for pods without it")
def test_a_gpu_pod_without_cuda_stops_before_writing_anything(tmp_path: Path) -> None:
    result = run_trainer(["train", "--device", "cuda", "--output-dir", str(tmp_path / "out")])
    assert result.returncode == 2 and not (tmp_path / "out").exists()
    # The reason names what is missing: a CPU-only wheel, or a CUDA wheel (PyPI's default on x86) with no GPU.
    reason = "was built without CUDA" if torch.version.cuda is None else "no GPU is visible"
    _assert_one_line_error(result.stderr, "--device cuda:", reason, "or use --device cpu")


def test_unwritable_output_dir(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = run_trainer(["train", "--output-dir", str(blocker / "out")])
    assert result.returncode == 2
    _assert_one_line_error(result.stderr, f"--output-dir {blocker / 'out'}: not writable")


def test_model_file_that_is_not_a_model(tmp_path: Path) -> None:
    bogus = tmp_path / "model.pt"
    bogus.write_bytes(b"\x00" * 64)
    result = run_trainer(["evaluate", "--model-file", str(bogus)])
    assert result.returncode == 2
    _assert_one_line_error(result.stderr, f"--model-file {bogus}: not a model saved by this trainer")


def test_checkpoint_dir_shared_by_two_jobs_is_refused(tmp_path: Path) -> None:
    """Same model and data, but another run: resuming from its checkpoints would mix two jobs."""
    checkpoints = tmp_path / "shared-checkpoints"
    first = run_trainer(
        ["train", "--epochs", "1", "--output-dir", str(tmp_path / "job-a"), "--checkpoint-dir", str(checkpoints)]
    )
    assert first.returncode == 0, first.stderr
    before = {path.name: path.read_bytes() for path in checkpoints.iterdir()}
    result = run_trainer(
        ["train", "--epochs", "1", "--output-dir", str(tmp_path / "job-b"), "--checkpoint-dir", str(checkpoints)]
    )
    assert result.returncode == 1
    _assert_one_line_error(
        result.stderr,
        f"--run-name {tmp_path / 'job-b'} does not match",
        f"started with --run-name {tmp_path / 'job-a'}",
    )
    assert {path.name: path.read_bytes() for path in checkpoints.iterdir()} == before


ON_THE_FINISHED_RUN = pytest.mark.xdist_group("test_bad_input.finished_run")
"""On the worker that has the run: `make test`'s workers (--dist loadgroup) would each train their own copy."""


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    output = tmp_path_factory.mktemp("finished")
    result = run_trainer(["train", "--epochs", "1", "--model", "mlp", "--output-dir", str(output), "--run-name", "job"])
    assert result.returncode == 0, result.stderr
    return output


@ON_THE_FINISHED_RUN
def test_checkpoint_of_another_model_is_refused_and_left_intact(finished_run: Path, tmp_path: Path) -> None:
    checkpoints = finished_run / "checkpoints"
    before = {path.name: path.read_bytes() for path in checkpoints.iterdir()}
    assert before
    second_out = tmp_path / "second"
    result = run_trainer(
        [
            "train",
            "--model",
            "small-cnn",
            "--epochs",
            "1",
            "--output-dir",
            str(second_out),
            "--checkpoint-dir",
            str(checkpoints),
            "--run-name",
            "job",
        ]
    )
    assert result.returncode == 1
    _assert_one_line_error(
        result.stderr,
        f"--model small-cnn does not match the run in --checkpoint-dir {checkpoints}, started with --model mlp",
    )
    assert {path.name: path.read_bytes() for path in checkpoints.iterdir()} == before
    assert not (second_out / "model.pt").exists()


@pytest.mark.parametrize(
    ("flag", "value", "recorded"),
    [("--seed", "1", "0"), ("--lr", "0.01", "0.003"), ("--epochs", "2", "1"), ("--batch-size", "32", "64")],
)
@ON_THE_FINISHED_RUN
def test_a_resume_with_other_hyperparameters_is_refused(
    finished_run: Path, flag: str, value: str, recorded: str
) -> None:
    """Re-running a job with another seed, LR, length or batch must not silently continue the old run."""
    checkpoints = finished_run / "checkpoints"
    before = {path.name: path.read_bytes() for path in checkpoints.iterdir()}
    args = [
        "train",
        "--epochs",
        "1",
        "--model",
        "mlp",
        "--output-dir",
        str(finished_run),
        "--run-name",
        "job",
        flag,
        value,
    ]
    result = run_trainer(args)
    assert result.returncode == 1
    _assert_one_line_error(
        result.stderr,
        f"{flag} {value} does not match the run in --checkpoint-dir {checkpoints}, "
        f"started with {flag} {recorded}; resume it with {flag} {recorded}",
    )
    assert {path.name: path.read_bytes() for path in checkpoints.iterdir()} == before


@ON_THE_FINISHED_RUN
def test_evaluating_the_model_of_another_run_is_refused(finished_run: Path) -> None:
    """After a re-deploy, the evaluation must not score the previous run's model.pt."""
    model = finished_run / "model.pt"
    result = run_trainer(["evaluate", "--model-file", str(model), "--run-name", "job-2"])
    assert result.returncode == 2
    _assert_one_line_error(result.stderr, f"--model-file {model} was written by run job, not --run-name job-2")
    assert run_trainer(["evaluate", "--model-file", str(model), "--run-name", "job"]).returncode == 0


def test_the_printed_tensorboard_command_runs_from_any_shell(tmp_path: Path) -> None:
    """`tensorboard` lives in the virtual environment's bin/, which the user's PATH may lack: the trainer prints the
    script by its path, and the command it prints answers `--version`."""
    import shlex
    import subprocess

    from eks_ddp.trainer.cli import tensorboard_command

    command = shlex.split(tensorboard_command())
    assert Path(command[0]).is_absolute()
    ran = subprocess.run([*command, "--version_tb"], capture_output=True, text=True, env={"PATH": ""}, check=False)
    assert ran.returncode == 0 and ran.stdout.strip(), ran.stderr[-500:]
