#!/usr/bin/env bash
# Set-up for development and CI: creates .venv and installs Hearth with everything it needs.
#
# llama-cpp-python is built from source by installers/llama_build.py, portably: nothing is compiled
# for this machine's CPU. ggml's CPU backend is built once per instruction level (x86-64-v2, AVX2,
# AVX-VNNI, AVX-512, AMX; on ARM64 NEON, dotprod, i8mm) and the app loads the fastest one whose
# canary passes on the machine it runs on. llamafile's sgemm reads prompts, patched to take only
# batches of 16 rows or more, so that a verify batch goes through the same kernels as a single token
# and drafting changes no token.
# The finished wheel is cached in ~/.cache/hearth/wheels under a key of every build flag, the
# target architecture, the compiler and Python (pip's own wheel cache knows none of these), so a
# second run installs in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
version=$(sed -n 's/.*"llama-cpp-python==\([0-9.]*\)".*/\1/p' pyproject.toml)
"$python" -m venv .venv
wheel=$(.venv/bin/python installers/llama_build.py --version "$version" --pip .venv/bin/pip \
  --cache "${HEARTH_WHEEL_CACHE:-$HOME/.cache/hearth/wheels}")
.venv/bin/pip install --force-reinstall --no-deps "$wheel"
.venv/bin/pip install -e '.[dev]'
# The built-in model in the layout it reads prompts fastest in (engine/models/embedded_layout.py), made once
# here so the app and the tests find it; an installed app makes it at its first start instead.
.venv/bin/python -m engine.models.embedded_convert

bash installers/setup_xvfb.sh || true  # best effort: only installers/screenshots.py needs a virtual X screen
