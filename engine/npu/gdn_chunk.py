"""The Gated DeltaNet core for one chunk of C tokens, in the chunked WY/UT form (``qnn-htp.md`` §4).

Per head, with the state S ∈ R^{dk×dv} (fla layout; llama.cpp stores Sᵀ), decay g_t ≤ 0 and
β_t ∈ (0, 1), the recurrence llama.cpp runs token by token is

    S_t = e^{g_t} S_{t-1} + k_t u_tᵀ,   u_t = β_t (v_t − (e^{g_t} S_{t-1})ᵀ k_t),   o_t = S_tᵀ q_t.

Unrolled over a chunk with G_i = Σ_{l≤i} g_l and the chunk's start state S₀:

    u_i = β_i (v_i − e^{G_i} S₀ᵀ k_i − Σ_{s<i} e^{G_i−G_s} (k_i·k_s) u_s)
    ⇒ (I + A) U = βV − (βK ⊙ e^G) S₀,    A_is = β_i e^{G_i−G_s} (k_i·k_s) for s < i,

so with T = (I + A)⁻¹, W = T(βK ⊙ e^G) and U' = T(βV): Vn = U' − W S₀ holds the u_i, and

    O   = (Q ⊙ e^G) S₀ + ((Q Kᵀ) ⊙ D) Vn,          D_is = e^{G_i−G_s} for s ≤ i, else 0
    S_C = e^{G_C} S₀ + (K ⊙ e^{G_C − G})ᵀ Vn.

HTP choices: A is strictly lower triangular, hence nilpotent (A^C = 0), and
T = Σ (−A)ⁿ = (I − A)(I + A²)(I + A⁴)…, exact after ⌈log₂C⌉−1 squarings — no Inverse op. The
cumulative sums are MatMuls with constant 0/1 matrices, and the pairwise differences G_i − G_s
come from one MatMul with the constant "segment-sum" matrix (Σ_{s<l≤i} g_l directly, which keeps
fp16 precision where cumsum(g)_i − cumsum(g)_s would not). Every Exp goes through the −60 clamp.
Padding tokens of a partial chunk arrive with g = 0 and β = 0: they leave the state untouched.

Shapes: q, k [H, C, dk]; v [H, C, dv]; g, β [H, C, 1]; S₀ [H, dk, dv].
"""

from __future__ import annotations

import numpy as np

from engine.npu.onnx_ops import GraphBuilder


def chunk_matrices(chunk: int) -> dict[str, np.ndarray]:
    """The constant 0/1 matrices of a chunk; ``segsum[l, i·C + s] = 1`` for s < l ≤ i."""
    i, s = np.indices((chunk, chunk))
    l = np.arange(chunk)[:, None, None]
    segsum = ((s[None] < l) & (l <= i[None])).reshape(chunk, chunk * chunk)
    return {
        "incl": (s <= i).astype(np.float32),  # lower triangle with the diagonal: cumsum and D's mask
        "strict": (s < i).astype(np.float32),
        "tail": (s > i).astype(np.float32),  # row i sums g_l for l > i: G_C − G_i
        "segsum": segsum.astype(np.float32),
        "eye": np.eye(chunk, dtype=np.float32),
    }


def unit_lower_inverse(b: GraphBuilder, a: str, eye: str, chunk: int) -> str:
    """(I + A)⁻¹ for strictly lower-triangular A as (I − A)(I + A²)(I + A⁴)… (exact, no Inverse)."""
    result, power, span = b.sub(eye, a), a, 2
    while span < chunk:  # result holds Σ_{n<span} (−A)ⁿ
        power = b.matmul(power, power)
        result = b.matmul(result, b.add(eye, power))
        span *= 2
    return result


def decay_differences(b: GraphBuilder, g: str, heads: int, chunk: int, segsum: str) -> str:
    """[H, C, C] with entry (i, s) = G_i − G_s for s < i and 0 elsewhere, by one MatMul."""
    row = b.reshape(g, (heads, 1, chunk))
    return b.reshape(b.matmul(row, segsum), (heads, chunk, chunk))


def gdn_chunk(b: GraphBuilder, q: str, k: str, v: str, g: str, beta: str, state: str,
              heads: int, chunk: int) -> tuple[str, str]:
    """(o [H, C, dv], new state [H, dk, dv]) for one chunk; see the module docstring."""
    m = {name: b.const(value, name) for name, value in chunk_matrices(chunk).items()}
    cum = b.matmul(m["incl"], g)  # G_i, [H, C, 1]
    decay = b.mul(b.exp_safe(decay_differences(b, g, heads, chunk, m["segsum"])), m["incl"])  # D
    k_t = b.transpose(k, (0, 2, 1))
    a = b.mul(b.mul(b.matmul(k, k_t), beta), b.mul(decay, m["strict"]))
    t = unit_lower_inverse(b, a, m["eye"], chunk)
    exp_cum = b.exp_safe(cum)
    w = b.matmul(t, b.mul(b.mul(k, beta), exp_cum))
    u = b.matmul(t, b.mul(v, beta))
    v_new = b.sub(u, b.matmul(w, state))
    inter = b.matmul(b.mul(q, exp_cum), state)
    intra = b.matmul(b.mul(b.matmul(q, k_t), decay), v_new)
    out = b.add(inter, intra)
    total = b.op("ReduceSum", g, b.const(np.array([1], np.int64), "axes"), keepdims=1)  # G_C, [H, 1, 1]
    to_end = b.exp_safe(b.matmul(m["tail"], g))  # e^{G_C − G_i}
    carried = b.mul(state, b.exp_safe(total))
    new_state = b.add(carried, b.matmul(b.transpose(b.mul(k, to_end), (0, 2, 1)), v_new))
    return out, new_state
