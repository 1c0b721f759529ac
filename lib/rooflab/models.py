"""Transformer architectures, and the counts that follow from them.

A model is described by its shape alone (layers, widths, heads, vocabulary,
experts); parameter counts, weight bytes and KV bytes per token are derived,
never typed in, so a catalogue entry cannot contradict itself.  Parameter
counts are plain integers: a parameter is a count, not a physical unit.

>>> llama = model("Llama-3-8B")
>>> round(llama.total_params / 1e9, 2), round(llama.non_embedding_params / 1e9, 2)
(8.03, 6.98)
>>> llama.kv_bytes_per_token("fp16")
<Quantity(131072.0, 'byte / token')>
>>> round(llama.weight_bytes("int4").m_as("GB"), 2)  # body in INT4 g128, embedding and head in FP16
5.7
>>> llama.max_context, model("Llama-3.1-8B").max_context
(8192, 131072)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pint

from .catalogue import index, lookup
from .precision import Precision, as_precision
from .units import quantity

__all__ = ["Model", "model", "MODELS", "ContextTooLong"]


class ContextTooLong(ValueError):
    """A prompt or context longer than the model's maximum context."""


@dataclass(frozen=True)
class Model:
    """A decoder-only transformer.  ``mlp_dim`` is per expert; ``experts == 1`` means dense."""

    name: str
    layers: int
    d_model: int
    heads: int
    kv_heads: int
    head_dim: int
    mlp_dim: int
    vocab: int
    tied_embeddings: bool
    source: str = field(repr=False)
    max_context: int = 2048  # tokens the model was trained to attend over (its card, paper or config)
    experts: int = 1
    experts_per_token: int = 1
    gated_mlp: bool = True
    qkv_bias: bool = False
    aliases: tuple[str, ...] = field(default=(), repr=False)
    notes: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        for name in ("layers", "d_model", "heads", "kv_heads", "head_dim", "mlp_dim", "vocab",
                     "experts", "experts_per_token", "max_context"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive whole number, got {value!r}")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.experts_per_token > self.experts:
            raise ValueError(
                f"experts_per_token ({self.experts_per_token}) cannot exceed experts ({self.experts})"
            )

    # --- widths -----------------------------------------------------------
    @property
    def attention_width(self) -> int:
        """Width of all query heads together: heads x head_dim."""
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        """Width of all key (or value) heads together: kv_heads x head_dim."""
        return self.kv_heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    # --- parameter counts ----------------------------------------------
    @property
    def embedding_params(self) -> int:
        """Input embedding table: vocab x d_model."""
        return self.vocab * self.d_model

    @property
    def head_params(self) -> int:
        """Output projection to the vocabulary: vocab x d_model, or 0 when tied to the embedding."""
        return 0 if self.tied_embeddings else self.vocab * self.d_model

    @property
    def _attention_params(self) -> int:
        d, a, kv = self.d_model, self.attention_width, self.kv_width
        bias = (a + 2 * kv) if self.qkv_bias else 0
        return d * a + 2 * d * kv + a * d + bias  # Q, K, V, O projections

    @property
    def _expert_params(self) -> int:
        return (3 if self.gated_mlp else 2) * self.d_model * self.mlp_dim

    def _non_embedding(self, experts: int) -> int:
        router = self.d_model * self.experts if self.is_moe else 0
        per_layer = self._attention_params + experts * self._expert_params + router + 2 * self.d_model
        return self.layers * per_layer + self.d_model  # + the final norm

    # Cached: the serving formulas read these on every call.
    @cached_property
    def non_embedding_params(self) -> int:
        """Parameters outside the embedding table and output head (all experts)."""
        return self._non_embedding(self.experts)

    @cached_property
    def active_non_embedding_params(self) -> int:
        """Non-embedding parameters one token passes through (top-k experts for MoE)."""
        return self._non_embedding(self.experts_per_token)

    @cached_property
    def shared_non_embedding_params(self) -> int:
        """Non-embedding parameters outside the experts: what every token uses in an MoE model."""
        return self._non_embedding(0)

    @property
    def total_params(self) -> int:
        """Every parameter held in memory: non-embedding + embedding + output head."""
        return self.non_embedding_params + self.embedding_params + self.head_params

    @property
    def active_params(self) -> int:
        """Parameters one token touches, the embedding table and head included."""
        return self.active_non_embedding_params + self.embedding_params + self.head_params

    def expert_params_per_layer(self) -> int:
        """Parameters of one expert's MLP in one layer (the whole MLP for a dense model)."""
        return self._expert_params

    # --- bytes and FLOPs --------------------------------------------------
    @property
    def embedding_and_head_params(self) -> int:
        """Parameters of the embedding table and output head (one shared matrix when tied)."""
        return self.embedding_params + self.head_params

    def weight_bytes_si(self, precision: str | Precision = "fp16") -> float:
        """Bytes all weights take in memory, a float: the body's at the format's bytes per weight (scales
        included), the embedding table's and head's at 16 bits unless the format quantizes them too."""
        p = as_precision(precision)
        return (self.non_embedding_params * p.bytes_per_weight
                + self.embedding_and_head_params * p.embedding_bytes_per_weight)

    def weight_bytes(self, precision: str | Precision = "fp16") -> pint.Quantity:
        """Bytes all weights take in memory, GB: the body's at the format's bytes per weight (scales included),
        the embedding table's and head's at 16 bits unless the format quantizes them too (docs/formulas.md)."""
        return quantity(self.weight_bytes_si(precision), "bytes").to("GB")

    def kv_bytes_per_token_si(self, precision: str | Precision = "fp16") -> float:
        """KV-cache bytes one token of context adds, as a float (docs/formulas.md)."""
        p = as_precision(precision)
        return 2 * self.layers * self.kv_width * p.kv_bytes_per_element

    def kv_bytes_per_token(self, precision: str | Precision = "fp16") -> pint.Quantity:
        """KV-cache bytes one token of context adds, B/token, in the precision's KV format; assignment 2 derives
        it, docs/formulas.md gives it."""
        return quantity(self.kv_bytes_per_token_si(precision), "bytes_per_token")

    def flops_per_token(self, context_len: int = 0) -> pint.Quantity:
        """Forward FLOPs for one token that attends to ``context_len`` earlier tokens, FLOP/token.

        Its body (the active non-embedding parameters), its attention over the context (QK^T and AV) and its
        logits; assignment 1 derives the count, docs/formulas.md gives it.
        """
        from .validation import lengths  # a local import keeps the model record free of cycles

        context = lengths(context_len, "context_len", minimum=0)
        flops = (
            2 * self.active_non_embedding_params
            + 4 * self.layers * self.attention_width * context
            + 2 * self.d_model * self.vocab
        )
        return quantity(flops, "flops") / quantity(1.0, "tokens")

    def check_context(self, tokens, what: str) -> None:
        """Raise ContextTooLong if ``tokens`` (an int or array) exceeds max_context, naming a model that has it."""
        if type(tokens) is int and tokens <= self.max_context:  # the common case, without numpy
            return
        longest = int(np.max(tokens)) if np.ndim(tokens) else int(tokens)
        if longest <= self.max_context:
            return
        raise ContextTooLong(
            f"{what} needs {longest:,} tokens of context, but {self.name}'s maximum context is "
            f"{self.max_context:,} tokens. {_longer(self, longest)}"
        )

    def __str__(self) -> str:
        return self.name


def _longer(m: Model, tokens: int) -> str:
    """A sentence naming catalogue models that have ``tokens`` of context, the same shapes first."""
    same = [o.name for o in _CATALOGUE if o.max_context >= tokens and _shapes(o) == _shapes(m)]
    if same:
        return f"{same[0]} has the same shapes and {MODELS[same[0]].max_context:,} tokens of context."
    others = [o.name for o in _CATALOGUE if o.max_context >= tokens]
    if others:
        return f"Models in the catalogue with that context: {', '.join(others)}."
    return "No model in the catalogue has that context."


def _shapes(m: Model) -> tuple:
    return (m.layers, m.d_model, m.heads, m.kv_heads, m.head_dim, m.mlp_dim, m.vocab, m.experts)


def _hf(repo: str) -> str:
    return f"https://huggingface.co/{repo}/blob/main/config.json"


_LLAMA3 = dict(vocab=128256, tied_embeddings=False, head_dim=128)
# max_context: the context length the publisher states (model card, paper or config.json).
_CATALOGUE = [
    Model("Llama-3-8B", layers=32, d_model=4096, heads=32, kv_heads=8, mlp_dim=14336, max_context=8192,
          source=_hf("meta-llama/Meta-Llama-3-8B"), aliases=("Meta-Llama-3-8B", "llama3-8b"),
          notes="Model card: context length 8k; config.json max_position_embeddings 8192.", **_LLAMA3),
    Model("Llama-3.1-8B", layers=32, d_model=4096, heads=32, kv_heads=8, mlp_dim=14336, max_context=131072,
          source=_hf("meta-llama/Llama-3.1-8B"), aliases=("Meta-Llama-3.1-8B", "llama3.1-8b"),
          notes="Llama-3-8B's shapes with a 128k context (config.json max_position_embeddings 131072, "
                "RoPE scaling).", **_LLAMA3),
    Model("Llama-3-70B", layers=80, d_model=8192, heads=64, kv_heads=8, mlp_dim=28672, max_context=8192,
          source=_hf("meta-llama/Meta-Llama-3-70B"), aliases=("Meta-Llama-3-70B", "llama3-70b"), **_LLAMA3),
    Model("Llama-3.1-70B", layers=80, d_model=8192, heads=64, kv_heads=8, mlp_dim=28672, max_context=131072,
          source=_hf("meta-llama/Llama-3.1-70B"), aliases=("Meta-Llama-3.1-70B", "llama3.1-70b"),
          notes="Llama-3-70B's shapes with a 128k context.", **_LLAMA3),
    Model("Llama-3.1-405B", layers=126, d_model=16384, heads=128, kv_heads=8, mlp_dim=53248, max_context=131072,
          source=_hf("meta-llama/Llama-3.1-405B"), aliases=("Meta-Llama-3.1-405B",), **_LLAMA3),
    Model("Llama-2-7B", layers=32, d_model=4096, heads=32, kv_heads=32, head_dim=128, mlp_dim=11008,
          vocab=32000, tied_embeddings=False, max_context=4096, source=_hf("meta-llama/Llama-2-7b-hf"),
          aliases=("Llama-2-7b-hf",), notes="Full multi-head attention: as many KV heads as query heads."),
    Model("Llama-2-13B", layers=40, d_model=5120, heads=40, kv_heads=40, head_dim=128, mlp_dim=13824,
          vocab=32000, tied_embeddings=False, max_context=4096, source=_hf("meta-llama/Llama-2-13b-hf"),
          aliases=("Llama-2-13b-hf",)),
    Model("Llama-2-70B", layers=80, d_model=8192, heads=64, kv_heads=8, head_dim=128, mlp_dim=28672,
          vocab=32000, tied_embeddings=False, max_context=4096, source=_hf("meta-llama/Llama-2-70b-hf"),
          aliases=("Llama-2-70b-hf",)),
    Model("Mistral-7B", layers=32, d_model=4096, heads=32, kv_heads=8, head_dim=128, mlp_dim=14336,
          vocab=32000, tied_embeddings=False, max_context=8192, source=_hf("mistralai/Mistral-7B-v0.1"),
          aliases=("Mistral-7B-v0.1",),
          notes="Paper (arXiv:2310.06825) Table 1: context_len 8192. v0.1 uses a 4,096-token sliding window, "
                "which this library does not model."),
    Model("Mixtral-8x7B", layers=32, d_model=4096, heads=32, kv_heads=8, head_dim=128, mlp_dim=14336,
          vocab=32000, tied_embeddings=False, experts=8, experts_per_token=2, max_context=32768,
          source=_hf("mistralai/Mixtral-8x7B-v0.1"), aliases=("Mixtral-8x7B-v0.1",),
          notes="Sparse mixture of experts: 8 expert MLPs a layer, each token routed to 2. "
                "Paper (arXiv:2401.04088): context size of 32k tokens."),
    Model("Qwen2-7B", layers=28, d_model=3584, heads=28, kv_heads=4, head_dim=128, mlp_dim=18944,
          vocab=152064, tied_embeddings=False, qkv_bias=True, max_context=32768, source=_hf("Qwen/Qwen2-7B"),
          notes="Qwen2 technical report (arXiv:2407.10671): pre-training context extended to 32,768 tokens; "
                "the instruct model reaches 128k with YaRN, not modelled here."),
    Model("Gemma-2B", layers=18, d_model=2048, heads=8, kv_heads=1, head_dim=256, mlp_dim=16384,
          vocab=256000, tied_embeddings=True, max_context=8192, source=_hf("google/gemma-2b"),
          aliases=("gemma-2b",), notes="Multi-query attention: one KV head shared by all 8 query heads. "
                                       "Gemma report: context length 8192."),
    Model("TinyLlama-1.1B", layers=22, d_model=2048, heads=32, kv_heads=4, head_dim=64, mlp_dim=5632,
          vocab=32000, tied_embeddings=False, max_context=2048,
          source=_hf("TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T"),
          aliases=("TinyLlama",), notes="Small enough for a laptop CPU."),
    Model("Qwen2-0.5B", layers=24, d_model=896, heads=14, kv_heads=2, head_dim=64, mlp_dim=4864,
          vocab=151936, tied_embeddings=True, qkv_bias=True, max_context=32768, source=_hf("Qwen/Qwen2-0.5B"),
          notes="Small enough for a laptop CPU; input embedding and output head share one matrix. "
                "Qwen2 blog and report: 32k context."),
    Model("GPT-J-6B", layers=28, d_model=4096, heads=16, kv_heads=16, head_dim=256, mlp_dim=16384,
          vocab=50400, tied_embeddings=False, gated_mlp=False, max_context=2048,
          source=_hf("EleutherAI/gpt-j-6b"), aliases=("GPT-J", "gpt-j-6b"),
          notes="n_positions 2048; a plain GELU MLP; biases (a few million parameters) left out. "
                "In the calibration table because TensorRT-LLM published its figures on it."),
]

#: The catalogue, by canonical name.
MODELS: dict[str, Model] = {m.name: m for m in _CATALOGUE}
_INDEX = index(_CATALOGUE)


def model(name: str | Model) -> Model:
    """Return the catalogue entry for ``name`` (case-insensitive), or raise listing close names."""
    if isinstance(name, Model):
        return name
    return lookup(name, _INDEX, "model", "Llama-3-8B")
