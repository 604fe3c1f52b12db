#!/usr/bin/env python3
"""Converts the vocabulary of a llama.cpp GGUF (BPE, `tokenizer.ggml.model = gpt2`, Qwen2
pre-tokenizer) into a Hugging Face `tokenizer.json`, so that kvlint's own rendering can be
checked against the engine's tokens with the same vocabulary.

    python scripts/gguf-to-tokenizer.py VOCAB.gguf OUT/tokenizer.json

Needs the PyPI packages `gguf` and `tokenizers` (both in the venv of scripts/setup-python.sh).
"""

import sys

from gguf import GGUFReader
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

# The Qwen2 pre-tokenizer split (as in Qwen2's tokenizer.json and llama.cpp's `qwen2` pre).
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
CONTROL, USER_DEFINED = 3, 4


def main(source: str, target: str) -> int:
    reader = GGUFReader(source)
    field = lambda name: reader.fields[name].contents()  # noqa: E731
    if field("tokenizer.ggml.model") != "gpt2" or field("tokenizer.ggml.pre") != "qwen2":
        print(f"{source}: only BPE vocabularies with the qwen2 pre-tokenizer are converted", file=sys.stderr)
        return 2
    tokens = field("tokenizer.ggml.tokens")
    types = field("tokenizer.ggml.token_type")
    merges = [tuple(merge.split(" ", 1)) for merge in field("tokenizer.ggml.merges")]
    vocab = {token: index for index, token in enumerate(tokens)}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=False))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    specials = [
        AddedToken(token, special=kind == CONTROL, normalized=False)
        for token, kind in zip(tokens, types)
        if kind in (CONTROL, USER_DEFINED)
    ]
    tokenizer.add_special_tokens(specials)
    tokenizer.save(target)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
