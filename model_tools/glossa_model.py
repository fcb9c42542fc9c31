"""Reader and writer for Glossa model files (format version 1).

A Glossa model file holds everything the inference server needs for one
translation model: the architecture config, generation defaults, the
tokenizer (both SentencePiece models and the id -> piece vocabulary) and all
weight tensors. The C++ loader maps it read-only with mmap, so every tensor is
64-byte aligned and stored in its final layout.

File layout (all integers little-endian):

    [0, 8)                  magic b"GLOSSAMF"
    [8, 12)                 uint32 format_version (= 1)
    [12, 16)                uint32 zlib.crc32 of the JSON header bytes
    [16, 24)                uint64 header_size, length of the JSON header in bytes
    [24, 24 + header_size)  UTF-8 JSON header
    zero padding up to the next multiple of 64, then the data region.

Every tensor starts at an absolute file offset that is a multiple of 64, with
zero padding between tensors; the file ends right after the last tensor.

The JSON header is an object with "format_version", "name",
"source_language", "target_language", "dtype", "converter", "config",
"generation", "tokenizer" and "tensors". Each entry of "tensors" is

    {"name": str, "dtype": "float32" | "bfloat16" | "int8" | "bytes",
     "shape": [int, ...], "offset": absolute file offset, "size": bytes,
     "crc32": zlib.crc32 of the bytes}

Tensors are C-contiguous and little-endian. "bytes" entries are opaque blobs
(shape [size]), e.g. the SentencePiece models. An alias is a second entry with
the same offset/size/crc32/dtype/shape as its target: the data is stored once.

Weight dtypes. The header's "dtype" is the model's weight dtype: "float32",
"bfloat16" or "int8". In a bfloat16 or int8 model, the weights of the Linear
layers (LINEAR_WEIGHT below: every q_proj/k_proj/v_proj/out_proj/fc1/fc2
weight of the encoder and decoder layers, cross-attention included, and
lm_head.weight unless the converter was asked to keep the output layer float32)
are stored in that dtype, with their float32 shape [out, in]; every other
tensor (embeddings, positions, layer norms, biases, final_logits_bias) stays
float32. Readers go by each entry's own dtype, so a file's dtype needs no other
header key, and the format version stays 1 (version 1 readers already check
every entry's dtype and refuse one they do not know, naming the tensor).

  bfloat16  the upper 16 bits of the float32 value, rounded to nearest even
            (float32_to_bfloat16); NaN stays NaN (quiet). Stored as uint16 bit
            patterns; numpy has no bfloat16, so read_model returns them as uint16
            and write_model stores uint16 arrays as bfloat16.
  int8      per output channel (row), symmetric, in float32 arithmetic
            (quantize_int8): scale[o] = max_i |W[o, i]| / 127 (1.0 for an
            all-zero row), q[o, i] = clip(rint(W[o, i] / scale[o]), -127, 127),
            rint rounding half to even; W ~= q * scale[o]. The scales are a
            float32 tensor of shape [out] named "<weight name>.scale" (e.g.
            "decoder.layers.0.fc1.weight.scale"), stored right after the weight.

lm_head.weight is tied to (an alias of) decoder.embed_tokens.weight in Marian
models; once quantised it is stored on its own and the embeddings stay float32.
"""

import json
import os
import re
import struct
import zlib

import numpy as np

MAGIC = b"GLOSSAMF"
FORMAT_VERSION = 1
ALIGNMENT = 64

# magic, format_version, header crc32, header_size
_PREAMBLE = struct.Struct("<8sIIQ")

# Storage dtype name -> numpy dtype of one element (bfloat16: its bit pattern).
DTYPES = {
    "float32": np.dtype("<f4"),
    "bfloat16": np.dtype("<u2"),
    "int8": np.dtype("i1"),
    "bytes": np.dtype("u1"),
}

# Model weight dtypes (the header's "dtype").
WEIGHT_DTYPES = ("float32", "bfloat16", "int8")

# The Linear layers' weights: stored in the model's weight dtype, when it is not float32.
LINEAR_WEIGHT = re.compile(
    r"(encoder|decoder)\.layers\.[0-9]+\.((self_attn|encoder_attn)\.(q_proj|k_proj|v_proj|out_proj)|fc1|fc2)\.weight")
OUTPUT_LAYER = "lm_head.weight"
SCALE_SUFFIX = ".scale"


class ModelFormatError(Exception):
    """A model file is malformed, truncated, corrupt or of an unknown version."""


def is_quantized_weight(name, float32_output_layer=False):
    """Whether a bfloat16 or int8 model stores tensor `name` in its weight dtype."""
    if name == OUTPUT_LAYER:
        return not float32_output_layer
    return LINEAR_WEIGHT.fullmatch(name) is not None


def float32_to_bfloat16(array):
    """float32 array -> uint16 bfloat16 bit patterns, rounded to nearest even; NaN stays NaN.

    Values past the largest bfloat16 round to infinity, as IEEE rounding does.
    """
    bits = np.ascontiguousarray(array, dtype="<f4").view("<u4").astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(np.asarray(array, dtype=np.float32))
    rounded = np.where(nan, (bits >> 16) | 0x0040, rounded)  # keep the sign, set the quiet bit
    return rounded.astype("<u2")


def bfloat16_to_float32(bits):
    """uint16 bfloat16 bit patterns -> float32 (exact)."""
    return (np.asarray(bits, dtype="<u2").astype("<u4") << 16).view("<f4")


def quantize_int8(weight):
    """float32 [out, in] -> (int8 [out, in], float32 scales [out]), per output channel, symmetric.

    All in float32, so that a C++ loader quantising a float32 file at load
    (max |w| / 127.0f, then nearbyint(w / scale) under the default rounding
    mode) gets the same bytes.
    """
    weight = np.asarray(weight, dtype=np.float32)
    if weight.ndim != 2:
        raise ValueError(f"int8 quantisation needs a 2-D weight, got shape {list(weight.shape)}")
    if not np.isfinite(weight).all():
        raise ValueError("int8 quantisation needs finite weights")
    max_abs = np.abs(weight).max(axis=1) if weight.shape[1] else np.zeros(weight.shape[0], np.float32)
    scale = (max_abs / np.float32(127)).astype(np.float32)
    scale[max_abs == 0] = np.float32(1)
    q = np.clip(np.rint(weight / scale[:, None]), -127, 127).astype(np.int8)
    return q, scale


def align(offset, alignment=ALIGNMENT):
    """Round offset up to a multiple of alignment."""
    return (offset + alignment - 1) // alignment * alignment


# ---------------------------------------------------------------------------
# Writing


class _Blob:
    """One stored tensor: its header fields and a buffer with its bytes."""

    def __init__(self, name, value):
        self.name = name
        if isinstance(value, (bytes, bytearray, memoryview)):
            self.data = np.frombuffer(bytes(value), dtype=np.uint8)
            self.dtype = "bytes"
            self.shape = [len(self.data)]
        elif isinstance(value, np.ndarray):
            self.dtype = _dtype_name(name, value.dtype)
            self.data = np.ascontiguousarray(value, dtype=DTYPES[self.dtype])
            self.shape = [int(n) for n in value.shape]
        else:
            raise TypeError(f"tensor {name!r}: expected a numpy array or bytes, got {type(value).__name__}")
        self.size = self.data.nbytes
        self.crc32 = zlib.crc32(self.data)

    def entry(self, name, offset):
        return {"name": name, "dtype": self.dtype, "shape": self.shape,
                "offset": offset, "size": self.size, "crc32": self.crc32}


def _dtype_name(name, dtype):
    for dtype_name, np_dtype in DTYPES.items():
        if dtype_name != "bytes" and dtype.newbyteorder("<") == np_dtype:
            return dtype_name
    raise TypeError(f"tensor {name!r}: unsupported dtype {dtype} "
                    "(supported: float32, uint16 bfloat16 bits, int8, bytes)")


def _encode_header(header):
    return json.dumps(header, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def _tensor_entries(blobs, offsets, aliases_of):
    """Header entries: each stored tensor followed by its aliases."""
    entries = []
    for blob, offset in zip(blobs, offsets):
        entries.append(blob.entry(blob.name, offset))
        entries.extend(blob.entry(alias, offset) for alias in aliases_of.get(blob.name, []))
    return entries


def _offsets(blobs, data_start):
    offsets, position = [], data_start
    for blob in blobs:
        position = align(position)
        offsets.append(position)
        position += blob.size
    return offsets


def _layout(header, blobs, aliases_of):
    """Returns (header bytes, tensor offsets) once they agree with each other.

    The header holds absolute offsets, and the data region starts after the
    header, so the two depend on each other. Longer offsets can only make the
    header longer, so iterating from data_start = 0 converges upwards to the
    smallest consistent layout.
    """
    data_start = 0
    while True:
        offsets = _offsets(blobs, data_start)
        full = dict(header, tensors=_tensor_entries(blobs, offsets, aliases_of))
        header_bytes = _encode_header(full)
        needed = align(_PREAMBLE.size + len(header_bytes))
        if needed == data_start:
            return header_bytes, offsets
        data_start = needed


def write_model(path, header, tensors, aliases=None):
    """Writes a Glossa model file.

    header:  dict of header fields; "tensors" is filled in here.
    tensors: dict name -> numpy array (float32, int8, or uint16 holding
             bfloat16 bit patterns) or bytes; stored in this order.
    aliases: dict alias name -> name of a stored tensor; the alias gets its own
             header entry pointing at the same data.

    The file is written to a temporary name next to path and renamed into
    place, so a failed write never leaves a partial model behind.
    """
    aliases = dict(aliases or {})
    if header.get("format_version", FORMAT_VERSION) != FORMAT_VERSION:
        raise ValueError(f"header format_version must be {FORMAT_VERSION}")
    header = dict(header, format_version=FORMAT_VERSION)
    header.pop("tensors", None)

    blobs = [_Blob(name, value) for name, value in tensors.items()]
    aliases_of = {}
    for alias, target in aliases.items():
        if alias in tensors:
            raise ValueError(f"alias {alias!r} is also a stored tensor")
        if target not in tensors:
            raise ValueError(f"alias {alias!r} points at {target!r}, which is not a stored tensor")
        aliases_of.setdefault(target, []).append(alias)

    header_bytes, offsets = _layout(header, blobs, aliases_of)
    tmp_path = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp_path, "wb") as f:
            f.write(_PREAMBLE.pack(MAGIC, FORMAT_VERSION, zlib.crc32(header_bytes), len(header_bytes)))
            f.write(header_bytes)
            for blob, offset in zip(blobs, offsets):
                f.write(b"\0" * (offset - f.tell()))
                f.write(blob.data)
        os.replace(tmp_path, path)
    except BaseException:
        if os.path.exists(tmp_path):
            os.unlink(tmp_path)
        raise


# ---------------------------------------------------------------------------
# Reading


def _parse_preamble(data):
    if len(data) < _PREAMBLE.size:
        raise ModelFormatError(f"file too short for a Glossa model ({len(data)} bytes)")
    magic, version, header_crc, header_size = _PREAMBLE.unpack_from(data)
    if magic != MAGIC:
        raise ModelFormatError(f"bad magic {magic!r}: not a Glossa model file")
    if version > FORMAT_VERSION:
        raise ModelFormatError(f"format version {version} is newer than the supported version {FORMAT_VERSION}")
    if version != FORMAT_VERSION:
        raise ModelFormatError(f"unknown format version {version}")
    if _PREAMBLE.size + header_size > len(data):
        raise ModelFormatError(f"truncated file: header of {header_size} bytes does not fit in {len(data)} bytes")
    return header_crc, header_size


def parse_header(data):
    """Parses and checks the preamble and JSON header of a whole file's bytes.

    Returns (header dict, raw header bytes).
    """
    header_crc, header_size = _parse_preamble(data)
    header_bytes = bytes(data[_PREAMBLE.size:_PREAMBLE.size + header_size])
    if zlib.crc32(header_bytes) != header_crc:
        raise ModelFormatError("header checksum mismatch")
    try:
        header = json.loads(header_bytes.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ModelFormatError(f"header is not valid UTF-8 JSON: {e}") from None
    if not isinstance(header, dict) or not isinstance(header.get("tensors"), list):
        raise ModelFormatError("header has no tensor list")
    if header.get("format_version") != FORMAT_VERSION:
        raise ModelFormatError(f"header format_version {header.get('format_version')!r} != {FORMAT_VERSION}")
    return header, header_bytes


def _check_entry(entry, data_start, file_size):
    name = entry.get("name")
    for key in ("name", "dtype", "shape", "offset", "size", "crc32"):
        if key not in entry:
            raise ModelFormatError(f"tensor {name!r}: header entry has no {key!r}")
    if entry["dtype"] not in DTYPES:
        raise ModelFormatError(f"tensor {name!r}: unknown dtype {entry['dtype']!r}")
    expected = int(np.prod(entry["shape"], dtype=np.int64)) * DTYPES[entry["dtype"]].itemsize
    if entry["size"] != expected:
        raise ModelFormatError(f"tensor {name!r}: size {entry['size']} does not match shape {entry['shape']}")
    offset = entry["offset"]
    if offset % ALIGNMENT:
        raise ModelFormatError(f"tensor {name!r}: offset {offset} is not a multiple of {ALIGNMENT}")
    if offset < data_start:
        raise ModelFormatError(f"tensor {name!r}: offset {offset} lies inside the header")
    if offset + entry["size"] > file_size:
        raise ModelFormatError(f"truncated file: tensor {name!r} ends at {offset + entry['size']}, "
                               f"file has {file_size} bytes")


def read_model(path, verify=True):
    """Reads a Glossa model file.

    Returns (header dict, dict name -> read-only numpy array); "bytes" tensors
    are uint8 arrays and aliases share memory with their target. Structural
    problems always raise ModelFormatError; verify=True also checks every
    tensor's crc32.
    """
    with open(path, "rb") as f:
        data = f.read()
    header, header_bytes = parse_header(data)
    data_start = align(_PREAMBLE.size + len(header_bytes))
    arrays = {}
    for entry in header["tensors"]:
        _check_entry(entry, data_start, len(data))
        name = entry["name"]
        if name in arrays:
            raise ModelFormatError(f"tensor {name!r} appears twice in the header")
        raw = memoryview(data)[entry["offset"]:entry["offset"] + entry["size"]]
        if verify and zlib.crc32(raw) != entry["crc32"]:
            raise ModelFormatError(f"tensor {name!r}: checksum mismatch")
        arrays[name] = np.frombuffer(raw, dtype=DTYPES[entry["dtype"]]).reshape(entry["shape"])
    return header, arrays
