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

    {"name": str, "dtype": "float32" | "int8" | "bytes", "shape": [int, ...],
     "offset": absolute file offset, "size": bytes, "crc32": zlib.crc32 of the bytes}

Tensors are C-contiguous and little-endian. "bytes" entries are opaque blobs
(shape [size]), e.g. the SentencePiece models. An alias is a second entry with
the same offset/size/crc32/dtype/shape as its target: the data is stored once.
Quantised dtypes (bfloat16, int8) are reserved for later versions of the
converter; an int8 tensor's scales will be a separate float32 tensor named
"<name>.scale".
"""

import json
import os
import struct
import zlib

import numpy as np

MAGIC = b"GLOSSAMF"
FORMAT_VERSION = 1
ALIGNMENT = 64

# magic, format_version, header crc32, header_size
_PREAMBLE = struct.Struct("<8sIIQ")

# Storage dtype name -> numpy dtype of one element.
DTYPES = {
    "float32": np.dtype("<f4"),
    "int8": np.dtype("i1"),
    "bytes": np.dtype("u1"),
}


class ModelFormatError(Exception):
    """A model file is malformed, truncated, corrupt or of an unknown version."""


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
    raise TypeError(f"tensor {name!r}: unsupported dtype {dtype} (supported: float32, int8, bytes)")


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
    tensors: dict name -> numpy array (float32 or int8) or bytes; stored in
             this order.
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
