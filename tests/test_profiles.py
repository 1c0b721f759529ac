"""The two clean profiles: what they time, and the roofline and utilisation beside each point."""

import math

import numpy as np
import pytest

import rooflab as rl
from rooflab import Q_, measure, profiles
from rooflab.tiny_transformer import TinyTransformer

SMALL = rl.Model("test-small", layers=2, d_model=64, heads=4, kv_heads=2, head_dim=16, mlp_dim=96, vocab=101,
                 tied_embeddings=False, max_context=64, source="test")
# One GFLOP/s and one GB/s: a time in seconds is the FLOPs (or bytes) over 1e9.
SLOW = measure.device(flops=Q_(1, "GFLOP/s"), bandwidth=Q_(1, "GB/s"), name="slow")
# SMALL by hand: per layer Q, K, V, O 64x64 + 2 x 64x32 + 64x64 = 12,288, MLP 3 x 64 x 96 = 18,432, norms 128:
# 30,848; two layers and the final norm: 61,760 non-embedding parameters.
P = 2 * (12_288 + 18_432 + 128) + 64


@pytest.fixture(scope="module")
def net():
    return TinyTransformer(SMALL, seed=1)


def test_the_ttft_profile_predicts_each_point_at_the_roofline(net):
    prefill = profiles.ttft_profile(net, SLOW, [4, 8], repeats=1)
    assert SMALL.non_embedding_params == P
    # 4 tokens: body 2 P 4 = 494,080 FLOP (494.08 us) against 4 (P + 4 x 64) = 248,064 B: compute;
    # attention 2 x 2 x 64 x 16 = 4,096 FLOP against 4 x 4 x 128 = 2,048 B; head 2 x 64 x 101 = 12,928 FLOP
    # against 4 x 101 x 64 = 25,856 B: 494.080 + 4.096 + 25.856 us.
    assert math.isclose(prefill.predicted_si[0], 524.032e-6, rel_tol=1e-9)
    assert math.isclose(prefill.work_si[0], 494_080 + 4_096 + 12_928)
    assert prefill.phase == "prefill" and list(prefill.points) == [4, 8] and list(prefill.tokens) == [4, 8]
    assert np.all(prefill.measured_si > 0)


def test_the_decode_profile_moves_the_bytes_of_its_mean_step(net):
    decode = profiles.decode_profile(net, SLOW, [2], prompt_len=8, steps=17, repeats=1)
    # Batch 2 at contexts 8..24 (mean 16): weights 4 (P + 2 x 64), caches 2 x 17 x 512 B (2 x 2 layers x 32 x 4 B
    # a token), head 4 x 101 x 64.
    assert math.isclose(decode.work_si[0], 4 * (P + 128) + 2 * 17 * 512 + 4 * 101 * 64)
    expected = rl.request(SMALL, SLOW, 8, 18, batch=2, precision="fp32").itl_si  # the mean of the 17 steps
    assert math.isclose(decode.predicted_si[0], expected)
    assert list(decode.tokens) == [2] and decode.measured_si[0] > 0


def test_every_run_is_kept_and_the_best_is_the_measurement(net):
    prefill = profiles.ttft_profile(net, SLOW, [4, 8], repeats=3)
    decode = profiles.decode_profile(net, SLOW, [1, 2], repeats=2)
    for made, count in ((prefill, 3), (decode, 2)):
        assert made.runs_si.shape == (2, count)
        assert np.array_equal(made.measured_si, made.runs_si.min(axis=1))
        assert np.all(made.measured.m_as("ms") <= made.median.m_as("ms"))
        assert np.all(made.median.m_as("ms") <= made.worst.m_as("ms"))
    assert "median" in prefill.table() and "worst" in decode.table()


def test_utilisation_is_the_work_over_the_time_at_the_roof():
    made = profiles.Profile("prefill", "prompt_len", np.array([100]), np.array([1]), np.array([100]),
                            np.array([0.001]), np.array([0.0005]), np.array([5e5]), SLOW, SMALL)
    assert math.isclose(made.utilisation.m_as("")[0], 0.5)  # 5e5 FLOP in 1 ms at 1e9 FLOP/s
    assert made.median.m_as("ms")[0] == 1.0  # no runs kept: the median and the worst are the best
    assert math.isclose(made.throughput.m_as("token/s")[0], 1e5)
    assert math.isclose(made.share_of_roofline.m_as("")[0], 0.5)
    assert "MFU" in made.table() and "0.50" in made.table()
    decode = profiles.Profile("decode", "batch", np.array([1]), np.array([1]), np.array([1]), np.array([0.002]),
                              np.array([0.001]), np.array([1e6]), SLOW, SMALL)
    assert math.isclose(decode.utilisation.m_as("")[0], 0.5) and "MBU" in decode.table()  # 1 MB in 2 ms at 1 GB/s


def test_bad_input_is_named(net):
    with pytest.raises(TypeError, match="TinyTransformer"):
        profiles.ttft_profile(object(), SLOW, [4])
    with pytest.raises(ValueError, match="prompt_lens"):
        profiles.ttft_profile(net, SLOW, [0])
    with pytest.raises(ValueError, match="repeats"):
        profiles.decode_profile(net, SLOW, [1], repeats=0)


def test_one_blas_thread_can_be_set_and_read():
    before = measure.blas_threads()
    if before is None:
        pytest.skip("numpy's BLAS here is not OpenBLAS: its threads cannot be set")
    try:
        assert measure.use_threads(1) == 1 and measure.blas_threads() == 1
    finally:
        measure.use_threads(before)
    with pytest.raises(ValueError, match="threads"):
        measure.use_threads(0)
