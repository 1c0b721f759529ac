"""The hardware catalogue against the vendors' datasheets (dense figures) and the capacities devices report."""

import pytest

import rooflab as rl
from rooflab import Q_

REQUIRED = ["A100-40GB", "A100-80GB", "H100-SXM", "H100-PCIe", "H200", "B200", "L4", "T4", "L40S", "MI300X", "TPU-v5e"]


@pytest.mark.parametrize("name", REQUIRED)
def test_every_required_device_is_there_with_a_source(name):
    device = rl.hardware(name)
    assert device.source.startswith("https://")
    assert device.memory_bandwidth.m_as("B/s") > 0 and device.memory_capacity.m_as("B") > 0
    assert device.capacity_source and device.memory_label.endswith("GB")


def test_h100_datasheet_figures():
    h100 = rl.hardware("h100")  # alias, any case
    assert h100.name == "H100-SXM"
    assert h100.peak_flops("fp16").m_as("TFLOP/s") == pytest.approx(989.4)  # 1979 sparse / 2
    assert h100.peak_flops("fp8").m_as("TFLOP/s") == pytest.approx(1978.9)
    assert h100.memory_bandwidth.m_as("TB/s") == pytest.approx(3.35)
    # capacity is what nvidia-smi reports, 81,559 MiB = 81,559 x 2^20 B = 85.52 GB; "80GB" is only the label
    assert h100.memory_capacity.m_as("B") == pytest.approx(81_559 * 1_048_576) == 85_520_809_984
    assert h100.memory_label == "80GB"
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


@pytest.mark.parametrize("name, mib", [("H100-SXM", 81_559), ("A100-80GB", 81_920), ("H200", 143_771),
                                       ("A100-40GB", 40_960), ("L4", 23_034), ("T4", 15_360), ("L40S", 46_068),
                                       ("B200", 183_359)])
def test_capacity_is_the_reported_total(name, mib):
    # nvidia-smi totals from public logs (modal-labs/modal-client PR #2797; rooflab issue #12 for the H100,
    # A100 80GB and H200; NVIDIA/TensorRT-LLM issue #10278 for the B200)
    assert rl.hardware(name).memory_capacity.m_as("MiB") == pytest.approx(mib, abs=1e-6)


def test_gb_against_gib_on_the_h100():
    # the true relation: the label says 80 GB, the device reports 79.65 GiB = 85.5 GB; "80 GB = 74.5 GiB" is wrong
    capacity = rl.hardware("H100").memory_capacity
    assert capacity.m_as("GiB") == pytest.approx(81_559 / 1024)
    assert capacity.m_as("GB") == pytest.approx(85.52, abs=0.005)
    assert Q_(80, "GB").m_as("GiB") == pytest.approx(74.5, abs=0.05)  # the mistake the issue names


def test_every_device_says_what_a_process_can_allocate():
    """Usable memory is at most what the device reports, within 1 GiB of it, and every figure names its source."""
    for device in rl.HARDWARE.values():
        assert 0 <= device.memory_capacity_si - device.usable_si <= 2**30, device.name
        assert device.usable_source, device.name
    # the figures seen in PyTorch's out-of-memory messages
    assert rl.hardware("T4").usable_memory.m_as("GiB") == pytest.approx(14.74)
    assert rl.hardware("A100-80GB").usable_memory.m_as("GiB") == pytest.approx(79.15)
    assert rl.hardware("L4").usable_source.startswith("estimate")


def test_a_hardware_record_built_without_the_usable_figure_uses_its_total():
    cpu = rl.Hardware(name="a laptop CPU", peak_flops_si={"fp32": 1e12}, memory_bandwidth_si=50e9,
                      memory_capacity_si=16e9, power_si=None, source="measured")
    assert cpu.usable_si == 16e9 and cpu.usable_memory.m_as("GB") == pytest.approx(16)
