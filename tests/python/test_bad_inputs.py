#!/usr/bin/python3
"""A survey of bad and odd inputs against one glossa-server, as a table.

Each case sends something a careless or hostile client might send: out-of-range and NaN
options, odd text, malformed protobuf, oversized messages and metadata, HTTP/1.1 and garbage on
the gRPC port, idle connections. Each must get an answer in its expected set of gRPC codes, and
after each the server must still be alive and translate normally. The answers (code and message)
are printed as a Markdown table at the end, so the table in the notes comes from a real run:
    GLOSSA_SERVER=build/glossa-server /usr/bin/python3 -m unittest -v tests/python/test_bad_inputs.py

The named, single-purpose checks of the same rules (with their exact messages) live in
test_server.py (RequestErrorsTest) and test_security.py; this file is about breadth.
"""

import math
import os
import socket
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402  (stubs, ServerProcess, ServerTestCase)
from test_server import setUpModule, tearDownModule  # noqa: E402,F401  (run by unittest)

MAX_MESSAGE_BYTES = 100_000
U32_MAX = 2**32 - 1
OK = "OK"
INVALID = "INVALID_ARGUMENT"
FRAME_TYPES = {4: "SETTINGS", 7: "GOAWAY", 8: "WINDOW_UPDATE"}  # HTTP/2 frame type byte


class BadInputsTest(ts.ServerTestCase):
    """Every case answers within its expected codes; the server survives all of them."""

    SERVER_FLAGS = ("--max_message_bytes", str(MAX_MESSAGE_BYTES))
    rows = []  # (case, expected, answer, message) for the table

    @classmethod
    def tearDownClass(cls):
        print("\n| input | expected | answer | message |\n|---|---|---|---|", file=sys.stderr)
        for case, expected, code, message in cls.rows:
            message = message.replace("|", "\\|").replace("\n", " ")
            if len(message) > 110:
                message = message[:107] + "..."
            print(f"| {case} | {expected} | {code} | {message} |", file=sys.stderr)
        super().tearDownClass()

    def outcome(self, call):
        """(code name, message) of call()."""
        try:
            call()
            return OK, ""
        except ts.grpc.RpcError as error:
            return error.code().name, error.details() or ""

    def check(self, case, call, *expected, closes_connection=False):
        """closes_connection: the case may make the server close the client's connection (an
        HTTP/2 connection error); the next call may then see UNAVAILABLE once, and is retried."""
        with self.subTest(case):
            code, message = self.outcome(call)
            self.rows.append((case, " or ".join(expected), code, message))
            self.assertIn(code, expected, f"{case}: {message!r}")
            if code != OK:
                self.assertTrue(message.strip(), f"{case}: {code} without a message")
            self.assertServerAlive()
            if closes_connection:
                code, message = self.outcome(self.assertTranslatesNormally)
                if code != OK:
                    self.assertEqual(code, "UNAVAILABLE", message)
            self.assertTranslatesNormally()

    def options_case(self, case, expected, texts=(ts.SHORT,), **options):
        self.check(case, lambda: self.translate(list(texts), **options), *expected)

    def raw_case(self, case, serialized, *expected, method="Translate"):
        call = self.server.channel.unary_unary(
            f"/glossa.v1.Translator/{method}", request_serializer=lambda b: b,
            response_deserializer=lambda b: b)
        self.check(case, lambda: call(serialized, timeout=ts.RPC_TIMEOUT_S), *expected)

    def test_options(self):
        nan, inf = math.nan, math.inf
        for name, value in (("beam_size", U32_MAX), ("beam_size", 17), ("num_hypotheses", U32_MAX),
                            ("max_output_tokens", U32_MAX), ("max_output_tokens", 100_000),
                            ("sampling_top_k", U32_MAX)):
            self.options_case(f"{name} {value}", (INVALID,), **{name: value})
        self.options_case("max_output_tokens 1", (OK,), max_output_tokens=1)
        self.options_case("num_hypotheses 4, beam_size 4", (OK,), beam_size=4, num_hypotheses=4)
        for name in ("length_penalty", "sampling_temperature", "sampling_top_p"):
            self.options_case(f"{name} NaN", (INVALID,), **{name: nan})
        for value in (inf, -inf, -1e30, 1e30):
            self.options_case(f"length_penalty {value:g}", (INVALID,), length_penalty=value)
        for value, expected in ((inf, INVALID), (-1.0, INVALID), (1e-30, OK), (1e30, INVALID)):
            self.options_case(f"sampling_temperature {value:g}", (expected,),
                              sampling_temperature=value, beam_size=1)
        for value, expected in ((-1.0, INVALID), (2.0, INVALID), (1e-30, OK), (inf, INVALID)):
            self.options_case(f"sampling_top_p {value:g} (temperature 1)", (expected,),
                              sampling_temperature=1.0, sampling_top_p=value, beam_size=1)
        self.options_case("seed 2^64-1 (temperature 1)", (OK,), sampling_temperature=1.0,
                          beam_size=1, seed=2**64 - 1)
        self.options_case("sampling with beam_size 4", (INVALID,), sampling_temperature=1.0,
                          beam_size=4)

    def test_decoding_controls(self):
        nan, inf = math.nan, math.inf
        for value in (nan, inf, -inf, -1.0):
            self.options_case(f"repetition_penalty {value:g}", (INVALID,),
                              repetition_penalty=value)
        for value in (1e-30, 1e30):
            self.options_case(f"repetition_penalty {value:g}", (OK,), repetition_penalty=value)
        for name in ("no_repeat_ngram_size", "min_output_tokens"):
            self.options_case(f"{name} 2^32-1", (INVALID,), **{name: U32_MAX})
        self.options_case("no_repeat_ngram_size 1000 (longer than any output)", (OK,),
                          no_repeat_ngram_size=1000, beam_size=1)
        self.options_case("min_output_tokens 600 (over the 511-token limit)", (INVALID,),
                          min_output_tokens=600)
        self.options_case("min_output_tokens 8 with max_output_tokens 8", (INVALID,),
                          min_output_tokens=8, max_output_tokens=8)
        self.options_case("target_prefix of 600 words", (INVALID,),
                          target_prefix="and " * 600)
        self.options_case("target_prefix of 10 tokens with max_output_tokens 505", (INVALID,),
                          target_prefix="the " * 10, max_output_tokens=505)
        self.options_case("target_prefix of control characters and </s>", (OK,),
                          target_prefix="\x00\x1b </s> <pad>", beam_size=1)
        self.options_case("every control with sampling", (OK,), sampling_temperature=1.0,
                          beam_size=1, repetition_penalty=1.3, no_repeat_ngram_size=2,
                          min_output_tokens=3, target_prefix="And", return_token_scores=True)
        # options (field 3) holding target_prefix (field 13) as the bytes FF FE
        prefix = b"\x6a\x02\xff\xfe"
        self.raw_case("target_prefix: invalid UTF-8",
                      ts.raw_translate_request(ts.MODEL_NAME, [b"hola"]) +
                      b"\x1a" + bytes([len(prefix)]) + prefix, INVALID)

    def test_texts(self):
        for case, text in (("whitespace only", " \t  \u3000 "),
                           ("control characters and NUL", "a\x00b\x01\x1b[31m\x7f"),
                           ("literal </s> and <pad>", "</s> <pad> <unk> hola </s>"),
                           ("emoji, CJK, RTL, combining marks", "😀 汉字 שלום e\u0301\u200d"),
                           ("BOM and U+FFFF", "\ufeffhola \uffff")):
            self.options_case(case, (OK,), texts=[text], beam_size=1)
        # within the byte limit, over the model's 512 tokens
        self.options_case("one 9,999-byte word", (INVALID,), texts=["a" * 9999])
        self.options_case("10,000 bytes of short words", (INVALID,), texts=["sí " * 2500])
        self.options_case("10,001 bytes", (INVALID,), texts=["a" * 10001])
        self.options_case("257 texts (limit 256)", (INVALID,), texts=["a"] * 257)
        self.options_case("256 texts of one letter", (OK,), texts=["a"] * 256, beam_size=1)
        for case, text in (("overlong '/' (C0 AF)", b"\xc0\xaf"),
                           ("UTF-16 surrogate (ED A0 80)", b"\xed\xa0\x80"),
                           ("5-byte sequence (F8 88 80 80 80)", b"\xf8\x88\x80\x80\x80"),
                           ("truncated 3-byte sequence at the end", b"hola \xe2\x82"),
                           ("code point above U+10FFFF (F4 90 80 80)", b"\xf4\x90\x80\x80")):
            self.raw_case(f"text: {case}", ts.raw_translate_request(ts.MODEL_NAME, [text]),
                          INVALID)
        self.raw_case("model name: invalid UTF-8",
                      b"\x0a\x02\xff\xfe" + ts.raw_translate_request("", [b"hola"])[2:],
                      "NOT_FOUND", INVALID)
        self.options_case("model name of 90,000 bytes", ("NOT_FOUND",), model="m" * 90_000)

    def test_wire(self):
        self.raw_case("empty message (no texts)", b"", OK)
        self.raw_case("truncated field (length past the end)", b"\x12\x7fhola", INVALID)
        # protobuf keeps a known field sent with another wire type as an unknown field
        self.raw_case("texts sent as a varint (wrong wire type)", b"\x10\x05", OK)
        self.raw_case("unknown field 99 beside a text",
                      ts.raw_translate_request(ts.MODEL_NAME, [b"hola"]) + b"\x98\x06\x01", OK)
        self.raw_case("options nested 5,000 deep (unknown groups)",
                      b"\x1a" + bytes([0x90, 0x4e]) + b"\x7b" * 5000 + b"\x7c" * 5000, INVALID)
        self.raw_case("200 KB message (limit 100 KB)",
                      ts.raw_translate_request(ts.MODEL_NAME, [b"a" * 8000] * 25),
                      "RESOURCE_EXHAUSTED")
        self.raw_case("ListModels with garbage bytes", b"\xff\xff\xff", INVALID,
                      method="ListModels")
        self.raw_case("unknown method", b"", "UNIMPLEMENTED", method="Nope")
        stream = self.server.channel.unary_stream(
            "/glossa.v1.Translator/TranslateStream", request_serializer=lambda b: b,
            response_deserializer=lambda b: b)
        self.check("TranslateStream with 2 texts",
                   lambda: list(stream(ts.raw_translate_request(ts.MODEL_NAME, [b"a", b"b"]),
                                       timeout=ts.RPC_TIMEOUT_S)), INVALID)

    def test_metadata_and_deadlines(self):
        def with_metadata(*metadata):
            return lambda: self.translator.Translate(ts.pb.TranslateRequest(texts=["hola"]),
                                                     metadata=metadata, timeout=ts.RPC_TIMEOUT_S)
        self.check("20 KB of metadata", with_metadata(("x-big", "a" * 20_000)),
                   OK, "RESOURCE_EXHAUSTED", "INTERNAL", "UNAVAILABLE", closes_connection=True)
        self.check("authorization header without --auth_token_file",
                   with_metadata(("authorization", "Bearer x")), OK)
        self.check("deadline 1 ms, 64 long texts, beam 4", lambda: self.translate(
            [ts.LONG] * 64, timeout=0.001, beam_size=4), "DEADLINE_EXCEEDED")

    def socket_case(self, case, payload):
        """Sends payload on a raw TCP connection; the server must hang up (within 10 s)."""
        host, port = self.server.address.rsplit(":", 1)
        reply = b""
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(payload)
            try:
                while chunk := s.recv(4096):
                    reply += chunk
                closed = True
            except ConnectionResetError:
                closed = True
            except socket.timeout:
                closed = False
        # HTTP/2 frames: 3-byte length, type (4 SETTINGS, 7 GOAWAY), flags, stream id
        types, i = [], 0
        while i + 9 <= len(reply):
            kind = reply[i + 3]
            types.append(FRAME_TYPES.get(kind, f"type {kind}"))
            i += 9 + int.from_bytes(reply[i:i + 3], "big")
        answer = "connection closed" if closed else "connection left open"
        self.rows.append((case, "connection closed", answer,
                          f"{len(reply)} bytes back: HTTP/2 {', '.join(types) or 'nothing'}"))
        self.assertTrue(closed, f"{case}: the server kept the connection open")
        self.assertServerAlive()
        self.assertTranslatesNormally()

    def test_not_grpc(self):
        self.socket_case("HTTP/1.1 GET on the gRPC port", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        self.socket_case("64 KB of random bytes on the gRPC port", os.urandom(65536))
        self.socket_case("HTTP/2 preface then garbage frames",
                         b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\xff" * 1000)
        host, port = self.server.address.rsplit(":", 1)
        idle = [socket.create_connection((host, int(port)), timeout=5) for _ in range(200)]
        try:
            self.assertTranslatesNormally()
            self.rows.append(("200 idle TCP connections held open", "others still served",
                              OK, "a translation on another channel succeeded meanwhile"))
        finally:
            for s in idle:
                s.close()
        self.assertServerAlive()

    def test_a_connection_may_open_at_most_100_streams(self):
        # The server's first HTTP/2 SETTINGS frame announces SETTINGS_MAX_CONCURRENT_STREAMS (3).
        host, port = self.server.address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes(9)[:3] + b"\x04" + bytes(5))
            reply = b""
            while len(reply) < 9 or len(reply) < 9 + int.from_bytes(reply[:3], "big"):
                chunk = s.recv(4096)
                if not chunk:
                    break
                reply += chunk
        self.assertEqual(reply[3], 4, f"the server's first frame is not SETTINGS: {reply[:9]!r}")
        payload = reply[9:9 + int.from_bytes(reply[:3], "big")]
        settings = {int.from_bytes(payload[i:i + 2], "big"):
                    int.from_bytes(payload[i + 2:i + 6], "big")
                    for i in range(0, len(payload) - 5, 6)}
        self.assertEqual(settings.get(3), 100, settings)
        self.rows.append(("a connection's concurrent calls", "at most 100", f"{settings.get(3)}",
                          "SETTINGS_MAX_CONCURRENT_STREAMS (--max_streams_per_connection)"))


if __name__ == "__main__":
    unittest.main()
