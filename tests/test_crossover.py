"""Crossovers under the per-operation model, each checked against a closed form worked out here."""

import math

import numpy as np
import pytest

import rooflab as rl

P = 6_979_588_096
L, A, D, V = 32, 4096, 4096, 128256
PEAK, BW = 989.4e12, 3.35e12
KV = 131072
CAP = 81_559 * 2**20


def test_attention_share_of_prefill():
    m = rl.model("Llama-3.1-8B")  # Llama-3-8B's shapes, with the context to go past 8k
    # 2 L A N^2 / (2 L A N^2 + 2 P N): 3.6 % at 2k, 37.5 % at 32k
    assert rl.attention_share("Llama-3-8B", 2000) == pytest.approx(0.036, abs=0.001)
    assert rl.attention_share(m, 32000) == pytest.approx(0.375, abs=0.001)
    assert rl.attention_crossover_len(m) == pytest.approx(P / (L * A), rel=1e-4)  # about 53,250
    assert rl.attention_share(m, round(rl.attention_crossover_len(m))) == pytest.approx(0.5, abs=1e-4)
    with pytest.raises(rl.ContextTooLong, match="Llama-3.1-8B"):
        rl.attention_share("Llama-3-8B", 32000)


@pytest.mark.parametrize("context", [0, 300, 4000])
def test_weight_matmuls_turn_compute_bound_near_the_ridge_at_any_context(context):
    # the body at batch B: compute B 2P / PEAK against memory (P + B D) 2 / BW; the context does not enter
    exact = (2 * P / BW) / (2 * P / PEAK - 2 * D / BW)
    assert 290 < exact < 300  # near the ridge point, 989.4 / 3.35 = 295
    assert rl.decode_compute_bound_batch("Llama-3-8B", "H100", context_len=context) == math.ceil(exact)
    crossing = rl.decode_compute_bound_batch("Llama-3-8B", "H100", context_len=context, detail=True)
    assert crossing.value == math.ceil(exact) and crossing.operation == "body"
    # whether that batch fits: 296 sequences of context + 1 tokens next to 16.06 GB of weights
    assert crossing.fits == (296 * (context + 1) * KV + 16.06e9 <= CAP)
    assert crossing.fits is (context != 4000)
    assert "does not fit" in crossing.note or crossing.fits


def test_attention_never_turns_compute_bound():
    # intensity 4 L A c / (2 (c + 1) 2 L kv_width) < heads / kv_heads = 4 FLOP/B, far below the ridge
    for context in (0, 2000):
        assert rl.decode_compute_bound_batch("Llama-3-8B", "H100", context, operation="attention") == math.inf


def test_the_whole_step_turns_compute_bound_only_at_short_context():
    # per sequence, the compute-bound body and head cost (2P + 2DV) / PEAK; attention costs (c + 1) KV / BW
    # of memory time, so the step's compute-bound share wins only while c + 1 < (2P + 2DV) BW / (PEAK KV)
    c_star = (2 * P + 2 * D * V) * BW / (PEAK * KV) - 1
    assert 380 < c_star < 390
    assert rl.decode_compute_bound_batch("Llama-3-8B", "H100", int(c_star) - 5, operation="step") < math.inf
    assert rl.decode_compute_bound_batch("Llama-3-8B", "H100", int(c_star) + 5, operation="step") == math.inf


def test_ttft_exceeds_decode():
    def ttft(k):  # body and attention compute-bound at these lengths, the head memory-bound
        return (max(2 * P * k / PEAK, (P + k * D) * 2 / BW) + max(2 * L * A * k * k / PEAK, k * KV / BW)
                + V * D * 2 / BW)

    def decode(k):  # 255 steps at contexts k .. k + 254, every operation memory-bound
        return sum(((P + D) * 2 + V * D * 2 + (c + 1) * KV) / BW for c in range(k, k + 255))

    crossing = rl.ttft_exceeds_decode_len("Llama-3.1-8B", "H100", output_len=256, detail=True)
    n = crossing.value
    assert n == rl.ttft_exceeds_decode_len("Llama-3.1-8B", "H100", output_len=256)
    assert ttft(n) > decode(n) and ttft(n - 1) <= decode(n - 1)
    assert crossing.operation == "attention"  # at ~58k tokens the N^2 attention is the prefill's largest part
    # Llama-3-8B has no such prompt within its 8,192 tokens
    assert rl.ttft_exceeds_decode_len("Llama-3-8B", "H100", output_len=256) == math.inf


def test_balanced_output_len():
    out = rl.balanced_output_len("Llama-3-8B", "H100", prompt_len=2000)
    r = rl.request("Llama-3-8B", "H100", 2000, out)
    shorter = rl.request("Llama-3-8B", "H100", 2000, out - 1)
    assert r.decode_time >= r.ttft and shorter.decode_time < shorter.ttft


def test_typical_efficiency_moves_the_crossings():
    ideal = rl.decode_compute_bound_batch("Llama-3-8B", "H100")
    e = rl.efficiency("typical")
    typical = rl.decode_compute_bound_batch("Llama-3-8B", "H100", efficiency="typical")
    # compute B 2P / (PEAK mfu) against memory (P + B D) 2 / (BW mbu): the ridge scales by mfu / mbu
    exact = (2 * P / (BW * e.mbu)) / (2 * P / (PEAK * e.mfu) - 2 * D / (BW * e.mbu))
    assert typical == math.ceil(exact) and typical < ideal
    assert rl.ttft_exceeds_decode_len("Llama-3.1-8B", "H100", 256, efficiency="typical") > 0


def test_crossovers_take_arrays():
    contexts = np.array([0, 100, 2000])
    batches = rl.decode_compute_bound_batch("Llama-3-8B", "H100", context_len=contexts)
    assert batches.shape == (3,)
    for context, batch in zip(contexts, batches):
        assert batch == rl.decode_compute_bound_batch("Llama-3-8B", "H100", context_len=int(context))
    steps = rl.decode_compute_bound_batch("Llama-3-8B", "H100", context_len=contexts, operation="step")
    assert steps[-1] == math.inf
    lengths = rl.ttft_exceeds_decode_len("Llama-3.1-8B", "H100", output_len=np.array([64, 256]))
    assert lengths[0] < lengths[1]
    outs = rl.balanced_output_len("Llama-3-8B", "H100", prompt_len=[500, 4000])
    assert outs[0] < outs[1]
    detailed = rl.balanced_output_len("Llama-3-8B", "H100", prompt_len=[500, 4000], detail=True)
    assert [c.value for c in detailed] == list(outs) and all(c.operation == "body" for c in detailed)


def test_plain_numbers_by_default():
    # plain ints (or math.inf) as before the per-operation model, so answer checkers take them as numbers
    assert type(rl.decode_compute_bound_batch("Llama-3-8B", "H100")) is int
    assert rl.decode_compute_bound_batch("Llama-3-8B", "H100", 4000, operation="step") == math.inf
    assert type(rl.balanced_output_len("Llama-3-8B", "H100", 2000)) is int


def test_bad_operation_is_named():
    with pytest.raises(ValueError, match="operation must be one of body, attention, head, step"):
        rl.decode_compute_bound_batch("Llama-3-8B", "H100", operation="mlp")


def test_a_short_prompt_is_memory_bound():
    # the body's prefill: 2 P N / PEAK >= (P + N D) 2 / BW from N = P / (BW P / PEAK - D) = 295.6
    exact = P / (P * BW / PEAK - D)
    assert rl.prefill_compute_bound_len("Llama-3-8B", "H100") == math.ceil(exact) == 296
    assert rl.prefill("Llama-3-8B", "H100", 50).parts["body"].bound == "memory"  # the chatbot's 50-token prompt
    # the shortcut (one max over the sums, embedding and head bytes included) put it at about 317 tokens
    flops = lambda n: 2 * P * n + 2 * L * A * n * n + 2 * D * V  # noqa: E731
    nbytes = lambda n: (P + V * D + n * D) * 2 + n * KV  # noqa: E731
    assert min(n for n in range(1, 1000) if flops(n) / PEAK >= nbytes(n) / BW) in range(310, 320)
    step = rl.prefill_compute_bound_len("Llama-3-8B", "H100", operation="step", detail=True)
    assert step.operation == "step" and step.value <= 296
