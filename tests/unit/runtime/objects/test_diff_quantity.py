"""Kubernetes quantities (runtime/objects/diff.py): the value `resource.ParseQuantity` gives a
string, so a quantity the API server rewrote in its canonical form compares equal to the
one we wrote, and any other value does not."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamo_pool_operator.runtime.objects.diff import equal_quantities, parse_quantity


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("1", Decimal(1)),
        (2, Decimal(2)),
        ("100m", Decimal("0.1")),
        ("1.5", Decimal("1.5")),
        (".5", Decimal("0.5")),
        ("5.", Decimal(5)),
        ("1Ki", Decimal(1024)),
        ("1Gi", Decimal(2**30)),
        ("1Ei", Decimal(2**60)),
        ("2k", Decimal(2000)),
        ("1E", Decimal(10**18)),  # exa, not an exponent
        ("1e3", Decimal(1000)),
        ("1E-3", Decimal("0.001")),
        ("1.5e+2", Decimal(150)),
        ("+1", Decimal(1)),
        ("-1", Decimal(-1)),
        ("5n", Decimal("5e-9")),
        ("3u", Decimal("3e-6")),
        ("007", Decimal(7)),
        # Rounded up (away from zero) to a whole nano, as the API server does.
        ("0.1n", Decimal("1e-9")),
        ("1.0000000001", Decimal("1.000000001")),
        ("-0.1n", Decimal("-1e-9")),
        ("1e-20", Decimal("1e-9")),
        # A binary-SI value is capped at the largest int64; a decimal one is not.
        ("9Ei", Decimal(2**63 - 1)),
        ("9E", Decimal(9 * 10**18)),
        # The exponent is read as an int64 and kept as an int32, as Kubernetes does.
        ("1e4294967296", Decimal(1)),
        ("1e2147483647", Decimal("1e2147483647")),
        # Beyond any float: exact.
        (
            "123456789012345678901234567890.123456789",
            Decimal("123456789012345678901234567890.123456789"),
        ),
    ],
)
def test_the_value_of_a_quantity(raw: object, value: Decimal) -> None:
    assert parse_quantity(raw) == value


@pytest.mark.parametrize(
    "raw",
    [
        "lots", "", " 1", "1 ", "1 Gi", "1GB", "1.2.3", "Mi", "m", "1e", "1e1.5", "1Ki3",
        "1ki", "1K", ".", "+", "1e99999999999999999999", True, None, 1.5, "1\n", [], {},
    ],
)  # fmt: skip
def test_not_a_quantity(raw: object) -> None:
    assert parse_quantity(raw) is None


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("1000m", "1"),
        ("1Gi", "1024Mi"),
        ("0.5", "500m"),
        ("1e3", "1k"),
        ("1k", "1000"),
        ("1M", "1e6"),
        ("1Mi", "1048576"),
        ("1Ki", "1024"),
        (1, "1"),
        (2, "2000m"),
        ("+1", "1"),
        ("1.0", "1"),
        ("0", "-0"),
        ("0.1n", "1n"),  # what the server keeps
        ("10Ei", "9Ei"),  # both capped
    ],
)
def test_a_quantity_in_another_form_is_equal(a: object, b: object) -> None:
    assert equal_quantities(a, b)
    assert equal_quantities(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("500m", "64"),
        ("1G", "1Gi"),
        ("1m", "1M"),
        ("1", "1001m"),
        ("128Mi", "128M"),
        ("1", ""),
        ("1", None),
        ("1", "one"),
        (1, True),
        ("1", 1.0),  # not a quantity: compared as it is
        ("1n", "2n"),
    ],
)
def test_a_different_quantity_is_not_equal(a: object, b: object) -> None:
    assert not equal_quantities(a, b)
    assert not equal_quantities(b, a)


def test_values_that_are_not_quantities_are_compared_as_they_are() -> None:
    assert equal_quantities("lots", "lots")
    assert not equal_quantities("lots", "Lots")
    assert equal_quantities(None, None)


@given(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from(["", "k", "M", "G", "T", "P", "E"]),
)
def test_every_decimal_suffix_is_its_power_of_ten(n: int, suffix: str) -> None:
    power = {"": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}[suffix]
    assert equal_quantities(f"{n}{suffix}", f"{n}e{power}")
    assert equal_quantities(f"{n}{suffix}", str(n * 10**power))


@given(st.integers(min_value=0, max_value=2**20), st.integers(min_value=1, max_value=4))
def test_every_binary_suffix_is_its_power_of_1024(n: int, k: int) -> None:
    suffix = ("Ki", "Mi", "Gi", "Ti")[k - 1]
    assert equal_quantities(f"{n}{suffix}", str(n * 1024**k))


@given(st.integers(min_value=-(10**12), max_value=10**12))
def test_milli_is_a_thousandth(n: int) -> None:
    whole, frac = divmod(abs(n), 1000)
    sign = "-" if n < 0 else ""
    assert equal_quantities(f"{n}m", f"{sign}{whole}.{frac:03d}")
    assert equal_quantities(f"{n}m", f"{n}e-3")
