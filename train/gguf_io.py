"""A small GGUF v3 reader and writer (Debian has no gguf-py).

Only what the export needs: scalar, string and array metadata, and f32/f16 tensors, laid out as
llama.cpp's gguf.cpp reads them (little endian, 32-byte alignment, data offsets relative to the
aligned start of the data section).
"""
import struct

import numpy as np

# GGUF metadata value types (gguf.h: enum gguf_type).
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
_SCALAR = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i",
           FLOAT32: "<f", BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}
# ggml tensor types used here.
GGML_F32, GGML_F16 = 0, 1
ALIGNMENT = 32


class _Reader:
    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = self.data[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return s

    def value(self, t):
        if t == STRING:
            return self.string()
        if t == ARRAY:
            et = self.take("<I")
            n = self.take("<Q")
            return (et, [self.value(et) for _ in range(n)])
        return self.take(_SCALAR[t])


def read(path):
    """Returns (metadata {key: (type, value)}, tensors {name: np.ndarray}); arrays are (elem_type, list)."""
    with open(path, "rb") as f:
        data = f.read()
    r = _Reader(data)
    if data[:4] != b"GGUF":
        raise ValueError(path + ": not a GGUF file")
    r.pos = 4
    version = r.take("<I")
    if version != 3:
        raise ValueError(path + ": GGUF version %d, expected 3" % version)
    n_tensors = r.take("<Q")
    n_kv = r.take("<Q")
    meta = {}
    for _ in range(n_kv):
        key = r.string()
        t = r.take("<I")
        meta[key] = (t, r.value(t))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        nd = r.take("<I")
        dims = [r.take("<Q") for _ in range(nd)]
        t = r.take("<I")
        off = r.take("<Q")
        infos.append((name, dims, t, off))
    align = meta.get("general.alignment", (UINT32, ALIGNMENT))[1]
    base = (r.pos + align - 1) // align * align
    tensors = {}
    for name, dims, t, off in infos:
        dtype = {GGML_F32: np.float32, GGML_F16: np.float16}.get(t)
        if dtype is None:
            raise ValueError("%s: tensor %s has ggml type %d (only f32/f16 are read)" % (path, name, t))
        n = int(np.prod(dims))
        arr = np.frombuffer(data, dtype=dtype, count=n, offset=base + off)
        tensors[name] = arr.reshape(list(reversed(dims)))  # ggml's ne[0] is the fastest axis
    return meta, tensors


def _pack_value(t, v):
    if t == STRING:
        b = v.encode("utf-8")
        return struct.pack("<Q", len(b)) + b
    if t == ARRAY:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(_pack_value(et, x) for x in items)
    return struct.pack(_SCALAR[t], v)


def write(path, meta, tensors):
    """meta: list of (key, type, value) in file order; tensors: list of (name, np.ndarray f32/f16).

    A tensor of numpy shape (a, b) is written with ggml dims (b, a), as llama.cpp's converter does.
    """
    header = bytearray(b"GGUF")
    header += struct.pack("<IQQ", 3, len(tensors), len(meta))
    for key, t, v in meta:
        header += _pack_value(STRING, key) + struct.pack("<I", t) + _pack_value(t, v)
    blobs = []
    off = 0
    for name, arr in tensors:
        arr = np.ascontiguousarray(arr)
        t = {np.dtype(np.float32): GGML_F32, np.dtype(np.float16): GGML_F16}[arr.dtype]
        dims = list(reversed(arr.shape))
        header += _pack_value(STRING, name) + struct.pack("<I", len(dims))
        header += b"".join(struct.pack("<Q", d) for d in dims)
        header += struct.pack("<IQ", t, off)
        raw = arr.tobytes()
        pad = (-len(raw)) % ALIGNMENT
        blobs.append(raw + b"\0" * pad)
        off += len(raw) + pad
    header += b"\0" * ((-len(header)) % ALIGNMENT)
    with open(path, "wb") as f:
        f.write(header)
        for b in blobs:
            f.write(b)
