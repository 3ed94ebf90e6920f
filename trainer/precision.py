"""Choosing the compute precision: bf16 autocast where the hardware does bf16 natively."""

import platform
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import torch

PRECISIONS = ("auto", "fp32", "bf16")
# x86: AVX-512 BF16 (Cooper Lake, Zen 4+) or AMX (Sapphire Rapids+).
# Arm: the BF16 extension (Graviton3 and later report "bf16").
_NATIVE_BF16_FLAGS = {"x86_64": {"avx512_bf16", "amx_bf16"}, "aarch64": {"bf16"}}


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The feature flags the kernel reports (x86 `flags`, Arm `Features`); empty where unknown."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return set()


def cpu_has_native_bf16(flags: set[str], machine: str) -> bool:
    return bool(_NATIVE_BF16_FLAGS.get(machine, set()) & flags)


def resolve(requested: str, device: torch.device) -> str:
    """`fp32` or `bf16` for `--precision` on this device (`auto` picks bf16 only where it is fast)."""
    if requested != "auto":
        return requested
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    return "bf16" if cpu_has_native_bf16(cpu_flags(), platform.machine()) else "fp32"


def autocast(precision: str, device: torch.device) -> AbstractContextManager[object]:
    """The forward-pass context: bf16 autocast, or nothing for fp32."""
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return nullcontext()
