"""Checks for the counts and factors that public functions take.

Each check runs once, at the boundary, and raises an error that names the
argument and says what was expected.  What comes out is a plain int, float or
numpy array, ready for the arithmetic inside.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import pint

from .units import to_si

__all__ = ["lengths", "fraction"]


def lengths(value: object, name: str, minimum: int = 1) -> int | np.ndarray:
    """Return a whole count (token length, batch) as an int, or an int64 array for a sweep.

    Accepts ints, whole-valued floats, numpy arrays of either, and quantities
    in tokens.  Rejects booleans, fractions, NaN, infinities and values below
    ``minimum``, naming ``name``.
    """
    if type(value) is int and value >= minimum:  # the common case, without the ABC checks below
        return value
    if isinstance(value, pint.Quantity):
        value = to_si(value, "tokens", name)
    if isinstance(value, bool) or isinstance(value, np.bool_):
        raise TypeError(f"{name} must be a whole number, got the boolean {value!r}")
    if isinstance(value, Integral):
        if value < minimum:
            raise ValueError(f"{name} must be at least {minimum}, got {value}")
        return int(value)
    if isinstance(value, (Real, np.ndarray, list, tuple)):
        array = np.asarray(value)
        if array.dtype.kind not in "iuf":
            raise TypeError(f"{name} must be a whole number or an array of them, got {value!r}")
        if array.dtype.kind == "f":
            if not np.all(np.isfinite(array)):
                raise ValueError(f"{name} must be finite, got {value!r}")
            if not np.all(array == np.round(array)):
                raise ValueError(f"{name} must be a whole number, got {value!r}")
        if array.ndim and not array.size:  # reductions over a sweep (its longest context) have no empty answer
            raise ValueError(f"{name} is an empty array: a sweep needs at least one value")
        if array.size and array.min() < minimum:
            raise ValueError(f"{name} must be at least {minimum}, got a minimum of {array.min()}")
        if array.ndim == 0:
            return int(array)
        return array.astype(np.int64)
    raise TypeError(f"{name} must be a whole number or an array of them, got {value!r}")


def fraction(value: object, name: str) -> float:
    """Return an efficiency factor (MFU, MBU, memory utilisation) as a float in (0, 1]."""
    if type(value) is float and 0 < value <= 1:  # the common case, without the ABC checks below
        return value
    if isinstance(value, pint.Quantity):
        value = to_si(value, "dimensionless", name)
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a number between 0 and 1, got {value!r}")
    value = float(value)
    if not 0 < value <= 1:
        raise ValueError(f"{name} must be in (0, 1], got {value}")
    return value
