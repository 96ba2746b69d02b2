"""The NPU prefill: a hybrid model's prompt reading as one static-shape ONNX graph, and the hand-off.

The flow, one module each:

* :mod:`~engine.npu.gguf_weights` reads a qwen35 GGUF (hyper-parameters, dequantized fp32 weights)
  and refuses what the exporter cannot reproduce, with a reason;
* :mod:`~engine.npu.qwen35_graph` builds the prefill graph for a fixed chunk length from
  :mod:`~engine.npu.deltanet_layer` (with the chunked DeltaNet core of :mod:`~engine.npu.gdn_chunk`)
  and :mod:`~engine.npu.attention_layer`, using only the HTP-safe ops of :mod:`~engine.npu.onnx_ops`;
* :mod:`~engine.npu.prefill` runs it chunk by chunk, carrying the state on the host;
* :mod:`~engine.npu.handoff` turns that state into llama.cpp's sequence-state blob (and back), so
  decoding continues on the CPU.

Nothing here imports onnxruntime: sessions come from :mod:`engine.backends.qnn`, and the prefill
takes any ``feeds → outputs`` callable. Building graphs needs the ``onnx`` package.
"""
