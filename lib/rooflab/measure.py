"""This machine's roofline, measured: numpy's float32 FLOP/s and the memory bandwidth, as a device record.

Every other device in rooflab comes from a datasheet.  :func:`calibrate` times
two operations on the machine it runs on and returns a :class:`~rooflab.Hardware`
record that every library function accepts like a catalogue GPU, with its
compute precision ``"fp32"`` (numpy multiplies float32 on the CPU's vector units):

* compute: a square float32 matrix product, n x n by n x n (n = 1536), 2 n^3 FLOPs, far above
  the ridge point (its intensity is n / 6 FLOP/B), so it runs at the CPU's peak as
  numpy's BLAS reaches it;
* memory: a stream through arrays much larger than the last-level cache, the best of a
  copy (it reads and writes each byte: 2 x the array's bytes move) and a matrix-vector
  product, which only reads, as decode's weight reads do (a write-allocate copy often
  moves more than it counts, so the read stream is usually the higher figure).

Each figure is the best of a few short repetitions after one warm-up: the fastest run is
the one least disturbed by other processes, and a roof is the best the machine does.

>>> dev = device(flops=Q_(100, "GFLOP/s"), bandwidth=Q_(20, "GB/s"), name="a laptop")
>>> dev.peak_flops("fp32"), round(dev.ridge_point("fp32").magnitude, 1)
(<Quantity(0.1, 'teraFLOP / second')>, 5.0)
"""

from __future__ import annotations

import os
import time
from typing import Callable

import numpy as np
import pint

from .hardware import Hardware
from .units import Q_, quantity, to_si

__all__ = ["calibrate", "latest", "device", "best_time", "timings", "spread", "last_level_cache_bytes", "use_threads",
           "blas_threads", "PRECISION"]

#: The precision numpy multiplies and stores in here: the record has a rate for this one only.
PRECISION = "fp32"
_LATEST: list = []  # the record the last calibrate() in this process returned (see latest())
_FALLBACK_CACHE = 32 * 2**20  # a last-level cache size to assume when the OS does not say


def _openblas():
    """numpy's OpenBLAS as a ctypes library with its thread setter and getter, or None (another BLAS, no /proc)."""
    import ctypes
    import re

    try:
        with open("/proc/self/maps") as handle:
            paths = sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", handle.read())))
    except OSError:
        return None
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix in (("scipy_openblas", "64_"), ("openblas", "64_"), ("openblas", "")):
            setter = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
            getter = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
            if setter is not None and getter is not None:
                getter.restype = ctypes.c_int
                return setter, getter
    return None


def blas_threads() -> int | None:
    """Threads numpy's BLAS (OpenBLAS) runs a matrix product on, or None where it cannot be read."""
    found = _openblas()
    return None if found is None else int(found[1]())


def use_threads(threads: int) -> int | None:
    """Run numpy's matrix products on ``threads`` threads from now on; return the number now set (None: unknown).

    One thread keeps a measurement clean on a shared machine: OpenBLAS's threads wait for each other by spinning, so
    when another program takes one of the cores, a product on two threads can run ten times slower, while one on a
    single thread only loses its share.  Calibrate and profile with the same setting.
    """
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a whole number of at least 1, got {threads!r}")
    found = _openblas()
    if found is None:
        return None
    found[0](threads)
    return int(found[1]())


def _whole(value, what: str, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{what} must be a whole number of at least {least}, got {value!r}")


def timings(run: Callable[[], object], repeats: int = 5, warmup: int = 1,
            clock: Callable[[], float] = time.perf_counter) -> pint.Quantity:
    """Run ``run()`` ``warmup`` times untimed, then ``repeats`` times; return every timed run, s (an array).

    Their spread is the noise of the machine: :func:`spread` summarises it, :func:`best_time` keeps the fastest.
    ``clock`` is the wall clock by default (what a user waits); ``time.thread_time`` counts only the CPU time the
    calling thread got, not the time it waited while other programs had the core.
    """
    _whole(repeats, "repeats", 1)
    _whole(warmup, "warmup", 0)
    for _ in range(warmup):
        run()
    seconds = []
    for _ in range(repeats):
        start = clock()
        run()
        seconds.append(clock() - start)
    return Q_(np.array(seconds), "s")


def best_time(run: Callable[[], object], repeats: int = 3, warmup: int = 1) -> pint.Quantity:
    """Run ``run()`` ``warmup`` times untimed, then ``repeats`` times; return the fastest run, s.

    The warm-up pays for first-touch page faults and lazy initialisation (BLAS threads); the minimum is the
    run least disturbed by the rest of the machine.
    """
    return Q_(float(np.min(timings(run, repeats, warmup).m_as("s"))), "s")


def spread(times: pint.Quantity, unit: str = "ms") -> str:
    """One line: the best, median and worst of repeated ``times`` in ``unit``, and worst / best (the noise)."""
    seconds = np.atleast_1d(np.asarray(times.m_as("s"), dtype=float))
    if seconds.size == 0 or not np.all(np.isfinite(seconds)) or np.any(seconds <= 0):
        raise ValueError(f"times must be positive finite times, got {times!r:.120}")
    best, median, worst = (Q_(float(f(seconds)), "s").m_as(unit) for f in (np.min, np.median, np.max))
    return (f"best {best:.3g} {unit}, median {median:.3g} {unit}, worst {worst:.3g} {unit} over {seconds.size} runs "
            f"(worst/best {worst / best:.2f}x)")


def last_level_cache_bytes() -> int:
    """The largest CPU cache the OS reports (Linux sysfs), B; 32 MiB where it reports none."""
    sizes = []
    root = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = os.listdir(root)
    except OSError:
        return _FALLBACK_CACHE
    for entry in entries:
        try:
            with open(os.path.join(root, entry, "size")) as handle:
                text = handle.read().strip()
        except OSError:
            continue
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:].upper(), 1)
        digits = text[:-1] if scale != 1 else text
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes, default=_FALLBACK_CACHE)


def _memory_capacity() -> float:
    """Physical memory, B (what the OS reports); 0 where it does not say."""
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0.0


def device(flops: pint.Quantity, bandwidth: pint.Quantity, name: str = "this machine",
           memory: pint.Quantity | None = None, source: str = "given", notes: str = "") -> Hardware:
    """A device record with one compute rate, ``fp32`` at ``flops``, and ``bandwidth``; memory in B (default 16 GB).

    What :func:`calibrate` returns, built from figures given by hand (another machine's calibration).
    """
    peak = to_si(flops, "flop_rate", "flops")
    bw = to_si(bandwidth, "bandwidth", "bandwidth")
    capacity = 16e9 if memory is None else to_si(memory, "bytes", "memory")
    for value, what in ((peak, "flops"), (bw, "bandwidth"), (capacity, "memory")):
        if not np.isfinite(value) or value <= 0:
            raise ValueError(f"{what} must be a positive finite quantity, got {value!r} in SI units")
    return Hardware(name=name, peak_flops_si={PRECISION: float(peak)}, memory_bandwidth_si=float(bw),
                    memory_capacity_si=float(capacity), power_si=None, source=source, notes=notes)


def _calibration_clock() -> tuple[Callable[[], float], str]:
    """The clock a calibration reads, and its name: the thread's CPU clock when numpy's BLAS runs on this one
    thread (all the work is then this thread's, and the time it waited for the core does not count), else the
    wall clock (BLAS threads of their own would not show on this thread's clock)."""
    if blas_threads() == 1:
        return time.thread_time, "CPU time of this thread"
    return time.perf_counter, "wall-clock time"


def _matmul_rate(size: int, repeats: int, clock=time.perf_counter) -> tuple[float, np.ndarray]:
    """(FLOP/s of the fastest run, every run's seconds) of a size x size float32 matrix product: 2 size^3 FLOPs."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    out = np.empty_like(a)
    seconds = timings(lambda: np.matmul(a, b, out=out), repeats, clock=clock).m_as("s")
    return 2.0 * size**3 / float(np.min(seconds)), seconds


def _stream_rates(nbytes: int, repeats: int, clock=time.perf_counter) -> tuple[float, float]:
    """(copy B/s, read B/s) through one float32 buffer of ``nbytes``: copying its first half onto its second
    moves 2 x nbytes / 2, a matrix-vector product over all of it reads nbytes (its vector and result are a
    few KB).  One buffer: the page faults of a second would cost more than the measurement."""
    columns = 4096
    rows = max(nbytes // (4 * columns) // 2 * 2, 2)
    buffer = np.empty((rows, columns), dtype=np.float32)
    buffer.fill(1.0)
    first, second = buffer[: rows // 2], buffer[rows // 2:]
    copy = float(np.min(timings(lambda: np.copyto(second, first), repeats, clock=clock).m_as("s")))
    vector = np.ones(columns, dtype=np.float32)
    read = float(np.min(timings(lambda: buffer @ vector, repeats, clock=clock).m_as("s")))
    return 2.0 * first.nbytes / copy, buffer.nbytes / read


def calibrate(size: int = 1536, stream_bytes: int | None = None, repeats: int = 3) -> Hardware:
    """Measure this machine's two roofs and return them as a device record (compute precision ``"fp32"``).

    peak = 2 size^3 / (fastest size x size float32 matmul), FLOP/s; bandwidth = the larger of
    2 x bytes / (fastest copy) and bytes / (fastest matrix-vector read) over ``stream_bytes`` (default:
    4 x the last-level cache, at least 128 MiB and at most 512 MiB; the copy streams half of it each way; best of
    at least 5), B/s.  Timed by the thread's CPU clock when BLAS runs on one thread (``use_threads(1)``), so time
    spent waiting for the core while other programs run is left out (their contention for the caches and the
    memory bus is not: a busy machine still calibrates somewhat lower); by the wall clock otherwise.  Takes
    under a second on an idle laptop.
    ``notes`` says what was measured and how.
    """
    for value, what, least in ((size, "size", 256), (repeats, "repeats", 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{what} must be a whole number of at least {least}, got {value!r}")
    cache = last_level_cache_bytes()
    if stream_bytes is None:
        stream_bytes = min(max(4 * cache, 128 * 2**20), 2**29)
    if isinstance(stream_bytes, bool) or not isinstance(stream_bytes, int) or stream_bytes < 2**20:
        raise ValueError(f"stream_bytes must be a whole number of bytes, at least 1 MiB, got {stream_bytes!r}")
    clock, clock_name = _calibration_clock()
    flops, matmul_runs = _matmul_rate(size, repeats, clock)
    matmul_s, slowest_s = float(np.min(matmul_runs)), float(np.max(matmul_runs))
    copy, read = _stream_rates(stream_bytes, max(repeats, 5), clock)  # a stream takes milliseconds: more tries are cheap
    bandwidth = max(copy, read)
    threads = blas_threads()
    notes = (f"float32 matmul {size}x{size}x{size}: best of {repeats} {matmul_s * 1e3:.1f} ms, "
             f"{flops / 1e9:.1f} GFLOP/s (its slowest run {slowest_s * 1e3:.1f} ms, "
             f"{2.0 * size**3 / slowest_s / 1e9:.1f} GFLOP/s); "
             f"stream over {stream_bytes / 2**20:.0f} MiB "
             f"(last-level cache {cache / 2**20:.0f} MiB, best of {max(repeats, 5)}): "
             f"copy {copy / 1e9:.1f} GB/s (read + write counted), "
             f"matrix-vector read {read / 1e9:.1f} GB/s; bandwidth = the larger. "
             f"{os.cpu_count()} CPUs visible, BLAS threads: {threads if threads else 'not known'}; "
             f"timed in {clock_name}.")
    source = f"measured by rooflab.measure.calibrate at {time.strftime('%Y-%m-%d %H:%M:%S')}"
    record = Hardware(name="this machine (numpy fp32)", peak_flops_si={PRECISION: flops},
                      memory_bandwidth_si=bandwidth, memory_capacity_si=_memory_capacity() or 16e9, power_si=None,
                      source=source, notes=notes)
    _LATEST[:] = [record]
    return record


def latest() -> Hardware | None:
    """The device record the last :func:`calibrate` in this process returned, or None before the first."""
    return _LATEST[0] if _LATEST else None


def describe(dev: Hardware) -> str:
    """One line: the device's fp32 peak, bandwidth and ridge point, with units."""
    peak = quantity(dev.peak_flops_for(PRECISION), "flop_rate").to("GFLOP/s")
    return (f"{dev.name}: {peak:.1f~P} fp32, {dev.memory_bandwidth.to('GB/s'):.1f~P}, "
            f"ridge point {dev.ridge_point(PRECISION):.1f~P}")
