"""What a configuration holds in device memory, and whether it fits: weights + KV cache + the engine's reserve.

Fits are judged against what a process can allocate (``Hardware.usable_memory``, a little under the total
nvidia-smi reports), of which an engine uses the fraction ``gpu_memory_utilization``: 0.9 by default, vLLM's
default, everywhere in the library.  Internal to the package (serving, fleet and crossover share it); users call
:func:`rooflab.memory_budget`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .operations import Setup

__all__ = ["DoesNotFit", "Footprint", "footprint", "check_fit", "GPU_MEMORY_UTILIZATION"]

#: The share of a device's usable memory an engine takes for weights and cache: vLLM's default
#: ``gpu_memory_utilization`` (https://docs.vllm.ai/en/latest/configuration/engine_args.html).
GPU_MEMORY_UTILIZATION = 0.9


class DoesNotFit(ValueError):
    """The configuration needs more memory than the device has."""


@dataclass(frozen=True, slots=True)
class Footprint:
    """Bytes held on one device: weights, KV cache and reserve, against what a process can allocate."""

    weights: float
    kv: float | np.ndarray
    reserve: float  # kept from weights and cache: (1 - utilization) x usable + activation workspace
    usable: float  # what a process can allocate
    capacity: float  # the total the device reports

    @property
    def fits(self) -> bool | np.ndarray:
        """weights + kv + reserve <= usable (element-wise)."""
        fits = self.weights + self.kv + self.reserve <= self.usable
        return fits if isinstance(fits, np.ndarray) else bool(fits)


def footprint(s: Setup, tokens_held, gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
              workspace: float = 0.0, tp: int = 1, kv_share: float = 1.0) -> Footprint:
    """The Footprint on one device of its share of the weights (1/tp) and of ``tokens_held`` cached tokens."""
    usable = s.device.usable_si
    return Footprint(s.model.weight_bytes_si(s.precision) / tp, tokens_held * s.kv_per_token * kv_share,
                     (1.0 - gpu_memory_utilization) * usable + workspace, usable, s.device.memory_capacity_si)


def weights_message(s: Setup, f: Footprint, u: float = GPU_MEMORY_UTILIZATION, tp: int = 1) -> str:
    """A sentence on the weights against the memory an engine may use, for DoesNotFit messages."""
    gpus = f" per GPU over tp={tp}" if tp > 1 else ""
    return (f"{s.model.name} ({s.precision}) needs {f.weights / 1e9:.2f} GB of weights{gpus}; {s.device.name} "
            f"reports {f.capacity / 1e9:.2f} GB, a process can allocate {f.usable / 1e9:.2f} GB "
            f"({f.usable / 2**30:.2f} GiB) and an engine takes {u:.0%} of that: {u * f.usable / 1e9:.2f} GB")


def check_fit(s: Setup, tokens_held, what: str, allow_overflow: bool,
              gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION, tp: int = 1, kv_share: float = 1.0):
    """Return whether weights and cache fit (element-wise); raise DoesNotFit unless ``allow_overflow``.

    Weights that exceed the engine's share of the usable memory on their own get a message of their own.
    """
    f = footprint(s, tokens_held, gpu_memory_utilization, tp=tp, kv_share=kv_share)
    room = f.usable - f.reserve
    if f.weights > room and not allow_overflow:
        raise DoesNotFit(f"{weights_message(s, f, gpu_memory_utilization, tp)}, so the weights alone do not fit. "
                         f"Use fewer bytes per weight, a larger device or more GPUs (tp).")
    fits = f.fits
    if not allow_overflow and not np.all(fits):
        worst = np.max(f.kv)
        raise DoesNotFit(
            f"{s.model.name} does not fit on {s.device.name} for this {what}: weights "
            f"{f.weights / 1e9:.2f} GB ({s.precision}) + KV cache {worst / 1e9:.2f} GB = "
            f"{(f.weights + worst) / 1e9:.2f} GB > {room / 1e9:.2f} GB, the {gpu_memory_utilization:.0%} an engine "
            f"takes of the {f.usable / 1e9:.2f} GB a process can allocate (the device reports "
            f"{f.capacity / 1e9:.2f} GB). Use a smaller batch or context, fewer bytes per weight, a larger device, "
            f"or pass allow_overflow=True to get the timing anyway."
        )
    return fits
