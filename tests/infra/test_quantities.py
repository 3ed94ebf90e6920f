"""Kubernetes quantities read exactly, and anything else refused rather than read as zero."""

from fractions import Fraction

import pytest

from eks_ddp.infra.facts import quantities
from eks_ddp.engine_models.base import quantity


@pytest.mark.parametrize(("text", "value"), [
    ("32", 32), ("500m", Fraction(1, 2)), ("1.5", Fraction(3, 2)), ("5120Mi", 5120 * 2**20), ("2G", 2 * 10**9),
    ("1Ti", 2**40), ("3k", 3000), (0, 0), (" 8 ", 8),
])
def test_a_quantity_is_read_in_base_units(text: object, value: Fraction) -> None:
    assert quantities.exact(text) == value


@pytest.mark.parametrize("text", ["", "abc", "-1", "1e3", "5 Gi", "1mi", True])
def test_anything_else_is_no_quantity_and_an_error_to_the_rules(text: object) -> None:
    assert quantities.exact(text) is None
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        quantity(text)
