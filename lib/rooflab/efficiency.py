"""How much of the roofline real engines reach: MFU, MBU per weight format, a per-pass overhead and the
all-reduce's share of the link, as named presets.

The roofline is a bound: no measurement beats it.  Real engines reach a
fraction of the peak FLOP/s (MFU) on compute-bound operations and of the
bandwidth (MBU) on memory-bound ones, and pay a fixed time per forward pass
(kernel launches, scheduling, sampling).  Each operation then takes
max(FLOPs / (peak x MFU), bytes / (bandwidth x MBU)), and each pass adds the
overhead.

The weight matmuls (the body) run at the factors of their weight format
(:func:`weight_format`): 16-bit, FP8 (weights and activations in the format,
no dequantisation), INT8 weight-only and INT4 weight-only.  A weight-only
kernel reads fewer bytes but reaches less of the bandwidth (it unpacks and
scales each weight), and once the batch makes it compute-bound it multiplies
slower than a 16-bit kernel (the dequantisation shares the cores: W4A16 at a
large batch is slower than FP16).  Attention and the head run at the 16-bit
factors.  A tensor-parallel all-reduce moves its bytes at
``allreduce_efficiency`` x the link bandwidth and pays ``allreduce_latency``.

``"ideal"`` is the bound itself and the library's one default.
``"typical"`` is fitted to current engines (CUDA graphs or torch.compile, in-flight batching; 2024-2025
measurements); ``"typical-2023"`` to 2023's static-batching engines.  Both come from
:func:`rooflab.calibration.calibrate` on the tables named in ``data``, and each states its vintage and its
median and maximum error (``benchmarks/bench_efficiency.py`` prints them row by row).

>>> e = efficiency("typical")
>>> 0 < e.mfu < 1 and 0 < e.mbu < 1 and e.overhead.m_as("ms") > 0
True
>>> e.body_factors("int4-g128")[1] < e.body_factors("fp16")[1]  # a W4A16 kernel reaches less bandwidth
True
>>> efficiency("ideal")
Efficiency(name='ideal', mfu=1, mbu=1, overhead=0 ms)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pint

from .catalogue import lookup
from .precision import DTYPE_BITS, Precision, as_precision
from .units import quantity, to_si
from .validation import fraction

__all__ = ["Efficiency", "efficiency", "PRESETS", "WEIGHT_FORMATS", "weight_format"]

#: The weight formats an efficiency distinguishes (see :func:`weight_format`).
WEIGHT_FORMATS = ("16-bit", "fp8", "int8", "int4")


def weight_format(precision: str | Precision) -> str:
    """Return the class of kernel the body's matmuls run: "16-bit" (16 or 32-bit weights), "fp8" (weights
    multiplied in their own format: FP8 or INT8 W8A8, FP4 on Blackwell), "int8" (8-bit weights, 16-bit math)
    or "int4" (4-bit weights, 16-bit math: GPTQ, AWQ, NF4, MXFP4 on older cores)."""
    p = as_precision(precision)
    bits = DTYPE_BITS[p.weights]
    if bits >= 16:
        return "16-bit"
    if DTYPE_BITS[p.compute] <= 8:
        return "fp8"
    return "int8" if bits == 8 else "int4"


@dataclass(frozen=True)
class Efficiency:
    """A named set of efficiency factors.

    ``mfu`` and ``mbu`` in (0, 1] are the 16-bit factors (attention, head, and the body at 16 bits);
    ``formats`` maps a weight format of :data:`WEIGHT_FORMATS` to the body's (MFU, MBU) in that format (a
    format absent uses the 16-bit pair); ``overhead_si`` is the fixed time per forward pass, s;
    ``allreduce_efficiency`` the share of the one-way link bandwidth an all-reduce reaches and
    ``allreduce_latency_si`` its fixed cost, s.  ``vintage``, ``median_error`` and ``max_error`` say what it
    was fitted on and how far it is from those measurements (|predicted / measured - 1|).
    """

    name: str
    mfu: float
    mbu: float
    overhead_si: float = 0.0
    formats: tuple[tuple[str, float, float], ...] = ()
    allreduce_efficiency: float = 1.0
    allreduce_latency_si: float = 0.0
    vintage: str = field(default="", compare=False)
    median_error: float | None = field(default=None, compare=False)
    max_error: float | None = field(default=None, compare=False)
    source: str = field(default="", repr=False, compare=False)
    aliases: tuple[str, ...] = field(default=(), repr=False, compare=False)
    # Beside the maximum, which one row the fit cannot explain may set: the 90th percentile, and that row named.
    p90_error: float | None = field(default=None, compare=False)
    worst: str = field(default="", repr=False, compare=False)

    def __post_init__(self) -> None:
        fraction(self.mfu, "mfu")
        fraction(self.mbu, "mbu")
        fraction(self.allreduce_efficiency, "allreduce_efficiency")
        for label, value in (("overhead", self.overhead_si), ("allreduce_latency", self.allreduce_latency_si)):
            if not value >= 0:
                raise ValueError(f"{label} must not be negative, got {value} s")
        for entry in self.formats:
            if len(entry) != 3 or entry[0] not in WEIGHT_FORMATS:
                raise ValueError(f"formats must hold (format, mfu, mbu) with a format of {', '.join(WEIGHT_FORMATS)}, "
                                 f"got {entry!r}")
            fraction(entry[1], f"mfu for {entry[0]}")
            fraction(entry[2], f"mbu for {entry[0]}")

    @property
    def overhead(self) -> pint.Quantity:
        """Fixed time each forward pass (a prefill, a decode step) adds, ms."""
        return quantity(self.overhead_si, "time").to("ms")

    @property
    def allreduce_latency(self) -> pint.Quantity:
        """Fixed time of one all-reduce, us."""
        return quantity(self.allreduce_latency_si, "time").to("us")

    def body_factors(self, precision: str | Precision) -> tuple[float, float]:
        """Return (MFU, MBU) of the weight matmuls in ``precision``'s weight format (the 16-bit pair if unlisted)."""
        key = weight_format(precision)
        for name, mfu, mbu in self.formats:
            if name == key:
                return mfu, mbu
        return self.mfu, self.mbu

    def __repr__(self) -> str:
        return (f"Efficiency(name={self.name!r}, mfu={self.mfu:.3g}, mbu={self.mbu:.3g}, "
                f"overhead={self.overhead:.3g~P})")

    def describe(self, detail: bool = False) -> str:
        """The factors per format, the overhead, the all-reduce and the error, a few lines; with ``detail``, one
        paragraph that adds the tables the preset was fitted on and the row that sets its maximum error."""
        pairs = {f: self.body_factors(_EXAMPLE[f]) for f in WEIGHT_FORMATS}
        formats = "; ".join(f"{f}: MFU {mfu:.2f}, MBU {mbu:.2f}" for f, (mfu, mbu) in pairs.items())
        within = "" if self.p90_error is None else f", 90% of rows within {self.p90_error:.0%}"
        if detail:
            error = ""
            if self.median_error is not None:
                worst = f" ({self.worst})" if self.worst else ""
                error = (f" Error on its measurements: median {self.median_error:.0%}{within}, "
                         f"max {self.max_error:.0%}{worst}.")
            return (f"{self.name}: {formats}; overhead {self.overhead:.3g~P} a pass; all-reduce at "
                    f"{self.allreduce_efficiency:.0%} of the link + {self.allreduce_latency:.3g~P}. "
                    f"Fitted on {self.vintage or 'nothing (the bound)'}.{error}")
        # The short form leaves the sources and the worst row out: novices read the paragraph as noise.
        fitted_on = self.vintage.split(":")[0] if self.vintage else "the roofline bound itself"
        lines = [f"{self.name} ({fitted_on}): the share of each roof an engine reaches",
                 f"  {formats.replace('; ', ' | ')}",
                 f"  plus {self.overhead:.3g~P} a pass; an all-reduce at {self.allreduce_efficiency:.0%} of the link "
                 f"+ {self.allreduce_latency:.3g~P}"]
        if self.median_error is not None:
            # Novices in four notebooks read the maximum as the model's typical error: say it is one row's.
            lines.append(f"  error on published measurements: median {self.median_error:.0%}{within}, max "
                         f"{self.max_error:.0%} on its single worst row (describe(detail=True) names it and the "
                         "sources)")
        return "\n".join(lines)


_EXAMPLE = {"16-bit": "fp16", "fp8": "fp8", "int8": "gpt-fast-int8", "int4": "int4-g128"}

PRESETS: dict[str, Efficiency] = {
    "ideal": Efficiency("ideal", 1.0, 1.0, 0.0,
                        vintage="", median_error=None, max_error=None,
                        source="The roofline bound: 100% of peak and bandwidth, no overhead.",
                        aliases=("roofline", "bound")),
}

#: A weight-only kernel's MFU relative to the 16-bit one once compute-bound (an ESTIMATE, not fitted: no table
#: here has a large-batch weight-only row).  From torchao's HQQ kernel table (A6000, M = 1024, N = K = 4096, group
#: 128): a fused Triton W4A16 kernel reaches 72 TFLOP/s where a 16-bit kernel at typical's MFU 0.67 of the 155
#: TFLOP/s peak would reach 104, about 0.69 of it (tinygemm, gpt-fast's kernel, reaches 16); vLLM's documentation
#: says its AWQ kernels have lower throughput than the unquantized model.  See docs/decisions.md.
DEQUANTISATION = 0.7


def _fitted(name: str, mfu: float, mbu: float, overhead_ms: float, formats: dict[str, tuple[float | None, float]],
            allreduce: tuple[float, float], vintage: str, errors: tuple[float, float], source: str,
            aliases: tuple[str, ...] = (), p90_error: float | None = None, worst: str = "") -> Efficiency:
    """A fitted preset: ``formats`` gives the body's (MFU, MBU) per weight format, MFU None for a weight-only
    format (it multiplies at DEQUANTISATION x the 16-bit MFU); overhead in ms, all-reduce latency in us."""
    table = tuple((key, round(mfu * DEQUANTISATION, 3) if f_mfu is None else f_mfu, f_mbu)
                  for key, (f_mfu, f_mbu) in formats.items())
    return Efficiency(name, mfu, mbu, overhead_ms * 1e-3, table, allreduce[0], allreduce[1] * 1e-6,
                      vintage, errors[0], errors[1], source, aliases, p90_error, worst)


# What rooflab.calibration.calibrate(name) returns (tests/test_efficiency.py refits and compares); the errors
# are the median, 90th percentile and maximum |predicted / measured - 1| over every row of the preset's tables.
_TYPICAL = dict(mfu=0.67, mbu=0.76, overhead_ms=0.65,
                formats={"fp8": (0.51, 0.75), "int8": (None, 0.59), "int4": (None, 0.48)},
                allreduce=(0.35, 23.0))
_TYPICAL_2023 = dict(mfu=0.63, mbu=0.95, overhead_ms=3.43,
                     formats={"fp8": (0.47, 0.70), "int8": (None, 0.77), "int4": (None, 0.67)},
                     allreduce=(1.0, 6.0))

PRESETS["typical"] = _fitted(
    "typical", **_TYPICAL,
    vintage="current engines, 2024-2025: TensorRT-LLM v0.12 and v1.0 in-flight batching at maximum load "
            "(data/throughput_at_load.csv) and gpt-fast at batch 1 with torch.compile and CUDA graphs, "
            "formats and tensor parallelism (data/batch_one.csv); 97 rows",
    errors=(0.068, 1.38), p90_error=0.14,
    worst="the worst, one row: Llama-3-70B in FP16 on two A100s, 2,048 + 2,048 tokens, 2.4x slower than "
          "Llama-2-70B's row of the same table and configuration (same cache per token, 2% fewer weights), which "
          "the library predicts within 15%: no mechanism the two share explains it",
    source="Fitted by rooflab.calibration.calibrate on data/throughput_at_load.csv and data/batch_one.csv "
           "(a Huber loss on log(predicted / measured), each table weighing alike).",
    aliases=("realistic", "calibrated", "current"))
PRESETS["typical-2023"] = _fitted(
    "typical-2023", **_TYPICAL_2023,
    vintage="2023 static-batching engines: TensorRT-LLM 0.5-0.6 performance tables and H200 blog, gpt-fast's "
            "first README (data/measurements.csv); 37 rows",
    errors=(0.074, 0.30), p90_error=0.15,
    worst="the worst: NVIDIA's preliminary H200 blog figure for Llama-2-13B in FP8",
    source="Fitted by rooflab.calibration.calibrate on data/measurements.csv (a Huber loss on "
           "log(predicted / measured)); its all-reduce is the 2024 NCCL figure (6 us, NVIDIA/nccl issue #1259) "
           "at the full link bandwidth, since the 2023 table has no tensor-parallel row.",
    aliases=("2023", "static"))
_INDEX = {key.lower(): preset for preset in PRESETS.values() for key in (preset.name, *preset.aliases)}


def efficiency(name: str | Efficiency = "ideal") -> Efficiency:
    """Return the preset called ``name`` ("ideal", "typical" or "typical-2023"), or ``name`` itself if it is an
    Efficiency.  An unknown name raises KeyError listing the presets."""
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
