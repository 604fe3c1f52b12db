#!/usr/bin/env python3
"""Write a tiny random-weight vision projector (mmproj GGUF) for the tiny Qwen2 model, so the
llama-server of kvlint's live tests accepts images in requests (without one it answers 500
"image input is not supported").

    PY=$(scripts/build-llama-server.sh --python)   # venv with the PyPI gguf + numpy
    "$PY" scripts/make-tiny-mmproj.py              # prints the projector's path
    llama-server -m tiny-qwen2.gguf --mmproj tiny-qwen2-mmproj.gguf ...

Output: ${KVLINT_TINY_MMPROJ:-$HOME/.cache/kvlint/tiny-qwen2-mmproj.gguf} (outside the repo).
Idempotent: an existing file is left alone (only its path is printed).

A LLaVA-style projector (llama.cpp's PROJECTOR_TYPE_MLP, tools/mtmd/clip.cpp: `load_hparams`,
`load_tensors`; the graph in tools/mtmd/models/llava.cpp, `clip_graph_llava::build`): a CLIP
vision encoder (28 x 28 pixels in 14 x 14 patches: 4 image tokens, class embedding,
pre-layernorm, 2 blocks of width 32) and a two-layer MLP into the text model's 64-wide
embeddings. Random weights, fixed seed: an image becomes 4 meaningless embeddings, which is
all the tests need (the request is accepted and its prompt cached as the engine does).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
from gguf import GGUFWriter

CACHE = Path.home() / ".cache" / "kvlint"
OUT = Path(os.environ.get("KVLINT_TINY_MMPROJ", CACHE / "tiny-qwen2-mmproj.gguf"))

SEED = 7
STD = 0.02
TEXT_EMBD = 64  # the tiny Qwen2's n_embd (scripts/make-tiny-model.py)
N_EMBD = 32
N_FF = 64
N_HEAD = 2
N_LAYER = 2
IMAGE_SIZE = 28
PATCH_SIZE = 14
N_PATCHES = (IMAGE_SIZE // PATCH_SIZE) ** 2
HIDDEN = 64


def build(out: Path) -> None:
    rng = np.random.default_rng(SEED)

    # numpy shapes are ggml's ne reversed.
    def w(*shape: int, dtype=np.float32) -> np.ndarray:
        return (rng.standard_normal(shape, dtype=np.float32) * STD).astype(dtype)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    tmp = out.with_name(out.name + f".tmp.{os.getpid()}")
    writer = GGUFWriter(tmp, "clip")
    writer.add_name("kvlint tiny mmproj (random weights)")
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_string("clip.projector_type", "mlp")
    writer.add_bool("clip.use_gelu", True)
    writer.add_uint32("clip.vision.embedding_length", N_EMBD)
    writer.add_uint32("clip.vision.feed_forward_length", N_FF)
    writer.add_uint32("clip.vision.block_count", N_LAYER)
    writer.add_uint32("clip.vision.attention.head_count", N_HEAD)
    writer.add_uint32("clip.vision.projection_dim", TEXT_EMBD)
    writer.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-5)
    writer.add_uint32("clip.vision.image_size", IMAGE_SIZE)
    writer.add_uint32("clip.vision.patch_size", PATCH_SIZE)
    writer.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    writer.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    writer.add_file_type(1)

    writer.add_tensor("v.patch_embd.weight", w(N_EMBD, 3, PATCH_SIZE, PATCH_SIZE, dtype=np.float16))
    writer.add_tensor("v.class_embd", w(N_EMBD))
    writer.add_tensor("v.position_embd.weight", w(N_PATCHES + 1, N_EMBD, dtype=np.float16))
    writer.add_tensor("v.pre_ln.weight", ones(N_EMBD))
    writer.add_tensor("v.pre_ln.bias", w(N_EMBD))
    for i in range(N_LAYER):
        p = f"v.blk.{i}."
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            writer.add_tensor(p + name + ".weight", w(N_EMBD, N_EMBD, dtype=np.float16))
            writer.add_tensor(p + name + ".bias", w(N_EMBD))
        for name in ("ln1", "ln2"):
            writer.add_tensor(p + name + ".weight", ones(N_EMBD))
            writer.add_tensor(p + name + ".bias", w(N_EMBD))
        writer.add_tensor(p + "ffn_up.weight", w(N_FF, N_EMBD, dtype=np.float16))
        writer.add_tensor(p + "ffn_up.bias", w(N_FF))
        writer.add_tensor(p + "ffn_down.weight", w(N_EMBD, N_FF, dtype=np.float16))
        writer.add_tensor(p + "ffn_down.bias", w(N_EMBD))
    writer.add_tensor("mm.0.weight", w(HIDDEN, N_EMBD, dtype=np.float16))
    writer.add_tensor("mm.0.bias", w(HIDDEN))
    writer.add_tensor("mm.2.weight", w(TEXT_EMBD, HIDDEN, dtype=np.float16))
    writer.add_tensor("mm.2.bias", w(TEXT_EMBD))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(out)


def main() -> None:
    force = "--force" in sys.argv[1:]
    if force or not OUT.is_file():
        OUT.parent.mkdir(parents=True, exist_ok=True)
        build(OUT)
    print(OUT)


if __name__ == "__main__":
    main()
