#!/usr/bin/env python3
"""Writes an llm.c token file with structure a tiny model learns in a few steps.

The stream is byte-level text (one token per byte, so any vocabulary of at
least 128 fits): short sentences drawn from a fixed list, each followed by a
space. Few distinct tokens and many repeated phrases give a unigram
distribution far from uniform and near-deterministic bigrams, so the loss
falls from ln(vocab) within tens of steps.

Format (llm.c): a header of 256 little-endian int32 [20240520, 1, num_tokens,
0, ...], then num_tokens little-endian uint16 tokens.

The output depends only on --tokens and --seed (own LCG, not Python's random),
and the file is replaced atomically, so running it again is harmless.
"""

import argparse
import os
import struct
import sys

PHRASES = [
    "the cat sat on the mat.",
    "the dog sat on the log.",
    "a cat and a dog.",
    "the cat ran.",
    "the dog ran.",
    "on the mat sat the cat.",
    "to be or not to be.",
    "one two three four.",
]

MAGIC, VERSION, HEADER_INTS = 20240520, 1, 256


def lcg(seed):
    """64-bit LCG (Knuth's MMIX constants); yields the top 31 bits."""
    state = (seed * 2862933555777941757 + 3037000493) % 2**64
    while True:
        state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
        yield state >> 33


def stream(count, seed):
    rand = lcg(seed)
    tokens = []
    while len(tokens) < count:
        phrase = PHRASES[next(rand) % len(PHRASES)]
        tokens.extend(phrase.encode("ascii") + b" ")
    return tokens[:count]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--out", required=True, help="output .bin file")
    parser.add_argument("--tokens", type=int, default=65536,
                        help="number of tokens (default 65536)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.tokens < 2 or args.tokens >= 2**31:
        sys.exit("make_tokens.py: --tokens must be in [2, 2^31)")
    tokens = stream(args.tokens, args.seed)
    header = [MAGIC, VERSION, len(tokens)] + [0] * (HEADER_INTS - 3)
    tmp = args.out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<%di" % HEADER_INTS, *header))
        f.write(struct.pack("<%dH" % len(tokens), *tokens))
    os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
