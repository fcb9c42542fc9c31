#!/usr/bin/python3
"""Tests for model_tools/glossa-convert and model_tools/glossa_model.py.

Run from the repository root, either way:
    /usr/bin/python3 -m unittest tests/python/test_convert.py
    /usr/bin/python3 tests/python/test_convert.py

Environment:
    GLOSSA_CONVERT  the glossa-convert to test (default: <repo>/model_tools/glossa-convert)
    GLOSSA_SHARED   the shared data directory holding models/opus-mt-es-en-bible
                    (default: <repo>/../shared); the real-model tests skip without it.

FileFormatTest and WeightDtypeTest need only numpy (WeightDtypeTest checks bfloat16 rounding against
torch when it is there); SyntheticModelTest builds tiny Marian checkpoints with torch;
SharedModelTest converts the real OPUS-MT model.
"""

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

import numpy as np

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "model_tools"))
import glossa_model  # noqa: E402

try:
    import torch
except ImportError:  # the synthetic and shared-model tests need torch
    torch = None

CONVERT = os.environ.get("GLOSSA_CONVERT", os.path.join(REPO, "model_tools", "glossa-convert"))
SHARED = os.environ.get("GLOSSA_SHARED", os.path.join(REPO, "..", "shared"))
MODEL_NAME = "opus-mt-es-en-bible"
MODEL_DIR = os.path.join(SHARED, "models", MODEL_NAME)

EXIT_REFUSED = 2


def run_convert(*args):
    return subprocess.run([CONVERT, *args], capture_output=True, text=True, timeout=300)


def hf_sinusoidal_positions(n_pos, dim):
    """transformers' MarianSinusoidalPositionalEmbedding._init_weight, copied literally."""
    position_enc = np.array(
        [[pos / np.power(10000, 2 * (j // 2) / dim) for j in range(dim)] for pos in range(n_pos)]
    )
    out = torch.empty(n_pos, dim, dtype=torch.float32, requires_grad=False)
    sentinel = dim // 2 if dim % 2 == 0 else (dim // 2) + 1
    out[:, 0:sentinel] = torch.FloatTensor(np.sin(position_enc[:, 0::2]))
    out[:, sentinel:] = torch.FloatTensor(np.cos(position_enc[:, 1::2]))
    return out.numpy()


def bits(array):
    """Bytes of an array, for bitwise comparisons (0.0 vs -0.0, NaN)."""
    return np.ascontiguousarray(array).tobytes()


def entries_by_name(header):
    return {entry["name"]: entry for entry in header["tensors"]}


class ConvertTestCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="glossa-test-")
        self.addCleanup(shutil.rmtree, self.tmp)

    def assertRefused(self, result, *fragments):
        """The converter exited 2 with a one-line reason containing every fragment."""
        self.assertEqual(result.returncode, EXIT_REFUSED, result.stderr + result.stdout)
        self.assertNotIn("Traceback", result.stderr)
        for fragment in fragments:
            self.assertIn(fragment, result.stderr)


# ---------------------------------------------------------------------------
# The file format itself


class FileFormatTest(ConvertTestCase):
    def write_sample(self):
        rng = np.random.default_rng(0)
        tensors = {
            "a": rng.standard_normal((3, 5)).astype(np.float32),   # 60 bytes: next tensor needs padding
            "b": np.array([-0.0, np.inf, 1.5], dtype=np.float32),
            "q": np.arange(-7, 6, dtype=np.int8),
            "h": np.array([[0x3F80, 0xFF80], [0x7FC0, 0x0001]], dtype=np.uint16),  # bfloat16 bits
            "blob": b"\x00spm bytes\xff",
            "empty": np.zeros((0, 4), dtype=np.float32),
        }
        header = {"name": "sample", "config": {"note": "naïve ▁piece"}}
        path = os.path.join(self.tmp, "sample.glossa")
        glossa_model.write_model(path, header, tensors, {"a_alias": "a", "blob_alias": "blob"})
        return path, tensors

    def test_round_trip(self):
        path, tensors = self.write_sample()
        header, arrays = glossa_model.read_model(path)
        self.assertEqual(header["name"], "sample")
        self.assertEqual(header["config"]["note"], "naïve ▁piece")
        self.assertEqual(header["format_version"], 1)
        for name, value in tensors.items():
            if isinstance(value, bytes):
                self.assertEqual(arrays[name].tobytes(), value)
                self.assertEqual(arrays[name].dtype, np.uint8)
            else:
                self.assertEqual(arrays[name].dtype, value.dtype)
                self.assertEqual(arrays[name].shape, value.shape)
                self.assertEqual(bits(arrays[name]), bits(value))
        self.assertEqual(bits(arrays["a_alias"]), bits(tensors["a"]))
        self.assertEqual(arrays["blob_alias"].tobytes(), tensors["blob"])

    def test_layout(self):
        path, tensors = self.write_sample()
        with open(path, "rb") as f:
            data = f.read()
        magic, version, header_crc, header_size = struct.unpack_from("<8sIIQ", data)
        self.assertEqual((magic, version), (b"GLOSSAMF", 1))
        header_bytes = data[24:24 + header_size]
        self.assertEqual(zlib.crc32(header_bytes), header_crc)
        header = json.loads(header_bytes.decode("utf-8"))
        data_start = (24 + header_size + 63) // 64 * 64
        self.assertEqual(data[24 + header_size:data_start], b"\0" * (data_start - 24 - header_size))

        entries = entries_by_name(header)
        self.assertEqual(set(entries), set(tensors) | {"a_alias", "blob_alias"})
        end = data_start
        for entry in sorted(entries.values(), key=lambda e: e["offset"]):
            self.assertEqual(entry["offset"] % 64, 0, entry)
            self.assertGreaterEqual(entry["offset"], data_start)
            raw = data[entry["offset"]:entry["offset"] + entry["size"]]
            self.assertEqual(zlib.crc32(raw), entry["crc32"])
            if entry["offset"] >= end:  # a new stored tensor: the gap before it is zero padding
                self.assertEqual(data[end:entry["offset"]], b"\0" * (entry["offset"] - end))
                self.assertLess(entry["offset"] - end, 64)
            end = max(end, entry["offset"] + entry["size"])
        self.assertEqual(len(data), end, "file must end right after the last tensor")

        self.assertEqual(entries["blob"]["dtype"], "bytes")
        self.assertEqual(entries["blob"]["shape"], [len(tensors["blob"])])
        self.assertEqual(entries["q"]["dtype"], "int8")
        self.assertEqual((entries["h"]["dtype"], entries["h"]["shape"], entries["h"]["size"]), ("bfloat16", [2, 2], 8))
        for alias, target in (("a_alias", "a"), ("blob_alias", "blob")):
            self.assertEqual({k: v for k, v in entries[alias].items() if k != "name"},
                             {k: v for k, v in entries[target].items() if k != "name"})

    def corrupt(self, path, position, value=None):
        with open(path, "r+b") as f:
            f.seek(position)
            byte = f.read(1)
            f.seek(position)
            f.write(bytes([byte[0] ^ 0xFF]) if value is None else value)

    def assertFormatError(self, path, fragment, verify=True):
        with self.assertRaises(glossa_model.ModelFormatError) as caught:
            glossa_model.read_model(path, verify=verify)
        self.assertIn(fragment, str(caught.exception))

    def test_tensor_corruption_is_detected(self):
        path, _ = self.write_sample()
        header, _ = glossa_model.read_model(path)
        self.corrupt(path, entries_by_name(header)["b"]["offset"] + 1)
        self.assertFormatError(path, "'b': checksum mismatch")
        glossa_model.read_model(path, verify=False)  # structure is still fine

    def test_header_problems_are_detected(self):
        path, _ = self.write_sample()
        with open(path, "rb") as f:
            original = f.read()

        def restore(data=original):
            with open(path, "wb") as f:
                f.write(data)

        self.corrupt(path, 30)
        self.assertFormatError(path, "header checksum mismatch", verify=False)

        restore()
        self.corrupt(path, 0, b"X")
        self.assertFormatError(path, "bad magic")

        restore()
        self.corrupt(path, 8, struct.pack("<I", 2))
        self.assertFormatError(path, "newer")

        restore(original[:-3])
        self.assertFormatError(path, "truncated", verify=False)

        restore(original[:100])
        self.assertFormatError(path, "truncated", verify=False)

    def test_inspect_reports_corruption(self):
        path, _ = self.write_sample()
        header, _ = glossa_model.read_model(path)
        self.corrupt(path, entries_by_name(header)["a"]["offset"])
        result = run_convert("--inspect", path)
        self.assertEqual(result.returncode, 1)
        self.assertIn("checksum mismatch", result.stderr)
        self.assertNotIn("Traceback", result.stderr)

    def test_writer_rejects_bad_arguments(self):
        path = os.path.join(self.tmp, "bad.glossa")
        with self.assertRaises(ValueError):
            glossa_model.write_model(path, {}, {"a": np.zeros(2, np.float32)}, {"x": "missing"})
        with self.assertRaises(TypeError):
            glossa_model.write_model(path, {}, {"a": np.zeros(2, np.float64)})
        self.assertEqual(os.listdir(self.tmp), [])


# ---------------------------------------------------------------------------
# bfloat16 and int8 conversion of one tensor


def bf16(*values):
    return glossa_model.float32_to_bfloat16(np.array(values, dtype=np.float32))


def f32_bits(*words):
    return np.array(words, dtype=np.uint32).view(np.float32)


class WeightDtypeTest(unittest.TestCase):
    def test_bfloat16_rounds_to_nearest_even(self):
        # 1 + 2^-8 lies halfway between bfloat16 1.0 (0x3F80) and 1 + 2^-7 (0x3F81): ties go to the even one.
        self.assertEqual(bf16(1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20).tolist(),
                         [0x3F80, 0x3F80, 0x3F82, 0x3F81])
        self.assertEqual(glossa_model.float32_to_bfloat16(f32_bits(0x3F808000, 0x3F818000, 0x3F807FFF,
                                                                   0xBF808001)).tolist(),
                         [0x3F80, 0x3F82, 0x3F80, 0xBF81])
        self.assertEqual(bf16(0.0, -0.0, np.inf, -np.inf, 3.4e38, -3.4e38).tolist(),
                         [0x0000, 0x8000, 0x7F80, 0xFF80, 0x7F80, 0xFF80])  # past bfloat16's max: infinity
        self.assertEqual(glossa_model.float32_to_bfloat16(f32_bits(0x00000001, 0x00008000, 0x00018000)).tolist(),
                         [0x0000, 0x0000, 0x0002])  # subnormals round like the rest

    def test_bfloat16_keeps_nan(self):
        nans = f32_bits(0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FFFFFFF)  # quiet, negative, signalling, all ones
        out = glossa_model.float32_to_bfloat16(nans)
        self.assertTrue(np.isnan(glossa_model.bfloat16_to_float32(out)).all(), [hex(v) for v in out])
        self.assertEqual(out.tolist()[:2], [0x7FC0, 0xFFC0])

    def test_bfloat16_round_trip(self):
        rng = np.random.default_rng(3)
        x = (rng.standard_normal(10000) * 10.0 ** rng.integers(-30, 30, 10000)).astype(np.float32)
        bits16 = glossa_model.float32_to_bfloat16(x)
        self.assertEqual(bits16.dtype, np.dtype("<u2"))
        back = glossa_model.bfloat16_to_float32(bits16)
        # Exact for values already in bfloat16, within half a unit in the last place otherwise.
        self.assertEqual(bits(glossa_model.float32_to_bfloat16(back)), bits(bits16))
        self.assertTrue((np.abs(back - x) <= np.abs(x) * 2.0 ** -8).all())
        if torch is not None:  # torch's float32 -> bfloat16 conversion rounds to nearest even too
            expected = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
            self.assertEqual(bits(bits16), bits(expected))

    def test_int8_scales_and_rounding(self):
        w = np.array([[0.0, 0.0, 0.0, 0.0],          # all zeros: scale 1
                      [1.27, -0.635, 0.005, -1.0],   # max 1.27: scale 0.01
                      [-2.54, 1.0, 0.03, 2.54],      # a negative maximum, +-127 both reached
                      [0.5, 1.5, 2.5, -127.0]], dtype=np.float32)
        q, scale = glossa_model.quantize_int8(w)
        self.assertEqual((q.dtype, q.shape, scale.dtype, scale.shape), (np.int8, (4, 4), np.float32, (4,)))
        expected_scale = np.array([1.0, np.float32(1.27) / np.float32(127), np.float32(2.54) / np.float32(127), 1.0],
                                  dtype=np.float32)
        self.assertEqual(bits(scale), bits(expected_scale))
        self.assertEqual(q[0].tolist(), [0, 0, 0, 0])
        self.assertEqual(q[1].tolist(), np.rint(w[1] / expected_scale[1]).astype(int).tolist())
        self.assertEqual((q[1, 0], q[2, 0], q[2, 3]), (127, -127, 127))
        self.assertEqual(q[3].tolist(), [0, 2, 2, -127])  # scale 1: halves round to even

    def test_int8_is_float32_arithmetic(self):
        rng = np.random.default_rng(4)
        w = (rng.standard_normal((64, 48)) * rng.uniform(0.01, 3, (64, 1))).astype(np.float32)
        w[5] = 0
        q, scale = glossa_model.quantize_int8(w)
        max_abs = np.abs(w).max(axis=1)
        expected_scale = np.where(max_abs == 0, np.float32(1), max_abs / np.float32(127)).astype(np.float32)
        self.assertEqual(bits(scale), bits(expected_scale))
        expected_q = np.clip(np.rint(np.float32(w) / expected_scale[:, None]), -127, 127).astype(np.int8)
        self.assertEqual(bits(q), bits(expected_q))
        self.assertTrue((np.abs(q).max(axis=1)[max_abs > 0] == 127).all())
        error = np.abs(q.astype(np.float64) * scale[:, None] - w)
        self.assertTrue((error <= scale[:, None] * (0.5 + 1e-5)).all())

    def test_int8_refuses_non_finite_weights(self):
        with self.assertRaises(ValueError):
            glossa_model.quantize_int8(np.array([[1.0, np.nan]], dtype=np.float32))
        with self.assertRaises(ValueError):
            glossa_model.quantize_int8(np.ones(4, dtype=np.float32))

    def test_which_tensors_are_quantized(self):
        quantized = ["encoder.layers.0.self_attn.q_proj.weight", "encoder.layers.11.self_attn.out_proj.weight",
                     "decoder.layers.2.encoder_attn.k_proj.weight", "decoder.layers.0.self_attn.v_proj.weight",
                     "encoder.layers.1.fc1.weight", "decoder.layers.5.fc2.weight", "lm_head.weight"]
        kept = ["encoder.embed_tokens.weight", "decoder.embed_positions.weight", "lm_head.bias",
                "encoder.layers.0.self_attn.q_proj.bias", "decoder.layers.0.fc1.bias", "final_logits_bias",
                "decoder.layers.0.encoder_attn_layer_norm.weight", "encoder.layers.0.final_layer_norm.weight",
                "encoder.layer_norm.weight", "encoder.layers.0.fc1.weight.scale", "tokenizer.source_spm",
                "xencoder.layers.0.fc1.weight"]
        for name in quantized:
            self.assertTrue(glossa_model.is_quantized_weight(name), name)
        for name in kept:
            self.assertFalse(glossa_model.is_quantized_weight(name), name)
        self.assertFalse(glossa_model.is_quantized_weight("lm_head.weight", float32_output_layer=True))
        self.assertTrue(glossa_model.is_quantized_weight("decoder.layers.0.fc1.weight", float32_output_layer=True))


# ---------------------------------------------------------------------------
# Tiny synthetic Marian checkpoints


class TinyMarian:
    """A small random Marian model in Hugging Face layout, written with torch or as safetensors."""

    def __init__(self, d=8, heads=2, ffn=16, encoder_layers=2, decoder_layers=1, source_vocab=12,
                 target_vocab=None, pre_norm=False, layernorm_embedding=False, seed=0):
        self.rng = np.random.default_rng(seed)
        self.d, self.ffn = d, ffn
        self.separate = target_vocab is not None
        self.vs, self.vt = source_vocab, target_vocab or source_vocab
        self.config = {
            "model_type": "marian", "architectures": ["MarianMTModel"], "is_encoder_decoder": True,
            "d_model": d, "encoder_layers": encoder_layers, "decoder_layers": decoder_layers,
            "encoder_attention_heads": heads, "decoder_attention_heads": heads,
            "encoder_ffn_dim": ffn, "decoder_ffn_dim": ffn, "activation_function": "swish",
            "max_position_embeddings": 16, "scale_embedding": True, "static_position_embeddings": True,
            "vocab_size": self.vs, "decoder_vocab_size": self.vt,
            "share_encoder_decoder_embeddings": not self.separate,
            "pad_token_id": self.vt - 1, "eos_token_id": 0, "decoder_start_token_id": self.vt - 1,
            "forced_eos_token_id": 0, "bad_words_ids": [[self.vt - 1]], "num_beams": 6, "max_length": 64,
        }
        if pre_norm:
            self.config["normalize_before"] = True
        if layernorm_embedding:
            self.config["normalize_embedding"] = True
        self.generation = {"num_beams": 4, "max_length": 32, "forced_eos_token_id": 0,
                           "bad_words_ids": [[self.vt - 1]], "pad_token_id": self.vt - 1}
        self.tokenizer_config = {"source_lang": "xx", "target_lang": "yy", "separate_vocabs": self.separate,
                                 "unk_token": "<unk>", "eos_token": "</s>", "pad_token": "<pad>"}
        self.state = self._state(encoder_layers, decoder_layers, pre_norm, layernorm_embedding)

    def _random(self, *shape):
        return self.rng.standard_normal(shape).astype(np.float32)

    def _state(self, encoder_layers, decoder_layers, pre_norm, layernorm_embedding):
        d, ffn = self.d, self.ffn
        state = {}
        source_embeddings = self._random(self.vs, d)
        target_embeddings = self._random(self.vt, d) if self.separate else source_embeddings
        if not self.separate:
            state["model.shared.weight"] = source_embeddings
        state["model.encoder.embed_tokens.weight"] = source_embeddings
        for side, layers in (("encoder", encoder_layers), ("decoder", decoder_layers)):
            prefix = f"model.{side}"
            if side == "decoder":
                state[f"{prefix}.embed_tokens.weight"] = target_embeddings
            if layernorm_embedding:
                state[f"{prefix}.layernorm_embedding.weight"] = self._random(d)
                state[f"{prefix}.layernorm_embedding.bias"] = self._random(d)
            for i in range(layers):
                layer = f"{prefix}.layers.{i}"
                for attention in ["self_attn"] + (["encoder_attn"] if side == "decoder" else []):
                    for proj in ("k_proj", "v_proj", "q_proj", "out_proj"):
                        state[f"{layer}.{attention}.{proj}.weight"] = self._random(d, d)
                        state[f"{layer}.{attention}.{proj}.bias"] = self._random(d)
                    state[f"{layer}.{attention}_layer_norm.weight"] = self._random(d)
                    state[f"{layer}.{attention}_layer_norm.bias"] = self._random(d)
                state[f"{layer}.fc1.weight"] = self._random(ffn, d)
                state[f"{layer}.fc1.bias"] = self._random(ffn)
                state[f"{layer}.fc2.weight"] = self._random(d, ffn)
                state[f"{layer}.fc2.bias"] = self._random(d)
                state[f"{layer}.final_layer_norm.weight"] = self._random(d)
                state[f"{layer}.final_layer_norm.bias"] = self._random(d)
            if pre_norm:
                state[f"{prefix}.layer_norm.weight"] = self._random(d)
                state[f"{prefix}.layer_norm.bias"] = self._random(d)
        state["lm_head.weight"] = target_embeddings
        state["final_logits_bias"] = self._random(1, self.vt)
        return state

    @staticmethod
    def vocab(size, prefix):
        pieces = ["</s>", "<unk>"] + [f"▁{prefix}{i}" for i in range(size - 3)] + ["<pad>"]
        return {piece: i for i, piece in enumerate(pieces)}

    def write(self, model_dir, checkpoint="bin", safetensors_dtype="F32", generation=True):
        os.makedirs(model_dir, exist_ok=True)

        def dump(name, value):
            with open(os.path.join(model_dir, name), "w", encoding="utf-8") as f:
                json.dump(value, f, ensure_ascii=False)

        dump("config.json", self.config)
        if generation:
            dump("generation_config.json", self.generation)
        dump("tokenizer_config.json", self.tokenizer_config)
        dump("vocab.json", self.vocab(self.vs, "s"))
        if self.separate:
            dump("target_vocab.json", self.vocab(self.vt, "t"))
        for name in ("source.spm", "target.spm"):
            with open(os.path.join(model_dir, name), "wb") as f:
                f.write(f"fake sentencepiece model {name}".encode())
        if checkpoint == "bin":
            torch.save({k: torch.from_numpy(v) for k, v in self.state.items()},
                       os.path.join(model_dir, "pytorch_model.bin"))
        else:
            # As save_pretrained does: tied copies are left out, only shared.weight remains.
            kept = {k: v for k, v in self.state.items() if self.separate or k not in (
                "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight")}
            write_safetensors(os.path.join(model_dir, "model.safetensors"), kept, safetensors_dtype)
        return model_dir


def write_safetensors(path, tensors, dtype):
    header, chunks, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, array in tensors.items():
        if dtype == "F32":
            raw = array.astype("<f4").tobytes()
        elif dtype == "F16":
            raw = array.astype("<f2").tobytes()
        else:  # BF16 by truncation
            raw = (array.astype("<f4").view("<u4") >> 16).astype("<u2").tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    header_bytes = json.dumps(header).encode()
    header_bytes += b" " * (-len(header_bytes) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)) + header_bytes + b"".join(chunks))


def as_stored(array, dtype):
    """What a safetensors value of the given dtype reads back as, in float32."""
    if dtype == "F16":
        return array.astype(np.float16).astype(np.float32)
    if dtype == "BF16":
        return ((array.astype("<f4").view("<u4") >> 16) << 16).view(np.float32)
    return array


@unittest.skipIf(torch is None, "torch is not importable; use /usr/bin/python3")
class SyntheticModelTest(ConvertTestCase):
    def convert(self, model, *extra, **write_options):
        model_dir = os.path.join(self.tmp, "tiny-model")
        shutil.rmtree(model_dir, ignore_errors=True)  # no checkpoint left from an earlier conversion
        model.write(model_dir, **write_options)
        output = os.path.join(self.tmp, "tiny.glossa")
        result = run_convert("--input", model_dir, "--output", output, *extra)
        return result, output

    def convert_ok(self, model, *extra, **write_options):
        result, output = self.convert(model, *extra, **write_options)
        self.assertEqual(result.returncode, 0, result.stderr)
        return glossa_model.read_model(output)

    def assertStoredEqual(self, arrays, model, dtype="F32"):
        for name, value in model.state.items():
            stored = name[len("model."):] if name.startswith("model.") else name
            if stored == "shared.weight":
                stored = "encoder.embed_tokens.weight"
            if stored == "final_logits_bias":
                value = value.reshape(-1)
            self.assertEqual(bits(arrays[stored]), bits(as_stored(value, dtype)), name)

    def test_shared_vocab_bin(self):
        model = TinyMarian()
        header, arrays = self.convert_ok(model)
        self.assertStoredEqual(arrays, model)
        config = header["config"]
        self.assertEqual((config["source_vocab_size"], config["target_vocab_size"]), (12, 12))
        self.assertTrue(config["shared_vocab"])
        self.assertEqual((config["pad_id"], config["eos_id"], config["unk_id"], config["decoder_start_id"]),
                         (11, 0, 1, 11))
        self.assertEqual(header["generation"], {"num_beams": 4, "max_length": 32, "length_penalty": 1.0,
                                                "early_stopping": False, "forced_eos_token_id": 0})
        self.assertNotIn("target_vocab", header["tokenizer"])
        self.assertEqual((header["source_language"], header["target_language"]), ("xx", "yy"))
        self.assertEqual(header["name"], "tiny-model")
        entries = entries_by_name(header)
        for name in ("decoder.embed_tokens.weight", "lm_head.weight"):
            self.assertEqual(entries[name]["offset"], entries["encoder.embed_tokens.weight"]["offset"])
        self.assertNotIn("shared.weight", entries)

    def test_a_bin_checkpoint_without_pytorch_is_refused_with_what_to_install(self):
        model_dir = os.path.join(self.tmp, "tiny-model")
        TinyMarian().write(model_dir)
        # The converter run in a Python where `import torch` fails, as on a machine without it.
        script = ("import runpy, sys; sys.modules['torch'] = None; sys.argv = sys.argv[1:]; "
                  "runpy.run_path(sys.argv[0], run_name='__main__')")
        result = subprocess.run([sys.executable, "-c", script, CONVERT, "--input", model_dir,
                                 "--output", os.path.join(self.tmp, "tiny.glossa")],
                                capture_output=True, text=True, timeout=120)
        self.assertRefused(result, "needs PyTorch", "python3-torch", "model.safetensors")

    def test_safetensors_with_only_shared_weight(self):
        for dtype in ("F32", "F16", "BF16"):
            with self.subTest(dtype=dtype):
                model = TinyMarian(seed=1)
                header, arrays = self.convert_ok(model, checkpoint="safetensors", safetensors_dtype=dtype)
                self.assertStoredEqual(arrays, model, dtype)
                self.assertTrue(all(e["dtype"] in ("float32", "bytes") for e in header["tensors"]))
                entries = entries_by_name(header)
                self.assertEqual(entries["lm_head.weight"]["offset"],
                                 entries["encoder.embed_tokens.weight"]["offset"])

    def test_separate_vocabularies(self):
        model = TinyMarian(target_vocab=10)
        header, arrays = self.convert_ok(model)
        self.assertStoredEqual(arrays, model)
        config = header["config"]
        self.assertFalse(config["shared_vocab"])
        self.assertEqual((config["source_vocab_size"], config["target_vocab_size"]), (12, 10))
        self.assertEqual(header["tokenizer"]["target_vocab"][:3], ["</s>", "<unk>", "▁t0"])
        self.assertEqual(header["tokenizer"]["source_vocab"][2], "▁s0")
        entries = entries_by_name(header)
        self.assertNotEqual(entries["decoder.embed_tokens.weight"]["offset"],
                            entries["encoder.embed_tokens.weight"]["offset"])
        self.assertEqual(entries["lm_head.weight"]["offset"], entries["decoder.embed_tokens.weight"]["offset"])

    def test_pre_norm_and_layernorm_embedding(self):
        model = TinyMarian(pre_norm=True, layernorm_embedding=True)
        header, arrays = self.convert_ok(model)
        self.assertStoredEqual(arrays, model)
        config = header["config"]
        self.assertTrue(config["normalize_before"] and config["final_layer_norm"] and config["layernorm_embedding"])
        for name in ("encoder.layer_norm.weight", "decoder.layer_norm.bias", "encoder.layernorm_embedding.weight"):
            self.assertIn(name, arrays)

    def test_post_norm_has_no_final_norm_tensors(self):
        header, arrays = self.convert_ok(TinyMarian())
        config = header["config"]
        self.assertFalse(config["normalize_before"] or config["final_layer_norm"] or config["layernorm_embedding"])
        self.assertFalse([name for name in arrays if ".layer_norm." in name and ".layers." not in name])

    def test_pre_norm_without_final_layer_norm_is_refused(self):
        model = TinyMarian(pre_norm=True)
        del model.state["model.encoder.layer_norm.weight"]
        result, output = self.convert(model)
        self.assertRefused(result, "encoder.layer_norm.weight", "normalize_before")
        self.assertFalse(os.path.exists(output))

    def test_unexpected_tensor_is_refused(self):
        model = TinyMarian()
        model.state["model.encoder.layer_norm.weight"] = np.ones(8, np.float32)
        self.assertRefused(self.convert(model)[0], "encoder.layer_norm.weight")

    def test_missing_tensor_is_refused(self):
        model = TinyMarian()
        del model.state["model.decoder.layers.0.encoder_attn.v_proj.bias"]
        self.assertRefused(self.convert(model)[0], "decoder.layers.0.encoder_attn.v_proj.bias")

    def test_shape_mismatch_is_refused(self):
        model = TinyMarian()
        model.state["model.encoder.layers.1.fc1.weight"] = np.zeros((16, 7), np.float32)
        self.assertRefused(self.convert(model)[0], "encoder.layers.1.fc1.weight", "[16, 7]", "[16, 8]")

    def test_untied_lm_head_contradicting_config_is_refused(self):
        model = TinyMarian()
        model.state["lm_head.weight"] = model.state["lm_head.weight"] + 1
        self.assertRefused(self.convert(model)[0], "tie_word_embeddings")

    def test_untied_lm_head_is_kept_when_config_allows(self):
        model = TinyMarian()
        model.config["tie_word_embeddings"] = False
        model.state["lm_head.weight"] = model.state["lm_head.weight"] + 1
        header, arrays = self.convert_ok(model)
        self.assertStoredEqual(arrays, model)
        entries = entries_by_name(header)
        self.assertNotEqual(entries["lm_head.weight"]["offset"], entries["decoder.embed_tokens.weight"]["offset"])

    def test_missing_final_logits_bias_is_zeros(self):
        model = TinyMarian()
        del model.state["final_logits_bias"]
        _, arrays = self.convert_ok(model)
        self.assertEqual(bits(arrays["final_logits_bias"]), bits(np.zeros(12, np.float32)))

    def test_checkpoint_positions_are_used(self):
        model = TinyMarian()
        encoder_positions = model._random(16, 8)
        model.state["model.encoder.embed_positions.weight"] = encoder_positions
        header, arrays = self.convert_ok(model)
        self.assertEqual(bits(arrays["encoder.embed_positions.weight"]), bits(encoder_positions))
        self.assertEqual(bits(arrays["decoder.embed_positions.weight"]), bits(hf_sinusoidal_positions(16, 8)))

    def test_odd_dimension_positions(self):
        model = TinyMarian(d=9, heads=3)
        _, arrays = self.convert_ok(model)
        self.assertEqual(bits(arrays["encoder.embed_positions.weight"]), bits(hf_sinusoidal_positions(16, 9)))

    def test_generation_defaults_from_config_without_generation_config(self):
        model = TinyMarian()
        header, _ = self.convert_ok(model, generation=False)
        self.assertEqual(header["generation"], {"num_beams": 6, "max_length": 64, "length_penalty": 1.0,
                                                "early_stopping": False, "forced_eos_token_id": 0})
        self.assertEqual(header["config"]["bad_words_ids"], [[11]])

    def test_vocabulary_with_missing_id_is_refused(self):
        model = TinyMarian()
        model_dir = model.write(os.path.join(self.tmp, "tiny-model"))
        vocab = TinyMarian.vocab(12, "s")
        vocab["▁s3"] = 40
        with open(os.path.join(model_dir, "vocab.json"), "w") as f:
            json.dump(vocab, f)
        result = run_convert("--input", model_dir, "--output", os.path.join(self.tmp, "x.glossa"))
        self.assertRefused(result, "vocab.json", "40")

    def test_eos_token_mismatch_is_refused(self):
        model = TinyMarian()
        model.config["eos_token_id"] = 1
        self.assertRefused(self.convert(model)[0], "eos_token_id")

    def assertWeightDtype(self, model, dtype, float32_output_layer=False, **write_options):
        """Converts model with --dtype and checks every tensor against the float32 conversion."""
        extra = ["--float32_output_layer"] if float32_output_layer else []
        reference_header, reference = self.convert_ok(model, **write_options)
        header, arrays = self.convert_ok(model, "--dtype", dtype, *extra, **write_options)
        self.assertEqual(header["dtype"], dtype)
        self.assertEqual((header["config"], header["generation"], header["tokenizer"]),
                         (reference_header["config"], reference_header["generation"], reference_header["tokenizer"]))
        entries = entries_by_name(header)
        quantized = {name for name in reference if glossa_model.is_quantized_weight(name, float32_output_layer)}
        expected_names = set(reference) | ({f"{name}.scale" for name in quantized} if dtype == "int8" else set())
        self.assertEqual(set(arrays), expected_names)
        names = [entry["name"] for entry in header["tensors"]]
        self.assertEqual(len(quantized), self.linear_weight_count(model) + (0 if float32_output_layer else 1))
        for name, value in reference.items():
            if name not in quantized:
                self.assertEqual(entries[name]["dtype"], entries_by_name(reference_header)[name]["dtype"], name)
                self.assertEqual(bits(arrays[name]), bits(value), name)
            elif dtype == "bfloat16":
                self.assertEqual(entries[name]["dtype"], "bfloat16", name)
                self.assertEqual(entries[name]["shape"], list(value.shape), name)
                self.assertEqual(bits(arrays[name]), bits(glossa_model.float32_to_bfloat16(value)), name)
            else:
                q, scale = glossa_model.quantize_int8(value)
                self.assertEqual(entries[name]["dtype"], "int8", name)
                self.assertEqual(entries[name]["shape"], list(value.shape), name)
                self.assertEqual(bits(arrays[name]), bits(q), name)
                scale_entry = entries[f"{name}.scale"]
                self.assertEqual((scale_entry["dtype"], scale_entry["shape"]), ("float32", [value.shape[0]]), name)
                self.assertEqual(bits(arrays[f"{name}.scale"]), bits(scale), name)
                self.assertEqual(names.index(f"{name}.scale"), names.index(name) + 1, "scale follows its weight")
        # The tied output layer stays an alias of the embeddings only while it is float32.
        same = entries["lm_head.weight"]["offset"] == entries["decoder.embed_tokens.weight"]["offset"]
        self.assertEqual(same, float32_output_layer)
        self.assertEqual(entries["decoder.embed_tokens.weight"]["dtype"], "float32")
        return header, arrays

    @staticmethod
    def linear_weight_count(model):
        """Linear weights in the layers: 6 per encoder layer, 10 per decoder layer (cross-attention)."""
        return 6 * model.config["encoder_layers"] + 10 * model.config["decoder_layers"]

    def test_bfloat16(self):
        self.assertWeightDtype(TinyMarian(), "bfloat16")

    def test_int8(self):
        header, arrays = self.assertWeightDtype(TinyMarian(), "int8")
        for name in ("decoder.layers.0.encoder_attn.q_proj.weight", "encoder.layers.1.fc2.weight", "lm_head.weight"):
            self.assertEqual(arrays[name].dtype, np.int8, name)
        self.assertEqual(arrays["encoder.layers.1.fc2.weight.scale"].shape, (8,))
        self.assertEqual(arrays["lm_head.weight.scale"].shape, (12,))

    def test_float32_output_layer(self):
        for dtype in ("bfloat16", "int8"):
            with self.subTest(dtype=dtype):
                _, arrays = self.assertWeightDtype(TinyMarian(), dtype, float32_output_layer=True)
                self.assertNotIn("lm_head.weight.scale", arrays)
                self.assertEqual(arrays["lm_head.weight"].dtype, np.float32)

    def test_quantized_safetensors_and_separate_vocabularies(self):
        self.assertWeightDtype(TinyMarian(seed=2), "int8", checkpoint="safetensors", safetensors_dtype="BF16")
        self.assertWeightDtype(TinyMarian(target_vocab=10), "int8")
        self.assertWeightDtype(TinyMarian(target_vocab=10, pre_norm=True), "bfloat16", float32_output_layer=True)

    def test_untied_lm_head_is_quantized(self):
        model = TinyMarian()
        model.config["tie_word_embeddings"] = False
        model.state["lm_head.weight"] = model.state["lm_head.weight"] + 1
        lm_head = model.state["lm_head.weight"]
        _, arrays = self.convert_ok(model, "--dtype", "int8", "--float32_output_layer")
        self.assertEqual(bits(arrays["lm_head.weight"]), bits(lm_head))
        _, arrays = self.convert_ok(model, "--dtype", "int8")
        self.assertEqual(bits(arrays["lm_head.weight"]), bits(glossa_model.quantize_int8(lm_head)[0]))

    def test_non_finite_weight_is_refused_for_int8(self):
        model = TinyMarian()
        model.state["model.decoder.layers.0.fc2.weight"][3, 1] = np.inf
        result, output = self.convert(model, "--dtype", "int8")
        self.assertRefused(result, "decoder.layers.0.fc2.weight", "finite")
        self.assertFalse(os.path.exists(output))
        header, arrays = self.convert_ok(model, "--dtype", "bfloat16")  # bfloat16 has infinities
        self.assertEqual(arrays["decoder.layers.0.fc2.weight"][3, 1], 0x7F80)


# ---------------------------------------------------------------------------
# The real OPUS-MT model


@unittest.skipUnless(os.path.isdir(MODEL_DIR), f"shared model not found at {MODEL_DIR} "
                                               "(set GLOSSA_SHARED to the shared data directory)")
@unittest.skipIf(torch is None, "torch is not importable; use /usr/bin/python3")
class SharedModelTest(ConvertTestCase):
    @classmethod
    def setUpClass(cls):
        cls.class_tmp = tempfile.mkdtemp(prefix="glossa-shared-")
        cls.output = os.path.join(cls.class_tmp, "opus.glossa")
        cls.result = run_convert("--input", MODEL_DIR, "--output", cls.output)
        if cls.result.returncode == 0:
            cls.header, cls.arrays = glossa_model.read_model(cls.output, verify=False)
        cls.checkpoint = torch.load(os.path.join(MODEL_DIR, "pytorch_model.bin"), map_location="cpu")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.class_tmp)

    def setUp(self):
        super().setUp()
        self.assertEqual(self.result.returncode, 0, self.result.stderr)

    def test_every_checkpoint_tensor_round_trips_exactly(self):
        for name, tensor in self.checkpoint.items():
            stored = {"model.shared.weight": "encoder.embed_tokens.weight"}.get(name, name)
            stored = stored[len("model."):] if stored.startswith("model.") else stored
            value = tensor.numpy()
            if name == "final_logits_bias":
                value = value.reshape(-1)
            self.assertEqual(self.arrays[stored].dtype, np.float32, name)
            self.assertEqual(self.arrays[stored].shape, value.shape, name)
            self.assertEqual(bits(self.arrays[stored]), bits(value), name)
        extra = set(self.arrays) - {n[len("model."):] if n.startswith("model.") else n for n in self.checkpoint}
        self.assertEqual(extra, {"encoder.embed_positions.weight", "decoder.embed_positions.weight",
                                 "tokenizer.source_spm", "tokenizer.target_spm"})

    def test_positions_equal_hf_formula(self):
        expected = hf_sinusoidal_positions(512, 256)
        for side in ("encoder", "decoder"):
            self.assertEqual(bits(self.arrays[f"{side}.embed_positions.weight"]), bits(expected))

    def test_aliases_share_offsets(self):
        entries = entries_by_name(self.header)
        embeddings = entries["encoder.embed_tokens.weight"]
        for name in ("decoder.embed_tokens.weight", "lm_head.weight"):
            self.assertEqual({k: v for k, v in entries[name].items() if k != "name"},
                             {k: v for k, v in embeddings.items() if k != "name"})
        self.assertEqual(entries["decoder.embed_positions.weight"]["offset"],
                         entries["encoder.embed_positions.weight"]["offset"])
        stored = {(e["offset"], e["size"]) for e in self.header["tensors"]}
        self.assertEqual(len(stored), len(self.header["tensors"]) - 3)
        self.assertLess(os.path.getsize(self.output), sum(e["size"] for e in self.header["tensors"]))

    def test_checksums_verify(self):
        glossa_model.read_model(self.output, verify=True)
        with open(self.output, "rb") as f:
            data = f.read()
        for entry in self.header["tensors"]:
            self.assertEqual(entry["offset"] % 64, 0)
            self.assertEqual(zlib.crc32(data[entry["offset"]:entry["offset"] + entry["size"]]), entry["crc32"])

    def test_header(self):
        header = self.header
        self.assertEqual(header["format_version"], 1)
        self.assertEqual(header["name"], MODEL_NAME)
        self.assertEqual((header["source_language"], header["target_language"]), ("es", "en"))
        self.assertEqual(header["dtype"], "float32")
        self.assertEqual(header["config"], {
            "architecture": "marian", "d_model": 256, "encoder_layers": 3, "decoder_layers": 3,
            "encoder_attention_heads": 4, "decoder_attention_heads": 4,
            "encoder_ffn_dim": 1024, "decoder_ffn_dim": 1024, "activation": "swish",
            "normalize_before": False, "layernorm_embedding": False, "final_layer_norm": False,
            "scale_embedding": True, "layer_norm_eps": 1e-05, "max_position_embeddings": 512,
            "source_vocab_size": 15315, "target_vocab_size": 15315, "shared_vocab": True,
            "pad_id": 15314, "eos_id": 0, "unk_id": 1, "decoder_start_id": 15314, "bad_words_ids": [[15314]],
        })
        self.assertEqual(header["generation"], {"num_beams": 4, "max_length": 512, "length_penalty": 1.0,
                                                "early_stopping": False, "forced_eos_token_id": 0})

    def test_tokenizer(self):
        tokenizer = self.header["tokenizer"]
        self.assertEqual(tokenizer["type"], "marian")
        with open(os.path.join(MODEL_DIR, "vocab.json"), encoding="utf-8") as f:
            vocab = json.load(f)
        self.assertEqual(tokenizer["source_vocab"], sorted(vocab, key=vocab.get))
        self.assertEqual(tokenizer["source_vocab"][:2], ["</s>", "<unk>"])
        self.assertEqual(tokenizer["source_vocab"][15314], "<pad>")
        self.assertNotIn("target_vocab", tokenizer)
        for key, file_name in (("source_spm", "source.spm"), ("target_spm", "target.spm")):
            with open(os.path.join(MODEL_DIR, file_name), "rb") as f:
                self.assertEqual(self.arrays[tokenizer[key]].tobytes(), f.read())

    def test_inspect(self):
        result = run_convert("--inspect", self.output)
        self.assertEqual(result.returncode, 0, result.stderr)
        for fragment in ("format version:   1", MODEL_NAME, "es -> en", "float32", "swish",
                         "134 entries, 131 stored", "num_beams", "lm_head.weight",
                         "alias of encoder.embed_tokens.weight", "tokenizer.target_spm"):
            self.assertIn(fragment, result.stdout)
        result = run_convert("--inspect", self.output, "--json")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(json.loads(result.stdout), self.header)

    def test_name_option(self):
        output = os.path.join(self.tmp, "named.glossa")
        result = run_convert("--input", MODEL_DIR, "--output", output, "--name", "es-en")
        self.assertEqual(result.returncode, 0, result.stderr)
        header, _ = glossa_model.read_model(output, verify=False)
        self.assertEqual(header["name"], "es-en")

    def copy_with_config(self, **changes):
        """The shared model in a temp dir (big files linked), with config.json edited."""
        model_dir = tempfile.mkdtemp(prefix="model-", dir=self.tmp)
        for name in os.listdir(MODEL_DIR):
            if name != "config.json":
                os.symlink(os.path.join(MODEL_DIR, name), os.path.join(model_dir, name))
        with open(os.path.join(MODEL_DIR, "config.json")) as f:
            config = json.load(f)
        config.update(changes)
        with open(os.path.join(model_dir, "config.json"), "w") as f:
            json.dump(config, f)
        return model_dir

    def test_unsupported_config_is_refused(self):
        for key, value in (("activation_function", "tanh"), ("model_type", "bart"),
                           ("add_bias_logits", True), ("static_position_embeddings", False),
                           ("is_encoder_decoder", False), ("encoder_attention_heads", 3),
                           ("scale_embedding", "yes"), ("pad_token_id", 20000)):
            with self.subTest(key=key):
                output = os.path.join(self.tmp, "refused.glossa")
                result = run_convert("--input", self.copy_with_config(**{key: value}), "--output", output)
                self.assertRefused(result, key, json.dumps(value).strip('"'))
                self.assertFalse(os.path.exists(output))

    def test_config_shape_disagreeing_with_checkpoint_is_refused(self):
        result = run_convert("--input", self.copy_with_config(encoder_ffn_dim=2048),
                             "--output", os.path.join(self.tmp, "x.glossa"))
        self.assertRefused(result, "encoder.layers.0.fc1.weight", "[2048, 256]")

    def test_unknown_dtype_is_refused(self):
        output = os.path.join(self.tmp, "q.glossa")
        self.assertRefused(run_convert("--input", MODEL_DIR, "--output", output, "--dtype", "fp8"), "fp8")
        self.assertFalse(os.path.exists(output))


@unittest.skipUnless(os.path.isdir(MODEL_DIR), f"shared model not found at {MODEL_DIR} "
                                               "(set GLOSSA_SHARED to the shared data directory)")
class SharedModelDtypeTest(ConvertTestCase):
    """The real model converted to bfloat16 and int8, against its float32 conversion."""

    @classmethod
    def setUpClass(cls):
        cls.class_tmp = tempfile.mkdtemp(prefix="glossa-shared-dtype-")
        cls.files, cls.results = {}, {}
        for variant, options in (("float32", []), ("bfloat16", ["--dtype", "bfloat16"]),
                                 ("int8", ["--dtype", "int8"]),
                                 ("int8_f32out", ["--dtype", "int8", "--float32_output_layer"])):
            cls.files[variant] = os.path.join(cls.class_tmp, f"{variant}.glossa")
            cls.results[variant] = run_convert("--input", MODEL_DIR, "--output", cls.files[variant], *options)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.class_tmp)

    def setUp(self):
        super().setUp()
        for variant, result in self.results.items():
            self.assertEqual(result.returncode, 0, f"{variant}: {result.stderr}")

    def read(self, variant):
        return glossa_model.read_model(self.files[variant], verify=True)

    def test_quantized_tensors(self):
        _, reference = self.read("float32")
        linear = [n for n in reference if glossa_model.LINEAR_WEIGHT.fullmatch(n)]
        self.assertEqual(len(linear), 3 * 6 + 3 * 10)
        for variant, output_layer_quantized in (("bfloat16", True), ("int8", True), ("int8_f32out", False)):
            with self.subTest(variant=variant):
                header, arrays = self.read(variant)
                dtype = variant.split("_")[0]
                self.assertEqual(header["dtype"], dtype)
                entries = entries_by_name(header)
                quantized = sorted(n for n, e in entries.items() if e["dtype"] == dtype)
                self.assertEqual(quantized, sorted(linear + (["lm_head.weight"] if output_layer_quantized else [])))
                for name in quantized:
                    w = reference[name]
                    if dtype == "bfloat16":
                        back = glossa_model.bfloat16_to_float32(arrays[name])
                        self.assertTrue((np.abs(back - w) <= np.abs(w) * 2.0 ** -8).all(), name)
                    else:
                        scale = arrays[f"{name}.scale"]
                        error = np.abs(arrays[name].astype(np.float32) * scale[:, None] - w)
                        self.assertTrue((error <= scale[:, None] * 0.5001).all(), name)
                for name, value in reference.items():
                    if name not in quantized:
                        self.assertEqual(bits(arrays[name]), bits(value), name)
                same = entries["lm_head.weight"]["offset"] == entries["decoder.embed_tokens.weight"]["offset"]
                self.assertEqual(same, not output_layer_quantized)

    def test_sizes(self):
        sizes = {variant: os.path.getsize(path) for variant, path in self.files.items()}
        # lm_head stored on its own costs its bytes; kept float32 it is free (an alias).
        self.assertLess(sizes["int8_f32out"], sizes["int8"])
        self.assertLess(sizes["int8"], sizes["bfloat16"])
        self.assertLess(sizes["bfloat16"], sizes["float32"])

    def test_inspect(self):
        result = run_convert("--inspect", self.files["int8"])
        self.assertEqual(result.returncode, 0, result.stderr)
        for fragment in ("dtype:            int8", "183 entries, 181 stored", "storage:          float32 ",
                         "int8 9,425,664 bytes in 49 tensors", "output layer:     lm_head.weight int8",
                         "lm_head.weight.scale", "decoder.layers.2.encoder_attn.v_proj.weight.scale"):
            self.assertIn(fragment, result.stdout)
        self.assertRegex(result.stdout, r"encoder\.layers\.0\.fc1\.weight +int8 +\[1024, 256\] +\d+ +262144 ")
        self.assertRegex(result.stdout, r"encoder\.layers\.0\.fc1\.weight\.scale +float32 +\[1024\] +\d+ +4096 ")
        result = run_convert("--inspect", self.files["bfloat16"])
        self.assertEqual(result.returncode, 0, result.stderr)
        for fragment in ("dtype:            bfloat16", "bfloat16 18,851,328 bytes in 49 tensors",
                         "output layer:     lm_head.weight bfloat16"):
            self.assertIn(fragment, result.stdout)
        self.assertRegex(result.stdout, r"lm_head\.weight +bfloat16 +\[15315, 256\] +\d+ +7841280 ")
        result = run_convert("--inspect", self.files["int8_f32out"])
        self.assertIn("output layer:     lm_head.weight float32", result.stdout)
        self.assertIn("alias of encoder.embed_tokens.weight", result.stdout)


class CommandLineTest(ConvertTestCase):
    def test_help(self):
        result = run_convert("--help")
        self.assertEqual(result.returncode, 0)
        for fragment in ("--input", "--output", "--dtype", "--inspect", "--json", "--name", "exit status",
                         "--float32_output_layer", "bfloat16", "int8", "<weight name>.scale", "--compute_type"):
            self.assertIn(fragment, result.stdout)

    def test_missing_input_directory(self):
        missing = os.path.join(self.tmp, "no-such-model")
        result = run_convert("--input", missing, "--output", os.path.join(self.tmp, "x.glossa"))
        self.assertRefused(result, missing, "does not exist")

    def test_missing_config(self):
        result = run_convert("--input", self.tmp, "--output", os.path.join(self.tmp, "x.glossa"))
        self.assertRefused(result, "config.json", "not found")

    def test_missing_inspect_file(self):
        self.assertRefused(run_convert("--inspect", os.path.join(self.tmp, "nothing.glossa")), "not found")

    def test_usage_errors(self):
        self.assertRefused(run_convert("--input", self.tmp), "--output")
        self.assertRefused(run_convert("--inspect", "x", "--input", self.tmp), "--inspect")

    def test_float32_output_layer_needs_a_quantized_dtype(self):
        result = run_convert("--input", self.tmp, "--output", os.path.join(self.tmp, "x"), "--float32_output_layer")
        self.assertRefused(result, "--float32_output_layer", "bfloat16 or int8")


if __name__ == "__main__":
    unittest.main()
