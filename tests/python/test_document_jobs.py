#!/usr/bin/python3
"""Documents as jobs: every front end's documents run on workers of their own, within one memory
budget; a document whose client goes away (an HTTP upload closed, a gRPC call cancelled) is
cancelled and frees its worker; uploads waiting for documents never hold every HTTP thread;
shutdown ends documents by --shutdown_timeout. Each test watches the server's document gauges
(glossa_documents_running, ...) on /metrics.

Run by ctest (python_document_jobs), or by hand from the repository root:
    GLOSSA_SERVER=build/glossa-server /usr/bin/python3 -m unittest -v \
        tests/python/test_document_jobs.py
"""

import concurrent.futures
import http.client
import io
import json
import os
import re
import signal
import socket
import sys
import time
import unittest
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_files as tf  # noqa: E402  (multipart bodies)
import test_http as th  # noqa: E402  (the HTTP server process and request plumbing)
import test_server as ts  # noqa: E402

grpc = ts.grpc
# Minutes of work on these cores: a document that is still running when the test acts on it.
LONG_TEXT = "\n\n".join([ts.LONG] * 600)


def setUpModule():
    ts.setUpModule()


def tearDownModule():
    ts.tearDownModule()


def upload_bytes(port, filename, data, fields=None):
    """The whole HTTP request of a /translate_file upload (es -> en)."""
    body = tf.multipart({"source": "es", "target": "en", **(fields or {})},
                        [("file", filename, data.encode() if isinstance(data, str) else data)])
    head = (f"POST /translate_file HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: multipart/form-data; boundary={tf.BOUNDARY}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    return head.encode() + body


def start_upload(port, filename, data):
    """A socket that has sent a whole upload and not read its answer."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=120)
    sock.sendall(upload_bytes(port, filename, data))
    return sock


def answer_status(sock):
    """The HTTP status of the answer on `sock` (read whole), then closes it."""
    data = b""
    with sock:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    m = re.match(rb"HTTP/1\.[01] (\d{3})", data)
    return int(m.group(1)) if m else None


class DocumentJobsTestCase(th.HttpTestCase):
    def gauges(self):
        """{name: value} of the glossa_documents_* series on /metrics."""
        conn = http.client.HTTPConnection("127.0.0.1", self.server.metrics_port, timeout=30)
        try:
            conn.request("GET", "/metrics")
            text = conn.getresponse().read().decode()
        finally:
            conn.close()
        return {m.group(1): float(m.group(2))
                for m in re.finditer(r"^(glossa_documents_\w+) (\S+)$", text, re.MULTILINE)}

    def wait_for(self, name, predicate, within_s):
        """Waits until gauge `name` satisfies `predicate`; returns the time it took."""
        started = time.monotonic()
        while True:
            value = self.gauges().get(name)
            if value is not None and predicate(value):
                return time.monotonic() - started
            if time.monotonic() - started > within_s:
                self.fail(f"{name} is {value} after {within_s} s: {self.gauges()}")
            time.sleep(0.1)

    def upload(self, filename, data):
        """(status, answer JSON) of an upload on a connection of its own."""
        status, _, raw = self.request(
            "POST", "/translate_file",
            tf.multipart({"source": "es", "target": "en"},
                         [("file", filename, data.encode() if isinstance(data, str) else data)]),
            {"Content-Type": f"multipart/form-data; boundary={tf.BOUNDARY}"})
        return status, json.loads(raw)


class ClientGoneTest(DocumentJobsTestCase):
    """One worker, one document at a time: a document whose client left must free both."""

    SERVER_FLAGS = ("--document_workers", "1", "--max_documents", "1")

    def test_an_upload_closed_mid_document_cancels_it(self):
        sock = start_upload(self.server.http_port, "long.txt", LONG_TEXT)
        self.wait_for("glossa_documents_running", lambda v: v == 1, 30)
        status, answer = self.upload("short.txt", ts.SHORT)
        self.assertEqual(status, 429, answer)  # the one place is taken
        self.assertIn("--max_documents", answer["error"])
        sock.close()
        took = self.wait_for("glossa_documents_running", lambda v: v == 0, 10)
        print(f"\n  the closed upload's document ended {took:.2f} s after its client left")
        status, answer = self.upload("short.txt", ts.SHORT)
        self.assertEqual(status, 200, answer)
        self.assertEqual(self.gauges()["glossa_documents_memory_bytes"], 0)

    def test_a_cancelled_grpc_call_cancels_its_document(self):
        request = ts.pb.TranslateDocumentRequest(file_name="long.txt", content=LONG_TEXT.encode(),
                                                 source_language="es", target_language="en")
        call = self.translator.TranslateDocument.future(request, timeout=300)
        self.wait_for("glossa_documents_running", lambda v: v == 1, 30)
        call.cancel()
        took = self.wait_for("glossa_documents_running", lambda v: v == 0, 10)
        print(f"\n  the cancelled call's document ended {took:.2f} s after the cancel")
        short = ts.pb.TranslateDocumentRequest(file_name="short.txt", content=ts.SHORT.encode(),
                                               source_language="es", target_language="en")
        answer = self.translator.TranslateDocument(short, timeout=60)
        self.assertEqual(answer.segments, 1)


class HttpThreadsTest(DocumentJobsTestCase):
    """Four HTTP threads: at most two wait for documents, so /health and /translate answer."""

    SERVER_FLAGS = ("--http_threads", "4", "--document_workers", "1", "--max_documents", "8")

    def test_health_and_translate_answer_while_uploads_wait(self):
        waiting = [start_upload(self.server.http_port, f"long{i}.txt", LONG_TEXT)
                   for i in range(2)]
        self.wait_for("glossa_documents_queued", lambda v: v == 1, 30)
        status, answer = self.upload("third.txt", ts.SHORT)
        self.assertEqual(status, 429, answer)
        self.assertIn("--http_threads", answer["error"])
        started = time.monotonic()
        status, _, _ = self.request("GET", "/health")
        self.assertEqual(status, 200)
        status, answer = self.post_json("/translate", {"q": ts.SHORT, "source": "es",
                                                       "target": "en"})
        took = time.monotonic() - started
        self.assertEqual(status, 200, answer)
        print(f"\n  /health and /translate answered in {took:.2f} s beside two waiting uploads")
        for sock in waiting:
            sock.close()
        self.wait_for("glossa_documents_running", lambda v: v == 0, 10)
        self.wait_for("glossa_documents_queued", lambda v: v == 0, 10)


class MemoryBudgetTest(DocumentJobsTestCase):
    """--document_memory_mb 2: a file that alone needs more is refused (400) before it is read
    whole; one that fits alone but not beside a document in flight is asked to wait (429)."""

    SERVER_FLAGS = ("--document_memory_mb", "2", "--document_workers", "2")

    def test_a_file_over_the_budget_alone_is_refused(self):
        status, answer = self.upload("big.txt", "Hola, mundo.\n" * 90000)  # 1.2 MB
        self.assertEqual(status, 400, answer)
        self.assertIn("--document_memory_mb", answer["error"])

    def test_an_archive_is_refused_before_it_is_inflated(self):
        # 3 MB of numbered paragraphs: within the zip bomb ratio, over the budget once inflated.
        paragraphs = "".join(f"<w:p><w:r><w:t>Hola, mundo {i}.</w:t></w:r></w:p>"
                             for i in range(60000))
        document = ('<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://'
                    'schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>' +
                    paragraphs + "</w:body></w:document>")
        data = io.BytesIO()
        with zipfile.ZipFile(data, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("[Content_Types].xml", "<Types/>")
            z.writestr("word/document.xml", document)
        status, answer = self.upload("big.docx", data.getvalue())
        self.assertEqual(status, 400, answer)
        self.assertIn("--document_memory_mb", answer["error"])
        self.assertEqual(self.gauges()["glossa_documents_memory_bytes"], 0)

    def test_a_file_that_fits_alone_waits_for_room(self):
        # ~300 KB of text holds about 1.5 MB; a 150 KB file then finds no room in 2 MiB.
        sock = start_upload(self.server.http_port, "long.txt", "\n\n".join([ts.LONG] * 1500))
        self.wait_for("glossa_documents_memory_bytes", lambda v: v > 1_000_000, 30)
        status, answer = self.upload("second.txt", "\n\n".join([ts.LONG] * 750))
        self.assertEqual(status, 429, answer)
        self.assertIn("try again later", answer["error"])
        sock.close()
        self.wait_for("glossa_documents_memory_bytes", lambda v: v == 0, 10)
        status, answer = self.upload("third.txt", ts.SHORT)
        self.assertEqual(status, 200, answer)


class ShutdownTest(unittest.TestCase):
    """SIGTERM with a document in translation: the server stops by --shutdown_timeout, and the
    document's call ends with an error rather than holding the process."""

    def test_shutdown_does_not_wait_for_a_long_document(self):
        server = th.HttpServer("--shutdown_timeout", "2s")
        try:
            stub = ts.pb_grpc.TranslatorStub(server.channel)
            request = ts.pb.TranslateDocumentRequest(
                file_name="long.txt", content=LONG_TEXT.encode(), source_language="es",
                target_language="en")
            call = stub.TranslateDocument.future(request, timeout=300)
            time.sleep(2)  # in translation
            started = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
            code = server.proc.wait(timeout=60)
            took = time.monotonic() - started
        finally:
            server.stop()
        print(f"\n  stopped {took:.2f} s after SIGTERM, exit code {code}")
        self.assertEqual(code, 0, server.output())
        self.assertLess(took, 15, server.output())
        with self.assertRaises(grpc.RpcError) as raised:
            call.result(timeout=10)
        print(f"  the document's call: {raised.exception.code()}: {raised.exception.details()}")
        self.assertIn(raised.exception.code(),
                      (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED))


if __name__ == "__main__":
    unittest.main()
