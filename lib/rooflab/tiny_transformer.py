"""A small decoder-only transformer in numpy, to measure: random weights, the shape of a Llama.

Each layer is RMSNorm, grouped-query attention with rotary positions (RoPE) over a KV cache,
RMSNorm, a SwiGLU MLP, each with a residual add; then a final RMSNorm and an output head.
Its shapes are a :class:`~rooflab.Model` (:data:`TINY` by default), so the library's FLOP and
byte counts for that record are this model's: every weight is float32, so price it with
``precision="fp32"``.  Weights are random from a seed (nothing is downloaded): the logits mean
nothing, the arithmetic and the memory traffic are those of a real model of this shape.

What the library's count leaves out, because it is small next to the matmuls: the norms,
RoPE, softmax and SwiGLU's element-wise products (a few FLOPs per activation, not per weight).

>>> net = TinyTransformer(seed=0)
>>> logits, cache = net.prefill(np.array([[1, 2, 3]]), max_new_tokens=2)
>>> logits.shape, cache.length
((1, 8192), 3)
>>> net.decode_step(np.array([4]), cache).shape, cache.length
((1, 8192), 4)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .models import Model

__all__ = ["TINY", "TinyTransformer", "KVCache"]

#: The course's model to measure: 32.5 M parameters, 130 MB in float32 (four times a 32 MiB last-level cache,
#: so a decode step streams its weights from memory), a prefill of 256 tokens in about 17 GFLOP.
TINY = Model("rooflab-tiny", layers=8, d_model=512, heads=8, kv_heads=2, head_dim=64, mlp_dim=1536, vocab=8192,
             tied_embeddings=False, max_context=1024,
             source="rooflab.tiny_transformer: random float32 weights from a seed, Llama's layout",
             notes="Grouped-query attention (4 query heads per KV head), RMSNorm, SwiGLU, RoPE.")

_EPS = 1e-5
_ROPE_BASE = 10000.0


@dataclass
class KVCache:
    """Keys and values of every layer for a batch: ``keys[layer]`` is (batch, kv_heads, capacity, head_dim);
    the first ``length`` positions hold tokens."""

    keys: list[np.ndarray]
    values: list[np.ndarray]
    length: int

    @property
    def capacity(self) -> int:
        return self.keys[0].shape[2]

    @property
    def batch(self) -> int:
        return self.keys[0].shape[0]

    @property
    def nbytes(self) -> int:
        """Bytes the cache holds for its ``length`` tokens (all layers, K and V)."""
        per_position = sum(k[:, :, :1].nbytes + v[:, :, :1].nbytes for k, v in zip(self.keys, self.values))
        return per_position * self.length


class TinyTransformer:
    """A decoder-only transformer with random float32 weights; ``spec`` gives its shapes (dense, gated MLP)."""

    def __init__(self, spec: Model = TINY, seed: int = 0):
        if not isinstance(spec, Model):
            raise TypeError(f"spec must be a rooflab Model, got {type(spec).__name__}")
        if spec.is_moe or not spec.gated_mlp or spec.qkv_bias or spec.tied_embeddings:
            raise ValueError(f"{spec.name}: TinyTransformer builds dense models with a gated (SwiGLU) MLP, "
                             "no QKV bias and an untied head")
        if spec.head_dim % 2:
            raise ValueError(f"head_dim must be even for rotary positions, got {spec.head_dim}")
        self.spec = spec
        rng = np.random.default_rng(seed)
        d, a, kv, f = spec.d_model, spec.attention_width, spec.kv_width, spec.mlp_dim

        def weight(rows: int, cols: int) -> np.ndarray:
            # Scaled by 1/sqrt(fan-in) so activations keep unit size through the layers.
            return (rng.standard_normal((rows, cols), dtype=np.float32) / np.float32(np.sqrt(rows)))

        self.embedding = rng.standard_normal((spec.vocab, d), dtype=np.float32)
        self.layers = []
        for _ in range(spec.layers):
            self.layers.append({
                "attn_norm": np.ones(d, np.float32), "wq": weight(d, a), "wk": weight(d, kv), "wv": weight(d, kv),
                "wo": weight(a, d), "mlp_norm": np.ones(d, np.float32), "w_gate": weight(d, f),
                "w_up": weight(d, f), "w_down": weight(f, d),
            })
        self.final_norm = np.ones(d, np.float32)
        self.head = weight(d, spec.vocab)
        half = spec.head_dim // 2
        self._inv_freq = (_ROPE_BASE ** (-np.arange(half, dtype=np.float64) / half)).astype(np.float32)

    @property
    def nbytes(self) -> int:
        """Bytes of all weights: 4 x the spec's total_params."""
        arrays = [self.embedding, self.final_norm, self.head]
        arrays += [w for layer in self.layers for w in layer.values()]
        return sum(w.nbytes for w in arrays)

    # --- the pieces ---------------------------------------------------------------------------------------
    @staticmethod
    def _rms_norm(x: np.ndarray, gain: np.ndarray) -> np.ndarray:
        scale = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + _EPS)
        return (x * scale) * gain

    def _rope(self, x: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Rotate (batch, heads, n, head_dim) by the angle of each position, pairs of halves."""
        angles = positions[:, None].astype(np.float32) * self._inv_freq[None, :]  # (n, half)
        cos, sin = np.cos(angles), np.sin(angles)
        half = x.shape[-1] // 2
        first, second = x[..., :half], x[..., half:]
        return np.concatenate([first * cos - second * sin, first * sin + second * cos], axis=-1)

    def _attention(self, x: np.ndarray, layer: dict, cache: KVCache | None, index: int, start: int) -> np.ndarray:
        """Attention of (batch, n, d) tokens at positions start..start+n-1 over the cache and themselves."""
        s = self.spec
        b, n, _ = x.shape
        flat = x.reshape(b * n, -1)
        q = (flat @ layer["wq"]).reshape(b, n, s.heads, s.head_dim).transpose(0, 2, 1, 3)
        k = (flat @ layer["wk"]).reshape(b, n, s.kv_heads, s.head_dim).transpose(0, 2, 1, 3)
        v = (flat @ layer["wv"]).reshape(b, n, s.kv_heads, s.head_dim).transpose(0, 2, 1, 3)
        positions = np.arange(start, start + n)
        q, k = self._rope(q, positions), self._rope(k, positions)
        if cache is not None:
            cache.keys[index][:, :, start:start + n] = k
            cache.values[index][:, :, start:start + n] = v
            k = cache.keys[index][:, :, :start + n]
            v = cache.values[index][:, :, :start + n]
        group = s.heads // s.kv_heads
        # Grouped-query: each KV head serves `group` query heads, without copying K and V.
        q = q.reshape(b, s.kv_heads, group, n, s.head_dim)
        scores = (q @ k[:, :, None].transpose(0, 1, 2, 4, 3)) / np.float32(np.sqrt(s.head_dim))
        total = start + n
        causal = np.arange(total)[None, :] > positions[:, None]  # (n, total): a token sees itself and earlier
        scores = np.where(causal, np.float32(-np.inf), scores)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        scores /= scores.sum(axis=-1, keepdims=True)
        out = (scores @ v[:, :, None]).reshape(b, s.heads, n, s.head_dim).transpose(0, 2, 1, 3)
        return (out.reshape(b * n, s.attention_width) @ layer["wo"]).reshape(b, n, -1)

    @staticmethod
    def _mlp(x: np.ndarray, layer: dict) -> np.ndarray:
        b, n, d = x.shape
        flat = x.reshape(b * n, d)
        gate = flat @ layer["w_gate"]
        up = flat @ layer["w_up"]
        hidden = gate / (1.0 + np.exp(-gate)) * up  # SwiGLU: silu(gate) x up
        return (hidden @ layer["w_down"]).reshape(b, n, d)

    def _run(self, tokens: np.ndarray, cache: KVCache | None, start: int) -> np.ndarray:
        """The hidden states after the final norm, (batch, n, d)."""
        x = self.embedding[tokens]
        for index, layer in enumerate(self.layers):
            x = x + self._attention(self._rms_norm(x, layer["attn_norm"]), layer, cache, index, start)
            x = x + self._mlp(self._rms_norm(x, layer["mlp_norm"]), layer)
        return self._rms_norm(x, self.final_norm)

    def _tokens(self, tokens, ndim: int, what: str) -> np.ndarray:
        array = np.asarray(tokens)
        if array.ndim != ndim or array.size == 0 or array.dtype.kind not in "iu":
            shape = "(batch, prompt_len)" if ndim == 2 else "(batch,)"
            raise ValueError(f"{what} must be a non-empty array of integer token ids of shape {shape}, "
                             f"got {array.dtype} of shape {array.shape}")
        if array.min() < 0 or array.max() >= self.spec.vocab:
            raise ValueError(f"{what} must be token ids from 0 to {self.spec.vocab - 1}")
        return array

    # --- the two phases -----------------------------------------------------------------------------------
    def forward(self, tokens) -> np.ndarray:
        """Logits of every position of (batch, n) ``tokens``, recomputed from scratch without a cache:
        (batch, n, vocab)."""
        tokens = self._tokens(tokens, 2, "tokens")
        self._check_length(tokens.shape[1])
        return self._run(tokens, None, 0) @ self.head

    def prefill(self, tokens, max_new_tokens: int = 1) -> tuple[np.ndarray, KVCache]:
        """Process (batch, prompt_len) ``tokens`` at once; return the last position's logits (batch, vocab) and
        a cache with room for ``max_new_tokens`` more tokens.  The head runs on the last position only: that is
        the first output token."""
        tokens = self._tokens(tokens, 2, "tokens")
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be a whole number of at least 0, got {max_new_tokens!r}")
        b, n = tokens.shape
        capacity = n + max_new_tokens
        self._check_length(capacity)
        s = self.spec
        shape = (b, s.kv_heads, capacity, s.head_dim)
        cache = KVCache([np.zeros(shape, np.float32) for _ in range(s.layers)],
                        [np.zeros(shape, np.float32) for _ in range(s.layers)], 0)
        hidden = self._run(tokens, cache, 0)
        cache.length = n
        return hidden[:, -1] @ self.head, cache

    def decode_step(self, tokens, cache: KVCache) -> np.ndarray:
        """Add one token per sequence, (batch,) ``tokens``, after the cache's tokens; return their logits
        (batch, vocab).  The cache grows by one position."""
        tokens = self._tokens(tokens, 1, "tokens")
        if not isinstance(cache, KVCache):
            raise TypeError(f"cache must be the KVCache prefill returned, got {type(cache).__name__}")
        if tokens.shape[0] != cache.batch:
            raise ValueError(f"tokens has {tokens.shape[0]} sequences but the cache holds {cache.batch}")
        if cache.length >= cache.capacity:
            raise ValueError(f"the cache is full ({cache.capacity} positions): prefill with a larger "
                             "max_new_tokens")
        hidden = self._run(tokens[:, None], cache, cache.length)
        cache.length += 1
        return hidden[:, 0] @ self.head

    def _check_length(self, n: int) -> None:
        if n > self.spec.max_context:
            raise ValueError(f"{n} positions exceed {self.spec.name}'s max_context of {self.spec.max_context}")
