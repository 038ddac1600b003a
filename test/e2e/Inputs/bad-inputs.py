"""Writes the bad inputs failures.test feeds the executables, from what a
good run left in OUT_DIR: good.safetensors (an --export of shardc-gen mlp)
and ckpt/ (a --save of it). The MLP's inputs are shardc-gen mlp's defaults:
x [32, 64] f32, y [32] i32 below 10; the GPT's vocabulary is 256 and its
sequence length 32.

usage: bad-inputs.py OUT_DIR
"""

import glob
import json
import os
import shutil
import struct
import sys
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import lib  # noqa: E402



def f32(values):
    return struct.pack("<%df" % len(values), *values)


def i32(values):
    return struct.pack("<%di" % len(values), *values)


def truncate(path, keep):
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:keep(len(data))])


def main():
    out = sys.argv[1]
    at = lambda name: os.path.join(out, name)  # noqa: E731

    def edit_checkpoint(name, edit):
        """A copy of ckpt/ as `name`, its checkpoint.json changed by edit
        and written without its "crc32", as a user edits one."""
        shutil.copytree(at("ckpt"), at(name))
        with open(at(name + "/checkpoint.json")) as f:
            manifest = json.load(f)
        del manifest["crc32"]
        edit(manifest)
        with open(at(name + "/checkpoint.json"), "w") as f:
            json.dump(manifest, f)

    # --init: from the good export, one thing wrong in each file.
    good = {name: ("F32", shape, f32(values))
            for name, (shape, values) in
            lib.read_safetensors(at("good.safetensors")).items()}
    bias = good["layers.1.bias"][2]
    lib.write_safetensors(at("init-missing.safetensors"),
                          {n: t for n, t in good.items()
                           if n != "layers.1.bias"})
    lib.write_safetensors(at("init-shape.safetensors"),
                          dict(good, **{"layers.1.bias":
                                        ("F32", [128, 2], bias)}))
    lib.write_safetensors(at("init-dtype.safetensors"),
                          dict(good, **{"layers.1.bias":
                                        ("I32", [256], bias)}))
    # Tensors the model does not have (a checkpoint's buffers, a separate
    # head): read around, and said.
    lib.write_safetensors(at("init-extra.safetensors"),
                          dict(good, **{"attn.bias": ("F32", [256], bias),
                                        "lm_head.weight": ("F32", [256], bias)}))
    nan = [0.0] * 256
    nan[100] = float("nan")
    lib.write_safetensors(at("init-nan.safetensors"),
                          dict(good, **{"layers.1.bias":
                                        ("F32", [256], f32(nan))}))
    shutil.copy(at("good.safetensors"), at("init-truncated.safetensors"))
    truncate(at("init-truncated.safetensors"), lambda n: n // 2)
    # Bytes that belong to no tensor: 7 appended; or the header length one
    # short of a header that ends in a space, which leaves the JSON valid
    # and moves every tensor one byte earlier.
    with open(at("good.safetensors"), "rb") as f:
        raw = f.read()
    with open(at("init-appended.safetensors"), "wb") as f:
        f.write(raw + b"\0" * 7)
    length = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + length])
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (8 - len(text) % 8)
    data = raw[8 + length:]
    with open(at("init-shifted.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text) - 1) + text + data)

    # --data: two steps of [steps, B, ...] per input.
    x = ("F32", [2, 32, 64], f32([0.5] * (2 * 32 * 64)))
    y = [1] * 64
    lib.write_safetensors(at("data-no-y.safetensors"),
                          {"x": x, "labels": ("I32", [2, 32], i32(y))})
    lib.write_safetensors(at("data-shape.safetensors"),
                          {"x": ("F32", [2, 32, 32], f32([0.5] * 2048)),
                           "y": ("I32", [2, 32], i32(y))})
    lib.write_safetensors(at("data-dtype.safetensors"),
                          {"x": x, "y": ("F32", [2, 32], f32([1.0] * 64))})
    lib.write_safetensors(at("data-steps.safetensors"),
                          {"x": x, "y": ("I32", [3, 32], i32([1] * 96))})
    label = list(y)
    label[32 + 8] = 10  # step 1, row 8: one past the 10 classes
    lib.write_safetensors(at("data-label.safetensors"),
                          {"x": x, "y": ("I32", [2, 32], i32(label))})
    inf = [0.5] * (2 * 32 * 64)
    inf[64 * 32 + 3] = float("-inf")  # step 1, row 0, column 3
    lib.write_safetensors(at("data-inf.safetensors"),
                          {"x": ("F32", [2, 32, 64], f32(inf)),
                           "y": ("I32", [2, 32], i32(y))})

    # Token files for the GPT (B = 8, T = 32, vocabulary 256): one batch
    # reads 257 tokens.
    window = [t % 256 for t in range(300)]
    lib.write_tokens(at("tokens-good.bin"), window)
    lib.write_tokens(at("tokens-copy.bin"), window)
    lib.write_tokens(at("tokens-other.bin"), window[1:] + window[:1])
    lib.write_tokens(at("tokens-magic.bin"), window, magic=12345)
    lib.write_tokens(at("tokens-few.bin"), [1] * 20)
    lib.write_tokens(at("tokens-vocab.bin"), window[:50] + [300] + window[51:])
    lib.write_tokens(at("tokens-count.bin"), window, count=400)

    # Checkpoints: rank 1's file cut short; checkpoint.json cut short.
    shutil.copytree(at("ckpt"), at("ckpt-truncated"))
    truncate(glob.glob(at("ckpt-truncated/rank-1.*.safetensors"))[0],
             lambda n: n - 100)
    # Rank 1's file with one bit of its last float flipped: same size, same
    # header, another value.
    shutil.copytree(at("ckpt"), at("ckpt-flipped"))
    with open(glob.glob(at("ckpt-flipped/rank-1.*.safetensors"))[0],
              "r+b") as f:
        f.seek(-1, os.SEEK_END)
        last = f.read(1)[0]
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last ^ 0x01]))
    # The same checkpoint as version 1 wrote it, without checksums: loads.
    def version1(manifest):
        manifest["version"] = 1
        for file in manifest["files"]:
            file["pieces"] = [piece[:3] for piece in file["pieces"]]
    edit_checkpoint("ckpt-v1", version1)
    shutil.copytree(at("ckpt"), at("ckpt-json"))
    truncate(at("ckpt-json/checkpoint.json"), lambda n: n // 2)
    # checkpoint.json saying 3 ranks saved it, beside 2 rank files.
    edit_checkpoint("ckpt-world", lambda manifest: manifest.update(world=3))
    # Rank files named outside the checkpoint's directory, or with a NUL.
    for variant, name in (("escape", "../../mlp.mlir"),
                          ("nul", "rank-0\0.safetensors")):
        edit_checkpoint("ckpt-" + variant,
                        lambda manifest: manifest["files"][1].update(name=name))
    # A tensor the model lacks (a layer more).
    edit_checkpoint("ckpt-extra", lambda manifest: manifest["tensors"].update(
        {"layers.9.weight": {"dtype": "F32", "shape": [4, 4]}}))
    # A step so late that a few more pass 2^63 - 1.
    edit_checkpoint("ckpt-late", lambda manifest: manifest["metadata"].update(
        step="9223372036854775806"))
    # A NaN in a param's piece of rank 0's file, its checksum made to match:
    # a save of a run that diverged.
    shutil.copytree(at("ckpt"), at("ckpt-nan"))
    with open(at("ckpt-nan/checkpoint.json")) as f:
        manifest = json.load(f)
    rank0 = manifest["files"][0]
    with open(at("ckpt-nan/" + rank0["name"]), "r+b") as f:
        raw = bytearray(f.read())
        length = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8:8 + length])
        key = next(k for k in header if k.startswith("layers.1.bias@"))
        begin, end = (8 + length + offset
                      for offset in header[key]["data_offsets"])
        raw[begin:begin + 4] = struct.pack("<f", float("nan"))
        f.seek(0)
        f.write(raw)
    for piece in rank0["pieces"]:
        if piece[0] == "layers.1.bias":
            piece[3] = "%08x" % zlib.crc32(bytes(raw[begin:end]))
    del manifest["crc32"]
    with open(at("ckpt-nan/checkpoint.json"), "w") as f:
        json.dump(manifest, f)
    # A seed that is no number (a resumed run takes the checkpoint's); a
    # step with a '+', which no save writes.
    edit_checkpoint("ckpt-seed",
                    lambda manifest: manifest["metadata"].update(seed="abc"))
    edit_checkpoint("ckpt-plus",
                    lambda manifest: manifest["metadata"].update(step="+1"))
    # A digit of the step changed in place, "crc32" kept: corrupt, not a
    # resume at another step. Its "crc32" moved up: not the last member.
    shutil.copytree(at("ckpt"), at("ckpt-step"))
    with open(at("ckpt-step/checkpoint.json")) as f:
        text = f.read()
    assert text.count('"step": "1"') == 1
    with open(at("ckpt-step/checkpoint.json"), "w") as f:
        f.write(text.replace('"step": "1"', '"step": "7"'))
    edit_checkpoint("ckpt-crc-first", lambda manifest: manifest.update(
        {"crc32": "00000000", "files": manifest.pop("files")}))

    # A FIFO where a file is read or written: refused, never waited on.
    os.mkfifo(at("fifo"))


if __name__ == "__main__":
    main()
