"""The short-batch column kernels of one CPU build against its single-row kernels, bit for bit.

    python -m tests.column_kernel_probe LIBRARY

LIBRARY is one of the wheel's ``libggml-cpu-<variant>.so`` (the process must be able to run it).
Hearth's build adds ``hearth_vec_dot_<type>_cols`` (``installers/llama_patches/``): one weight row
against several activation columns, each column summed as ``ggml_vec_dot_<type>`` sums it alone.
This calls both on random blocks (well-formed scales, random quants, and saturating extremes) for
1 to 16 columns, and the same for repacked Q4_K (``hearth_gemv_q4_K_8x8_q8_K_cols`` against
``ggml_gemv_q4_K_8x8_q8_K``, the kernel a single token takes), and prints one JSON line: per kernel, the trials and how many differed. The
``--against generic`` control compares with the portable C kernel instead, which sums in another
order, so a probe that could not tell kernels apart would show here.
"""

from __future__ import annotations

import argparse
import ctypes
import json

import numpy as np

QK_K = 256
Q8_K_BYTES = 4 + QK_K + 2 * 16  # float d, 256 quants, 16 sums of 16
Q8_0_BYTES = 2 + 32
# kernel: (weight block bytes, values per block, byte range of the float16 scales, activation layout)
KERNELS = {
    "q8_0_q8_0": (34, 32, (0, 2), "q8_0"),
    "q4_K_q8_K": (144, QK_K, (0, 4), "q8_K"),
    "q5_K_q8_K": (176, QK_K, (0, 4), "q8_K"),
    "q6_K_q8_K": (210, QK_K, (208, 210), "q8_K"),
}
TRIALS = 150
ptr = ctypes.c_void_p


def weight_blocks(rng, kernel: str, blocks: int, extreme: bool) -> np.ndarray:
    size, _, (lo, hi), _ = KERNELS[kernel]
    raw = rng.integers(0, 256, size=(blocks, size), dtype=np.uint8)
    if extreme:  # every byte at its largest: the byte products saturate where they can
        raw[:] = 127 if kernel == "q8_0_q8_0" else 255
    scales = np.asarray(rng.normal(0, 0.05, blocks * (hi - lo) // 2), dtype=np.float16).view(np.uint8)
    raw[:, lo:hi] = scales.reshape(blocks, hi - lo)
    return raw


def activation_blocks(rng, layout: str, blocks: int, extreme: bool) -> np.ndarray:
    per = 32 if layout == "q8_0" else QK_K
    qs = np.full((blocks, per), 127, np.int8) if extreme else rng.integers(-128, 128, size=(blocks, per)).astype(np.int8)
    if layout == "q8_0":
        out = np.zeros((blocks, Q8_0_BYTES), np.uint8)
        out[:, 0:2] = np.asarray(rng.uniform(0.001, 0.1, blocks), np.float16).view(np.uint8).reshape(blocks, 2)
        out[:, 2:] = qs.view(np.uint8)
        return out
    out = np.zeros((blocks, Q8_K_BYTES), np.uint8)
    out[:, 0:4] = np.asarray(rng.uniform(0.001, 0.1, blocks), np.float32).view(np.uint8).reshape(blocks, 4)
    out[:, 4:4 + QK_K] = qs.view(np.uint8)
    sums = qs.reshape(blocks, 16, 16).astype(np.int16).sum(axis=2, dtype=np.int16)
    out[:, 4 + QK_K:] = sums.view(np.uint8).reshape(blocks, 32)
    return out


def differing(lib: ctypes.CDLL, kernel: str, against: str, rng) -> int:
    _, per_block, _, layout = KERNELS[kernel]
    single = getattr(lib, f"ggml_vec_dot_{kernel}" + ("_generic" if against == "generic" else ""))
    columns = getattr(lib, f"hearth_vec_dot_{kernel}_cols")
    differ = 0
    for trial in range(TRIALS):
        blocks = int(rng.integers(1, 12 if layout == "q8_K" else 96))
        ncols = int(rng.integers(1, 17))
        extreme = trial % 10 == 0
        x = np.ascontiguousarray(weight_blocks(rng, kernel, blocks, extreme))
        y = np.ascontiguousarray(np.stack([activation_blocks(rng, layout, blocks, extreme) for _ in range(ncols)]))
        stride = y[0].nbytes
        want = np.zeros(ncols, np.float32)
        for c in range(ncols):
            single(blocks * per_block, ptr(want.ctypes.data + 4 * c), ctypes.c_size_t(0), ptr(x.ctypes.data),
                   ctypes.c_size_t(0), ptr(y.ctypes.data + c * stride), ctypes.c_size_t(0), 1)
        got = np.zeros((ncols, 16), np.float32)  # a column every 16 floats, as ggml's tile keeps them
        columns(blocks * per_block, ptr(got.ctypes.data), ctypes.c_size_t(16), ptr(x.ctypes.data),
                ptr(y.ctypes.data), ctypes.c_size_t(stride), ncols)
        differ += not np.array_equal(got[:, 0].view(np.uint32), want.view(np.uint32))
    return differ


def repacked_differing(lib: ctypes.CDLL, against: str, rng) -> int:
    """Q4_K repacked eight rows to a block (block_q4_Kx8: 8 + 8 float16 scales, 96 bytes of packed
    sub-block scales, 1,024 of quants): the gemv one column at a time against the column kernel."""
    single = getattr(lib, "ggml_gemv_q4_K_8x8_q8_K" + ("_generic" if against == "generic" else ""))
    differ = 0
    for trial in range(TRIALS):
        blocks, groups, ncols = int(rng.integers(1, 10)), int(rng.integers(1, 4)), int(rng.integers(1, 17))
        extreme = trial % 10 == 0
        x = rng.integers(0, 256, size=(groups * blocks, 1152), dtype=np.uint8)
        if extreme:
            x[:] = 255
        x[:, :32] = np.asarray(rng.normal(0, 0.05, groups * blocks * 16), np.float16).view(np.uint8).reshape(-1, 32)
        y = np.ascontiguousarray(np.stack([activation_blocks(rng, "q8_K", blocks, extreme) for _ in range(ncols)]))
        stride, n, rows = y[0].nbytes, blocks * QK_K, groups * 8
        want = np.zeros((ncols, rows), np.float32)
        for c in range(ncols):
            single(n, ptr(want[c].ctypes.data), ctypes.c_size_t(rows), ptr(x.ctypes.data), ptr(y.ctypes.data + c * stride),
                   1, rows)
        got = np.zeros((ncols, rows + 3), np.float32)  # rows apart by more than a row: the stride is honoured
        lib.hearth_gemv_q4_K_8x8_q8_K_cols(n, ptr(got.ctypes.data), ctypes.c_size_t(rows + 3), ptr(x.ctypes.data),
                                           ptr(y.ctypes.data), ctypes.c_size_t(stride), ncols, rows)
        differ += not np.array_equal(got[:, :rows].view(np.uint32), want.view(np.uint32))
    return differ


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("library")
    parser.add_argument("--against", choices=("single", "generic"), default="single")
    args = parser.parse_args()
    lib = ctypes.CDLL(args.library)
    lib.ggml_cpu_init()  # fills the float16 table the kernels read scales through
    rng = np.random.default_rng(20261207)
    report = {k: {"trials": TRIALS, "differ": differing(lib, k, args.against, rng)} for k in KERNELS}
    report["q4_K_8x8_q8_K_repacked"] = {"trials": TRIALS, "differ": repacked_differing(lib, args.against, rng)}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
