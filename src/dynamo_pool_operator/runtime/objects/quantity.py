"""Kubernetes resource quantities (`resource.Quantity`): their value. Pure.

The API server keeps a quantity in its canonical form, not as it was written: `1000m`
is stored as `1`, `0.5` as `500m`, `1024Mi` as `1Gi`, an integer `2` as `"2"`. So a
field of quantities (a container's `resources.limits` and `requests`) is compared by
value, `equal`, or every pass would see drift where there is none.

`parse` gives the value `resource.ParseQuantity` gives: a signed decimal number (`5`,
`.5`, `5.`; at least one digit) and an optional suffix, binary SI (`Ki` to `Ei`, powers
of 1024), decimal SI (`n`, `u`, `m`, `k`, `M`, `G`, `T`, `P`, `E`) or a decimal exponent
(`e3`, `E-2`: an integer, read as an int64 and kept as an int32, as Kubernetes does).
The value is rounded up (away from zero) to a whole nano, and a binary-SI value is
capped at the largest int64, as the server does. Only exact arithmetic: a value too
long to compute exactly is no quantity here (and is then compared as written).
"""

from __future__ import annotations

import re
from decimal import (
    MAX_EMAX,
    MIN_EMIN,
    ROUND_UP,
    Context,
    Decimal,
    DecimalException,
    Inexact,
    InvalidOperation,
    Overflow,
    Rounded,
)

_GRAMMAR = re.compile(
    r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE]([+-]?[0-9]+))?"
)
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_INT64 = 2**63
_MAX_BINARY = Decimal(_INT64 - 1)
_NANO = Decimal("1e-9")
#: Exact or nothing: any rounding raises (the nano rounding is asked for explicitly).
_EXACT = Context(
    prec=1000, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[InvalidOperation, Overflow, Inexact, Rounded]
)
_ROUNDING = Context(prec=1000, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[InvalidOperation, Overflow])


def _int32(exponent: int) -> int:
    """Go's `int32(x)` of an int64: the low 32 bits, signed."""
    return (exponent + 2**31) % 2**32 - 2**31


def parse(raw: object) -> Decimal | None:
    """The value of the quantity `raw` (`"100m"` is 0.1, `"1Gi"` is 2**30, an int is
    itself), or None when `raw` is not one."""
    if type(raw) is int:
        return Decimal(raw)
    if type(raw) is not str:
        return None  # bool, float, None, ...: not a quantity in an int-or-string field
    match = _GRAMMAR.fullmatch(raw)
    if match is None:
        return None
    number, suffix, exponent = match.groups()
    try:
        value = Decimal(number)
        if suffix in _BINARY:
            value = _EXACT.multiply(value, Decimal(1024) ** _BINARY[suffix])
            if abs(value) > _MAX_BINARY:
                value = _MAX_BINARY.copy_sign(value)
        else:
            if exponent is not None:
                power = int(exponent)
                if not -_INT64 <= power < _INT64:
                    return None  # Go's ParseInt refuses it
                power = _int32(power)
            else:
                power = _DECIMAL[suffix or ""]
            value = value.scaleb(power, _EXACT)
        exp = value.as_tuple().exponent
        if isinstance(exp, int) and exp < -9:
            value = value.quantize(_NANO, rounding=ROUND_UP, context=_ROUNDING)
    except DecimalException:
        return None
    return value


def equal(a: object, b: object) -> bool:
    """Do `a` and `b` hold the same quantity? Values that are not quantities are compared
    as they are (and of the same type: `True` is no `1`)."""
    if type(a) is type(b) and a == b:
        return True
    x, y = parse(a), parse(b)
    return x is not None and y is not None and x == y
