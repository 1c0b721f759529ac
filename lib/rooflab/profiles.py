"""Two clean profiles, one per phase, held against the roofline of the machine they ran on.

Never mix the phases in one measurement: a request's time is a prefill plus many decode
steps, and its average says nothing about either limit.  So:

* **prefill alone** (:func:`ttft_profile`): a prompt and one output token, at several prompt
  lengths; the time is the TTFT.  Judged by MFU = FLOPs / (TTFT x peak FLOP/s).
* **decode alone** (:func:`decode_profile`): a short prompt and a long answer, at several batch
  sizes; the time is the time per output token (one decode step of the whole batch).  Judged by
  MBU = bytes moved / (time per token x bandwidth).

FLOPs and bytes are the library's count for the model's :class:`~rooflab.Model` in ``fp32``
(:func:`rooflab.prefill`, :func:`rooflab.decode_step`), and the prediction beside each
measurement is the library's ideal time on the same device record (a calibrated machine from
:func:`rooflab.measure.calibrate`, or any catalogue device).  Each time is the best of a few
repetitions (:func:`rooflab.measure.best_time`); every run is kept (``runs_si``), so the table shows the
spread a busy machine adds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pint

from .hardware import Hardware, hardware as _hardware
from .measure import PRECISION, timings
from .models import Model
from .serving import decode_step, prefill, request
from .units import quantity
from .validation import lengths

__all__ = ["Profile", "ttft_profile", "decode_profile", "DECODE_PROMPT", "DECODE_STEPS", "MARGIN"]

#: The decode profile's workload: a short prompt, then DECODE_STEPS steps at contexts 8 .. 16 (a whole mean, 12).
DECODE_PROMPT, DECODE_STEPS = 8, 9
#: How much faster than the calibrated roofline a measurement may seem before it is called impossible: the
#: calibration is itself a measurement (best of a few runs, disturbed by whatever else the machine does), and a
#: small model's weights partly sit in the last-level cache.  Beyond this factor the time is wrong (a unit, a
#: phase left out), not fast.
MARGIN = 2.0


@dataclass(frozen=True)
class Profile:
    """One phase measured at several points.  ``*_si`` floats in SI units (s, FLOP or B)."""

    phase: str  # "prefill" or "decode"
    swept: str  # what varies: "prompt_len" or "batch"
    points: np.ndarray  # its values
    batch: np.ndarray  # sequences in each measurement
    tokens: np.ndarray  # tokens each measurement yields: batch x prompt_len (prefill) or batch (decode)
    measured_si: np.ndarray  # s: TTFT, or time per output token
    predicted_si: np.ndarray  # s: the library's ideal time on ``device``
    work_si: np.ndarray  # FLOPs (prefill) or bytes (decode) the library counts for one measurement
    device: Hardware
    model: Model
    runs_si: np.ndarray | None = None  # s: every timed run, one row per point (``measured_si`` is each row's best)

    @property
    def measured(self) -> pint.Quantity:
        """The measured times, ms: TTFT (prefill) or time per output token (decode)."""
        return quantity(self.measured_si, "time").to("ms")

    @property
    def predicted(self) -> pint.Quantity:
        """The library's ideal roofline time on the device for each point, ms."""
        return quantity(self.predicted_si, "time").to("ms")

    @property
    def throughput(self) -> pint.Quantity:
        """Tokens per second: tokens / measured time (prompt tokens for prefill, output tokens for decode)."""
        return quantity(self.tokens / self.measured_si, "token_rate")

    @property
    def roof_si(self) -> float:
        """The roof the phase is judged by: peak FLOP/s (prefill) or bandwidth in B/s (decode)."""
        if self.phase == "prefill":
            return self.device.peak_flops_for(PRECISION)
        return self.device.memory_bandwidth_si

    @property
    def utilisation(self) -> pint.Quantity:
        """MFU (prefill) = FLOPs / (time x peak FLOP/s), or MBU (decode) = bytes / (time x bandwidth)."""
        return quantity(self.work_si / (self.measured_si * self.roof_si), "dimensionless")

    @property
    def share_of_roofline(self) -> pint.Quantity:
        """predicted / measured: 1 at the roofline, less when slower (dimensionless)."""
        return quantity(self.predicted_si / self.measured_si, "dimensionless")

    @property
    def median(self) -> pint.Quantity:
        """The median of each point's timed runs, ms (the best where the runs were not kept)."""
        runs = self.measured_si if self.runs_si is None else np.median(self.runs_si, axis=1)
        return quantity(runs, "time").to("ms")

    @property
    def worst(self) -> pint.Quantity:
        """The slowest of each point's timed runs, ms (the best where the runs were not kept)."""
        runs = self.measured_si if self.runs_si is None else np.max(self.runs_si, axis=1)
        return quantity(runs, "time").to("ms")

    def table(self) -> str:
        """The profile as a text table: the swept value, best, median and worst measured ms, the roofline's ms,
        tokens/s and MFU or MBU (both from the best run)."""
        judge = "MFU" if self.phase == "prefill" else "MBU"
        head = (f"{self.swept:>10} {'best ms':>9} {'median':>8} {'worst':>8} {'roofline ms':>12} {'tokens/s':>10} "
                f"{judge:>6}")
        rows = [head]
        median, worst = self.median.m_as("ms"), self.worst.m_as("ms")
        for i, point in enumerate(self.points):
            rows.append(f"{point:>10} {self.measured_si[i] * 1e3:>9.2f} {median[i]:>8.2f} {worst[i]:>8.2f} "
                        f"{self.predicted_si[i] * 1e3:>12.2f} {self.tokens[i] / self.measured_si[i]:>10.0f} "
                        f"{self.work_si[i] / (self.measured_si[i] * self.roof_si):>6.2f}")
        return "\n".join(rows)


def _sweep(values, name: str) -> np.ndarray:
    array = np.atleast_1d(lengths(values, name))
    if array.ndim != 1:
        raise ValueError(f"{name} must be a whole number or a list of them, got {values!r}")
    return array.astype(np.int64)


def _net_model(net) -> Model:
    spec = getattr(net, "spec", None)
    if not isinstance(spec, Model) or not callable(getattr(net, "prefill", None)):
        raise TypeError(f"net must be a TinyTransformer (with .spec, .prefill, .decode_step), got {type(net).__name__}")
    return spec


def ttft_profile(net, device: Hardware | str, prompt_lens, batch: int = 1, repeats: int = 3,
                 seed: int = 0) -> Profile:
    """Time the prefill of ``batch`` prompts at each of ``prompt_lens`` (one output token: the TTFT).

    Each point is the best of ``repeats`` runs after one warm-up (all runs kept in ``runs_si``); the prediction is
    ``rooflab.prefill(model, device, n, batch, "fp32").time`` (ideal) and the work its FLOPs.
    """
    spec, dev = _net_model(net), _hardware(device)
    lens = _sweep(prompt_lens, "prompt_lens")
    b = lengths(batch, "batch")
    rng = np.random.default_rng(seed)
    runs, predicted, work = [], [], []
    for n in lens:
        tokens = rng.integers(0, spec.vocab, (b, int(n)))
        runs.append(timings(lambda: net.prefill(tokens, max_new_tokens=0), repeats).m_as("s"))
        cost = prefill(spec, dev, int(n), precision=PRECISION, batch=b, allow_overflow=True)
        predicted.append(cost.time_si)
        work.append(cost.flops_si)
    runs = np.array(runs)
    return Profile("prefill", "prompt_len", lens, np.full(len(lens), b), b * lens, runs.min(axis=1),
                   np.array(predicted), np.array(work), dev, spec, runs)


def _decode_seconds(net, spec: Model, batch: int, prompt_len: int, steps: int, rng) -> float:
    """Seconds per decode step over ``steps`` steps after a (untimed) prefill of ``prompt_len`` tokens."""
    prompt = rng.integers(0, spec.vocab, (batch, prompt_len))
    logits, cache = net.prefill(prompt, max_new_tokens=steps)
    token = np.argmax(logits, axis=-1)
    start = time.perf_counter()
    for _ in range(steps):
        token = np.argmax(net.decode_step(token, cache), axis=-1)  # greedy: the next step's input
    return (time.perf_counter() - start) / steps


def decode_profile(net, device: Hardware | str, batches, prompt_len: int = DECODE_PROMPT, steps: int = DECODE_STEPS,
                   repeats: int = 2,
                   seed: int = 0) -> Profile:
    """Time per output token at each batch size: ``steps`` decode steps after a prompt of ``prompt_len`` tokens.

    Each point is the best of ``repeats`` runs (a fresh prefill, untimed, before each); the steps run at
    contexts prompt_len .. prompt_len + steps - 1, so the prediction is the library's mean step over them,
    ``rooflab.request(model, device, prompt_len, steps + 1, batch, "fp32").itl``, and the work is the mean
    bytes a step moves (``rooflab.decode_step`` at those contexts).
    """
    spec, dev = _net_model(net), _hardware(device)
    sizes = _sweep(batches, "batches")
    n, k = lengths(prompt_len, "prompt_len"), lengths(steps, "steps")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a whole number of at least 1, got {repeats!r}")
    rng = np.random.default_rng(seed)
    contexts = np.arange(n, n + k)
    runs, predicted, work = [], [], []
    for b in sizes:
        _decode_seconds(net, spec, int(b), n, 2, rng)  # warm-up
        runs.append([_decode_seconds(net, spec, int(b), n, k, rng) for _ in range(repeats)])
        predicted.append(request(spec, dev, n, k + 1, precision=PRECISION, batch=int(b), allow_overflow=True).itl_si)
        work.append(float(np.mean(decode_step(spec, dev, contexts, int(b), PRECISION, allow_overflow=True).bytes_si)))
    runs = np.array(runs)
    return Profile("decode", "batch", sizes, sizes.copy(), sizes.copy(), runs.min(axis=1), np.array(predicted),
                   np.array(work), dev, spec, runs)
