"""The numpy transformer: the cache gives the logits a full recomputation gives; its size is its Model's."""

import numpy as np
import pytest

from rooflab import Model
from rooflab.tiny_transformer import TINY, KVCache, TinyTransformer

SMALL = Model("test-small", layers=2, d_model=64, heads=4, kv_heads=2, head_dim=16, mlp_dim=96, vocab=101,
              tied_embeddings=False, max_context=64, source="test")


@pytest.fixture(scope="module")
def net():
    return TinyTransformer(SMALL, seed=3)


def test_decoding_with_the_cache_gives_the_logits_of_recomputing_the_whole_sequence(net):
    tokens = np.random.default_rng(0).integers(0, SMALL.vocab, (3, 12))
    full = net.forward(tokens)  # (3, 12, vocab), no cache
    logits, cache = net.prefill(tokens[:, :5], max_new_tokens=7)
    np.testing.assert_allclose(logits, full[:, 4], rtol=1e-4, atol=1e-4)
    for position in range(5, 12):
        logits = net.decode_step(tokens[:, position], cache)
        np.testing.assert_allclose(logits, full[:, position], rtol=1e-4, atol=1e-4)
    assert cache.length == 12


def test_a_sequence_of_the_batch_does_not_see_the_others(net):
    tokens = np.random.default_rng(1).integers(0, SMALL.vocab, (2, 6))
    alone = net.forward(tokens[:1])
    np.testing.assert_allclose(net.forward(tokens)[:1], alone, rtol=1e-5, atol=1e-5)


def test_a_token_does_not_see_later_tokens(net):
    tokens = np.random.default_rng(2).integers(0, SMALL.vocab, (1, 8))
    changed = tokens.copy()
    changed[0, 6] = (changed[0, 6] + 1) % SMALL.vocab
    np.testing.assert_allclose(net.forward(tokens)[:, :6], net.forward(changed)[:, :6], rtol=1e-5, atol=1e-5)
    assert not np.allclose(net.forward(tokens)[:, 6], net.forward(changed)[:, 6])


def test_position_matters_through_rope(net):
    # The same two tokens in the other order give a different last-position distribution.
    a = net.forward(np.array([[5, 9]]))[0, 1]
    b = net.forward(np.array([[9, 5]]))[0, 0]
    assert not np.allclose(a, b)


def test_the_weights_are_its_model_count_in_float32():
    # TINY by hand: per layer Q 512x512 + K, V 2 x 512x128 + O 512x512 = 655,360; MLP 3 x 512 x 1536 = 2,359,296;
    # two norms 1,024: 3,015,680 a layer, x 8 = 24,125,440; final norm 512; embedding and head 2 x 8192 x 512.
    params = 8 * (655_360 + 2_359_296 + 1_024) + 512 + 2 * 8192 * 512
    assert TINY.total_params == params == 32_514_560
    assert TinyTransformer(TINY, seed=0).nbytes == 4 * params  # 130 MB: fits in 1 GB


def test_the_same_seed_gives_the_same_weights():
    one, two = TinyTransformer(SMALL, seed=7), TinyTransformer(SMALL, seed=7)
    assert np.array_equal(one.head, two.head) and not np.array_equal(one.head, TinyTransformer(SMALL, seed=8).head)


def test_the_cache_holds_two_tensors_a_layer(net):
    _, cache = net.prefill(np.zeros((2, 5), dtype=int), max_new_tokens=3)
    assert isinstance(cache, KVCache) and cache.capacity == 8 and cache.batch == 2
    # 2 (K, V) x layers x kv_heads x head_dim x 4 B per token and sequence, x 2 sequences x 5 tokens.
    assert cache.nbytes == 2 * 2 * 2 * 16 * 4 * 2 * 5


def test_bad_input_is_named(net):
    with pytest.raises(ValueError, match="tokens must be a non-empty array"):
        net.prefill(np.zeros(4, dtype=int))
    with pytest.raises(ValueError, match="token ids from 0 to 100"):
        net.prefill(np.array([[101]]))
    with pytest.raises(ValueError, match="max_context"):
        net.prefill(np.zeros((1, 60), dtype=int), max_new_tokens=10)
    _, cache = net.prefill(np.zeros((1, 2), dtype=int), max_new_tokens=0)
    with pytest.raises(ValueError, match="cache is full"):
        net.decode_step(np.zeros(1, dtype=int), cache)
    with pytest.raises(ValueError, match="2 sequences but the cache holds 1"):
        net.decode_step(np.zeros(2, dtype=int), cache)
    with pytest.raises(ValueError, match="dense models"):
        TinyTransformer(Model("moe", 1, 64, 4, 2, 16, 96, 101, False, "t", experts=4, experts_per_token=2))
