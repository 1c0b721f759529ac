"""The registry: bytes, FLOPs and tokens each have a dimension, and the boundary checks name the argument."""

import numpy as np
import pint
import pytest

import rooflab as rl
from rooflab import Q_
from rooflab.units import UnitError, to_si


@pytest.mark.parametrize(
    "make",
    [
        lambda: Q_(1, "GB") + 1,
        lambda: Q_(1, "FLOP") + Q_(1, "B"),
        lambda: Q_(1, "GB/s").to("Hz"),
        lambda: Q_(1, "token") + Q_(1, "B"),
    ],
)
def test_distinct_dimensions_do_not_mix(make):
    with pytest.raises(pint.DimensionalityError):
        make()


def test_decimal_and_binary_prefixes():
    assert Q_(1, "GiB").m_as("B") == 2**30
    assert Q_(1, "GB").m_as("B") == 1e9
    assert Q_(1, "Gb").m_as("MB") == pytest.approx(125.0)  # gigabit, not gilbert
    assert Q_(4, "byte") != 32
    assert Q_(3.35, "TB/s").m_as("GB/s") == pytest.approx(3350)


def test_one_registry_is_the_application_registry():
    assert rl.ureg is pint.get_application_registry().get()


def test_to_si_converts_and_names_the_argument():
    assert to_si(Q_(5, "ms"), "time", "overhead") == pytest.approx(0.005)
    with pytest.raises(UnitError, match="overhead"):
        to_si(5, "time", "overhead")
    with pytest.raises(UnitError, match=r"overhead.*Q_\(5, 'ms'\)"):
        to_si(5, "time", "overhead")
    with pytest.raises(UnitError, match="bandwidth.*TB/s"):
        to_si(Q_(3, "TB"), "bandwidth", "bandwidth")
    with pytest.raises(ValueError, match="finite"):
        to_si(Q_(float("nan"), "s"), "time", "t")
    assert np.allclose(to_si(Q_(np.array([1.0, 2.0]), "ms"), "time", "t"), [0.001, 0.002])


def test_quantity_from_another_registry_is_converted():
    other = pint.UnitRegistry()
    assert to_si(other.Quantity(2.0, "ms"), "time", "t") == pytest.approx(0.002)
    assert to_si(other.Quantity(3.35, "TB/s"), "bandwidth", "bw") == pytest.approx(3.35e12)
