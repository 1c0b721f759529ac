"""Number formats: what a weight, a KV-cache entry and a multiply cost.

A serving configuration has three precisions that need not agree: the format
weights are stored in (what a decode step reads), the format of the KV cache,
and the format the tensor cores multiply in (which peak FLOP/s applies).
Weight-only INT4 stores 4-bit weights but still multiplies in FP16.

>>> Precision(weights="int4", group_size=128).bits_per_weight
4.125
>>> as_precision("fp16").compute
'fp16'
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from difflib import get_close_matches

__all__ = ["DTYPE_BITS", "Precision", "as_precision", "bytes_per_element"]

#: Bits one element takes in memory.  tf32 is a compute mode only: its operands live in fp32.
DTYPE_BITS = {
    "fp32": 32,
    "tf32": 32,
    "fp16": 16,
    "bf16": 16,
    "fp8": 8,
    "int8": 8,
    "int4": 4,
    "fp4": 4,
}

# Formats that carry a scale per group of weights when used for weights.
_GROUPED = {"int8", "int4", "fp4"}
# Sensible defaults: INT4 is almost always stored in groups of 128 (GPTQ, AWQ);
# INT8 and FP4 default to per-channel scales, whose cost per weight is negligible.
_DEFAULT_GROUP = {"int4": 128}


def _dtype(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a format name such as 'fp16', got {value!r}")
    key = value.strip().lower()
    if key not in DTYPE_BITS:
        close = get_close_matches(key, DTYPE_BITS, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ValueError(
            f"unknown {name} format {value!r}: known formats are {', '.join(DTYPE_BITS)}{hint}"
        )
    return key


def bytes_per_element(dtype: str) -> float:
    """Return the bytes one element of ``dtype`` takes, without any scales (fp16 -> 2.0)."""
    return DTYPE_BITS[_dtype(dtype, "dtype")] / 8


@dataclass(frozen=True)
class Precision:
    """The formats of weights, KV cache and compute, and how weights are grouped.

    ``group_size`` weights share one scale of ``scale_bits`` bits (and a zero
    point of the same width when ``zero_point`` is true), so a grouped weight
    costs ``bits + scale_bits * (1 + zero_point) / group_size`` bits.
    """

    weights: str = "fp16"
    kv: str = "fp16"
    compute: str = "fp16"
    group_size: int | None = None
    scale_bits: int = 16
    zero_point: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "weights", _dtype(self.weights, "weights"))
        object.__setattr__(self, "kv", _dtype(self.kv, "kv"))
        object.__setattr__(self, "compute", _dtype(self.compute, "compute"))
        if self.weights == "tf32" or self.kv == "tf32":
            raise ValueError("tf32 is a compute mode, not a storage format: store in 'fp32'")
        group = self.group_size
        if group is None:
            group = _DEFAULT_GROUP.get(self.weights)
        elif self.weights not in _GROUPED:
            raise ValueError(
                f"group_size applies to grouped weight formats ({', '.join(sorted(_GROUPED))}), "
                f"not to {self.weights!r} weights"
            )
        elif isinstance(group, bool) or not isinstance(group, int) or group <= 0:
            raise ValueError(f"group_size must be a positive whole number, got {group!r}")
        object.__setattr__(self, "group_size", group)
        if isinstance(self.scale_bits, bool) or not isinstance(self.scale_bits, int) or self.scale_bits <= 0:
            raise ValueError(f"scale_bits must be a positive whole number, got {self.scale_bits!r}")

    @property
    def bits_per_weight(self) -> float:
        """Bits one weight really costs in memory, scales included (int4 g128 -> 4.125)."""
        bits = float(DTYPE_BITS[self.weights])
        if self.group_size:
            bits += self.scale_bits * (2 if self.zero_point else 1) / self.group_size
        return bits

    @property
    def bytes_per_weight(self) -> float:
        """Bytes one weight costs in memory: bits_per_weight / 8."""
        return self.bits_per_weight / 8

    @property
    def kv_bytes_per_element(self) -> float:
        """Bytes one K or V element takes in the cache."""
        return DTYPE_BITS[self.kv] / 8

    def __str__(self) -> str:
        if self.weights == self.kv == self.compute and self.group_size is None:
            return self.weights
        group = f", group {self.group_size}" if self.group_size else ""
        return f"weights {self.weights}{group}, KV {self.kv}, compute {self.compute}"


def as_precision(precision: str | Precision, name: str = "precision") -> Precision:
    """Return a Precision; a format name such as ``"fp16"`` sets weights, KV and compute alike."""
    if isinstance(precision, Precision):
        return precision
    if isinstance(precision, str):
        return _from_name(precision, name)
    raise TypeError(
        f"{name} must be a format name such as 'fp16' or a rooflab.Precision, got {precision!r}"
    )


@lru_cache(maxsize=64)
def _from_name(precision: str, name: str) -> Precision:
    dtype = _dtype(precision, name)
    storage = "fp32" if dtype == "tf32" else dtype
    return Precision(weights=storage, kv=storage, compute=dtype)
