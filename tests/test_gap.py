"""The gap between a measured pass and its roofline, taken apart into timed pieces."""

import math

import pytest

import rooflab as rl
from rooflab import Q_, gap, measure
from rooflab.tiny_transformer import TinyTransformer

SMALL = rl.Model("test-small", layers=2, d_model=64, heads=4, kv_heads=2, head_dim=16, mlp_dim=96, vocab=101,
                 tied_embeddings=False, max_context=64, source="test")
SLOW = measure.device(flops=Q_(1, "GFLOP/s"), bandwidth=Q_(1, "GB/s"), name="slow")
P = 2 * (12_288 + 18_432 + 128) + 64  # SMALL's non-embedding parameters, counted by hand in test_profiles.py


@pytest.fixture(scope="module")
def net():
    return TinyTransformer(SMALL, seed=1)


def test_the_roofline_parts_are_the_hand_count(net):
    found = gap.explain_gap(net, SLOW, "decode", 1, Q_(10, "ms"), context_len=12, repeats=1)
    # Batch 1 at 1 GB/s: body 2 P FLOP against 4 (P + 64) B: memory, 4 (P + 64) ns; head 2 x 64 x 101 FLOP
    # against 4 x 64 x 101 B: memory, 25,856 ns.  Attention: 4 x 2 layers x 64 x 12 = 6,144 FLOP against
    # 13 tokens x 2 layers x 2 (K, V) x 32 x 4 B = 6,656 B: memory, 6,656 ns.
    assert math.isclose(found.products_roofline_si, (4 * (P + 64) + 25_856) * 1e-9, rel_tol=1e-9)
    assert math.isclose(found.attention_roofline_si, 6_656e-9, rel_tol=1e-9)
    assert math.isclose(found.roofline_si, found.products_roofline_si + found.attention_roofline_si, rel_tol=1e-9)
    assert found.yours_si == 0.01 and found.measured_si > 0
    assert math.isclose(found.gap.m_as("ms"), (found.measured_si - found.roofline_si) * 1e3)
    assert "yours 10.00 ms" in found.table() or "at or below" in found.table()


def test_the_parts_and_what_is_left_add_up_to_the_gap(net):
    found = gap.explain_gap(net, SLOW, "prefill", 8, repeats=1)
    assert min(found.products_si, found.attention_si, found.elementwise_si, found.measured_si) > 0
    assert math.isclose(sum(found.parts_si.values()) + found.unexplained_si, found.gap_si, rel_tol=1e-9)
    assert found.waiting_si >= 0
    # made by hand: a pass of 10 ms against a roofline of 4, 0.5 of it waiting; products 5 against 3, attention
    # 1.5 against 1, element-wise 2: the parts 0.5 + 2 + 0.5 + 2, unexplained 6 - 5 = 1
    made = gap.Gap("decode", 4, 0.010, 0.004, 0.0005, 0.005, 0.003, 0.0015, 0.001, 0.002, yours_si=0.012)
    assert math.isclose(made.unexplained_si, 0.001, rel_tol=1e-9)
    text = made.table()
    assert text.startswith("decode step at batch 4: yours 12.00 ms; timed again with its pieces 10.00 ms")
    assert "unexplained" in text and "17%" in text and "60% of their roofline's speed" in text  # 1 / 6; 3 / 5
    assert "waiting for the core" in text and " 8%" in text  # 0.5 / 6
    fast = gap.Gap("prefill", 8, 0.001, 0.002, 0.0, 0.001, 0.001, 0.0, 0.0, 0.0)
    assert "at or below the roofline" in fast.table()


def test_bad_input_is_named(net):
    with pytest.raises(ValueError, match="phase"):
        gap.explain_gap(net, SLOW, "both", 1, Q_(1, "ms"))
    with pytest.raises(ValueError, match="measured"):
        gap.explain_gap(net, SLOW, "decode", 1, Q_(1, "GB"))
    with pytest.raises(ValueError, match="measured"):
        gap.explain_gap(net, SLOW, "decode", 1, Q_(-1, "ms"))
    with pytest.raises(ValueError, match="repeats"):
        gap.explain_gap(net, SLOW, "decode", 1, repeats=0)
    with pytest.raises(TypeError, match="TinyTransformer"):
        gap.explain_gap(object(), SLOW, "decode", 1, Q_(1, "ms"))
