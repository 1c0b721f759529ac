"""The same two profiles in PyTorch, on a CUDA GPU when there is one, with NVTX ranges for Nsight Systems.

Optional: nothing in the course needs PyTorch or a GPU.  :func:`status` says what this machine has.
With PyTorch, :class:`TorchTransformer` runs the numpy model's weights (copied) with the same math; on a
CUDA device :func:`cuda_profiles` times each phase with CUDA events and wraps it in an NVTX range named
``"prefill"`` or ``"decode"``, which Nsight Systems draws as a labelled band on its timeline:

    nsys profile --trace=cuda,nvtx --output=measure python my_profiles.py
    nsys-ui measure.nsys-rep      # or open the file in the Nsight Systems GUI; the NVTX row holds the bands

A GPU profile shows kernels; "GPU utilisation 100%" (nvidia-smi) says only that some kernel was running at each
sample, not how much of the FLOP/s or bandwidth roof it used: judge prefill by MFU and decode by MBU.

tests/test_torch_profiles.py runs the CPU model against the numpy one where PyTorch is installed (skipped where
it is not); :func:`cuda_profiles` itself runs only on a CUDA device, which the suite's machines do not have.
"""

from __future__ import annotations

import numpy as np

__all__ = ["status", "has_cuda", "TorchTransformer", "cuda_profiles"]


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def has_cuda() -> bool:
    """Whether PyTorch is installed and sees a CUDA device (so :func:`cuda_profiles` can run)."""
    torch = _torch()
    return torch is not None and torch.cuda.is_available()


def status() -> str:
    """One sentence: whether PyTorch is installed and which CUDA device it sees."""
    torch = _torch()
    if torch is None:
        return ("PyTorch is not installed here, so the GPU profiles are skipped; the numpy profiles above are the "
                "measurement. On a machine with a CUDA GPU: pip install torch, then run torch_profiles.cuda_profiles.")
    if not torch.cuda.is_available():
        return (f"PyTorch {torch.__version__} is installed but sees no CUDA device: the GPU profiles are skipped "
                "(TorchTransformer still runs on the CPU).")
    return f"PyTorch {torch.__version__} with CUDA device {torch.cuda.get_device_name(0)}: cuda_profiles will run."


class TorchTransformer:
    """A :class:`~rooflab.tiny_transformer.TinyTransformer`'s weights and math in PyTorch, on ``device``."""

    def __init__(self, net, device: str = "cpu", dtype: str = "float32"):
        torch = _torch()
        if torch is None:
            raise ImportError("TorchTransformer needs PyTorch: pip install torch")
        self.torch, self.spec, self.device = torch, net.spec, device
        kind = getattr(torch, dtype)
        move = lambda array: torch.from_numpy(np.ascontiguousarray(array)).to(device=device, dtype=kind)  # noqa: E731
        self.embedding, self.head, self.final_norm = move(net.embedding), move(net.head), move(net.final_norm)
        self.layers = [{name: move(w) for name, w in layer.items()} for layer in net.layers]
        self.inv_freq = move(net._inv_freq)

    def _norm(self, x, gain):
        return x * self.torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * gain

    def _rope(self, x, positions):
        angles = positions[:, None].to(x.dtype) * self.inv_freq[None, :]
        cos, sin = angles.cos(), angles.sin()
        half = x.shape[-1] // 2
        first, second = x[..., :half], x[..., half:]
        return self.torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)

    def _run(self, tokens, cache, start):
        torch, s = self.torch, self.spec
        x = self.embedding[tokens]
        b, n, _ = x.shape
        positions = torch.arange(start, start + n, device=self.device)
        group = s.heads // s.kv_heads
        for index, layer in enumerate(self.layers):
            h = self._norm(x, layer["attn_norm"])
            q = (h @ layer["wq"]).view(b, n, s.heads, s.head_dim).transpose(1, 2)
            k = (h @ layer["wk"]).view(b, n, s.kv_heads, s.head_dim).transpose(1, 2)
            v = (h @ layer["wv"]).view(b, n, s.kv_heads, s.head_dim).transpose(1, 2)
            q, k = self._rope(q, positions), self._rope(k, positions)
            cache[index][0][:, :, start:start + n] = k
            cache[index][1][:, :, start:start + n] = v
            keys = cache[index][0][:, :, :start + n].repeat_interleave(group, dim=1)
            values = cache[index][1][:, :, :start + n].repeat_interleave(group, dim=1)
            scores = (q @ keys.transpose(-1, -2)) / s.head_dim ** 0.5
            causal = torch.arange(start + n, device=self.device)[None, :] > positions[:, None]
            scores = scores.masked_fill(causal, float("-inf")).softmax(-1)
            out = (scores @ values).transpose(1, 2).reshape(b, n, s.attention_width)
            x = x + out @ layer["wo"]
            h = self._norm(x, layer["mlp_norm"])
            x = x + (torch.nn.functional.silu(h @ layer["w_gate"]) * (h @ layer["w_up"])) @ layer["w_down"]
        return self._norm(x, self.final_norm)

    def _tokens(self, tokens):
        """Token ids on this model's device: a tensor stays where it is (no copy through the host, no sync)."""
        if isinstance(tokens, self.torch.Tensor):
            return tokens.to(self.device)
        return self.torch.as_tensor(np.asarray(tokens), device=self.device)

    def prefill(self, tokens, max_new_tokens: int = 1):
        """(last position's logits, cache) for (batch, n) token ids, as TinyTransformer.prefill."""
        torch, s = self.torch, self.spec
        tokens = self._tokens(tokens)
        b, n = tokens.shape
        shape = (b, s.kv_heads, n + max_new_tokens, s.head_dim)
        cache = [[torch.zeros(shape, device=self.device, dtype=self.head.dtype) for _ in range(2)]
                 for _ in range(s.layers)]
        hidden = self._run(tokens, cache, 0)
        return hidden[:, -1] @ self.head, {"layers": cache, "length": n}

    def decode_step(self, tokens, cache):
        """Logits of one new token per sequence after the cache's tokens, as TinyTransformer.decode_step."""
        tokens = self._tokens(tokens)
        hidden = self._run(tokens[:, None], cache["layers"], cache["length"])
        cache["length"] += 1
        return hidden[:, 0] @ self.head


def cuda_profiles(net, prompt_lens, batches, prompt_len: int = 8, steps: int = 17, repeats: int = 3) -> dict:
    """The two profiles on the first CUDA device: {"ttft_ms": [...], "tpot_ms": [...]}, each the best of ``repeats``.

    Every prefill runs inside ``torch.cuda.nvtx.range("prefill")`` and every decode loop inside ``"decode"``;
    CUDA events time them (the GPU runs asynchronously, so a host clock would time the launches).
    """
    if not has_cuda():
        raise RuntimeError(status())
    torch = _torch()
    gpu = TorchTransformer(net, device="cuda")
    rng = np.random.default_rng(0)

    def timed(run, label):
        best = float("inf")
        for _ in range(repeats + 1):  # the first is a warm-up
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with torch.cuda.nvtx.range(label):
                start.record()
                run()
                end.record()
            torch.cuda.synchronize()
            best = min(best, start.elapsed_time(end))
        return best

    with torch.inference_mode():
        # The prompts go to the GPU before the clock starts: a host-to-device copy is not part of the prefill.
        prompts = [gpu._tokens(rng.integers(0, net.spec.vocab, (1, n))) for n in prompt_lens]
        ttft = [timed(lambda p=p: gpu.prefill(p, 0), "prefill") for p in prompts]
        tpot = []
        for b in batches:
            logits, cache = gpu.prefill(rng.integers(0, net.spec.vocab, (b, prompt_len)), steps * (repeats + 1))
            token = logits.argmax(-1)

            def decode():
                nonlocal token
                for _ in range(steps):
                    token = gpu.decode_step(token, cache).argmax(-1)  # stays on the GPU: no sync per step

            tpot.append(timed(decode, "decode") / steps)
    return {"ttft_ms": ttft, "tpot_ms": tpot}
