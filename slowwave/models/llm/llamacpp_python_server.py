"""llama-cpp-python's server with llama.cpp's extra weight buffers off: what
``llama-server --no-repack`` does, which llama-cpp-python's server has no option for.

llama.cpp repacks weights at load into buffers for the CPU's matrix units; on CPUs with AMX
that path crashes loading the default model (a segfault in ``ggml_backend_amx_mul_mat``,
llama.cpp issue 20824), so ``SLOWWAVE_LLAMACPP_REPACK=auto`` starts the server through this
module there. Run as ``python -m slowwave.models.llm.llamacpp_python_server`` with
``llama_cpp.server``'s arguments.
"""

from __future__ import annotations

import runpy

import llama_cpp.llama_cpp as llama_lib

_defaults = llama_lib.llama_model_default_params


def _without_extra_buffers() -> llama_lib.llama_model_params:
    params = _defaults()
    params.use_extra_bufts = False
    return params


def main() -> None:
    # llama_cpp.Llama takes its model parameters from this function and sets no
    # use_extra_bufts of its own
    llama_lib.llama_model_default_params = _without_extra_buffers
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
