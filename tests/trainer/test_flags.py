"""The trainer's flags (trainer/flags.py), parsed in this process: each bound where it lies, the image shape, every
flag reaching its setting, and the reference in docs/trainer.md equal to the parser."""

import argparse
import re
from pathlib import Path

import pytest

from eks_ddp.trainer import datasets
from eks_ddp.trainer.config import TrainConfig
from eks_ddp.trainer.flags import build_parser, reference, shape, train_config

ROOT = Path(__file__).resolve().parents[2]

def test_the_help_names_the_trainer_and_its_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    assert capsys.readouterr().out.startswith(
        "usage: python -m eks_ddp.trainer [-h] {train,evaluate,prepare-data} ...\n\nThe eks-ddp PyTorch DDP trainer.\n"
    )


def test_a_command_is_required_and_each_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args([])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "error: the following arguments are required: command (see python -m eks_ddp.trainer --help)"
    )
    assert [_parse(command).command for command in ("train", "evaluate")] == ["train", "evaluate"]
    prepare = build_parser().parse_args(["prepare-data", "--dataset", "mnist", "--data-dir", "d"])
    assert prepare.command == "prepare-data"


BOUNDS = [
    # command, flag, accepted at the edge, refused just past it, what the refusal says is allowed
    ("train", "--epochs", "1", "0", ">= 1"),
    ("train", "--lr", "1e-12", "0", "> 0"),
    ("train", "--weight-decay", "0", "-0.001", ">= 0"),
    ("train", "--warmup-fraction", "0", "-0.001", ">= 0 and < 1"),
    ("train", "--warmup-fraction", "0.999", "1", ">= 0 and < 1"),
    ("train", "--checkpoint-every", "0", "-1", ">= 0"),
    ("train", "--keep-checkpoints", "1", "0", ">= 1"),
    ("train", "--metrics-port", "0", "-1", ">= 0 and < 65536"),
    ("train", "--metrics-port", "65535", "65536", ">= 0 and < 65536"),
    ("train", "--timeout-minutes", "0.001", "0", "> 0"),
    ("train", "--synthetic-classes", "2", "1", ">= 2"),
    ("evaluate", "--wait-minutes", "0", "-0.5", ">= 0"),
    ("evaluate", "--batch-size", "1", "0", ">= 1"),
]


def _parse(command: str, *argv: str) -> argparse.Namespace:
    required = ["--model-file", "m.pt"] if command == "evaluate" else []
    return build_parser().parse_args([command, *required, *argv])


def _refusal(capsys: pytest.CaptureFixture[str], command: str, *argv: str) -> str:
    """The one line the command stops with, without what every refusal says around it."""
    with pytest.raises(SystemExit) as exit_:
        _parse(command, *argv)
    assert exit_.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    prefix, suffix = "error: ", f" (see python -m eks_ddp.trainer {command} --help)"
    assert line.startswith(prefix) and line.endswith(suffix), line
    return line.removeprefix(prefix).removesuffix(suffix)


@pytest.mark.parametrize(("command", "flag", "accepted", "refused", "allowed"), BOUNDS,
                         ids=[f"{c} {f} {r}" for c, f, _, r, _ in BOUNDS])
def test_each_bound_lies_where_the_flag_says(
    capsys: pytest.CaptureFixture[str], command: str, flag: str, accepted: str, refused: str, allowed: str
) -> None:
    assert getattr(_parse(command, flag, accepted), flag[2:].replace("-", "_")) == float(accepted)
    assert _refusal(capsys, command, flag, refused) == f"argument {flag}: {refused} is not allowed (must be {allowed})"


@pytest.mark.parametrize("flag", ["--epochs", "--lr", "--metrics-port"])
def test_a_number_flag_given_text_says_so(capsys: pytest.CaptureFixture[str], flag: str) -> None:
    assert _refusal(capsys, "train", flag, "ten") == f"argument {flag}: 'ten' is not a number"


def test_a_whole_number_flag_refuses_a_fraction(capsys: pytest.CaptureFixture[str]) -> None:
    assert _refusal(capsys, "train", "--epochs", "1.5") == "argument --epochs: '1.5' is not a number"


@pytest.mark.parametrize(("text", "parsed"), [("3x32x32", (3, 32, 32)), ("1X4X8", (1, 4, 8)), ("1x1x1", (1, 1, 1))])
def test_an_image_shape_is_channels_height_width(text: str, parsed: tuple[int, int, int]) -> None:
    assert shape(text) == parsed


@pytest.mark.parametrize(
    "text", ["3x32", "3x32x32x1", "3x0x32", "0x32x32", "3x32x0", "3x-1x32", "ax32x32", "3x 2x2", ""]
)
def test_a_shape_that_is_not_three_positive_whole_numbers_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=re.escape(f"{text!r} is not CxHxW with positive integers")):
        shape(text)


EVERY_TRAIN_FLAG = {
    "--dataset": ("synthetic", "dataset", "synthetic"),
    "--data-dir": ("/data", "data_dir", Path("/data")),
    "--model": ("mlp", "model", "mlp"),
    "--epochs": ("3", "epochs", 3),
    "--batch-size": ("7", "batch_size", 7),
    "--global-batch-size": ("28", "global_batch_size", 28),
    "--lr": ("0.5", "lr", 0.5),
    "--weight-decay": ("0.2", "weight_decay", 0.2),
    "--warmup-fraction": ("0.25", "warmup_fraction", 0.25),
    "--seed": ("-4", "seed", -4),
    "--precision": ("bf16", "precision", "bf16"),
    "--device": ("cpu", "device", "cpu"),
    "--output-dir": ("/out", "output_dir", Path("/out")),
    "--checkpoint-dir": ("/ckpt", "checkpoint_dir", Path("/ckpt")),
    "--artifact-uri": ("s3://b/a", "artifact_uri", "s3://b/a"),
    "--checkpoint-uri": ("s3://b/c", "checkpoint_uri", "s3://b/c"),
    "--run-name": ("job", "run_name", "job"),
    "--checkpoint-every": ("9", "checkpoint_every", 9),
    "--keep-checkpoints": ("5", "keep_checkpoints", 5),
    "--log-every": ("11", "log_every", 11),
    "--metrics-port": ("9400", "metrics_port", 9400),
    "--metrics-address": ("127.0.0.1", "metrics_address", "127.0.0.1"),
    "--timeout-minutes": ("2.5", "timeout_minutes", 2.5),
}
SYNTHETIC = {"--synthetic-shape": "1x4x8", "--synthetic-size": "13", "--synthetic-classes": "3"}


def test_every_train_flag_reaches_its_setting() -> None:
    argv = [text for flag, (value, _, _) in EVERY_TRAIN_FLAG.items() for text in (flag, value)]
    config = train_config(_parse("train", *argv, "--compile", *[t for item in SYNTHETIC.items() for t in item]))
    for flag, (_, name, expected) in EVERY_TRAIN_FLAG.items():
        assert getattr(config, name) == expected, f"{flag} -> TrainConfig.{name}"
    assert config.compile is True
    assert config.synthetic == datasets.SyntheticShape(1, 4, 8, 13, 3)
    assert {*(name for _, name, _ in EVERY_TRAIN_FLAG.values()), "compile", "synthetic"} == set(
        TrainConfig.__dataclass_fields__
    ), "a setting no flag reaches, or a flag this test does not try"


def test_without_them_the_run_is_named_for_its_output_and_checkpoints_beside_it(tmp_path: Path) -> None:
    config = train_config(_parse("train", "--output-dir", str(tmp_path / "out")))
    assert config.run_name == str((tmp_path / "out").resolve())
    assert config.checkpoint_dir == tmp_path / "out" / "checkpoints"
    assert config.compile is False and config.global_batch_size is None


def test_the_reference_in_the_docs_is_the_parser_s() -> None:
    text = (ROOT / "docs" / "trainer.md").read_text()
    found = re.search(r"<!-- generated by `python -m eks_ddp.trainer.flags`[^\n]*-->\n(.*)<!-- end of the generated",
                      text, re.DOTALL)
    assert found, "docs/trainer.md has no generated flags section"
    assert found.group(1) == reference(), (
        "docs/trainer.md's flags differ from the parser's: paste `python -m eks_ddp.trainer.flags` between its markers"
    )
