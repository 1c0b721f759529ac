"""The package's one pint registry, and the conversions at its public boundary.

pint's stock definitions leave ``bit`` and ``byte`` dimensionless, so out of
the box GB/s converts to Hz and ``Q_(4, "byte") == 32`` holds.  This registry
is built from ``units.txt`` beside this file: time, information, computation
(FLOPs), text (tokens), money (USD) and the few units derived from them (W, J, Hz), with
decimal and binary prefixes.  Bytes, FLOPs and tokens each have a dimension of
their own, so mixing them raises ``pint.DimensionalityError`` instead of
producing a wrong number, and ``Gb`` is a gigabit.

>>> Q_(3.35, "TB/s").to("GB/s")
<Quantity(3350.0, 'gigabyte / second')>
>>> Q_(1, "GiB").to("GB").magnitude
1.073741824
"""

from __future__ import annotations

import math
from importlib import resources
from numbers import Real

import numpy as np
import pint

__all__ = ["ureg", "Q_", "to_si", "as_quantity", "UnitError", "SI_UNITS", "rounded"]


ureg = pint.UnitRegistry(filename=None)
ureg.load_definitions(str(resources.files("rooflab").joinpath("units.txt")))
ureg.formatter.default_format = "~P"
if __package__ == "rooflab":  # not for the private reference copy that rooflab.check loads
    pint.set_application_registry(ureg)
Q_ = ureg.Quantity

#: The SI unit each dimension is held in inside the library's arithmetic.
SI_UNITS = {
    "time": "s",
    "bytes": "B",
    "flops": "FLOP",
    "flop_rate": "FLOP/s",
    "bandwidth": "B/s",
    "power": "W",
    "intensity": "FLOP/B",
    "tokens": "token",
    "token_rate": "token/s",
    "bytes_per_token": "B/token",
    "energy": "J",
    "energy_per_token": "J/token",
    "money": "USD",
    "price_rate": "USD/s",
    "cost_per_token": "USD/token",
    "request_rate": "1/s",
    "dimensionless": "",
}

# Unit objects made once: building a Quantity from a Unit is faster than from a string.
_UNITS = {kind: ureg.Unit(unit) for kind, unit in SI_UNITS.items()}
_DIMS = {kind: unit.dimensionality for kind, unit in _UNITS.items()}
_EXAMPLE = {
    "time": "ms",
    "bytes": "GB",
    "flops": "TFLOP",
    "flop_rate": "TFLOP/s",
    "bandwidth": "TB/s",
    "power": "W",
    "intensity": "FLOP/B",
    "tokens": "token",
    "token_rate": "token/s",
    "bytes_per_token": "KiB/token",
    "energy": "J",
    "energy_per_token": "J/token",
    "money": "USD",
    "price_rate": "USD/h",
    "cost_per_token": "USD/Mtok",
    "request_rate": "1/s",
    "dimensionless": "",
}


_FACTORS: dict = {}


class UnitError(TypeError):
    """A value given with the wrong unit, or with none where one is needed."""


def _from_other_registry(value: pint.Quantity) -> pint.Quantity:
    """Re-create a quantity made by another pint registry in ours, by its unit text."""
    return Q_(value.magnitude, format(value.units, "D") if str(value.units) else "")


def as_quantity(value: object, kind: str, name: str) -> pint.Quantity:
    """Return ``value`` as a quantity of our registry with the dimension of ``kind``.

    ``kind`` is a key of :data:`SI_UNITS`.  A bare number, a quantity of another
    dimension or a NaN raises an error that names ``name`` and shows the fix.
    """
    example = _EXAMPLE[kind]
    if not isinstance(value, pint.Quantity):
        if kind == "dimensionless" and isinstance(value, (Real, np.ndarray)):
            value = Q_(value, "")
        else:
            raise UnitError(
                f"{name} must be a quantity with units of {example or 'a pure number'}, "
                f"got the bare value {value!r}; write {name}=Q_({value!r}, {example!r})"
            )
    if value._REGISTRY is not ureg:
        value = _from_other_registry(value)
    if value.dimensionality != _DIMS[kind]:
        raise UnitError(
            f"{name} must have the dimension of {example or 'a pure number'} "
            f"({_DIMS[kind] or 'dimensionless'}), got {value:~P} "
            f"({value.dimensionality or 'dimensionless'})"
        )
    return value


def to_si(value: object, kind: str, name: str) -> float | np.ndarray:
    """Return the magnitude of ``value`` in the SI unit of ``kind`` (a float or array).

    Checks the dimension once, then the caller works with plain numbers.
    NaN and infinite values are rejected here, naming ``name``.
    """
    quantity = as_quantity(value, kind, name)
    factor = _FACTORS.get(quantity._units)
    if factor is None:
        # pint's own conversion costs tens of microseconds; a unit's factor to SI never changes.
        factor = _FACTORS[quantity._units] = Q_(1.0, quantity.units).m_as(_UNITS[kind])
    magnitude = quantity.magnitude * factor
    if isinstance(magnitude, np.ndarray):
        if not np.all(np.isfinite(magnitude)):
            raise ValueError(f"{name} must be finite, got {quantity:~P}")
        return magnitude.astype(float)
    if not math.isfinite(magnitude):
        raise ValueError(f"{name} must be finite, got {quantity:~P}")
    return float(magnitude)


def quantity(magnitude: float | np.ndarray, kind: str) -> pint.Quantity:
    """Wrap an SI magnitude as a quantity of ``kind`` (the way out of the library)."""
    return Q_(magnitude, _UNITS[kind])


def rounded(value: pint.Quantity, digits: int = 3) -> pint.Quantity:
    """Return ``value`` with its magnitude rounded to ``digits`` significant figures (for printing).

    >>> f"{rounded(Q_(1894.77, 'FLOP/B')):~P}", f"{rounded(Q_(0.0160616, 'TFLOP')):~P}"
    ('1890 FLOP/B', '0.0161 TFLOP')
    """
    magnitude = float(value.magnitude)
    if magnitude == 0 or not math.isfinite(magnitude):
        return value
    places = digits - 1 - math.floor(math.log10(abs(magnitude)))
    shown = round(magnitude, places)
    return Q_(int(shown) if places <= 0 else shown, value.units)
