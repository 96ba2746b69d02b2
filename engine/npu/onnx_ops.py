"""A small ONNX graph builder that only emits ops the QNN HTP runs without CPU fallback.

:data:`HTP_SAFE_OPS` is the list measured in ``qnn-htp.md`` §0.4 and §2 (soc_model set, fp32 I/O),
plus ``Relu``, which the notes' GDN graph uses for the Exp clamp. Deliberately absent: ``Trilu``
(use constant masks), ``CumSum`` (a MatMul with a constant triangular matrix is exact and has no
exclusive/reverse trap), ``Einsum`` (only some equations work), com.microsoft ``Inverse``, and the
built-in ``Softplus`` (7 % off in fp16). :meth:`GraphBuilder.op` refuses anything else, so a graph
built here cannot pick up an op that would make the HTP session fall back to the CPU.

The numerically delicate patterns live here once:

* ``exp_safe(x) = Exp(x + Relu(c - x))`` with c = -60: exact for x > c, and it keeps x out of the
  HTP's broken range x < -88 (``Relu(x - c) + c`` would lose fp16 precision instead);
* ``sigmoid(x) = Reciprocal(1 + Exp(−max(x, −10)))``: the HTP's own ``Sigmoid`` is 1.1e-2 off
  near x = −3 and flushes to 0 below −9 (emulator); this form stays within 2.5e-3 over [−8, 8].
  Small values matter: DeltaNet's β = σ(·) scales the delta rule, whose state amplifies β's
  relative error, and SiLU = x·σ(x) feeds q, k, v and the gates;
* ``softplus(x) = Relu(x) + log1p(e)`` with ``e = Exp(clamp(-|x|))`` and log1p as the series
  ``2·atanh(s) = 2(s + s³/3 + … + s⁹/9)``, ``s = e / (2 + e)`` ≤ 1/3. Forming ``Log(1 + e)`` would
  round ``1 + e`` to fp16 first and lose e's digits: the emulator measured 1e-3 relative error at
  x ∈ [−1, 0] and 18 % at x = −6, where the DeltaNet decay lives (softplus(α + dt_bias) is often
  0.03–0.5); the series has no cancellation (2.6e-3 at worst, from Exp itself) and the terms it
  drops are below fp16's resolution;
* RMS norm ``x · (mean(x²) + eps)^−½ · w`` and L2 norm ``x · (Σx² + eps)^−½``, the forms ggml
  computes (its GDN L2 norm is an RMS norm with eps/n, which is the same thing), with one ``Pow``
  (3.9e-4 relative on the emulator) rather than ``Div`` by ``Sqrt`` (5.7e-4).

Together with DeltaNet's token-major convolution (:mod:`engine.npu.deltanet_layer`) these forms
brought hybrid-tiny's state error on the emulator from 1.2e-2 to 2.9e-3 (relative L2, worst
tensor), and its logit error from 6e-3 to 1.8e-3; on the CPU provider nothing changes (< 1e-6).

Values are referred to by name (``str``); constants become initializers, deduplicated by content.
"""

from __future__ import annotations

import hashlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
EXP_CLAMP = -60.0
SIGMOID_FLOOR = -10.0  # e^10 = 22026 stays inside fp16; σ(−10) = 4.5e-5 is the error below it

HTP_SAFE_OPS = frozenset({
    "MatMul", "Add", "Sub", "Mul", "Div", "Max", "Min", "Exp", "Sigmoid", "Tanh", "Log", "Neg", "Abs",
    "Sqrt", "Reciprocal", "Pow", "Relu", "Equal", "Less", "Greater", "Cast", "Softmax", "ReduceSum",
    "ReduceMean", "ReduceMax", "Transpose", "Reshape", "Concat", "Slice", "Split", "Gather", "Conv",
    "Tile", "Expand", "Unsqueeze", "Squeeze",
})  # fmt: skip

_ONNX_TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int32): TensorProto.INT32,
               np.dtype(np.int64): TensorProto.INT64}


class GraphBuilder:
    """Collects nodes, initializers, inputs and outputs; :meth:`model` makes the ModelProto."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self._consts: dict[tuple, str] = {}
        self._count = 0

    def _fresh(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def input(self, name: str, dtype, shape: tuple[int, ...]) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, _ONNX_TYPES[np.dtype(dtype)], list(shape)))
        return name

    def output(self, value: str, name: str, shape: tuple[int, ...], dtype=np.float32) -> None:
        """Make ``value`` a graph output called ``name`` by renaming the tensor (no Identity node)."""
        for node in self.nodes:
            for field in (node.input, node.output):
                for i, used in enumerate(field):
                    if used == value:
                        field[i] = name
        self.outputs.append(helper.make_tensor_value_info(name, _ONNX_TYPES[np.dtype(dtype)], list(shape)))

    def const(self, array, hint: str = "c") -> str:
        array = np.asarray(array)
        if array.dtype == np.float64:
            array = array.astype(np.float32)
        key = (array.dtype.str, array.shape, hashlib.sha1(array.tobytes()).hexdigest())
        if key not in self._consts:
            name = self._fresh(hint)
            self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
            self._consts[key] = name
        return self._consts[key]

    def op(self, op_type: str, *inputs: str, hint: str | None = None, **attrs) -> str:
        if op_type not in HTP_SAFE_OPS:
            raise ValueError(f"{op_type} is not on the HTP-safe op list")
        out = self._fresh(hint or op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=out, **attrs))
        return out

    def model(self) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="hearth")
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model

    # -- shapes ----------------------------------------------------------------------------------

    def reshape(self, x: str, shape: tuple[int, ...]) -> str:
        return self.op("Reshape", x, self.const(np.array(shape, np.int64), "shape"))

    def transpose(self, x: str, perm: tuple[int, ...]) -> str:
        return self.op("Transpose", x, perm=list(perm))

    def slice(self, x: str, axis: int, start: int, end: int) -> str:
        ints = [self.const(np.array([v], np.int64), "idx") for v in (start, end, axis)]
        return self.op("Slice", x, *ints)

    def concat(self, values: list[str], axis: int) -> str:
        return self.op("Concat", *values, axis=axis)

    # -- arithmetic ------------------------------------------------------------------------------

    def matmul(self, a: str, b: str) -> str:
        return self.op("MatMul", a, b)

    def add(self, a: str, b: str) -> str:
        return self.op("Add", a, b)

    def sub(self, a: str, b: str) -> str:
        return self.op("Sub", a, b)

    def mul(self, a: str, b: str) -> str:
        return self.op("Mul", a, b)

    def scale(self, x: str, factor: float) -> str:
        return self.mul(x, self.const(np.float32(factor), "scale"))

    def linear(self, x: str, weight: np.ndarray, hint: str = "w") -> str:
        """``x @ weightᵀ`` for a GGUF matrix stored (n_out, n_in)."""
        return self.matmul(x, self.const(np.ascontiguousarray(weight.T), hint))

    def flag(self, cmp: str, a: str, b: str) -> str:
        """A comparison as a 0/1 float tensor (Equal/Less/Greater, then Cast)."""
        return self.op("Cast", self.op(cmp, a, b), to=TensorProto.FLOAT)

    # -- activations and norms -------------------------------------------------------------------

    def sigmoid(self, x: str) -> str:
        """1 / (1 + e^(−max(x, −10))) rather than the ``Sigmoid`` op (see the module docstring)."""
        floor = self.const(np.float32(SIGMOID_FLOOR), "sigmoid_floor")
        clamped = self.add(x, self.op("Relu", self.sub(floor, x)))
        tail = self.op("Exp", self.op("Neg", clamped))
        return self.op("Reciprocal", self.add(self.const(np.float32(1.0), "one"), tail))

    def silu(self, x: str) -> str:
        return self.mul(x, self.sigmoid(x))

    def exp_safe(self, x: str) -> str:
        lifted = self.op("Relu", self.sub(self.const(np.float32(EXP_CLAMP), "clamp"), x))
        return self.op("Exp", self.add(x, lifted))

    def softplus(self, x: str) -> str:
        tail = self.exp_safe(self.op("Neg", self.op("Abs", x)))
        return self.add(self.op("Relu", x), self.log1p_small(tail))

    def log1p_small(self, e: str) -> str:
        """log(1 + e) for 0 ≤ e ≤ 1 without forming 1 + e (see the module docstring)."""
        s = self.op("Div", e, self.add(self.const(np.float32(2.0), "two"), e))
        s2 = self.mul(s, s)
        series = self.const(np.float32(1 / 9), "atanh9")
        for n in (7, 5, 3, 1):  # Horner: ((s²/9 + 1/7) s² + 1/5) s² ... + 1
            series = self.add(self.mul(series, s2), self.const(np.float32(1 / n), f"atanh{n}"))
        return self.scale(self.mul(s, series), 2.0)

    def rms_norm(self, x: str, weight: np.ndarray | None, eps: float) -> str:
        mean_sq = self.op("ReduceMean", self.mul(x, x), axes=[-1], keepdims=1)
        normed = self.mul(x, self._rsqrt(self.add(mean_sq, self.const(np.float32(eps), "eps"))))
        return normed if weight is None else self.mul(normed, self.const(weight, "norm"))

    def l2_norm(self, x: str, eps: float) -> str:
        sum_sq = self.op("ReduceSum", self.mul(x, x), self.const(np.array([-1], np.int64), "axes"), keepdims=1)
        return self.mul(x, self._rsqrt(self.add(sum_sq, self.const(np.float32(eps), "eps"))))

    def _rsqrt(self, x: str) -> str:
        """x^−½ by one Pow: 3.9e-4 relative on the emulated HTP, against 5.7e-4 for Div(·, Sqrt)."""
        return self.op("Pow", x, self.const(np.float32(-0.5), "minus_half"))
