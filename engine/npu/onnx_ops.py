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
* ``softplus(x) = Relu(x) + Log(1 + Exp(clamp(-|x|)))``;
* RMS norm ``x / sqrt(mean(x²) + eps) · w`` and L2 norm ``x / sqrt(Σx² + eps)``, the exact forms
  ggml computes (its GDN L2 norm is an RMS norm with eps/n, which is the same thing).

Values are referred to by name (``str``); constants become initializers, deduplicated by content.
"""

from __future__ import annotations

import hashlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
EXP_CLAMP = -60.0

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
        return self.op("Sigmoid", x)

    def silu(self, x: str) -> str:
        return self.mul(x, self.sigmoid(x))

    def exp_safe(self, x: str) -> str:
        lifted = self.op("Relu", self.sub(self.const(np.float32(EXP_CLAMP), "clamp"), x))
        return self.op("Exp", self.add(x, lifted))

    def softplus(self, x: str) -> str:
        tail = self.exp_safe(self.op("Neg", self.op("Abs", x)))
        return self.add(self.op("Relu", x), self.op("Log", self.add(self.const(np.float32(1.0), "one"), tail)))

    def rms_norm(self, x: str, weight: np.ndarray | None, eps: float) -> str:
        mean_sq = self.op("ReduceMean", self.mul(x, x), axes=[-1], keepdims=1)
        root = self.op("Sqrt", self.add(mean_sq, self.const(np.float32(eps), "eps")))
        normed = self.op("Div", x, root)
        return normed if weight is None else self.mul(normed, self.const(weight, "norm"))

    def l2_norm(self, x: str, eps: float) -> str:
        sum_sq = self.op("ReduceSum", self.mul(x, x), self.const(np.array([-1], np.int64), "axes"), keepdims=1)
        return self.op("Div", x, self.op("Sqrt", self.add(sum_sq, self.const(np.float32(eps), "eps"))))
