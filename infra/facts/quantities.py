"""Kubernetes quantities (`32`, `500m`, `5120Mi`, `2G`), read exactly: the one reader of the stack's quotas and of
what nodes and pods declare (k8s.io/apimachinery pkg/api/resource, decimal and binary suffixes; signs and exponents
are used by no resource here and are not read)."""

import re
from fractions import Fraction

SUFFIXES = {"": 1, "m": Fraction(1, 1000), "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
            "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_QUANTITY = re.compile(r"(\d+(?:\.\d+)?)(m|Ki|Mi|Gi|Ti|k|M|G|T)?")


def split(value: object) -> tuple[Fraction, str] | None:
    """(number, suffix) of a quantity, or None when `value` is not one (a bool never is)."""
    match = None if isinstance(value, bool) else _QUANTITY.fullmatch(str(value).strip())
    return (Fraction(match.group(1)), match.group(2) or "") if match else None


def exact(value: object) -> Fraction | None:
    """A quantity's value in base units (cores, bytes, devices), or None when `value` is not one."""
    parts = split(value)
    return parts[0] * SUFFIXES[parts[1]] if parts else None
