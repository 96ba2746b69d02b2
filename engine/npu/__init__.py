"""The NPU prefill: a hybrid model's prompt reading as one static-shape ONNX graph, and the hand-off.

The flow, one module each:

* :mod:`~engine.npu.gguf_weights` reads a qwen35 GGUF (hyper-parameters, dequantized fp32 weights)
  and refuses what the exporter cannot reproduce, with a reason;
* :mod:`~engine.npu.qwen35_graph` builds the prefill graph for a fixed chunk length from
  :mod:`~engine.npu.deltanet_layer` (with the chunked DeltaNet core of :mod:`~engine.npu.gdn_chunk`)
  and :mod:`~engine.npu.attention_layer`, using only the HTP-safe ops of :mod:`~engine.npu.onnx_ops`
  (its static shape, :class:`~engine.npu.graph_shape.PrefillSpec`, lives apart so running needs no ``onnx``);
* :mod:`~engine.npu.prefill` runs it chunk by chunk, carrying the state on the host;
* :mod:`~engine.npu.handoff` turns that state into llama.cpp's sequence-state blob (and back), so
  decoding continues on the CPU;
* :mod:`~engine.npu.compiled` caches the graph compiled for the HTP (EP context) per model file,
  chunk length, positions, SoC and runtime;
* :mod:`~engine.npu.runner` reads a live sequence's new tokens on the HTP and hands the state to
  its llama.cpp context; :mod:`~engine.npu.service` is what the engine core uses: prepare at
  load, route each request, fall back to the CPU, record the devices that ran.

Nothing here imports onnxruntime: sessions come from :mod:`engine.backends.qnn`, and the prefill
takes any ``feeds → outputs`` callable. Building graphs needs the ``onnx`` package (imported only
when a graph is compiled, never for a cached one).
"""
