"""Accelerators: their two roofs (peak FLOP/s, memory bandwidth), capacity and power.

Every peak is the vendor's *dense* figure (no 2:4 structured sparsity, which
datasheets often quote at twice the rate) and every entry cites its source.
Bandwidths are decimal, as datasheets write them (3.35 TB/s = 3.35e12 B/s).
Memory capacity is what the device reports, not the marketing label: HBM is
built in binary sizes, and an "80GB" H100 reports 81,559 MiB in nvidia-smi,
which is 85.5 GB (79.6 GiB).  The label is kept as ``memory_label``.  A process
gets a little less than that total (the driver and the CUDA context keep some):
``usable_memory`` is what PyTorch reports as the device's total capacity in its
out-of-memory messages and what vLLM's ``gpu_memory_utilization`` is a fraction
of; ``usable_source`` says where each figure was seen, or that it is an estimate.
The GPU-to-GPU link (``interconnect``: NVLink, PCIe, Infinity Fabric, ICI) is
the per-GPU figure of the same datasheet, both directions together (900 GB/s
for an H100 SXM's NVLink 4, so 450 GB/s each way); tensor parallelism
(:mod:`rooflab.fleet`) sends its all-reduces over it.

>>> h100 = hardware("H100")
>>> h100.name, round(h100.ridge_point("fp16").magnitude)
('H100-SXM', 295)
>>> h100.memory_label, h100.memory_capacity.to("MiB"), round(h100.memory_capacity.m_as("GB"), 1)
('80GB', <Quantity(81559.0, 'mebibyte')>, 85.5)
>>> round(h100.usable_memory.m_as("GiB"), 2), round(hardware("T4").usable_memory.m_as("GiB"), 2)
(79.11, 14.74)
>>> h100.interconnect, h100.interconnect_bandwidth, hardware("L40S").interconnect
('NVLink 4', <Quantity(900.0, 'gigabyte / second')>, 'PCIe Gen4 x16')
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pint

from .catalogue import index, lookup
from .precision import DTYPE_BITS
from .units import quantity

__all__ = ["Hardware", "hardware", "HARDWARE", "UnsupportedPrecision"]

_TERA = 1e12
_MIB = 2**20
_GIB = 2**30


class UnsupportedPrecision(ValueError):
    """The device has no tensor-core rate for the precision asked for."""


@dataclass(frozen=True)
class Hardware:
    """One accelerator.  Quantity properties for people; ``*_si`` floats for the library's arithmetic."""

    name: str
    peak_flops_si: dict[str, float] = field(repr=False)  # FLOP/s by compute precision
    memory_bandwidth_si: float = field(repr=False)  # B/s
    memory_capacity_si: float = field(repr=False)  # B, the total the device reports
    power_si: float | None = field(repr=False)  # W; None where the vendor publishes none
    source: str = field(repr=False)
    aliases: tuple[str, ...] = field(default=(), repr=False)
    notes: str = field(default="", repr=False)
    memory_label: str = field(default="", repr=False)  # the marketing name, e.g. "80GB"
    capacity_source: str = field(default="", repr=False)  # where the reported total comes from
    interconnect: str = field(default="", repr=False)  # GPU-to-GPU link, e.g. "NVLink 4"
    interconnect_bandwidth_si: float | None = field(default=None, repr=False)  # B/s, both directions, per GPU
    interconnect_links: int | None = field(default=None, repr=False)  # point-to-point links (a mesh); None: switched
    usable_memory_si: float | None = field(default=None, repr=False)  # B a process can allocate; None: the total
    usable_source: str = field(default="", repr=False)  # where that figure was seen, or "estimate: ..."

    @property
    def memory_bandwidth(self) -> pint.Quantity:
        """Peak memory bandwidth, B/s."""
        return quantity(self.memory_bandwidth_si, "bandwidth").to("TB/s")

    @property
    def memory_capacity(self) -> pint.Quantity:
        """Memory capacity as the device reports it (nvidia-smi's or rocm-smi's total), GB."""
        return quantity(self.memory_capacity_si, "bytes").to("GB")

    @property
    def usable_si(self) -> float:
        """Bytes a process can allocate (float): ``usable_memory_si``, or the reported total where none is known."""
        return self.memory_capacity_si if self.usable_memory_si is None else self.usable_memory_si

    @property
    def usable_memory(self) -> pint.Quantity:
        """Memory a process can allocate (PyTorch's total capacity; what vLLM takes a fraction of), GB."""
        return quantity(self.usable_si, "bytes").to("GB")

    @property
    def power(self) -> pint.Quantity | None:
        """Board power (TDP), W, or None where it is not published."""
        return None if self.power_si is None else quantity(self.power_si, "power")

    @property
    def interconnect_bandwidth(self) -> pint.Quantity | None:
        """GPU-to-GPU bandwidth per GPU as the datasheet quotes it (both directions together), GB/s."""
        if self.interconnect_bandwidth_si is None:
            return None
        return quantity(self.interconnect_bandwidth_si, "bandwidth").to("GB/s")

    def link_bandwidth_si(self, gpus: int) -> float:
        """Bandwidth one GPU sends at (one direction) within a group of ``gpus``, B/s (float).

        Half the datasheet's two-way figure; on a mesh of point-to-point links (MI300X's seven Infinity
        Fabric links) a group of N reaches only N - 1 of them.  Raises if the device has no such link.
        """
        if self.interconnect_bandwidth_si is None:
            raise ValueError(f"{self.name} has no GPU-to-GPU interconnect in the catalogue, so it cannot run "
                             f"tensor parallel here; use tp=1")
        one_way = self.interconnect_bandwidth_si / 2
        if self.interconnect_links:
            one_way *= min(gpus - 1, self.interconnect_links) / self.interconnect_links
        return one_way

    @property
    def precisions(self) -> tuple[str, ...]:
        """The compute precisions this device has a tensor-core (or vector) rate for."""
        return tuple(self.peak_flops_si)

    def peak_flops_for(self, compute: str) -> float:
        """Return the dense peak for ``compute`` in FLOP/s (float); raise if the device has none."""
        key = compute.strip().lower() if isinstance(compute, str) else compute
        try:
            return self.peak_flops_si[key]
        except (KeyError, TypeError):
            known = f"known formats: {', '.join(DTYPE_BITS)}"
            if key in DTYPE_BITS:
                raise UnsupportedPrecision(
                    f"{self.name} has no {key} compute rate (it has {', '.join(self.precisions)}); "
                    f"pick one of those, or store weights in {key} and compute in another format, "
                    f"e.g. Precision(weights={key!r}, compute='fp16')"
                ) from None
            raise UnsupportedPrecision(f"unknown compute precision {compute!r}; {known}") from None

    def peak_flops(self, precision: str = "fp16") -> pint.Quantity:
        """Dense peak compute for a compute precision, TFLOP/s."""
        return quantity(self.peak_flops_for(precision), "flop_rate").to("TFLOP/s")

    def ridge_point(self, precision: str = "fp16") -> pint.Quantity:
        """Arithmetic intensity where the two roofs meet, FLOP/B: peak_flops / memory_bandwidth."""
        return quantity(self.peak_flops_for(precision) / self.memory_bandwidth_si, "intensity")

    def __str__(self) -> str:
        return self.name


def _device(
    name: str,
    tflops: dict[str, float],
    bandwidth_tb_s: float,
    capacity: tuple[int, str, str],
    power_w: float | None,
    source: str,
    aliases: tuple[str, ...] = (),
    notes: str = "",
    link: tuple[str, float, int | None] | None = None,
    usable: tuple[float, str] | None = None,
) -> Hardware:
    capacity_bytes, label, capacity_source = capacity
    link_name, link_gb_s, links = link or ("", None, None)
    return Hardware(
        name=name,
        peak_flops_si={k: v * _TERA for k, v in tflops.items()},
        memory_bandwidth_si=bandwidth_tb_s * _TERA,
        memory_capacity_si=float(capacity_bytes),
        power_si=power_w,
        source=source,
        aliases=aliases,
        notes=notes,
        memory_label=label,
        capacity_source=capacity_source,
        interconnect=link_name,
        interconnect_bandwidth_si=None if link_gb_s is None else link_gb_s * 1e9,
        interconnect_links=links,
        usable_memory_si=None if usable is None else usable[0] * _GIB,
        usable_source="" if usable is None else usable[1],
    )


_MODAL = ("modal-labs/modal-client PR #2797, 'docs fix: nvidia quotes GB on their GPUs not GiB' (2025-01-23), "
          "https://github.com/modal-labs/modal-client/pull/2797: nvidia-smi totals of Modal's GPUs")

# Dense peaks in TFLOP/s (TOP/s for integer formats), bandwidth in TB/s; capacity as
# (bytes the device reports, marketing label, where that total is shown).
_CATALOGUE = [
    _device(
        "A100-40GB",
        {"fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312, "int8": 624, "int4": 1248},
        1.555, (40960 * _MIB, "40GB", f"nvidia-smi total 40,960 MiB; {_MODAL}"), 400,
        "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
        aliases=("A100-SXM-40GB",),
        notes="SXM4 module; A100 datasheet, dense figures (sparse ones are twice these).",
        link=("NVLink 3", 600, None),  # NVLink 3: 600 GB/s per GPU (datasheet, SXM4).
        usable=(39.39, "PyTorch out-of-memory messages on A100 40GB machines, '39.39 GiB total capacity' (many public "
                "logs found by text search; no stable URL recorded)"),
    ),
    _device(
        "A100-80GB",
        {"fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312, "int8": 624, "int4": 1248},
        2.039, (81920 * _MIB, "80GB", f"nvidia-smi total 81,920 MiB; {_MODAL}"), 400,
        "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
        aliases=("A100", "A100-SXM", "A100-SXM-80GB"),
        notes="SXM4 module with HBM2e; A100 datasheet, dense figures.",
        link=("NVLink 3", 600, None),  # NVLink 3: 600 GB/s per GPU (datasheet, SXM4).
        usable=(79.15, "PyTorch out-of-memory messages on A100 80GB machines, '79.15 GiB total capacity', also in vLLM "
                "engine errors (public logs found by text search; no stable URL recorded)"),
    ),
    _device(
        "H100-SXM",
        {"fp32": 67, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4, "fp8": 1978.9, "int8": 1978.9},
        3.35, (81559 * _MIB, "80GB",
                f"nvidia-smi total 81,559 MiB ('NVIDIA H100 80GB HBM3'); {_MODAL}; also NVIDIA/nccl issue #1264 "
                "(2024), https://github.com/NVIDIA/nccl/issues/1264"), 700,
        "https://www.nvidia.com/en-us/data-center/h100/",
        aliases=("H100", "H100-SXM5", "H100-80GB"),
        notes="H100 SXM5 datasheet; the page quotes sparse tensor rates, halved here. No INT4 tensor cores.",
        link=("NVLink 4", 900, None),  # NVLink 4: 900 GB/s per GPU (datasheet; PCIe Gen5 128 GB/s to the host).
        usable=(79.11, "vllm-project/vllm issue #27508 (2025), https://github.com/vllm-project/vllm/issues/27508: 'GPU 0"
                " has a total capacity of 79.11 GiB' on an H100; other public logs show 79.18-79.25 GiB with "
                "other drivers"),
    ),
    _device(
        "H100-PCIe",
        {"fp32": 51, "tf32": 378, "fp16": 756, "bf16": 756, "fp8": 1513, "int8": 1513},
        2.0, (81559 * _MIB, "80GB",
               "nvidia-smi total 81,559 MiB ('NVIDIA H100 PCIe'), as public nvidia-smi logs show it (found by "
               "text search of public repositories; no stable URL recorded). One log showed 81,920 MiB."), 350,
        "https://www.nvidia.com/en-us/data-center/h100/",
        notes="H100 PCIe datasheet column, dense figures.",
        link=("PCIe Gen5 x16", 128, None),  # PCIe Gen5 x16: 128 GB/s (datasheet); an NVLink bridge joins a pair at 600 GB/s.
        usable=(79.11, "estimate: the H100 SXM's figure, since both report 81,559 MiB"),
    ),
    _device(
        "H200",
        {"fp32": 67, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4, "fp8": 1978.9, "int8": 1978.9},
        4.8, (143771 * _MIB, "141GB",
               "nvidia-smi total 143,771 MiB ('NVIDIA H200'), as public nvidia-smi logs show it and rooflab issue "
               "#12 states; no stable public URL recorded in this build."), 700,
        "https://www.nvidia.com/en-us/data-center/h200/",
        aliases=("H200-SXM",),
        notes="Same GH100 compute as the H100 SXM; HBM3e raises bandwidth and capacity.",
        link=("NVLink 4", 900, None),  # NVLink 4: 900 GB/s per GPU (datasheet).
        usable=(139.80, "PyTorch out-of-memory messages on H200 machines, 'a total capacity of 139.80 GiB' (139.72-139.81"
                " GiB by driver; public logs found by text search, no stable URL recorded)"),
    ),
    _device(
        "B200",
        {"fp32": 80, "tf32": 1100, "fp16": 2250, "bf16": 2250, "fp8": 4500, "int8": 4500, "fp4": 9000},
        8.0, (183359 * _MIB, "180GB",
              "nvidia-smi total 183,359 MiB ('NVIDIA B200'); NVIDIA/TensorRT-LLM issue #10278 (2025-12-24), "
              "https://github.com/NVIDIA/TensorRT-LLM/issues/10278"), 1000,
        "https://www.nvidia.com/en-us/data-center/hgx/",
        aliases=("HGX-B200",),
        notes="One GPU of an HGX B200 board (1,000 W configuration), dense figures.",
        link=("NVLink 5", 1800, None),  # NVLink 5: 1.8 TB/s per GPU (HGX page).
        usable=(178.35, "PyTorch out-of-memory messages on B200 machines, 'a total capacity of 178.35 GiB' (public logs "
                "found by text search, no stable URL recorded)"),
    ),
    _device(
        "L4",
        {"fp32": 30.3, "tf32": 60, "fp16": 121, "bf16": 121, "fp8": 242.5, "int8": 242.5},
        0.300, (23034 * _MIB, "24GB", f"nvidia-smi total 23,034 MiB; {_MODAL}"), 72,
        "https://www.nvidia.com/en-us/data-center/l4/",
        notes="L4 datasheet; its tensor rates are quoted with sparsity, halved here.",
        link=("PCIe Gen4 x16", 64, None),  # PCIe Gen4 x16: 64 GB/s (datasheet); no NVLink.
        usable=(21.96, "estimate: the reported 22.49 GiB less 0.53 GiB, the median gap of the NVIDIA GPUs with a seen "
                "figure"),
    ),
    _device(
        "T4",
        {"fp32": 8.1, "fp16": 65, "int8": 130, "int4": 260},
        0.320, (15360 * _MIB, "16GB", f"nvidia-smi total 15,360 MiB; {_MODAL}"), 70,
        "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf",
        notes="Turing: FP16 mixed-precision tensor cores, no BF16, TF32 or FP8.",
        link=("PCIe Gen3 x16", 32, None),  # PCIe Gen3 x16: 32 GB/s (datasheet); no NVLink.
        usable=(14.74, "PyTorch out-of-memory messages on T4 (g4dn) machines, '14.74 GiB total capacity' (public logs "
                "found by text search); also 14.75 GiB, GSeanCDAT/GIMM-VFI issue #6, "
                "https://github.com/GSeanCDAT/GIMM-VFI/issues/6, 14.76 GiB, xinge008/Cylinder3D issue #109, "
                "https://github.com/xinge008/Cylinder3D/issues/109, and 14.56 GiB with 2025 drivers, "
                "Zheng-Chong/CatVTON issue #133, https://github.com/Zheng-Chong/CatVTON/issues/133"),
    ),
    _device(
        "L40S",
        {"fp32": 91.6, "tf32": 183, "fp16": 362, "bf16": 362, "fp8": 733, "int8": 733, "int4": 733},
        0.864, (46068 * _MIB, "48GB", f"nvidia-smi total 46,068 MiB; {_MODAL}"), 350,
        "https://www.nvidia.com/en-us/data-center/l40s/",
        notes="L40S datasheet, dense figures (the page lists sparse ones too).",
        link=("PCIe Gen4 x16", 64, None),  # PCIe Gen4 x16: 64 GB/s both directions (datasheet); no NVLink.
        usable=(44.53, "Wan-Video/Wan2.1 issue #205 (2025), https://github.com/Wan-Video/Wan2.1/issues/205: 'GPU 0 has a"
                " total capacity of 44.53 GiB' on an L40S"),
    ),
    _device(
        "MI300X",
        {"fp32": 163.4, "tf32": 653.7, "fp16": 1307.4, "bf16": 1307.4, "fp8": 2614.9, "int8": 2614.9},
        5.3, (205822885888, "192GB",
              "rocm-smi --showmeminfo vram: 'VRAM Total Memory (B): 205822885888', as public rocm-smi logs of "
              "MI300X machines show it (found by text search; no stable URL recorded)."), 750,
        "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html",
        aliases=("AMD-MI300X",),
        notes="AMD Instinct MI300X datasheet, dense matrix figures.",
        link=("Infinity Fabric", 896, 7),  # Seven Infinity Fabric links of 128 GB/s each (product page): 896 GB/s in all, one link to each peer of an 8-GPU platform.
        usable=(205822885888 / _GIB, "HIP out-of-memory messages on MI300X machines, 'a total capacity of 191.69 GiB' (205,822,885,888"
                " B, all that rocm-smi reports; public logs found by text search, no stable URL recorded)"),
    ),
    _device(
        "TPU-v5e",
        {"bf16": 197, "int8": 394},
        0.819, (16 * 2**30, "16GB",
                "No device-reported total found: Google's v5e page says 16 GB of HBM2 per chip; HBM stacks are "
                "built in binary sizes, so 16 GiB is taken (see docs/decisions.md)."), None,
        "https://cloud.google.com/tpu/docs/v5e",
        aliases=("TPUv5e", "v5e"),
        notes="One Cloud TPU v5e chip. Google publishes no per-chip power figure.",
        link=("ICI", 200, None),  # Inter-chip interconnect 1,600 Gbps = 200 GB/s per chip (v5e page).
        usable=(15.75, "estimate: JAX's bytes_limit is a little under the 16 GiB of HBM; 0.25 GiB is assumed kept by the"
                " runtime"),
    ),
]

#: The catalogue, by canonical name.
HARDWARE: dict[str, Hardware] = {device.name: device for device in _CATALOGUE}
_INDEX = index(_CATALOGUE)


def hardware(name: str | Hardware) -> Hardware:
    """Return the catalogue entry for ``name`` (case-insensitive; aliases such as 'H100' work)."""
    if isinstance(name, Hardware):
        return name
    return lookup(name, _INDEX, "hardware", "H100")
