#!/usr/bin/python3
"""Stored glossaries end to end: glossa-server --glossary_dir through gRPC (GlossaryService) and
HTTP (/v1/glossaries): create, list, get, the entries as TSV, delete, errors that name the line
or the id, the bearer token, glossaries that survive a restart, and a kill -9 in the middle of
many creations that leaves only whole files, every one of which loads again.

Run by ctest (python_glossaries), or by hand from the repository root:
    GLOSSA_SERVER=build/glossa-server /usr/bin/python3 -m unittest -v tests/python/test_glossaries.py
"""

import http.client
import json
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402  (stubs, server process, constants)
import test_http as th  # noqa: E402  (a server with HTTP on a free port)

grpc = ts.grpc
HTTP_TIMEOUT_S = 60
TOKEN = "glossary-token-1234"
ID = re.compile(r"^[0-9a-f]{32}$")

TSV = "luz\tlight\nDios\tGod\nluz\tbrightness\n"
ENTRIES = [("luz", ["light", "brightness"]), ("Dios", ["God"])]


def setUpModule():
    ts.setUpModule()


def tearDownModule():
    ts.tearDownModule()


def field(number, payload):
    """A length-delimited protobuf field: tag, varint length, bytes."""
    out = bytearray([number << 3 | 2])
    n = len(payload)
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out) + payload


def entries_of(message):
    return [(e.source, list(e.targets)) for e in message.entries]


class GlossaryServer(th.HttpServer):
    """glossa-server with HTTP, its glossaries in `directory`."""

    def __init__(self, directory, *flags):
        self.directory = directory
        dir_flags = ("--glossary_dir", directory) if directory else ()
        super().__init__(*dir_flags, "--workers", "1", *flags)
        self.glossaries = ts.pb_grpc.GlossaryServiceStub(self.channel)


class GlossaryTestCase(unittest.TestCase):
    """One server per class; `self.dir` holds its glossaries."""

    FLAGS = ()
    METADATA = None  # sent with every gRPC call
    HEADERS = {}     # sent with every HTTP request

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="glossa-glossaries-")
        cls.addClassCleanup(shutil.rmtree, cls.dir, ignore_errors=True)
        cls.server = GlossaryServer(os.path.join(cls.dir, "store"), *cls.FLAGS)
        cls.addClassCleanup(lambda: cls.server.stop())

    def restart(self, *flags):
        self.assertEqual(self.server.stop(), 0, self.server.output())
        type(self).server = GlossaryServer(self.server.directory, *self.FLAGS, *flags)
        return self.server

    def request(self, method, path, body=None, headers=None):
        """(status, content type, body bytes)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.server.http_port,
                                          timeout=HTTP_TIMEOUT_S)
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body)
            if isinstance(body, str):
                body = body.encode()
            sent = {**self.HEADERS, **({"Content-Type": "application/json"} if body else {}),
                    **(headers or {})}
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            return response.status, response.getheader("Content-Type"), response.read()
        finally:
            conn.close()

    def http_json(self, method, path, body=None, headers=None):
        status, content_type, data = self.request(method, path, body, headers)
        self.assertEqual(content_type, "application/json", data)
        return status, json.loads(data)

    def assertHttpError(self, answer, status, want_status, *mentions):
        self.assertEqual(status, want_status, answer)
        self.assertEqual(set(answer), {"error"}, answer)
        for word in mentions:
            self.assertIn(word, answer["error"])

    def create(self, name="bible", tsv=TSV, **fields):
        request = ts.pb.CreateGlossaryRequest(
            **{"name": name, "source_language": "es", "target_language": "en", **fields})
        if tsv is not None:
            request.entries_text = tsv
            request.entries_format = "tsv"
        return self.server.glossaries.CreateGlossary(request, timeout=ts.RPC_TIMEOUT_S,
                                                     metadata=self.METADATA)

    def call(self, method, request):
        return getattr(self.server.glossaries, method)(request, timeout=ts.RPC_TIMEOUT_S,
                                                       metadata=self.METADATA)

    def listed(self):
        return [g.glossary_id for g in
                self.call("ListGlossaries", ts.pb.ListGlossariesRequest()).glossaries]

    def assertRpcError(self, call, code, *mentions):
        with self.assertRaises(grpc.RpcError) as caught:
            call()
        self.assertEqual(caught.exception.code(), code, caught.exception.details())
        for word in mentions:
            self.assertIn(word, caught.exception.details())
        self.assertIsNone(self.server.proc.poll(), self.server.output())
        return caught.exception.details()

    def files(self):
        return sorted(os.listdir(self.server.directory))


class GlossaryServiceTest(GlossaryTestCase):
    def test_grpc_create_list_get_delete(self):
        info = self.create("bible")
        self.assertRegex(info.glossary_id, ID)
        self.assertEqual((info.name, info.source_language, info.target_language, info.entry_count),
                         ("bible", "es", "en", 2))
        self.assertRegex(info.creation_time, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
        self.assertIn(info.glossary_id, self.listed())
        self.assertIn(f"{info.glossary_id}.json", self.files())
        got = self.call("GetGlossary", ts.pb.GetGlossaryRequest(glossary_id=info.glossary_id))
        self.assertEqual(got.glossary, info)
        self.assertEqual(entries_of(got), ENTRIES)

        by_message = self.create("messages", tsv=None, entries=[
            ts.pb.GlossaryEntry(source="agua", targets=["water"])])
        self.assertEqual(by_message.entry_count, 1)
        listed = self.listed()
        self.assertLess(listed.index(info.glossary_id), listed.index(by_message.glossary_id))

        self.call("DeleteGlossary", ts.pb.DeleteGlossaryRequest(glossary_id=info.glossary_id))
        self.assertNotIn(info.glossary_id, self.listed())
        self.assertNotIn(f"{info.glossary_id}.json", self.files())
        for method, request in [("GetGlossary", ts.pb.GetGlossaryRequest),
                                ("DeleteGlossary", ts.pb.DeleteGlossaryRequest)]:
            self.assertRpcError(lambda: self.call(method, request(glossary_id=info.glossary_id)),
                                grpc.StatusCode.NOT_FOUND, info.glossary_id)

    def test_http_create_list_get_entries_delete(self):
        status, info = self.http_json("POST", "/v1/glossaries", {
            "name": "http", "sourceLanguage": "es", "targetLanguage": "en",
            "entriesText": "luz,light\nDios,God\nluz,brightness\n", "entriesFormat": "csv"})
        self.assertEqual(status, 201, info)
        gid = info["glossaryId"]
        self.assertRegex(gid, ID)
        self.assertEqual((info["name"], info["entryCount"]), ("http", 2))
        status, listed = self.http_json("GET", "/v1/glossaries")
        self.assertEqual(status, 200)
        self.assertIn(info, listed["glossaries"])
        status, got = self.http_json("GET", f"/v1/glossaries/{gid}")
        self.assertEqual(status, 200)
        self.assertEqual(got["glossary"], info)
        self.assertEqual([(e["source"], e["targets"]) for e in got["entries"]], ENTRIES)
        status, content_type, tsv = self.request("GET", f"/v1/glossaries/{gid}/entries")
        self.assertEqual(status, 200)
        self.assertEqual(content_type, "text/tab-separated-values; charset=utf-8")
        self.assertEqual(tsv.decode(), "luz\tlight\nluz\tbrightness\nDios\tGod\n")
        # The same store over gRPC.
        grpc_got = self.call("GetGlossary", ts.pb.GetGlossaryRequest(glossary_id=gid))
        self.assertEqual(entries_of(grpc_got), ENTRIES)

        status, _, body = self.request("DELETE", f"/v1/glossaries/{gid}")
        self.assertEqual((status, body), (204, b""))
        self.assertNotIn(gid, self.listed())
        for method, path in [("GET", f"/v1/glossaries/{gid}"),
                             ("GET", f"/v1/glossaries/{gid}/entries"),
                             ("DELETE", f"/v1/glossaries/{gid}")]:
            status, answer = self.http_json(method, path)
            self.assertHttpError(answer, status, 404, gid)

    def test_an_empty_list_is_a_list(self):
        server = GlossaryServer(None)  # in memory: nothing stored yet
        try:
            conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=HTTP_TIMEOUT_S)
            conn.request("GET", "/v1/glossaries")
            self.assertEqual(json.loads(conn.getresponse().read()), {"glossaries": []})
            conn.close()
        finally:
            self.assertEqual(server.stop(), 0, server.output())

    def test_bad_entries_are_named_by_line_or_index(self):
        bad_tsv = "luz\tlight\nDios\tGod\nagua\n"
        self.assertRpcError(lambda: self.create("bad", bad_tsv), grpc.StatusCode.INVALID_ARGUMENT,
                            "entries_text (tsv): line 3: 1 column")
        status, answer = self.http_json("POST", "/v1/glossaries", {
            "name": "bad", "sourceLanguage": "es", "targetLanguage": "en",
            "entriesText": bad_tsv})
        self.assertHttpError(answer, status, 400, "entries_text (tsv): line 3: 1 column")
        cases = [
            ("luz\tlight\nluz\tlight\n", "tsv", "line 2: the pair 'luz' -> 'light' is given twice"),
            ("a\tb\n\t\tc\n", "tsv", "line 2: 3 columns"),
            ("a\tb\nc\t" + "x" * 257 + "\n", "tsv", "line 2: the target term is 257 bytes"),
            ("a\tb\nc\td\u0007\n", "tsv", "line 2: the target term holds a control character"),
            ("a,b\n\"c,d\n", "csv", "line 2: a quoted field is not closed"),
            ('{"a": "b",\n "c": ""}', "json", "line 2: the target term is empty"),
            ('{"a": "b",\n "a": "c"}', "json", "line 2: the source term 'a' comes again"),
            ("a\tb\n", "xml", "entries_format: unknown glossary format 'xml'"),
        ]
        for text, entries_format, message in cases:
            with self.subTest(text=text):
                self.assertRpcError(
                    lambda: self.create("bad", None, entries_text=text,
                                        entries_format=entries_format),
                    grpc.StatusCode.INVALID_ARGUMENT, message)
        self.assertRpcError(
            lambda: self.create("bad", None, entries=[
                ts.pb.GlossaryEntry(source="a", targets=["b"]),
                ts.pb.GlossaryEntry(source="c", targets=["d", ""])]),
            grpc.StatusCode.INVALID_ARGUMENT, "entries[1].targets[1]: the target term is empty")
        self.assertRpcError(lambda: self.create(""), grpc.StatusCode.INVALID_ARGUMENT,
                            "name is required")
        self.assertRpcError(lambda: self.create("x", source_language=""),
                            grpc.StatusCode.INVALID_ARGUMENT, "source_language is required")
        status, answer = self.http_json("POST", "/v1/glossaries", '{"name": "x", "nme": 1}')
        self.assertHttpError(answer, status, 400, "CreateGlossaryRequest")

    def test_invalid_utf8_over_grpc_names_the_line(self):
        raw = (field(1, b"raw") + field(2, b"es") + field(3, b"en") +
               field(5, b"a\tb\nc\td\n\xff\te\n") + field(6, b"tsv"))
        create = self.server.channel.unary_unary(
            "/glossa.v1.GlossaryService/CreateGlossary",
            request_serializer=lambda b: b, response_deserializer=lambda b: b)
        self.assertRpcError(lambda: create(raw, timeout=ts.RPC_TIMEOUT_S, metadata=self.METADATA),
                            grpc.StatusCode.INVALID_ARGUMENT,
                            "entries_text (tsv): line 3: the source term is not valid UTF-8")
        self.assertRpcError(lambda: create(field(1, b"\xff"), timeout=ts.RPC_TIMEOUT_S,
                                           metadata=self.METADATA),
                            grpc.StatusCode.INVALID_ARGUMENT, "CreateGlossaryRequest")

    def test_unknown_ids_and_paths(self):
        for gid in ["0" * 32, "../../etc/passwd", "x" * 1000]:
            with self.subTest(gid=gid[:40]):
                self.assertRpcError(
                    lambda: self.call("GetGlossary", ts.pb.GetGlossaryRequest(glossary_id=gid)),
                    grpc.StatusCode.NOT_FOUND, gid[:32])
                self.assertRpcError(
                    lambda: self.call("DeleteGlossary",
                                      ts.pb.DeleteGlossaryRequest(glossary_id=gid)),
                    grpc.StatusCode.NOT_FOUND, gid[:32])
        status, answer = self.http_json("GET", "/v1/glossaries/" + "0" * 32)
        self.assertHttpError(answer, status, 404, "0" * 32)
        for method, path, want in [("GET", "/v1/glossaries/", 404),
                                   ("GET", "/v1/glossaries/abc/def", 404),
                                   ("PUT", "/v1/glossaries", 405),
                                   ("POST", "/v1/glossaries/" + "0" * 32, 405),
                                   ("DELETE", "/v1/glossaries/" + "0" * 32 + "/entries", 405)]:
            with self.subTest(method=method, path=path):
                status, answer = self.http_json(method, path, "")
                self.assertHttpError(answer, status, want)

    def test_glossaries_survive_a_restart(self):
        before = [self.create(f"kept {i}") for i in range(3)]
        status, over_http = self.http_json("POST", "/v1/glossaries", {
            "name": "kept http", "sourceLanguage": "es", "targetLanguage": "en",
            "entries": [{"source": "agua", "targets": ["water", "waters"]}]})
        self.assertEqual(status, 201, over_http)
        self.call("DeleteGlossary", ts.pb.DeleteGlossaryRequest(glossary_id=before[1].glossary_id))
        listed = self.call("ListGlossaries", ts.pb.ListGlossariesRequest()).glossaries

        self.restart()
        self.assertIn(f"glossa-server: {len(listed)} stored glossaries in {self.server.directory} "
                      "(0.0 of --glossary_store_mb=64 MiB)", self.server.stdout_lines)
        self.assertEqual(list(self.call("ListGlossaries", ts.pb.ListGlossariesRequest()).glossaries),
                         list(listed))
        got = self.call("GetGlossary", ts.pb.GetGlossaryRequest(glossary_id=before[0].glossary_id))
        self.assertEqual(entries_of(got), ENTRIES)
        _, _, tsv = self.request("GET", f"/v1/glossaries/{over_http['glossaryId']}/entries")
        self.assertEqual(tsv, b"agua\twater\nagua\twaters\n")
        self.assertRpcError(
            lambda: self.call("GetGlossary",
                              ts.pb.GetGlossaryRequest(glossary_id=before[1].glossary_id)),
            grpc.StatusCode.NOT_FOUND, before[1].glossary_id)

    def test_kill_9_while_creating_leaves_only_whole_files(self):
        # Near the limit of a glossary (1 MiB in memory, each term counting 256 bytes besides
        # its own): each write takes a while.
        big = "".join(f"término {i}\t{i} {'t' * 240}\n" for i in range(1300))
        created, errors, stop = [], [], threading.Event()

        def loop(worker):
            stub = ts.pb_grpc.GlossaryServiceStub(self.server.channel)
            i = 0
            while not stop.is_set():
                request = ts.pb.CreateGlossaryRequest(
                    name=f"loop {worker} {i}", source_language="es", target_language="en",
                    entries_text=big, entries_format="tsv")
                try:
                    created.append(stub.CreateGlossary(request, timeout=ts.RPC_TIMEOUT_S,
                                                       metadata=self.METADATA).glossary_id)
                except grpc.RpcError as e:
                    if e.code() != grpc.StatusCode.UNAVAILABLE:  # the kill
                        errors.append(e)
                    return
                i += 1

        whole = {}  # file name -> the glossary it holds

        def check_files():
            """Every .json file is a whole glossary (only .tmp files may be cut)."""
            for name in os.listdir(self.server.directory):
                if name.endswith(".json.tmp") or name in whole:
                    continue
                self.assertTrue(name.endswith(".json"), name)
                with open(os.path.join(self.server.directory, name), encoding="utf-8") as f:
                    stored = json.load(f)  # fails on a file cut in the middle of its write
                self.assertEqual(stored["glossary_id"] + ".json", name)
                if stored["name"].startswith("loop "):
                    self.assertEqual(len(stored["entries"]), 1300)
                whole[name] = stored["glossary_id"]

        workers = [threading.Thread(target=loop, args=(w,), daemon=True) for w in range(6)]
        for worker in workers:
            worker.start()
        # The directory seen at many random moments, the server stopped (SIGSTOP) meanwhile, so
        # that some of them fall in the middle of a write; then SIGKILL, in the middle of writes.
        deadline = time.monotonic() + 120
        while len(created) < 40 and time.monotonic() < deadline:
            time.sleep(random.uniform(0, 0.01))
            os.kill(self.server.proc.pid, signal.SIGSTOP)
            try:
                check_files()
            finally:
                os.kill(self.server.proc.pid, signal.SIGCONT)
        self.server.proc.kill()
        self.server.proc.wait()
        stop.set()
        for worker in workers:
            worker.join(timeout=60)
        self.server.stop()
        self.assertEqual(errors, [])
        self.assertGreaterEqual(len(created), 40)
        check_files()
        on_disk = set(whole.values())
        # A Create that answered is on disk (fsync'd before the answer).
        self.assertLessEqual(set(created), on_disk)
        # A write cut short for sure: removed on start.
        leftover = os.path.join(self.server.directory, "f" * 32 + ".json.tmp")
        with open(leftover, "w", encoding="utf-8") as f:
            f.write('{"format": 1, "glossary_id": "')

        type(self).server = GlossaryServer(self.server.directory, *self.FLAGS)
        self.assertFalse(any(name.endswith(".tmp") for name in self.files()), self.files())
        self.assertLessEqual(on_disk, set(self.listed()))
        self.assertNotIn("skipped", self.server.output())


class StoreBoundTest(GlossaryTestCase):
    """--glossary_store_mb: what the stored glossaries hold together is bounded. A full store
    refuses a new one (gRPC RESOURCE_EXHAUSTED, HTTP 507) until others are deleted; a directory
    past the bound at start is loaded whole."""

    FLAGS = ("--glossary_store_mb", "1")
    # 1,000 entries of an 8-byte source and a 245-byte target, each term counting 256 bytes
    # besides its own: 765,000 bytes, so that one fits in 1 MiB and two do not.
    BIG = "".join(f"term{i:04d}\t{i:03d} {'t' * 241}\n" for i in range(1000))
    BIG_BYTES = 765000

    def setUp(self):
        for gid in self.listed():
            self.call("DeleteGlossary", ts.pb.DeleteGlossaryRequest(glossary_id=gid))

    def create_over_http(self, name, tsv):
        return self.http_json("POST", "/v1/glossaries", {
            "name": name, "sourceLanguage": "es", "targetLanguage": "en", "entriesText": tsv})

    def test_a_full_store_refuses_until_one_is_deleted(self):
        first = self.create("first", self.BIG)
        status, answer = self.create_over_http("second", self.BIG)
        self.assertHttpError(answer, status, 507, "--glossary_store_mb",
                             f"hold {self.BIG_BYTES} bytes in memory and this one needs "
                             f"{self.BIG_BYTES} more")
        self.assertRpcError(lambda: self.create("second", self.BIG),
                            grpc.StatusCode.RESOURCE_EXHAUSTED, "--glossary_store_mb")
        self.assertEqual(self.listed(), [first.glossary_id])
        small = self.create("small")  # what still fits is taken
        status, info = self.create_over_http("small too", TSV)
        self.assertEqual(status, 201, info)
        self.call("DeleteGlossary", ts.pb.DeleteGlossaryRequest(glossary_id=first.glossary_id))
        second = self.create("second", self.BIG)
        self.assertEqual(self.listed(), [small.glossary_id, info["glossaryId"], second.glossary_id])

    def test_a_directory_past_the_bound_is_loaded_whole(self):
        self.restart("--glossary_store_mb", "2")
        kept = [self.create(f"big {i}", self.BIG).glossary_id for i in range(2)]
        self.restart()  # 1 MiB again
        self.assertEqual(self.listed(), kept)
        self.assertIn(f"glossa-server: 2 stored glossaries in {self.server.directory} "
                      f"(1.5 of --glossary_store_mb=1 MiB)", self.server.stdout_lines)
        self.assertIn(f"hold {2 * self.BIG_BYTES} bytes in memory, more than the {1 << 20} the "
                      "store keeps (--glossary_store_mb): all are loaded", self.server.output())
        got = self.call("GetGlossary", ts.pb.GetGlossaryRequest(glossary_id=kept[1]))
        self.assertEqual(len(got.entries), 1000)
        status, answer = self.create_over_http("small", TSV)
        self.assertHttpError(answer, status, 507, "--glossary_store_mb")
        self.call("DeleteGlossary", ts.pb.DeleteGlossaryRequest(glossary_id=kept[0]))
        self.assertEqual(self.create("small").entry_count, 2)  # 765,000 bytes of 1 MiB held


class TokenTest(GlossaryTestCase):
    """--auth_token_file: every glossary call needs the token, over gRPC and HTTP."""

    FLAGS = ()
    METADATA = [("authorization", f"Bearer {TOKEN}")]
    HEADERS = {"Authorization": f"Bearer {TOKEN}"}

    @classmethod
    def setUpClass(cls):
        cls.token_dir = tempfile.mkdtemp(prefix="glossa-token-")
        cls.addClassCleanup(shutil.rmtree, cls.token_dir, ignore_errors=True)
        token_file = os.path.join(cls.token_dir, "token")
        with open(token_file, "w", encoding="utf-8") as f:
            f.write(TOKEN + "\n")
        cls.FLAGS = ("--auth_token_file", token_file)
        super().setUpClass()

    def test_every_call_needs_the_token(self):
        info = self.create("secret")
        gid = info.glossary_id
        calls = {
            "CreateGlossary": ts.pb.CreateGlossaryRequest(
                name="x", source_language="es", target_language="en", entries_text="a\tb\n"),
            "ListGlossaries": ts.pb.ListGlossariesRequest(),
            "GetGlossary": ts.pb.GetGlossaryRequest(glossary_id=gid),
            "DeleteGlossary": ts.pb.DeleteGlossaryRequest(glossary_id=gid),
        }
        for method, request in calls.items():
            for metadata in (None, [("authorization", f"Bearer {TOKEN}x")]):
                with self.subTest(method=method, metadata=metadata):
                    self.assertRpcError(
                        lambda: getattr(self.server.glossaries, method)(
                            request, timeout=ts.RPC_TIMEOUT_S, metadata=metadata),
                        grpc.StatusCode.UNAUTHENTICATED, "Bearer")
        for method, path in [("POST", "/v1/glossaries"), ("GET", "/v1/glossaries"),
                             ("GET", f"/v1/glossaries/{gid}"),
                             ("GET", f"/v1/glossaries/{gid}/entries"),
                             ("DELETE", f"/v1/glossaries/{gid}")]:
            with self.subTest(method=method, path=path):
                status, answer = self.http_json(method, path, "{}", {"Authorization": ""})
                self.assertHttpError(answer, status, 403, "Bearer")
        self.assertEqual(self.listed(), [gid])  # nothing was created or deleted
        status, _, _ = self.request("DELETE", f"/v1/glossaries/{gid}")
        self.assertEqual(status, 204)
        self.assertEqual(self.listed(), [])


if __name__ == "__main__":
    unittest.main()
