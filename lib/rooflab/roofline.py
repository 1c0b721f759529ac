"""The roofline: an operation takes at least max(FLOPs / peak, bytes / bandwidth).

Whichever term is larger is the resource that *binds*.  Arithmetic intensity
(FLOPs per byte) says which: above the device's ridge point (peak /
bandwidth) compute binds, below it memory does.  Everything here works
element-wise on numpy arrays, so a sweep is one call.

A forward pass is several operations run one after the other (the body's
weight matmuls, attention over the cache, the output head), so its time is
the *sum* of their roofline times, never less than the single max over the
summed FLOPs and bytes: :func:`combine` builds such a Cost, whose ``parts``
keep each operation.

>>> from rooflab import Q_, hardware
>>> r = roofline(Q_(16, "GFLOP"), Q_(16, "GB"), hardware("H100"))
>>> r.bound, round(r.time.to("ms").magnitude, 2)
('memory', 4.78)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pint

from .hardware import Hardware, hardware as _hardware
from .precision import Precision, as_precision
from .units import quantity, rounded, to_si
from .validation import fraction

__all__ = ["Cost", "roofline", "cost_si", "combine"]


@dataclass(frozen=True)
class Cost:
    """What one operation, or a pass of several, costs on one device.

    Fields ending in ``_si`` are plain floats or arrays in SI units (FLOP, B,
    s); the properties give the same values as quantities.  ``time`` is the
    time under the efficiency factors (MFU, MBU, overhead); ``ideal_time`` is
    the pure roofline bound.  A pass keeps its operations in ``parts`` (by
    name: ``"body"``, ``"attention"``, ``"head"``), each a Cost of its own.
    """

    flops_si: float | np.ndarray
    bytes_si: float | np.ndarray
    compute_time_si: float | np.ndarray
    memory_time_si: float | np.ndarray
    time_si: float | np.ndarray
    fits: bool | np.ndarray = True
    mfu: float = 1.0
    mbu: float = 1.0
    parts: dict[str, Cost] = field(default_factory=dict, compare=False, repr=False)
    overhead_si: float = 0.0

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
        """Time the math alone needs at peak, ms: flops / peak_flops (summed over the parts)."""
        return quantity(self.compute_time_si, "time").to("ms")

    @property
    def memory_time(self) -> pint.Quantity:
        """Time the memory traffic alone needs at peak, ms: bytes / memory_bandwidth."""
        return quantity(self.memory_time_si, "time").to("ms")

    @property
    def ideal_time(self) -> pint.Quantity:
        """Roofline lower bound, ms: the sum over parts of max(compute_time, memory_time)."""
        return quantity(self._ideal_si, "time").to("ms")

    @property
    def _ideal_si(self):
        if not self.parts:
            return np.maximum(self.compute_time_si, self.memory_time_si)
        return sum(np.maximum(p.compute_time_si, p.memory_time_si) for p in self.parts.values())

    @property
    def one_operation_time(self) -> pint.Quantity:
        """The shortcut that prices the pass as one operation, ms: max(compute_time, memory_time).

        Never more than ``ideal_time``: it assumes every operation's reads overlap every other's math.
        """
        return quantity(np.maximum(self.compute_time_si, self.memory_time_si), "time").to("ms")

    @property
    def time(self) -> pint.Quantity:
        """Predicted time under the efficiency factors, ms (equals ideal_time at MFU = MBU = 1, no overhead)."""
        return quantity(self.time_si, "time").to("ms")

    @property
    def overhead(self) -> pint.Quantity:
        """Fixed time added to the pass (launches, scheduling, sampling), ms."""
        return quantity(self.overhead_si, "time").to("ms")

    @property
    def bound(self) -> str | np.ndarray:
        """``"compute"`` or ``"memory"``: for one operation, the resource whose time (under MFU and MBU) is
        the larger; for a pass of several, the resource that binds the parts taking most of the time."""
        if self.parts:
            compute = np.zeros(np.shape(self.time_si))
            memory = np.zeros(np.shape(self.time_si))
            for part in self.parts.values():
                on_compute = part._compute_bound
                part_time = part.time_si - part.overhead_si
                compute = compute + np.where(on_compute, part_time, 0.0)
                memory = memory + np.where(on_compute, 0.0, part_time)
            return _words(compute >= memory)
        return _words(self._compute_bound)

    @property
    def _compute_bound(self):
        return np.asarray(self.compute_time_si) / self.mfu >= np.asarray(self.memory_time_si) / self.mbu

    @property
    def dominant(self) -> str | np.ndarray:
        """Name of the part that takes the longest (element-wise for sweeps); "" for a single operation."""
        if not self.parts:
            return ""
        names = list(self.parts)
        times = np.stack([np.broadcast_to(np.asarray(p.time_si, dtype=float), np.shape(self.time_si))
                          for p in self.parts.values()])
        index = np.argmax(times, axis=0)
        if index.ndim == 0:
            return names[int(index)]
        return np.array(names)[index]

    def __repr__(self) -> str:
        if np.ndim(self.time_si) == 0:
            fits = "" if np.all(self.fits) else ", DOES NOT FIT"
            return (
                f"Cost(time={rounded(self.time):~P}, bound={self.bound!r}, flops={rounded(self.flops):~P}, "
                f"bytes={rounded(self.bytes):~P}, intensity={rounded(self.intensity):~P}{fits})"
            )
        return f"Cost(sweep of {np.size(self.time_si)} points)"


def _words(compute):
    compute = np.asarray(compute)
    if compute.ndim == 0:
        return "compute" if compute else "memory"
    return np.where(compute, "compute", "memory")


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
    return Cost(flops, nbytes, compute, memory, time, fits, mfu, mbu, {}, overhead)


def combine(parts: dict[str, Cost], overhead: float = 0.0, fits: bool | np.ndarray = True) -> Cost:
    """Return the Cost of running ``parts`` one after the other: each quantity summed, time = sum of the
    parts' times + overhead (s).  The parts must share one MFU and MBU."""
    first = next(iter(parts.values()))
    flops = nbytes = compute = memory = time = 0.0
    for part in parts.values():
        flops = flops + part.flops_si
        nbytes = nbytes + part.bytes_si
        compute = compute + part.compute_time_si
        memory = memory + part.memory_time_si
        time = time + part.time_si
    return Cost(flops, nbytes, compute, memory, time + overhead, fits, first.mfu, first.mbu, parts, overhead)


def roofline(
    flops: pint.Quantity,
    bytes: pint.Quantity,  # noqa: A002 - the roofline's own word for it
    hardware: Hardware | str,
    precision: str | Precision = "fp16",
    mfu: float = 1.0,
    mbu: float = 1.0,
) -> Cost:
    """Return the Cost of doing ``flops`` while moving ``bytes`` on ``hardware``, as one operation.

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
