"""How much of the roofline real kernels reach: MFU, MBU and a per-step overhead, as named presets.

The roofline is a bound: no measurement beats it.  Real engines reach a
fraction of the peak FLOP/s (MFU) on compute-bound operations and of the
bandwidth (MBU) on memory-bound ones, and pay a fixed time per forward pass
(kernel launches, scheduling, sampling).  Each operation then takes
max(FLOPs / (peak x MFU), bytes / (bandwidth x MBU)), and each pass adds the
overhead.

``"ideal"`` is the bound itself.  ``"typical"`` is fitted to the public
measurements in ``data/measurements.csv`` by :func:`rooflab.calibration.calibrate`
(least squares on the log of predicted over measured); ``benchmarks/bench_efficiency.py``
prints the fit row by row.

>>> e = efficiency("typical")
>>> 0 < e.mfu < 1 and 0 < e.mbu < 1 and e.overhead.m_as("ms") > 0
True
>>> efficiency("ideal")
Efficiency(name='ideal', mfu=1, mbu=1, overhead=0 ms)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pint

from .catalogue import lookup
from .units import quantity, to_si
from .validation import fraction

__all__ = ["Efficiency", "efficiency", "PRESETS"]


@dataclass(frozen=True)
class Efficiency:
    """A named set of efficiency factors: MFU and MBU in (0, 1], overhead per forward pass in seconds."""

    name: str
    mfu: float
    mbu: float
    overhead_si: float = 0.0
    source: str = field(default="", repr=False, compare=False)
    aliases: tuple[str, ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        fraction(self.mfu, "mfu")
        fraction(self.mbu, "mbu")
        if not self.overhead_si >= 0:
            raise ValueError(f"overhead must not be negative, got {self.overhead_si} s")

    @property
    def overhead(self) -> pint.Quantity:
        """Fixed time each forward pass (a prefill, a decode step) adds, ms."""
        return quantity(self.overhead_si, "time").to("ms")

    def __repr__(self) -> str:
        return (f"Efficiency(name={self.name!r}, mfu={self.mfu:.3g}, mbu={self.mbu:.3g}, "
                f"overhead={self.overhead:.3g~P})")


# The typical preset: the values rooflab.calibration.calibrate() returns on data/measurements.csv
# (37 rows, median |error| 13%; rounded to 0.01 and 0.01 ms); tests/test_efficiency.py refits and
# checks they agree.  The table is of 2023 engines (TensorRT-LLM 0.5-0.6 static batching, gpt-fast),
# whose fixed cost per pass, a few ms, is larger than today's CUDA-graph engines pay at batch 1.
_TYPICAL = dict(mfu=0.53, mbu=0.83, overhead_si=3.73e-3)

PRESETS: dict[str, Efficiency] = {
    "ideal": Efficiency("ideal", 1.0, 1.0, 0.0,
                        source="The roofline bound: 100% of peak and bandwidth, no overhead.",
                        aliases=("roofline", "bound")),
    "typical": Efficiency("typical", **_TYPICAL,
                          source="Fitted to the 37 public measurements in rooflab/data/measurements.csv "
                                 "(TensorRT-LLM 0.5-0.6 tables and blog, gpt-fast README, 2023) by least squares "
                                 "on log(predicted / measured); see rooflab.calibration.",
                          aliases=("realistic", "calibrated")),
}
_INDEX = {key.lower(): preset for preset in PRESETS.values() for key in (preset.name, *preset.aliases)}


def efficiency(name: str | Efficiency = "typical") -> Efficiency:
    """Return the preset called ``name`` ("ideal" or "typical"), or ``name`` itself if it is an Efficiency."""
    if isinstance(name, Efficiency):
        return name
    return lookup(name, _INDEX, "efficiency preset", "typical")


def resolve(preset: str | Efficiency, mfu=None, mbu=None, overhead=None) -> tuple[float, float, float]:
    """Return (mfu, mbu, overhead in s) from a preset, each replaced by the explicit value when one is given."""
    e = efficiency(preset)
    return (
        e.mfu if mfu is None else fraction(mfu, "mfu"),
        e.mbu if mbu is None else fraction(mbu, "mbu"),
        e.overhead_si if overhead is None else _non_negative(to_si(overhead, "time", "overhead")),
    )


def _non_negative(value: float) -> float:
    if value < 0:
        raise ValueError(f"overhead must not be negative, got {value} s")
    return value
