"""Precisions: bytes per element, real bits per grouped weight, and the shorthand."""

import pytest

from rooflab import Precision, as_precision, bytes_per_element


def test_bytes_per_element():
    assert [bytes_per_element(d) for d in ("fp32", "fp16", "bf16", "fp8", "int8", "int4")] == [4, 2, 2, 1, 1, 0.5]


def test_group_scales_cost_real_bits():
    # 4 bits + one 16-bit scale shared by 128 weights = 4 + 16/128
    assert Precision(weights="int4", group_size=128).bits_per_weight == 4 + 16 / 128 == 4.125
    # a zero point of the same width doubles the overhead
    assert Precision(weights="int4", group_size=64, zero_point=True).bits_per_weight == 4 + 32 / 64
    # INT4 defaults to groups of 128; fp16 has no groups
    assert Precision(weights="int4").bits_per_weight == 4.125
    assert Precision().bits_per_weight == 16


def test_shorthand_sets_all_three():
    p = as_precision("bf16")
    assert (p.weights, p.kv, p.compute) == ("bf16", "bf16", "bf16")
    weight_only = Precision(weights="int4", kv="fp8", compute="fp16", group_size=128)
    assert (weight_only.weights, weight_only.kv, weight_only.compute) == ("int4", "fp8", "fp16")
    assert weight_only.kv_bytes_per_element == 1


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(weights="fp17"), "unknown weights format 'fp17'.*fp16"),
        (dict(weights="fp16", group_size=128), "group_size applies to grouped"),
        (dict(weights="int4", group_size=0), "group_size must be a positive"),
        (dict(kv="tf32"), "tf32 is a compute mode"),
    ],
)
def test_bad_precisions_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Precision(**kwargs)


def test_as_precision_rejects_other_types():
    with pytest.raises(TypeError, match="precision must be"):
        as_precision(16)
