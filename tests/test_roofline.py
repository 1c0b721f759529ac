"""The roofline on its own: max of two times, intensity, which roof binds."""

import numpy as np
import pytest

import rooflab as rl
from rooflab import Q_
from rooflab.roofline import combine


def test_memory_bound_operation():
    r = rl.roofline(Q_(16, "GFLOP"), Q_(16, "GB"), "H100")
    assert r.bound == "memory"
    assert r.time.m_as("s") == pytest.approx(16e9 / 3.35e12)
    assert r.intensity.m_as("FLOP/B") == pytest.approx(1.0)


def test_compute_bound_operation_and_efficiency():
    r = rl.roofline(Q_(32, "TFLOP"), Q_(16, "GB"), "H100", mfu=0.5)
    assert r.bound == "compute"
    assert r.ideal_time.m_as("s") == pytest.approx(32e12 / 989.4e12)
    assert r.time.m_as("s") == pytest.approx(32e12 / (0.5 * 989.4e12))


def test_arrays_sweep_elementwise():
    flops = Q_(np.array([1e9, 1e15]), "FLOP")
    r = rl.roofline(flops, Q_(1, "GB"), "H100")
    assert list(r.bound) == ["memory", "compute"]


def test_errors_name_the_argument():
    with pytest.raises(rl.UnitError, match="bytes must have the dimension"):
        rl.roofline(Q_(1, "TFLOP"), Q_(1, "TB/s"), "H100")
    with pytest.raises(rl.UnitError, match="flops must be a quantity"):
        rl.roofline(1e12, Q_(1, "GB"), "H100")
    with pytest.raises(ValueError, match=r"mfu must be in \(0, 1\]"):
        rl.roofline(Q_(1, "TFLOP"), Q_(1, "GB"), "H100", mfu=1.5)


def test_operations_in_sequence_add_up():
    # a matmul that waits on compute, then a cache read that waits on memory: they do not overlap
    matmul = rl.roofline(Q_(10, "TFLOP"), Q_(1, "GB"), "H100")
    read = rl.roofline(Q_(0.01, "TFLOP"), Q_(20, "GB"), "H100")
    both = combine({"matmul": matmul, "read": read})
    assert both.time.m_as("s") == pytest.approx(10e12 / 989.4e12 + 20e9 / 3.35e12)
    # the shortcut max(sum of FLOPs / peak, sum of bytes / bandwidth) says less
    assert both.one_operation_time.m_as("s") == pytest.approx(max(10.01e12 / 989.4e12, 21e9 / 3.35e12))
    assert both.one_operation_time < both.time == both.ideal_time
    assert both.dominant == "matmul" and both.bound == "compute"  # compute-bound parts take most of the time
    assert matmul.dominant == "" and not matmul.parts
