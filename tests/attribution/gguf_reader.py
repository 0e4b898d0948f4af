"""A small, independent GGUF v3 reader for the attribution tests (model-math §1-§2).

Reads the metadata and the tensors of F32, F16, BF16 and Q8_0 files and dequantizes them
to float64 NumPy arrays shaped as PyTorch would ([out, in] for a matrix: GGUF lists ne[0],
the contiguous dimension, first). It shares no code with Ember, so a test built on it
checks Ember's own loading and dequantization too.
"""
import struct

import numpy as np

# ggml type id -> (name, block elements, block bytes)
GGML_TYPES = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 8: ("Q8_0", 32, 34), 30: ("BF16", 1, 2)}

# GGUF metadata value types: id -> struct format (scalars)
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class GGUF:
    def __init__(self, path):
        with open(path, "rb") as f:
            self.data = f.read()
        self.pos = 0
        if self._take(4) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        version = self._scalar(4)
        if version != 3:
            raise ValueError(f"{path}: GGUF version {version}, expected 3")
        n_tensors = self._scalar(11)
        n_kv = self._scalar(11)
        self.meta = {}
        for _ in range(n_kv):
            key = self._string()
            self.meta[key] = self._value(self._scalar(4))
        self.tensors = {}
        for _ in range(n_tensors):
            name = self._string()
            n_dims = self._scalar(4)
            ne = [self._scalar(11) for _ in range(n_dims)]
            ggml_type = self._scalar(5)
            offset = self._scalar(10)
            self.tensors[name] = (ne, ggml_type, offset)
        alignment = self.meta.get("general.alignment", 32)
        self.data_start = (self.pos + alignment - 1) // alignment * alignment

    def _take(self, n):
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def _scalar(self, type_id):
        fmt = _SCALARS[type_id]
        return struct.unpack(fmt, self._take(struct.calcsize(fmt)))[0]

    def _string(self):
        n = self._scalar(10)
        return self._take(n).decode("utf-8", errors="replace")

    def _value(self, type_id):
        if type_id == 8:
            return self._string()
        if type_id == 9:
            elem = self._scalar(4)
            count = self._scalar(10)
            return [self._value(elem) for _ in range(count)]
        return self._scalar(type_id)

    def has(self, name):
        return name in self.tensors

    def tensor(self, name):
        """The tensor dequantized to float64, NumPy shape = reversed ne ([out, in])."""
        ne, ggml_type, offset = self.tensors[name]
        if ggml_type not in GGML_TYPES:
            raise ValueError(f"{name}: ggml type {ggml_type} is not one this reader dequantizes")
        _, block, block_bytes = GGML_TYPES[ggml_type]
        count = int(np.prod(ne))
        start = self.data_start + offset
        raw = self.data[start:start + count // block * block_bytes]
        if ggml_type == 0:
            values = np.frombuffer(raw, dtype="<f4").astype(np.float64)
        elif ggml_type == 1:
            values = np.frombuffer(raw, dtype="<f2").astype(np.float64)
        elif ggml_type == 30:
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            values = bits.view(np.float32).astype(np.float64)
        else:  # Q8_0: an F16 scale d, then 32 int8 q; y = q * d
            blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 34)
            d = blocks[:, :2].copy().view("<f2").astype(np.float32)
            q = blocks[:, 2:].copy().view(np.int8).astype(np.float32)
            values = (q * d).astype(np.float64).reshape(-1)
        return values.reshape(list(reversed(ne)))
