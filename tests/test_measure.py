"""The calibrated device: a record like a catalogue GPU's, built from what was measured."""

import math
import re

import pytest

import rooflab as rl
from rooflab import Q_, measure


def test_a_device_from_figures_is_priced_like_a_catalogue_gpu():
    dev = measure.device(flops=Q_(100, "GFLOP/s"), bandwidth=Q_(20, "GB/s"), name="laptop")
    # 1 GFLOP over 1 GB: compute 1e9 / 1e11 = 10 ms, memory 1e9 / 2e10 = 50 ms: memory binds.
    cost = rl.roofline(Q_(1, "GFLOP"), Q_(1, "GB"), dev, precision="fp32")
    assert cost.bound == "memory" and math.isclose(cost.time.m_as("ms"), 50.0)
    assert math.isclose(dev.ridge_point("fp32").m_as("FLOP/B"), 5.0)
    # The library's prefill of a 1-token prompt of TinyLlama in fp32 on it: its body reads 4 bytes a weight.
    m = rl.model("TinyLlama")
    body = rl.prefill(m, dev, 1, precision="fp32").parts["body"]
    assert math.isclose(body.bytes_si, 4 * m.non_embedding_params + 4 * m.d_model)
    with pytest.raises(rl.UnsupportedPrecision, match="fp16"):
        rl.prefill(m, dev, 1)  # only an fp32 rate was measured


def test_bad_figures_are_named():
    with pytest.raises(ValueError, match="bandwidth"):
        measure.device(flops=Q_(1, "GFLOP/s"), bandwidth=Q_(0, "GB/s"))
    with pytest.raises(Exception, match="flops"):
        measure.device(flops=Q_(1, "GB/s"), bandwidth=Q_(1, "GB/s"))
    with pytest.raises(ValueError, match="repeats"):
        measure.best_time(lambda: None, repeats=0)
    with pytest.raises(ValueError, match="size"):
        measure.calibrate(size=10)
    with pytest.raises(ValueError, match="stream_bytes"):
        measure.calibrate(size=256, stream_bytes=100)


def test_best_time_is_the_fastest_run():
    calls = []
    assert measure.best_time(lambda: calls.append(1), repeats=4, warmup=2).m_as("s") >= 0
    assert len(calls) == 6


def test_calibrate_returns_a_record_that_says_what_it_measured():
    dev = measure.calibrate(size=256, stream_bytes=4 * 2**20, repeats=1)
    assert isinstance(dev, rl.Hardware) and dev.precisions == ("fp32",)
    assert dev.peak_flops_for("fp32") > 0 and dev.memory_bandwidth_si > 0
    assert "256x256x256" in dev.notes and "copy" in dev.notes and "matrix-vector" in dev.notes
    assert dev.source.startswith("measured by rooflab.measure.calibrate")
    assert measure.last_level_cache_bytes() > 0
    # 07's reveals price the student's own machine: latest() is the record the last calibration returned
    assert measure.latest() is dev
    again = measure.calibrate(size=256, stream_bytes=4 * 2**20, repeats=1)
    assert measure.latest() is again and again is not dev


def test_timings_keeps_every_run_and_spread_summarises_them():
    calls = []
    runs = measure.timings(lambda: calls.append(1), repeats=4, warmup=2)
    assert len(calls) == 6 and runs.m_as("s").shape == (4,)
    # 2, 4 and 10 ms: best 2, median 4, worst 10, worst / best 5x
    line = measure.spread(Q_([4.0, 10.0, 2.0], "ms"))
    assert line == "best 2 ms, median 4 ms, worst 10 ms over 3 runs (worst/best 5.00x)"
    assert measure.spread(Q_(0.003, "s"), unit="us").startswith("best 3e+03 us")
    with pytest.raises(ValueError, match="times"):
        measure.spread(Q_([1.0, -1.0], "ms"))
    with pytest.raises(ValueError, match="warmup"):
        measure.timings(lambda: None, warmup=-1)


def test_calibrate_notes_the_slowest_run_too():
    dev = measure.calibrate(size=256, stream_bytes=4 * 2**20, repeats=2)
    assert "slowest run" in dev.notes and "best of 2" in dev.notes
    # both runs as a time and as a rate, with units: the slowest takes at least as long and runs no faster
    best = re.search(r"best of 2 ([0-9.]+) ms, ([0-9.]+) GFLOP/s", dev.notes)
    slowest = re.search(r"slowest run ([0-9.]+) ms, ([0-9.]+) GFLOP/s", dev.notes)
    assert best and slowest, dev.notes
    assert float(slowest[1]) >= float(best[1]) and float(slowest[2]) <= float(best[2])


def test_a_calibration_on_one_blas_thread_reads_the_cpu_clock():
    before = measure.blas_threads()
    if before is None:
        pytest.skip("numpy's BLAS here is not OpenBLAS: its threads cannot be set")
    try:
        measure.use_threads(1)
        assert "timed in CPU time of this thread" in measure.calibrate(size=256, stream_bytes=4 * 2**20).notes
        if measure.use_threads(2) == 2:
            assert "timed in wall-clock time" in measure.calibrate(size=256, stream_bytes=4 * 2**20).notes
    finally:
        measure.use_threads(before)
    # the clock is the one given: a clock that advances 1 s a reading times every run at 1 s
    ticks = iter(range(100))
    assert list(measure.timings(lambda: None, repeats=3, clock=lambda: float(next(ticks))).m_as("s")) == [1, 1, 1]
