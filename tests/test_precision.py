"""Precisions: bytes per element, real bits per grouped weight, and the shorthand."""

import pytest

from rooflab import FORMATS, Precision, as_precision, bytes_per_element


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


def test_zero_points_and_scales_of_shipped_formats():
    # AWQ and GPTQ: a 16-bit scale and a 4-bit zero point per group of 128
    assert as_precision("awq-int4").bits_per_weight == 4 + (16 + 4) / 128
    assert as_precision("gptq-int4").bits_per_weight == 4 + (16 + 4) / 128
    # bitsandbytes NF4: one FP32 absmax per block of 64 (QLoRA's 0.5 extra bits without double quantization)
    assert as_precision("bnb-nf4").bits_per_weight == 4 + 32 / 64
    # GGUF Q4_0 and Q8_0: one FP16 scale per 32 weights; Q4_K: 128 bits of metadata per 256
    assert [as_precision(f).bits_per_weight for f in ("gguf-q4_0", "gguf-q8_0", "gguf-q4_k")] == [4.5, 8.5, 4.5]
    # gpt-fast INT4: a BF16 scale and a BF16 zero per group of 32
    assert as_precision("gpt-fast-int4-g32").bits_per_weight == 4 + 32 / 32
    assert as_precision("mxfp4").bits_per_weight == 4 + 8 / 32 and as_precision("nvfp4").bits_per_weight == 4 + 8 / 16
    assert Precision(weights="int4", group_size=128, zero_point=True, zero_bits=4).bits_per_weight == 4.15625


def test_embedding_and_head_stay_16_bit_unless_quantized():
    assert Precision(weights="int4").embeddings == "fp16" and Precision(weights="int4").embedding_bits_per_weight == 16
    assert Precision(weights="int8", compute="bf16").embeddings == "bf16"
    assert as_precision("fp8").embeddings == "fp16"  # FP8 checkpoints keep lm_head in 16-bit
    assert as_precision("fp32").embeddings == "fp32" and as_precision("bf16").embeddings == "bf16"
    quantized = Precision(weights="int4", group_size=128, quantize_embeddings=True)
    assert quantized.embeddings == "int4" and quantized.embedding_bits_per_weight == 4.125


def test_every_format_names_its_library_or_paper():
    for name, precision in FORMATS.items():
        assert precision.name and len(precision.source) > 40, name
        assert as_precision(name.upper()) is precision  # case-insensitive
    with pytest.raises(ValueError, match="library layouts.*awq-int4"):
        as_precision("awq")
