"""The optional PyTorch path: honest without torch, the same logits as numpy with it."""

import importlib.util

import numpy as np
import pytest

import rooflab as rl
from rooflab import torch_profiles
from rooflab.tiny_transformer import TinyTransformer

HAS_TORCH = importlib.util.find_spec("torch") is not None
SMALL = rl.Model("test-small", layers=2, d_model=64, heads=4, kv_heads=2, head_dim=16, mlp_dim=96, vocab=101,
                 tied_embeddings=False, max_context=64, source="test")


@pytest.mark.skipif(HAS_TORCH, reason="PyTorch is installed here")
def test_without_torch_it_says_so_and_refuses_to_pretend():
    assert "not installed" in torch_profiles.status()
    with pytest.raises(ImportError, match="pip install torch"):
        torch_profiles.TorchTransformer(TinyTransformer(SMALL))
    with pytest.raises(RuntimeError, match="not installed"):
        torch_profiles.cuda_profiles(TinyTransformer(SMALL), [4], [1])


@pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is not installed here")
def test_with_torch_the_same_weights_give_the_same_logits():
    net = TinyTransformer(SMALL, seed=2)
    twin = torch_profiles.TorchTransformer(net)
    tokens = np.random.default_rng(0).integers(0, SMALL.vocab, (2, 6))
    ours, cache = net.prefill(tokens, max_new_tokens=2)
    theirs, their_cache = twin.prefill(tokens, max_new_tokens=2)
    np.testing.assert_allclose(theirs.numpy(), ours, rtol=1e-4, atol=1e-4)
    step = np.array([3, 7])
    np.testing.assert_allclose(twin.decode_step(step, their_cache).numpy(), net.decode_step(step, cache),
                               rtol=1e-4, atol=1e-4)
