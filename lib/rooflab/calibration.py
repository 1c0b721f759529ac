"""The typical efficiency, fitted to public measurements of real serving engines.

``data/measurements.csv`` holds published measurements (TensorRT-LLM's
performance tables and blog, gpt-fast's README): model, device, precision,
batch, prompt and answer lengths, what was measured (``ttft`` in ms, or
``output_throughput`` in token/s: batch x answer tokens / the whole run) and
the source.  :func:`predict` gives the library's figure for a row at an
efficiency; :func:`calibrate` finds the MFU, MBU and per-pass overhead that
minimise the squared log error over the table (a multiplicative error, so
fast and slow rows weigh alike), by a coordinate search on a shrinking grid.

``data/throughput_at_load.csv`` holds throughput *under load*: in-flight
(continuous) batching at maximum load, from TensorRT-LLM's performance
overview (v0.12.0 and v1.0).  :func:`predict_load` gives the library's
steady-state figure for a row (:mod:`rooflab.fleet`) at the row's concurrency,
or at the most sequences that fit when the source does not say.

>>> rows = measurements()
>>> len(rows) >= 15 and all(ideal_ratio(r) <= 1 for r in rows)  # the ideal is a bound
True
>>> at_load = load_measurements()
>>> len(at_load) >= 40 and all(predict_load(r, "ideal") >= r.value for r in at_load)  # a bound under load too
True
"""

from __future__ import annotations

import csv
import math
import statistics
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .efficiency import Efficiency, PRESETS
from .fleet import max_concurrency, steady_state
from .memory import footprint
from .operations import setup
from .serving import request

__all__ = ["Measurement", "measurements", "predict", "ideal_ratio", "calibrate", "median_error", "DATA",
           "LoadMeasurement", "load_measurements", "predict_load", "LOAD_DATA", "BATCH_ONE", "tables", "error",
           "predicted", "fit_loss", "factors", "free_factors", "load_batch", "engine_reserve",
           "ENGINE_RESERVE_GIB", "HELD_OUT"]

#: The shipped table of public measurements.
DATA = Path(__file__).resolve().parent / "data" / "measurements.csv"
#: The shipped table of throughput under load (continuous batching at maximum load).
LOAD_DATA = Path(__file__).resolve().parent / "data" / "throughput_at_load.csv"
#: gpt-fast at batch 1 (2024 README): weight formats and tensor parallelism, in the under-load table's columns.
BATCH_ONE = Path(__file__).resolve().parent / "data" / "batch_one.csv"
#: Rows of the same TensorRT-LLM v0.12.0 table held out of every fit (Llama-2-70B beside the fitted Llama-3-70B,
#: same GPUs and columns): an out-of-sample check of the typical preset (``load_measurements(HELD_OUT)``).
HELD_OUT = Path(__file__).resolve().parent / "data" / "held_out_at_load.csv"
_METRICS = {"ttft": "ms", "output_throughput": "token/s"}


@dataclass(frozen=True)
class Measurement:
    """One published measurement and the configuration it was taken on."""

    model: str
    device: str
    precision: str
    batch: int
    prompt_len: int
    output_len: int
    metric: str  # "ttft" (ms) or "output_throughput" (token/s over the whole run)
    value: float
    unit: str
    engine: str
    source_title: str
    source_url: str
    source_date: str
    notes: str = ""

    def __post_init__(self) -> None:
        if _METRICS.get(self.metric) != self.unit:
            raise ValueError(f"metric {self.metric!r} must be in {_METRICS.get(self.metric, 'a known unit')}, "
                             f"got {self.unit!r}; known metrics: {', '.join(_METRICS)}")
        if not (self.value > 0 and self.source_url.startswith("https://")):
            raise ValueError(f"a measurement needs a positive value and a source URL, got {self}")


@lru_cache(maxsize=4)
def measurements(path: str | Path = DATA) -> tuple[Measurement, ...]:
    """Return the rows of a measurements CSV file (the shipped table by default)."""
    return _read(path, Measurement, ints=("batch", "prompt_len", "output_len"))


def _read(path: str | Path, record: type, ints: tuple[str, ...], optional_ints: tuple[str, ...] = ()) -> tuple:
    """Each row of the CSV file at ``path`` as a ``record``: ``ints`` as integers (``optional_ints`` too, or None
    where empty), ``value`` as a float, the rest as text.  The record validates its own fields."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    out = []
    for row in rows:
        fields = {k: int(v) if k in ints else float(v) if k == "value" else v for k, v in row.items()}
        fields.update({k: int(row[k]) if row[k] else None for k in optional_ints})
        out.append(record(**fields))
    return tuple(out)


def predict(row: Measurement, efficiency: str | Efficiency = "ideal") -> float:
    """Return the library's figure for ``row`` in the row's unit: the TTFT in ms, or
    batch x output_len / e2e in token/s."""
    # The row ran, so it fit in the engine it ran on: a static-batch engine takes what the batch needs, not
    # vLLM's 90% (the table's rows fit in all that a process can allocate; tests/test_efficiency.py checks).
    r = request(row.model, row.device, row.prompt_len, row.output_len, row.batch, row.precision,
                efficiency=efficiency, allow_overflow=True)
    if row.metric == "ttft":
        return r.ttft_si * 1e3
    return row.batch * row.output_len / (r.ttft_si + r.decode_time_si)


def ideal_ratio(row: Measurement) -> float:
    """Return ideal time / measured time (a throughput enters inverted): never above 1 if the roofline is a bound."""
    ideal = predict(row, "ideal")
    return ideal / row.value if row.metric == "ttft" else row.value / ideal


def _log_errors(rows, efficiency: Efficiency) -> list[float]:
    return [math.log(predicted(row, efficiency) / row.value) for row in rows]


def predicted(row, efficiency: str | Efficiency = "ideal") -> float:
    """The library's figure for a row of either table (:func:`predict` or :func:`predict_load`)."""
    return predict_load(row, efficiency) if isinstance(row, LoadMeasurement) else predict(row, efficiency)


def error(row, efficiency: str | Efficiency = "ideal") -> float:
    """predicted / measured - 1 for a row of either table (a throughput or a TTFT)."""
    return predicted(row, efficiency) / row.value - 1


def median_error(rows, efficiency: str | Efficiency = "typical") -> float:
    """Median over ``rows`` of |predicted / measured - 1| at ``efficiency``."""
    return statistics.median(abs(error(row, efficiency)) for row in rows)


def tables(preset: str) -> dict[str, tuple]:
    """The measurements a typical preset is fitted on and judged by, by table: ``"typical-2023"`` the 2023
    static-batch table; ``"typical"`` the 2024-2025 tables (under load at tp 1 and tp > 1, gpt-fast at batch 1)."""
    if preset == "typical-2023":
        return {"static batches, 2023": measurements()}
    if preset == "typical":
        load = load_measurements()
        return {"under load, tp 1": tuple(r for r in load if r.tp == 1),
                "under load, tp > 1": tuple(r for r in load if r.tp > 1),
                "batch 1, gpt-fast 2024": load_measurements(BATCH_ONE)}
    raise KeyError(f"no fitted preset {preset!r}: the fitted presets are 'typical' and 'typical-2023'")


# What each fit may move (factor: (start, span, low, high)); the rest stay at their start.  The 2023 table has
# no tensor-parallel row, so its all-reduce is not fitted (see typical-2023's source).
_FACTORS = {
    "mfu": (0.5, 0.5, 0.05, 1.0), "mbu": (0.75, 0.25, 0.3, 1.0), "overhead_ms": (2.0, 2.0, 0.0, 20.0),
    "fp8_mfu": (0.5, 0.5, 0.05, 1.0), "fp8_mbu": (0.75, 0.25, 0.3, 1.0),
    "int8_mbu": (0.6, 0.3, 0.2, 1.0), "int4_mbu": (0.5, 0.3, 0.1, 1.0),
    "allreduce_efficiency": (0.5, 0.5, 0.05, 1.0), "allreduce_us": (10.0, 10.0, 0.0, 100.0),
}
_FROZEN = {"typical-2023": {"allreduce_efficiency": 1.0, "allreduce_us": 6.0}, "typical": {}}
_DIGITS = {"overhead_ms": 2, "allreduce_us": 1}


def _preset(name: str, f: dict) -> Efficiency:
    from .efficiency import _fitted  # the presets' one constructor

    base = PRESETS[name]
    return _fitted(name, f["mfu"], f["mbu"], f["overhead_ms"],
                   {"fp8": (f["fp8_mfu"], f["fp8_mbu"]), "int8": (None, f["int8_mbu"]), "int4": (None, f["int4_mbu"])},
                   (f["allreduce_efficiency"], f["allreduce_us"]), base.vintage,
                   (base.median_error, base.max_error), base.source, base.aliases, base.p90_error, base.worst)


def factors(e: Efficiency) -> dict[str, float]:
    """The fitted factors of a preset, by the names :func:`calibrate` moves them under."""
    fp8, int8, int4 = (e.body_factors(p) for p in ("fp8", "gpt-fast-int8", "int4-g128"))
    return {"mfu": e.mfu, "mbu": e.mbu, "overhead_ms": e.overhead_si * 1e3, "fp8_mfu": fp8[0], "fp8_mbu": fp8[1],
            "int8_mbu": int8[1], "int4_mbu": int4[1], "allreduce_efficiency": e.allreduce_efficiency,
            "allreduce_us": e.allreduce_latency_si * 1e6}


def free_factors(preset: str) -> list[str]:
    """The factors :func:`calibrate` fits for ``preset`` (the others are held, see ``_FROZEN``)."""
    tables(preset)  # an unknown preset is an error
    return [name for name in _FACTORS if name not in _FROZEN[preset]]


def fit_loss(preset: str, e: Efficiency | None = None) -> float:
    """The loss :func:`calibrate` minimises for ``preset``, at ``e`` (the shipped preset by default): over its
    tables, the mean Huber loss of the log errors, summed over the tables."""
    e = PRESETS[preset] if e is None else e
    return sum(sum(map(_huber, _log_errors(rows, e))) / len(rows) for rows in tables(preset).values() if rows)


#: Log errors beyond this weigh linearly, not squared (a Huber loss), so that one row no setting of the factors
#: explains (an engine's unpublished batch limit) cannot pull the fit away from the others.
HUBER = 0.25


def _huber(x: float) -> float:
    a = abs(x)
    return a * a if a <= HUBER else 2 * HUBER * a - HUBER * HUBER


def calibrate(preset: str = "typical", rounds: int = 5, points: int = 11) -> Efficiency:
    """Return the preset ``preset`` refitted: the factors minimising the Huber loss (squared within ``HUBER``,
    linear beyond) of the log errors over its tables (:func:`tables`), each table weighing alike whatever its rows.

    Coordinate search: each round scans each factor over ``points`` values around the best so far (within its
    limits) and halves the span; values are rounded to 0.01 (overhead to 0.01 ms, all-reduce latency to 0.1 us),
    then polished on that grid until no single step lowers the loss.
    """
    free = free_factors(preset)
    best = {name: start for name, (start, _, _, _) in _FACTORS.items()}
    best.update(_FROZEN[preset])
    span = {name: _FACTORS[name][1] for name in free}

    def loss(f: dict) -> float:
        return fit_loss(preset, _preset(preset, f))

    current = loss(best)
    for _ in range(rounds):
        for name in free:
            _, _, low, high = _FACTORS[name]
            for k in range(points):
                value = min(high, max(low, best[name] + span[name] * (2 * k / (points - 1) - 1)))
                trial = dict(best, **{name: value})
                score = loss(trial)
                if score < current:
                    best, current = trial, score
            span[name] /= 2
    rounded = {name: round(value, _DIGITS.get(name, 2)) for name, value in best.items()}
    return _preset(preset, _polish(preset, rounded, free))


def _step(name: str) -> float:
    return 10.0 ** -_DIGITS.get(name, 2)


def _polish(preset: str, f: dict, free: list[str]) -> dict:
    """Move one rounded factor one step (0.01, 0.01 ms, 0.1 us) at a time while that lowers the loss, so that the
    result is a minimum on the grid it is stated on (no single step from it does better)."""
    current = fit_loss(preset, _preset(preset, f))
    improved = True
    while improved:
        improved = False
        for name in free:
            _, _, low, high = _FACTORS[name]
            for sign in (-1, 1):
                value = round(f[name] + sign * _step(name), _DIGITS.get(name, 2))
                if not low <= value <= high:
                    continue
                trial = dict(f, **{name: value})
                score = fit_loss(preset, _preset(preset, trial))
                if score < current:
                    f, current, improved = trial, score, True
    return f


@dataclass(frozen=True)
class LoadMeasurement:
    """One published throughput under load: total output token/s of ``tp`` GPUs serving fixed-length requests."""

    model: str
    device: str
    precision: str
    tp: int
    prompt_len: int
    output_len: int
    concurrency: int | None  # sequences in flight; None where the source gives only "maximum load"
    metric: str
    value: float
    unit: str
    engine: str
    source_title: str
    source_url: str
    source_date: str
    notes: str = ""

    def __post_init__(self) -> None:
        if self.metric != "output_throughput" or self.unit != "token/s":
            raise ValueError(f"a load measurement is an output_throughput in token/s, got {self.metric} in {self.unit}")
        if not (self.value > 0 and self.source_url.startswith("https://")):
            raise ValueError(f"a measurement needs a positive value and a source URL, got {self}")


@lru_cache(maxsize=4)
def load_measurements(path: str | Path = LOAD_DATA) -> tuple[LoadMeasurement, ...]:
    """Return the rows of a throughput-under-load CSV file (the shipped table by default)."""
    return _read(path, LoadMeasurement, ints=("tp", "prompt_len", "output_len"), optional_ints=("concurrency",))


#: TensorRT-LLM gives its KV cache this share of the memory free once the weights (and the activations it reserved
#: at build time) are loaded: ``KvCacheConfig.free_gpu_memory_fraction``, default 0.9
#: (https://nvidia.github.io/TensorRT-LLM/examples/kvcacheconfig.html; the activations:
#: https://nvidia.github.io/TensorRT-LLM/reference/memory.html).
TRTLLM_FREE_FRACTION = 0.9

#: What a serving engine holds on each GPU beside the weights and the KV cache, GiB, by tensor-parallel degree (2
#: stands for any tp > 1): the activations of its largest pass plus the memory outside PyTorch's allocator
#: (CUDA graphs, NCCL and custom all-reduce buffers).  TensorRT-LLM reserves its activations at build time but does
#: not publish their size ("no general formula", TensorRT-LLM issue #210), so the figures are the one public
#: measurement of the same reserve, vLLM's start-up profile of Llama-3-8B on an H100 (vLLM pull request #10511,
#: 2024-12-14): activation peak 1.26 GiB, non-torch memory 1.79 GiB at tp 1 and 3.58 GiB at tp 2.  An ESTIMATE
#: for another engine and other models; it matters only where the weights leave little room (70B in FP16 on two
#: 80 GB GPUs).  See docs/decisions.md.
ENGINE_RESERVE_GIB = {1: 1.26 + 1.79, 2: 1.26 + 3.58}


def engine_reserve(tp: int) -> float:
    """Bytes an engine holds on each of ``tp`` GPUs beside weights and KV cache (:data:`ENGINE_RESERVE_GIB`)."""
    return ENGINE_RESERVE_GIB[1 if tp == 1 else 2] * 2**30


def load_batch(row: LoadMeasurement) -> int:
    """The concurrency a row ran at, or the most sequences that fit (caches at prompt + answer) when unpublished.

    TensorRT-LLM's cache takes 0.9 of what a process can allocate less the weights and the engine's reserve
    (:func:`engine_reserve`) on each GPU: cache = 0.9 x (usable - weights - reserve), which is vLLM's utilisation
    u = (cache + weights) / usable."""
    if row.concurrency is not None:
        return row.concurrency
    s = setup(row.model, row.device, row.precision)
    f = footprint(s, 1, 1.0, tp=row.tp)
    free = max(f.usable - f.weights - engine_reserve(row.tp), 0.0)
    u = min((TRTLLM_FREE_FRACTION * free + f.weights) / f.usable, 1.0)
    return max_concurrency(row.model, row.device, row.prompt_len, row.output_len, row.precision, row.tp,
                           gpu_memory_utilization=u)


def predict_load(row: LoadMeasurement, efficiency: str | Efficiency = "typical", prefill: str = "separate") -> float:
    """Return the library's total output token/s for ``row``: the steady state of ``row.tp`` GPUs at
    :func:`load_batch` sequences (the whole group, as the sources report it)."""
    s = steady_state(row.model, row.device, row.prompt_len, row.output_len, load_batch(row), row.precision,
                     row.tp, prefill=prefill, efficiency=efficiency, gpu_memory_utilization=1.0)
    return s.throughput_si
