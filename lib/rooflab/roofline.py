"""The roofline: an operation takes at least max(FLOPs / peak, bytes / bandwidth).

Whichever term is larger is the resource that *binds*.  Arithmetic intensity
(FLOPs per byte) says which: above the device's ridge point (peak /
bandwidth) compute binds, below it memory does.  Everything here works
element-wise on numpy arrays, so a sweep is one call.

>>> from rooflab import Q_, hardware
>>> r = roofline(Q_(16, "GFLOP"), Q_(16, "GB"), hardware("H100"))
>>> r.bound, round(r.time.to("ms").magnitude, 2)
('memory', 4.78)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pint

from .hardware import Hardware, hardware as _hardware
from .precision import Precision, as_precision
from .units import quantity, to_si
from .validation import fraction

__all__ = ["Cost", "roofline", "cost_si"]


@dataclass(frozen=True)
class Cost:
    """What one operation or phase costs on one device.

    Fields ending in ``_si`` are plain floats or arrays in SI units (FLOP, B,
    s); the properties give the same values as quantities.  ``time`` is the
    time under the efficiency factors (MFU, MBU, overhead); ``ideal_time`` is
    the pure roofline bound.
    """

    flops_si: float | np.ndarray
    bytes_si: float | np.ndarray
    compute_time_si: float | np.ndarray
    memory_time_si: float | np.ndarray
    time_si: float | np.ndarray
    fits: bool | np.ndarray = True
    mfu: float = 1.0
    mbu: float = 1.0

    @property
    def flops(self) -> pint.Quantity:
        """FLOPs done, TFLOP."""
        return quantity(self.flops_si, "flops").to("TFLOP")

    @property
    def bytes(self) -> pint.Quantity:
        """Bytes moved to or from memory, GB."""
        return quantity(self.bytes_si, "bytes").to("GB")

    @property
    def intensity(self) -> pint.Quantity:
        """Arithmetic intensity, FLOP/B: flops / bytes."""
        return quantity(np.divide(self.flops_si, self.bytes_si), "intensity")

    @property
    def compute_time(self) -> pint.Quantity:
        """Time the math alone needs at peak, ms: flops / peak_flops."""
        return quantity(self.compute_time_si, "time").to("ms")

    @property
    def memory_time(self) -> pint.Quantity:
        """Time the memory traffic alone needs at peak, ms: bytes / memory_bandwidth."""
        return quantity(self.memory_time_si, "time").to("ms")

    @property
    def ideal_time(self) -> pint.Quantity:
        """Roofline lower bound, ms: max(compute_time, memory_time)."""
        return quantity(np.maximum(self.compute_time_si, self.memory_time_si), "time").to("ms")

    @property
    def time(self) -> pint.Quantity:
        """Predicted time under the efficiency factors, ms (equals ideal_time at MFU = MBU = 1, no overhead)."""
        return quantity(self.time_si, "time").to("ms")

    @property
    def bound(self) -> str | np.ndarray:
        """``"compute"`` or ``"memory"``: the resource whose time, under MFU and MBU, is the larger."""
        compute = np.asarray(self.compute_time_si) / self.mfu >= np.asarray(self.memory_time_si) / self.mbu
        if compute.ndim == 0:
            return "compute" if compute else "memory"
        return np.where(compute, "compute", "memory")

    def __repr__(self) -> str:
        if np.ndim(self.time_si) == 0:
            return (
                f"Cost(time={self.time:.4g~P}, bound={self.bound!r}, flops={self.flops:.4g~P}, "
                f"bytes={self.bytes:.4g~P}, intensity={self.intensity:.4g~P})"
            )
        return f"Cost(sweep of {np.size(self.time_si)} points)"


def cost_si(
    flops: float | np.ndarray,
    nbytes: float | np.ndarray,
    peak: float,
    bandwidth: float,
    mfu: float = 1.0,
    mbu: float = 1.0,
    overhead: float = 0.0,
    fits: bool | np.ndarray = True,
) -> Cost:
    """Build a Cost from SI floats: time = max(flops / (peak x mfu), bytes / (bandwidth x mbu)) + overhead."""
    compute = flops / peak
    memory = nbytes / bandwidth
    if isinstance(compute, np.ndarray) or isinstance(memory, np.ndarray):
        time = np.maximum(compute / mfu, memory / mbu) + overhead
    else:
        time = max(compute / mfu, memory / mbu) + overhead
    return Cost(flops, nbytes, compute, memory, time, fits, mfu, mbu)


def roofline(
    flops: pint.Quantity,
    bytes: pint.Quantity,  # noqa: A002 - the roofline's own word for it
    hardware: Hardware | str,
    precision: str | Precision = "fp16",
    mfu: float = 1.0,
    mbu: float = 1.0,
) -> Cost:
    """Return the Cost of doing ``flops`` while moving ``bytes`` on ``hardware``.

    time = max(flops / (peak x mfu), bytes / (bandwidth x mbu)); the peak is the
    one for the compute precision.
    """
    device = _hardware(hardware)
    peak = device.peak_flops_for(as_precision(precision).compute)
    return cost_si(
        to_si(flops, "flops", "flops"),
        to_si(bytes, "bytes", "bytes"),
        peak,
        device.memory_bandwidth_si,
        fraction(mfu, "mfu"),
        fraction(mbu, "mbu"),
    )
