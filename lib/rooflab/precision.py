"""Number formats: what a weight, a KV-cache entry and a multiply cost.

A serving configuration has three precisions that need not agree: the format
weights are stored in (what a decode step reads), the format of the KV cache,
and the format the tensor cores multiply in (which peak FLOP/s applies).
Weight-only INT4 stores 4-bit weights but still multiplies in FP16.

Quantization as shipped: GPTQ, AWQ, bitsandbytes, TensorRT-LLM and vLLM's FP8
checkpoints quantize the body's linear layers and keep the embedding table and
the output head in 16-bit, so a format narrower than 16 bits applies to the
non-embedding weights only unless ``quantize_embeddings=True`` (as GGUF files
and gpt-fast do).  Grouped formats pay for a scale per group and, when
asymmetric, a zero point: those bits are counted in ``bits_per_weight``.

>>> Precision(weights="int4", group_size=128).bits_per_weight
4.125
>>> as_precision("awq-int4").bits_per_weight  # FP16 scale and 4-bit zero point per 128 weights
4.15625
>>> as_precision("fp16").compute
'fp16'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from difflib import get_close_matches

__all__ = ["DTYPE_BITS", "FORMATS", "Precision", "as_precision", "bytes_per_element"]

#: Bits one element takes in memory.  tf32 is a compute mode only: its operands live in fp32.
#: nf4 (bitsandbytes' NormalFloat) is a storage format only: it is dequantized to 16-bit to multiply.
DTYPE_BITS = {
    "fp32": 32,
    "tf32": 32,
    "fp16": 16,
    "bf16": 16,
    "fp8": 8,
    "int8": 8,
    "int4": 4,
    "fp4": 4,
    "nf4": 4,
}

# Formats that carry a scale per group of weights when used for weights.
_GROUPED = {"int8", "int4", "fp4", "nf4"}
# Sensible defaults: INT4 is almost always stored in groups of 128 (GPTQ, AWQ);
# INT8 and FP4 default to per-channel scales, whose cost per weight is negligible.
_DEFAULT_GROUP = {"int4": 128, "nf4": 64}
_DEFAULT_SCALE_BITS = {"nf4": 32}  # bitsandbytes keeps one FP32 absmax per block of 64


def _dtype(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a format name such as 'fp16', got {value!r}")
    key = value.strip().lower()
    if key not in DTYPE_BITS:
        close = get_close_matches(key, DTYPE_BITS, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ValueError(
            f"unknown {name} format {value!r}: known formats are {', '.join(DTYPE_BITS)}{hint}"
        )
    return key


def _whole(value: object, name: str, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive whole number, got {value!r}")


def bytes_per_element(dtype: str) -> float:
    """Return the bytes one element of ``dtype`` takes, without any scales (fp16 -> 2.0)."""
    return DTYPE_BITS[_dtype(dtype, "dtype")] / 8


@dataclass(frozen=True)
class Precision:
    """The formats of weights, KV cache and compute, and how weights are grouped.

    ``group_size`` weights share one scale of ``scale_bits`` bits and, when
    ``zero_point`` is true, a zero point of ``zero_bits`` bits (the scale's
    width unless given), so a grouped weight costs
    ``bits + (scale_bits + zero_point x zero_bits) / group_size`` bits.
    The embedding table and output head stay in 16-bit when the weights are
    narrower, unless ``quantize_embeddings`` is true.  ``name`` and ``source``
    say which library or paper a catalogue format matches.
    """

    weights: str = "fp16"
    kv: str = "fp16"
    compute: str = "fp16"
    group_size: int | None = None
    scale_bits: int | None = None
    zero_point: bool = False
    zero_bits: int | None = None
    quantize_embeddings: bool = False
    name: str = field(default="", compare=False)
    source: str = field(default="", compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "weights", _dtype(self.weights, "weights"))
        object.__setattr__(self, "kv", _dtype(self.kv, "kv"))
        object.__setattr__(self, "compute", _dtype(self.compute, "compute"))
        if self.weights == "tf32" or self.kv == "tf32":
            raise ValueError("tf32 is a compute mode, not a storage format: store in 'fp32'")
        if self.kv == "nf4" or self.compute == "nf4":
            raise ValueError("nf4 is a weight storage format: it is not used for the KV cache or to multiply")
        group = self.group_size
        if group is None:
            group = _DEFAULT_GROUP.get(self.weights)
        elif self.weights not in _GROUPED:
            raise ValueError(
                f"group_size applies to grouped weight formats ({', '.join(sorted(_GROUPED))}), "
                f"not to {self.weights!r} weights"
            )
        _whole(group, "group_size", allow_none=True)
        object.__setattr__(self, "group_size", group)
        scale = _DEFAULT_SCALE_BITS.get(self.weights, 16) if self.scale_bits is None else self.scale_bits
        _whole(scale, "scale_bits")
        object.__setattr__(self, "scale_bits", scale)
        _whole(self.zero_bits, "zero_bits", allow_none=True)
        for flag in ("zero_point", "quantize_embeddings"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"{flag} must be True or False, got {getattr(self, flag)!r}")

    @property
    def bits_per_weight(self) -> float:
        """Bits one body weight really costs in memory, its group's scales and zero points included; assignment 3
        derives it, docs/formulas.md gives it."""
        bits = float(DTYPE_BITS[self.weights])
        if self.group_size:
            zero = (self.scale_bits if self.zero_bits is None else self.zero_bits) if self.zero_point else 0
            bits += (self.scale_bits + zero) / self.group_size
        return bits

    @property
    def bytes_per_weight(self) -> float:
        """Bytes one body weight costs in memory, scales and zero points included."""
        return self.bits_per_weight / 8

    @property
    def embeddings(self) -> str:
        """Storage format of the embedding table and output head: the weights' own format when it is
        16 bits or wider or ``quantize_embeddings`` is set, else 16-bit (bf16 if computing in bf16)."""
        if self.quantize_embeddings or DTYPE_BITS[self.weights] >= 16:
            return self.weights
        return "bf16" if self.compute == "bf16" else "fp16"

    @property
    def embedding_bits_per_weight(self) -> float:
        """Bits one embedding or output-head weight costs: the body's if quantized with it, else its own format's."""
        return self.bits_per_weight if self.embeddings == self.weights else float(DTYPE_BITS[self.embeddings])

    @property
    def embedding_bytes_per_weight(self) -> float:
        """Bytes one embedding or output-head weight costs."""
        return self.embedding_bits_per_weight / 8

    @property
    def kv_bytes_per_element(self) -> float:
        """Bytes one K or V element takes in the cache."""
        return DTYPE_BITS[self.kv] / 8

    def __str__(self) -> str:
        if self.name:
            return self.name
        embeddings = "" if self.embeddings == self.weights else f", embeddings {self.embeddings}"
        if self.weights == self.kv == self.compute and self.group_size is None:
            return self.weights + (f" ({embeddings[2:]})" if embeddings else "")
        group = f", group {self.group_size}" if self.group_size else ""
        return f"weights {self.weights}{group}{embeddings}, KV {self.kv}, compute {self.compute}"


def _format(name: str, source: str, **fields) -> Precision:
    return Precision(name=name, source=source, **fields)


#: Weight formats as libraries ship them, by name.  Each says which library or paper it matches.
FORMATS: dict[str, Precision] = {
    "int4-g128": _format(
        "INT4 g128, symmetric", weights="int4", group_size=128,
        source="Symmetric group-wise INT4 with one FP16 scale per 128 weights, as GPTQ with sym=True is run by "
               "the Marlin kernels and TensorRT-LLM's W4A16 stores it; embedding and lm_head stay 16-bit."),
    "gptq-int4": _format(
        "GPTQ INT4 g128", weights="int4", group_size=128, zero_point=True, zero_bits=4,
        source="Frantar et al. 2022, GPTQ (arXiv:2210.17323); AutoGPTQ/GPTQModel checkpoints store packed 4-bit "
               "qweight, an FP16 scale and a packed 4-bit qzero per group of 128 (qzeros are stored even when "
               "sym=True); embedding and lm_head are left in FP16."),
    "awq-int4": _format(
        "AWQ INT4 g128", weights="int4", group_size=128, zero_point=True, zero_bits=4,
        source="Lin et al. 2023, AWQ (arXiv:2306.00978); AutoAWQ GEMM checkpoints: 4-bit weights, FP16 scales "
               "and 4-bit zero points per group of 128 (zero_point=True); embedding and lm_head in FP16."),
    "bnb-nf4": _format(
        "bitsandbytes NF4", weights="nf4", group_size=64, scale_bits=32,
        source="Dettmers et al. 2023, QLoRA (arXiv:2305.14314): NF4 in blocks of 64 with one FP32 absmax each, "
               "0.5 extra bits a weight without double quantization (transformers' default); Linear layers "
               "only, embedding and lm_head in 16-bit."),
    "bnb-int8": _format(
        "bitsandbytes LLM.int8()", weights="int8",
        source="Dettmers et al. 2022, LLM.int8() (arXiv:2208.07339): INT8 weights with one FP32 scale per row "
               "(negligible per weight); outliers are handled in the activations; embedding and lm_head in 16-bit."),
    "fp8-w8a8": _format(
        "FP8 E4M3 W8A8", weights="fp8", kv="fp16", compute="fp8",
        source="FP8 E4M3 weights and activations with per-tensor scales, as vLLM (llm-compressor) and "
               "TensorRT-LLM (ModelOpt) ship them; lm_head and embedding stay BF16 (both tools exclude lm_head)."),
    "gguf-q8_0": _format(
        "GGUF Q8_0", weights="int8", group_size=32, quantize_embeddings=True,
        source="llama.cpp ggml block_q8_0: 32 INT8 weights and one FP16 scale (8.5 bits a weight); llama.cpp "
               "quantizes token_embd and output too."),
    "gguf-q4_0": _format(
        "GGUF Q4_0", weights="int4", group_size=32, quantize_embeddings=True,
        source="llama.cpp ggml block_q4_0: 32 4-bit weights and one FP16 scale (4.5 bits a weight); llama.cpp "
               "quantizes token_embd too and stores output in Q6_K, counted here at 4.5 bits."),
    "gguf-q4_k": _format(
        "GGUF Q4_K", weights="int4", group_size=256, scale_bits=128, quantize_embeddings=True,
        source="llama.cpp ggml block_q4_K: super-blocks of 256 weights with eight 6-bit scales and mins and an "
               "FP16 d and dmin, 128 bits of metadata (4.5 bits a weight); Q4_K_M mixes in Q6_K tensors."),
    "gpt-fast-int8": _format(
        "gpt-fast INT8", weights="int8", quantize_embeddings=True,
        source="pytorch-labs/gpt-fast quantize.py, WeightOnlyInt8QuantHandler: per-channel INT8 with a BF16 "
               "scale per output row, applied to every nn.Linear including the output head."),
    "gpt-fast-int4-g32": _format(
        "gpt-fast INT4 g32", weights="int4", group_size=32, zero_point=True, quantize_embeddings=True,
        source="pytorch-labs/gpt-fast quantize.py, WeightOnlyInt4QuantHandler: 4-bit weights with a BF16 scale "
               "and a BF16 zero point per group (5 bits a weight at groups of 32), every nn.Linear including "
               "the output head; the embedding table stays BF16 (one row is read per token)."),
    "mxfp4": _format(
        "MXFP4", weights="fp4", compute="fp16", group_size=32, scale_bits=8,
        source="OCP Microscaling Formats (MX) Specification v1.0 (2023): FP4 E2M1 elements in blocks of 32 "
               "with one 8-bit E8M0 scale (4.25 bits a weight)."),
    "nvfp4": _format(
        "NVFP4", weights="fp4", kv="fp8", compute="fp4", group_size=16, scale_bits=8,
        source="NVIDIA Blackwell NVFP4: FP4 E2M1 in blocks of 16 with an FP8 E4M3 scale (4.5 bits a weight) "
               "plus a per-tensor FP32 scale (negligible); lm_head kept in 16-bit by ModelOpt."),
}


def as_precision(precision: str | Precision, name: str = "precision") -> Precision:
    """Return a Precision.  A dtype name such as ``"fp16"`` sets weights, KV and compute alike;
    a name of :data:`FORMATS` (``"awq-int4"``) gives that library's layout."""
    if isinstance(precision, Precision):
        return precision
    if isinstance(precision, str):
        return _from_name(precision, name)
    raise TypeError(
        f"{name} must be a format name such as 'fp16' or a rooflab.Precision, got {precision!r}"
    )


@lru_cache(maxsize=64)
def _from_name(precision: str, name: str) -> Precision:
    key = precision.strip().lower()
    if key in FORMATS:
        return FORMATS[key]
    if key not in DTYPE_BITS:
        close = get_close_matches(key, [*DTYPE_BITS, *FORMATS], n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ValueError(
            f"unknown {name} format {precision!r}: known formats are {', '.join(DTYPE_BITS)} "
            f"and the library layouts {', '.join(FORMATS)}{hint}"
        )
    if key == "nf4":
        return Precision(weights="nf4")
    storage = "fp32" if key == "tf32" else key
    return Precision(weights=storage, kv=storage, compute=key)
