"""The hardware catalogue against the vendors' datasheets (dense figures)."""

import pytest

import rooflab as rl
from rooflab import Q_

REQUIRED = ["A100-40GB", "A100-80GB", "H100-SXM", "H100-PCIe", "H200", "B200", "L4", "T4", "L40S", "MI300X", "TPU-v5e"]


@pytest.mark.parametrize("name", REQUIRED)
def test_every_required_device_is_there_with_a_source(name):
    device = rl.hardware(name)
    assert device.source.startswith("https://")
    assert device.memory_bandwidth.m_as("B/s") > 0 and device.memory_capacity.m_as("B") > 0


def test_h100_datasheet_figures():
    h100 = rl.hardware("h100")  # alias, any case
    assert h100.name == "H100-SXM"
    assert h100.peak_flops("fp16").m_as("TFLOP/s") == pytest.approx(989.4)  # 1979 sparse / 2
    assert h100.peak_flops("fp8").m_as("TFLOP/s") == pytest.approx(1978.9)
    assert h100.memory_bandwidth.m_as("TB/s") == pytest.approx(3.35)
    assert h100.memory_capacity == Q_(80, "GB")
    assert h100.power == Q_(700, "W")
    # ridge point = 989.4e12 / 3.35e12, about 295 FLOP/B
    assert h100.ridge_point("fp16").m_as("FLOP/B") == pytest.approx(989.4 / 3.35)


def test_h200_has_h100_compute_and_more_bandwidth():
    h100, h200 = rl.hardware("H100"), rl.hardware("H200")
    assert h200.peak_flops("bf16") == h100.peak_flops("bf16")
    assert h200.memory_bandwidth.m_as("TB/s") / h100.memory_bandwidth.m_as("TB/s") == pytest.approx(4.8 / 3.35)


def test_missing_precision_is_an_error_not_a_fallback():
    with pytest.raises(rl.UnsupportedPrecision, match="H100-SXM has no int4"):
        rl.hardware("H100").peak_flops("int4")
    with pytest.raises(rl.UnsupportedPrecision, match="T4 has no bf16"):
        rl.hardware("T4").ridge_point("bf16")
    assert rl.hardware("T4").peak_flops("int4").m_as("TFLOP/s") == 260


def test_unknown_device_lists_close_names():
    with pytest.raises(KeyError, match="Did you mean.*H100-SXM"):
        rl.hardware("H100-SMX")
    with pytest.raises(KeyError, match="The catalogue has"):
        rl.hardware("Voodoo2")
