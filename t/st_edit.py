#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""st_edit.py FILE [--meta KEY VALUE]... [--fill TENSOR VALUE]... — edit a safetensors file in place,
as a tampered or damaged checkpoint would be: --meta sets a metadata entry (the header grows or
shrinks, the data stays), --fill sets every element of an F32 tensor to VALUE (nan, inf, -inf or a
number). Standard library only: the tests that use it need no PyPI package."""
import json
import struct
import sys


def main(argv):
    if len(argv) < 2:
        sys.exit("usage: st_edit.py FILE [--meta KEY VALUE]... [--fill TENSOR VALUE]...")
    path, ops = argv[1], argv[2:]
    with open(path, "rb") as f:
        blob = f.read()
    (hlen,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + hlen])
    data = bytearray(blob[8 + hlen:])
    i = 0
    while i < len(ops):
        if ops[i] == "--meta":
            header.setdefault("__metadata__", {})[ops[i + 1]] = ops[i + 2]
        elif ops[i] == "--fill":
            t = header[ops[i + 1]]
            if t["dtype"] != "F32":
                sys.exit("st_edit.py: %s is %s, --fill writes F32 only" % (ops[i + 1], t["dtype"]))
            begin, end = t["data_offsets"]
            data[begin:end] = struct.pack("<f", float(ops[i + 2])) * ((end - begin) // 4)
        else:
            sys.exit("st_edit.py: unknown operation %s" % ops[i])
        i += 3
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + bytes(data))


if __name__ == "__main__":
    main(sys.argv)
