"""This machine's calibrated roofline (rooflab.measure) beside numpy's own figures.  Prints, asserts nothing.

The calibration takes the best of a few runs of a 1536^3 float32 matrix product (FLOP/s) and of a copy and a
matrix-vector read over a buffer four times the last-level cache (bandwidth).  Beside it, numpy timed the plain
way: one large np.dot and one np.copyto of a fresh 512 MiB array, each the best of 5, on one BLAS thread (the
setting the course measures with) and on the BLAS default.  The calibrated figures should be at or above these:
a roof is the best the machine does.  Then the two clean profiles of the numpy transformer, with the library's
prediction and MFU / MBU beside each point.  Figures are noisy on a shared machine: run it on an idle one.
"""

import time

import numpy as np

from rooflab import measure, profiles
from rooflab.tiny_transformer import TINY, TinyTransformer


def best(run, repeats=5):
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def numpy_figures() -> tuple[float, float]:
    """(FLOP/s of a 3000^3 np.dot, B/s of an np.copyto of 512 MiB: read + write counted)."""
    n = 3000
    a = np.ones((n, n), dtype=np.float32)
    dot = best(lambda: np.dot(a, a), 3)
    source = np.ones(2**27, dtype=np.float32)  # 512 MiB
    target = np.empty_like(source)
    copy = best(lambda: np.copyto(target, source))
    return 2 * n**3 / dot, 2 * source.nbytes / copy


def main() -> None:
    default = measure.blas_threads()
    for threads in sorted({1, default or 1}):
        measure.use_threads(threads)
        start = time.perf_counter()
        machine = measure.calibrate()
        took = time.perf_counter() - start
        flops, bandwidth = numpy_figures()
        print(f"BLAS threads: {threads}")
        print(f"  calibrated:  {machine.peak_flops_for('fp32') / 1e9:7.1f} GFLOP/s  "
              f"{machine.memory_bandwidth_si / 1e9:6.1f} GB/s   (calibrate() took {took:.2f} s)")
        print(f"  numpy:       {flops / 1e9:7.1f} GFLOP/s  {bandwidth / 1e9:6.1f} GB/s   "
              f"(np.dot 3000^3, np.copyto 512 MiB)")
        print(f"  calibrated / numpy: {machine.peak_flops_for('fp32') / flops:.2f} and "
              f"{machine.memory_bandwidth_si / bandwidth:.2f}")
        print(f"  {machine.notes}")
    measure.use_threads(1)
    machine = measure.calibrate()
    net = TinyTransformer(TINY, seed=0)
    start = time.perf_counter()
    prefill = profiles.ttft_profile(net, machine, [1, 4, 16, 64, 256])
    decode = profiles.decode_profile(net, machine, [1, 4, 16])
    print(f"\nthe two profiles on one thread ({time.perf_counter() - start:.1f} s), {measure.describe(machine)}")
    print(prefill.table())
    print(decode.table())
    if default:
        measure.use_threads(default)


if __name__ == "__main__":
    main()
