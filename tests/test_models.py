"""Model records: parameter counts and KV sizes derived by hand from the published configs."""

import pytest

import rooflab as rl
from rooflab import Q_

REQUIRED = ["Llama-3-8B", "Llama-3.1-8B", "Llama-3-70B", "Llama-3.1-70B", "Llama-3.1-405B", "Llama-2-7B",
            "Llama-2-13B", "Llama-2-70B", "Mistral-7B", "Mixtral-8x7B", "Qwen2-7B", "TinyLlama-1.1B", "GPT-J-6B"]


def test_llama3_8b_counts_by_hand():
    m = rl.model("llama-3-8b")
    d, L, vocab = 4096, 32, 128256
    attention = d * d + 2 * d * 1024 + d * d  # Q, K and V (8 KV heads x 128), O
    mlp = 3 * d * 14336  # gate, up, down
    per_layer = attention + mlp + 2 * d  # two RMSNorms
    non_embedding = L * per_layer + d  # final norm
    assert m.non_embedding_params == non_embedding
    assert m.total_params == non_embedding + 2 * vocab * d  # untied: embedding and head
    assert round(m.total_params / 1e9, 2) == 8.03  # model card: 8.03 B
    assert round(m.non_embedding_params / 1e9, 2) == 6.98
    assert m.weight_bytes("fp16").m_as("GB") == pytest.approx(16.06, abs=0.005)


def test_published_sizes():
    # (model, parameters in billions as published on the model cards)
    for name, billions in [("Llama-3-70B", 70.6), ("Llama-3.1-8B", 8.03), ("Llama-3.1-70B", 70.6),
                           ("Llama-3.1-405B", 405.9), ("Llama-2-7B", 6.74), ("Llama-2-13B", 13.0),
                           ("Mistral-7B", 7.24), ("Mixtral-8x7B", 46.7), ("Qwen2-7B", 7.62),
                           ("TinyLlama-1.1B", 1.10), ("GPT-J-6B", 6.05)]:
        assert rl.model(name).total_params / 1e9 == pytest.approx(billions, rel=0.005), name


def test_moe_active_parameters():
    mixtral = rl.model("Mixtral-8x7B")
    # Mistral AI: 46.7 B in all, 12.9 B used per token (2 of 8 experts)
    assert mixtral.active_params / 1e9 == pytest.approx(12.9, rel=0.01)
    expert = 3 * 4096 * 14336
    assert mixtral.total_params - mixtral.active_params == 32 * 6 * expert


def test_tied_embeddings_count_once():
    gemma = rl.model("Gemma-2B")
    assert gemma.head_params == 0
    assert gemma.total_params == gemma.non_embedding_params + 256000 * 2048


@pytest.mark.parametrize("name, kv_heads, layers", [("Llama-3-8B", 8, 32), ("Llama-2-7B", 32, 32),
                                                     ("Llama-3-70B", 8, 80), ("Gemma-2B", 1, 18)])
def test_kv_bytes_per_token(name, kv_heads, layers):
    m = rl.model(name)
    expected = 2 * layers * kv_heads * m.head_dim * 2  # K and V, fp16
    assert m.kv_bytes_per_token("fp16") == Q_(expected, "B/token")
    assert m.kv_bytes_per_token("fp8").m_as("B/token") == expected / 2


def test_curriculum_kv_figures():
    assert rl.model("Llama-3-8B").kv_bytes_per_token().m_as("KiB/token") == 128
    assert rl.model("Llama-2-7B").kv_bytes_per_token().m_as("KiB/token") == 512
    assert rl.model("Llama-3-70B").kv_bytes_per_token().m_as("KiB/token") == 320


def test_flops_per_token():
    m = rl.model("Llama-3-8B")
    by_hand = 2 * m.non_embedding_params + 4 * 32 * 4096 * 2000 + 2 * 4096 * 128256
    assert m.flops_per_token(2000).m_as("FLOP/token") == pytest.approx(by_hand)


@pytest.mark.parametrize("name", REQUIRED)
def test_required_models_have_sources(name):
    assert rl.model(name).source.startswith("https://")


def test_unknown_model_lists_close_names():
    with pytest.raises(KeyError, match="Did you mean.*Llama-3-8B"):
        rl.model("Llama-3-9B")


def test_inconsistent_shapes_are_rejected():
    with pytest.raises(ValueError, match="multiple of kv_heads"):
        rl.Model("bad", layers=2, d_model=64, heads=6, kv_heads=4, head_dim=16, mlp_dim=128,
                 vocab=100, tied_embeddings=True, source="https://example.org")
    with pytest.raises(ValueError, match="layers must be a positive"):
        rl.Model("bad", layers=0, d_model=64, heads=4, kv_heads=4, head_dim=16, mlp_dim=128,
                 vocab=100, tied_embeddings=True, source="https://example.org")


@pytest.mark.parametrize("name, tokens", [("Llama-3-8B", 8192), ("Llama-3-70B", 8192), ("Llama-3.1-8B", 131072),
                                          ("Llama-3.1-70B", 131072), ("Llama-2-7B", 4096), ("GPT-J-6B", 2048)])
def test_models_carry_their_context(name, tokens):
    # model cards: Llama 3 "8k", Llama 3.1 "128k" (131,072), Llama 2 4,096, GPT-J n_positions 2,048
    assert rl.model(name).max_context == tokens


def test_llama_31_has_llama_3_shapes():
    old, new = rl.model("Llama-3-8B"), rl.model("Llama-3.1-8B")
    assert (old.total_params, old.kv_bytes_per_token()) == (new.total_params, new.kv_bytes_per_token())
    assert rl.model("Llama-3.1-70B").total_params == rl.model("Llama-3-70B").total_params


def test_context_error_names_a_model_that_has_it():
    with pytest.raises(rl.ContextTooLong, match=r"16,000 tokens.*Llama-3-8B's maximum context is 8,192 tokens\. "
                                                r"Llama-3.1-8B has the same shapes and 131,072"):
        rl.model("Llama-3-8B").check_context(16_000, "this prompt")
    with pytest.raises(rl.ContextTooLong, match="Llama-3.1-70B has the same shapes"):
        rl.model("Llama-3-70B").check_context(20_000, "this prompt")
    rl.model("Llama-3-8B").check_context(8192, "a full context")  # exactly the maximum is allowed


def test_weight_bytes_as_shipped():
    m = rl.model("Llama-3-8B")
    body, table = m.non_embedding_params, 2 * 128256 * 4096  # embedding and untied head
    assert m.weight_bytes("int8").m_as("B") == pytest.approx(body * 1 + table * 2)  # W8A8: 8.03 -> 9.08 GB
    assert m.weight_bytes("awq-int4").m_as("B") == pytest.approx(body * (4 + 20 / 128) / 8 + table * 2)
    assert m.weight_bytes("gguf-q4_0").m_as("B") == pytest.approx((body + table) * 4.5 / 8)  # GGUF quantizes both
