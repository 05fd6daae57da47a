"""Lets transformers 4.51 (the first with Qwen3) import over Debian 12's
torch 1.13.

transformers 4.51 imports three things torch 1.13 lacks, none of which a
CPU forward and backward in fp32 uses: the `torch.distributed.tensor`
module (for tensor-parallel plans), `torch.compiler`'s decorators and
queries (compilation is off here), and the float8 dtypes (a table of
checkpoint dtypes). This module supplies inert stand-ins for exactly
those names, and only where torch lacks them (PATCHED says whether it
did): on torch >= 2.5 it changes nothing. The computation under test --
transformers' own modules, run by torch's own eager kernels -- is
untouched. `from_pretrained` itself needs more of torch 2 than that; under
PATCHED, load a directory with load_pretrained below.

Import it before transformers.
"""

import os
import sys
import types

import torch


PATCHED = False


def _install():
    global PATCHED
    from importlib.metadata import version
    major, minor = (int(x) for x in version("transformers").split(".")[:2])
    if (major, minor) < (4, 51):
        return  # transformers 4.44 runs on torch 1.13 as it is
    PATCHED = not (hasattr(torch.distributed, "tensor") and
                   hasattr(torch, "compiler") and
                   hasattr(torch, "float8_e4m3fn"))
    if not hasattr(torch.distributed, "tensor"):
        tensor = types.ModuleType("torch.distributed.tensor")

        class DTensor:  # never instantiated: nothing is sharded here
            pass

        tensor.DTensor = DTensor
        sys.modules["torch.distributed.tensor"] = tensor
        torch.distributed.tensor = tensor
    if not hasattr(torch, "compiler"):
        compiler = types.ModuleType("torch.compiler")

        def disable(fn=None, recursive=True):
            return fn if fn is not None else (lambda f: f)

        compiler.disable = disable
        compiler.is_compiling = lambda: False
        compiler.is_exporting = lambda: False
        sys.modules["torch.compiler"] = compiler
        torch.compiler = compiler
    for name in ("float8_e4m3fn", "float8_e5m2"):
        if not hasattr(torch, name):
            # A sentinel no tensor's dtype equals.
            setattr(torch, name, object())


_install()


def load_pretrained(transformers, directory):
    """What from_pretrained does for an fp32 model on the CPU, over torch
    1.13: transformers reads config.json and builds the model class it
    names; every tensor of model.safetensors is loaded under its name,
    strictly (none missing, none unexpected, shapes equal)."""
    from safetensors.torch import load_file

    config = transformers.AutoConfig.from_pretrained(directory)
    config._attn_implementation = "eager"
    model = transformers.AutoModelForCausalLM.from_config(config)
    state = load_file(os.path.join(directory, "model.safetensors"))
    if config.tie_word_embeddings:
        state.setdefault("lm_head.weight", state["model.embed_tokens.weight"])
    model.load_state_dict(state, strict=True)
    return model.float()
