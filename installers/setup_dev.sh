#!/usr/bin/env bash
# Set-up for development and CI: creates .venv and installs Hearth with everything it needs.
#
# llama-cpp-python is built from source with llamafile's sgemm switched off (GGML_LLAMAFILE=OFF).
# With it on, a batch of tokens is multiplied with a different kernel than a single token, so the
# logits of a speculative verify batch differ in the last bits from plain decoding and greedy
# output can change; with it off, both go through the same kernels and drafting changes no token.
# The wheel built with these flags is kept in ~/.cache/hearth/wheels (pip's own wheel cache does
# not know about build flags), so a second run installs in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
version=$(sed -n 's/.*"llama-cpp-python==\([0-9.]*\)".*/\1/p' pyproject.toml)
wheels="${HEARTH_WHEEL_CACHE:-$HOME/.cache/hearth/wheels}/llama-cpp-python-$version-nollamafile"
"$python" -m venv .venv
if ! ls "$wheels"/llama_cpp_python-"$version"-*.whl >/dev/null 2>&1; then
  echo "building llama-cpp-python $version from source (about 5 minutes on 2 cores)"
  CMAKE_ARGS="-DGGML_LLAMAFILE=OFF" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    .venv/bin/pip wheel --no-deps --no-binary llama-cpp-python --no-cache-dir -w "$wheels" "llama-cpp-python==$version"
fi
.venv/bin/pip install --force-reinstall --no-deps "$wheels"/llama_cpp_python-"$version"-*.whl
.venv/bin/pip install -e '.[dev]'
