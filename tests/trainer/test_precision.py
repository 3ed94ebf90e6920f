from pathlib import Path

import pytest
import torch

from eks_ddp.trainer import precision


@pytest.mark.parametrize(
    ("flags", "machine", "expected"),
    [
        ({"avx512f", "avx512_bf16"}, "x86_64", True),  # Zen 4 / Cooper Lake
        ({"avx512f", "amx_bf16", "amx_tile"}, "x86_64", True),  # Sapphire Rapids
        ({"avx512f", "avx2"}, "x86_64", False),  # Skylake: bf16 would be emulated
        ({"fp", "asimd", "sve", "bf16"}, "aarch64", True),  # Graviton3/4
        ({"fp", "asimd"}, "aarch64", False),  # Graviton2
        ({"bf16"}, "riscv64", False),
    ],
)
def test_native_bf16(flags: set[str], machine: str, expected: bool) -> None:
    assert precision.cpu_has_native_bf16(flags, machine) is expected


def test_cpu_flags_reads_x86_and_arm_cpuinfo(tmp_path: Path) -> None:
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nflags\t\t: fpu avx512_bf16 sse\n")
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd bf16\n")
    assert precision.cpu_flags(x86) == {"fpu", "avx512_bf16", "sse"}
    assert precision.cpu_flags(arm) == {"fp", "asimd", "bf16"}
    assert precision.cpu_flags(tmp_path / "missing") == set()


def test_explicit_precision_is_kept() -> None:
    cpu = torch.device("cpu")
    assert precision.resolve("fp32", cpu) == "fp32" and precision.resolve("bf16", cpu) == "bf16"
