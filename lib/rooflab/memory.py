"""What a configuration holds in device memory, and whether it fits: weights + KV cache + the engine's reserve.

Internal to the package (serving, fleet and crossover share it); users call :func:`rooflab.memory_budget`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .operations import Setup

__all__ = ["DoesNotFit", "Footprint", "footprint", "check_fit"]


class DoesNotFit(ValueError):
    """The configuration needs more memory than the device has."""


@dataclass(frozen=True, slots=True)
class Footprint:
    """Bytes held on one device: weights, KV cache and reserve, against the capacity the device reports."""

    weights: float
    kv: float | np.ndarray
    reserve: float  # kept from weights and cache: (1 - utilization) x capacity + activation workspace
    capacity: float

    @property
    def fits(self) -> bool | np.ndarray:
        """weights + kv + reserve <= capacity (element-wise)."""
        fits = self.weights + self.kv + self.reserve <= self.capacity
        return fits if isinstance(fits, np.ndarray) else bool(fits)


def footprint(s: Setup, tokens_held, gpu_memory_utilization: float = 1.0, workspace: float = 0.0) -> Footprint:
    """The Footprint of all weights and ``tokens_held`` cached tokens on one device."""
    capacity = s.device.memory_capacity_si
    return Footprint(s.model.weight_bytes_si(s.precision), tokens_held * s.kv_per_token,
                     (1.0 - gpu_memory_utilization) * capacity + workspace, capacity)


def check_fit(s: Setup, tokens_held, what: str, allow_overflow: bool):
    """Return whether weights and cache fit (element-wise); raise DoesNotFit unless ``allow_overflow``."""
    f = footprint(s, tokens_held)
    fits = f.fits
    if not allow_overflow and not np.all(fits):
        worst = np.max(f.kv)
        raise DoesNotFit(
            f"{s.model.name} does not fit on {s.device.name} for this {what}: weights "
            f"{f.weights / 1e9:.2f} GB ({s.precision}) + KV cache {worst / 1e9:.2f} GB = "
            f"{(f.weights + worst) / 1e9:.2f} GB > capacity {f.capacity / 1e9:.2f} GB "
            f"({f.capacity / 2**20:,.0f} MiB, as the device reports it). "
            f"Use a smaller batch or context, fewer bytes per weight, a larger device, "
            f"or pass allow_overflow=True to get the timing anyway."
        )
    return fits
