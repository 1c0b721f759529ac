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


@pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is not installed here")
def test_with_torch_several_decode_steps_follow_numpy_and_grow_the_cache():
    # A batch of 3 prompts of 5 tokens, then 4 greedy steps each: every step's logits equal the numpy model's.
    net = TinyTransformer(SMALL, seed=5)
    twin = torch_profiles.TorchTransformer(net)
    tokens = np.random.default_rng(1).integers(0, SMALL.vocab, (3, 5))
    ours, cache = net.prefill(tokens, max_new_tokens=4)
    theirs, their_cache = twin.prefill(tokens, max_new_tokens=4)
    for step in range(4):
        np.testing.assert_allclose(theirs.numpy(), ours, rtol=1e-4, atol=1e-4)
        following = np.argmax(ours, axis=-1)
        ours = net.decode_step(following, cache)
        theirs = twin.decode_step(following, their_cache)
        assert their_cache["length"] == 5 + step + 1
    np.testing.assert_allclose(theirs.numpy(), ours, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is not installed here")
def test_with_torch_but_no_cuda_the_gpu_profiles_are_refused_with_the_reason():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: cuda_profiles runs instead")
    assert "sees no CUDA device" in torch_profiles.status()
    with pytest.raises(RuntimeError, match="no CUDA device"):
        torch_profiles.cuda_profiles(TinyTransformer(SMALL), [4], [1])


@pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is not installed here")
def test_with_torch_token_ids_as_a_tensor_give_the_same_logits_as_an_array():
    import torch

    net = TinyTransformer(SMALL, seed=3)
    twin = torch_profiles.TorchTransformer(net)
    tokens = np.array([[1, 2, 3, 4]])
    from_array, cache_a = twin.prefill(tokens, max_new_tokens=1)
    from_tensor, cache_t = twin.prefill(torch.as_tensor(tokens), max_new_tokens=1)
    assert torch.equal(from_array, from_tensor)
    assert torch.equal(twin.decode_step(np.array([9]), cache_a), twin.decode_step(torch.tensor([9]), cache_t))


def test_has_cuda_agrees_with_the_status_sentence():
    # The notebook runs the GPU profiles on has_cuda(): a status that merely mentions CUDA must not start them.
    said = torch_profiles.status()
    assert torch_profiles.has_cuda() == said.endswith("cuda_profiles will run.")
    if not HAS_TORCH:
        assert not torch_profiles.has_cuda()
