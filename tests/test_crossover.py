"""Crossovers, each checked against a closed form worked out here."""

import math

import numpy as np

import pytest

import rooflab as rl

P = 6_979_588_096
L, A, D, V = 32, 4096, 4096, 128256
PEAK, BW = 989.4e12, 3.35e12
KV = 131072


def test_attention_share_of_prefill():
    m = rl.model("Llama-3-8B")
    # 2 L A N^2 / (2 L A N^2 + 2 P N): 3.6 % at 2k, 37.5 % at 32k
    assert rl.attention_share(m, 2000) == pytest.approx(0.036, abs=0.001)
    assert rl.attention_share(m, 32000) == pytest.approx(0.375, abs=0.001)
    assert rl.attention_crossover_len(m) == pytest.approx(P / (L * A), rel=1e-4)  # about 53,250
    assert rl.attention_share(m, round(rl.attention_crossover_len(m))) == pytest.approx(0.5, abs=1e-4)


def test_decode_turns_compute_bound_near_the_ridge_without_kv():
    # batch B: compute B (2P + 2DV) / PEAK against memory ((P + VD) 2 + B (2D + KV)) / BW
    per_token_flops = 2 * P + 2 * D * V
    per_token_bytes = 2 * D + KV
    weights = (P + V * D) * 2
    exact = (weights / BW) / (per_token_flops / PEAK - per_token_bytes / BW)
    assert rl.decode_compute_bound_batch("Llama-3-8B", "H100") == math.ceil(exact)
    assert 280 < exact < 310  # near the ridge point, 295


def test_decode_never_turns_compute_bound_at_long_context():
    # per sequence, context c adds 4 L A c FLOPs but c x KV bytes: intensity heads / kv_heads = 4
    # so past c* = (f/PEAK - e/BW) / (KV/BW - 4 L A / PEAK) no batch is compute-bound
    f, e = 2 * P + 2 * D * V, 2 * D + KV
    c_star = (f / PEAK - e / BW) / (KV / BW - 4 * L * A / PEAK)
    assert 350 < c_star < 450
    assert rl.decode_compute_bound_batch("Llama-3-8B", "H100", context_len=int(c_star) + 1) == math.inf
    assert rl.decode_compute_bound_batch("Llama-3-8B", "H100", context_len=int(c_star) - 20) < math.inf


def test_ttft_exceeds_decode():
    n = rl.ttft_exceeds_decode_len("Llama-3-8B", "H100", output_len=256)
    def ttft(k):
        return (2 * P * k + 2 * L * A * k * k + 2 * D * V) / PEAK
    def decode(k):  # 255 steps at contexts k .. k + 254, all memory-bound
        return sum(((P + V * D + D) * 2 + (c + 1) * KV) / BW for c in range(k, k + 255))
    assert ttft(n) > decode(n) and ttft(n - 1) <= decode(n - 1)


def test_balanced_output_len():
    out = rl.balanced_output_len("Llama-3-8B", "H100", prompt_len=2000)
    r = rl.request("Llama-3-8B", "H100", 2000, out)
    shorter = rl.request("Llama-3-8B", "H100", 2000, out - 1)
    assert r.decode_time >= r.ttft and shorter.decode_time < shorter.ttft


def test_crossovers_take_arrays():
    contexts = np.array([0, 100, 2000])
    batches = rl.decode_compute_bound_batch("Llama-3-8B", "H100", context_len=contexts)
    assert batches.shape == (3,)
    for context, batch in zip(contexts, batches):
        assert batch == rl.decode_compute_bound_batch("Llama-3-8B", "H100", context_len=int(context))
    assert batches[-1] == math.inf
    lengths = rl.ttft_exceeds_decode_len("Llama-3-8B", "H100", output_len=np.array([64, 256]))
    assert lengths[0] < lengths[1]
    outs = rl.balanced_output_len("Llama-3-8B", "H100", prompt_len=[500, 4000])
    assert outs[0] < outs[1]
