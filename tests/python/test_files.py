#!/usr/bin/python3
"""LibreTranslate's file API (POST /translate_file, GET /download_file/<name>): files of each
format the server reads (.txt, .srt, .vtt, .md, .html) come back with every text segment
translated as POST /translate translates the same text, and everything else unchanged; bad
uploads get LibreTranslate's errors and leave the server up.

Run by ctest (python_files), or by hand from the repository root:
    GLOSSA_SERVER=build/glossa-server /usr/bin/python3 -m unittest -v tests/python/test_files.py
"""

import json
import os
import re
import socket
import sys
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_http as th  # noqa: E402  (the HTTP server process and request plumbing)
import test_server as ts  # noqa: E402

BOUNDARY = "glossa-test-boundary-7f3a"


def setUpModule():
    ts.setUpModule()


def tearDownModule():
    ts.tearDownModule()


def spanish_lines(n, longest=90):
    """n short lines of the shared Spanish corpus."""
    with open(os.path.join(ts.SHARED, "corpus", "dev.es"), encoding="utf-8") as f:
        lines = [line.strip() for line in f if 20 < len(line.strip()) <= longest]
    assert len(lines) >= n, "the shared corpus is shorter than this test needs"
    return lines[:n]


def multipart(fields, files=(), boundary=BOUNDARY):
    """A multipart/form-data body: fields {name: text}, files [(field, filename, bytes)]."""
    out = b""
    for name, value in fields.items():
        out += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n"
                .encode() + value.encode() + b"\r\n")
    for field, filename, data in files:
        out += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; "
                f"filename=\"{filename}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
                .encode() + data + b"\r\n")
    return out + f"--{boundary}--\r\n".encode()


class FileTestCase(th.HttpTestCase):
    def upload(self, filename, data, source="es", target="en", extra=None, body=None,
               content_type=None):
        """(status, answer JSON) of POST /translate_file."""
        fields = {"source": source, "target": target, **(extra or {})}
        if isinstance(data, str):
            data = data.encode("utf-8")
        files = [] if data is None else [("file", filename, data)]
        status, _, raw = self.request(
            "POST", "/translate_file", body if body is not None else multipart(fields, files),
            {"Content-Type": content_type or f"multipart/form-data; boundary={BOUNDARY}"})
        return status, json.loads(raw)

    def translate_file(self, filename, text, **kwargs):
        """The downloaded translation of `text` (as str) and its headers."""
        status, answer = self.upload(filename, text, **kwargs)
        self.assertEqual(status, 200, answer)
        self.assertEqual(set(answer), {"translatedFileUrl"}, answer)
        url = urllib.parse.urlparse(answer["translatedFileUrl"])
        self.assertEqual(url.scheme, "http")
        self.assertEqual(url.netloc, f"127.0.0.1:{self.server.http_port}")  # the Host header
        self.assertRegex(url.path, r"^/download_file/[0-9a-f]{32}$")
        status, headers, data = self.request("GET", url.path)
        self.assertEqual(status, 200, data[:300])
        return data.decode("utf-8"), headers

    def libre(self, texts):
        """POST /translate's translations of `texts` (format text, es -> en)."""
        status, answer = self.post_json("/translate", {"q": texts, "source": "es",
                                                       "target": "en", "format": "text"})
        self.assertEqual(status, 200, answer)
        return answer["translatedText"]


class TranslateFileTest(FileTestCase):
    SERVER_FLAGS = ("--max_file_mb", "1")

    def test_txt_in_batches_in_order(self):
        # More lines than one translation request holds (64): the order must survive batching.
        lines = spanish_lines(70)
        text = "\n".join(lines[:35]) + "\n\n   " + "\n".join(lines[35:]) + "\n"
        out, headers = self.translate_file("libro.txt", text)
        self.assertEqual(headers["Content-Disposition"], 'attachment; filename="libro.en.txt"')
        self.assertTrue(headers["Content-Type"].startswith("text/plain"), headers)
        out_lines = out.split("\n")
        self.assertEqual(len(out_lines), len(text.split("\n")))
        self.assertEqual(out_lines[35], "")
        self.assertTrue(out_lines[36].startswith("   "))
        got = [line.strip() for line in out_lines if line.strip()]
        self.assertEqual(got, self.libre(lines))
        self.assertNotEqual(got, lines)

    def test_srt_keeps_cues_and_timings(self):
        lines = spanish_lines(4)
        cues = [f"{i + 1}\n00:00:0{i},000 --> 00:00:0{i},900\n{line}\n"
                for i, line in enumerate(lines)]
        out, headers = self.translate_file("peli.srt", "\n".join(cues))
        self.assertEqual(headers["Content-Disposition"], 'attachment; filename="peli.en.srt"')
        blocks = out.strip("\n").split("\n\n")
        self.assertEqual(len(blocks), 4)
        want = self.libre(lines)
        for i, block in enumerate(blocks):
            number, timing, text = block.split("\n")
            self.assertEqual((number, timing), (str(i + 1), f"00:00:0{i},000 --> 00:00:0{i},900"))
            self.assertEqual(text, want[i])

    def test_vtt_keeps_header_cues_and_timings(self):
        lines = spanish_lines(3)
        vtt = ("WEBVTT\n\nNOTE una nota que no se traduce\n\n" +
               "\n".join(f"00:0{i}.000 --> 00:0{i}.500 align:start\n{line}\n"
                         for i, line in enumerate(lines)))
        out, headers = self.translate_file("clase.vtt", vtt)
        self.assertTrue(headers["Content-Type"].startswith("text/vtt"), headers)
        self.assertTrue(out.startswith("WEBVTT\n\nNOTE una nota que no se traduce\n\n"), out)
        timings = re.findall(r"^\d\d:\d\d\.\d{3} --> .*$", out, re.MULTILINE)
        self.assertEqual(timings, [f"00:0{i}.000 --> 00:0{i}.500 align:start" for i in range(3)])
        texts = [b.split("\n")[1] for b in out.strip("\n").split("\n\n")[2:]]
        self.assertEqual(texts, self.libre(lines))

    def test_markdown_keeps_code_and_structure(self):
        title, para, item = spanish_lines(3)
        code = "```python\nprint('no traducir esto')\n```\n"
        md = f"# {title}\n\n{para}\n\n{code}\n- {item}\n"
        out, headers = self.translate_file("guia.md", md)
        self.assertEqual(headers["Content-Disposition"], 'attachment; filename="guia.en.md"')
        want = self.libre([title, para, item])
        self.assertEqual(out, f"# {want[0]}\n\n{want[1]}\n\n{code}\n- {want[2]}\n")

    def test_html_keeps_tags_and_scripts(self):
        a, b = spanish_lines(2)
        page = (f"<!DOCTYPE html>\n<html><head><title>{a}</title>"
                f"<script>var s = 'Hola mundo';</script></head>\n"
                f"<body><p class=\"x\">{b}</p></body></html>\n")
        out, headers = self.translate_file("pagina.html", page)
        self.assertTrue(headers["Content-Type"].startswith("text/html"), headers)
        self.assertEqual(re.findall(r"<[^>]*>", out), re.findall(r"<[^>]*>", page))
        self.assertIn("<script>var s = 'Hola mundo';</script>", out)
        want = self.libre([a, b])
        self.assertIn(f"<title>{want[0]}</title>", out)
        self.assertIn(f"<p class=\"x\">{want[1]}</p>", out)

    def test_auto_detects_once(self):
        lines = spanish_lines(3)
        out, _ = self.translate_file("auto.txt", "\n".join(lines), source="auto")
        self.assertEqual(out.split("\n"), self.libre(lines))

    def test_settings_list_the_formats(self):
        _, _, data = self.request("GET", "/frontend/settings")
        settings = json.loads(data)
        self.assertTrue(settings["filesTranslation"])
        self.assertEqual(settings["supportedFilesFormat"],
                         [".txt", ".md", ".markdown", ".srt", ".vtt", ".html", ".htm", ".docx",
                          ".pptx", ".xlsx", ".odt", ".odp", ".epub"])

    def test_errors(self):
        status, answer = self.upload("a.pdf", b"%PDF-1.4 ...")
        self.assertError(status, answer, 400, "PDF", ".txt", ".srt")
        status, answer = self.upload("a.doc", b"PK...")
        self.assertError(status, answer, 400, ".txt", ".html", ".docx")
        status, answer = self.upload("a.docx", b"PK...")
        self.assertError(status, answer, 400, "not a zip archive")
        status, answer = self.upload("a.txt", None)
        self.assertError(status, answer, 400, "missing file parameter")
        status, answer = self.upload("a.txt", b"")
        self.assertError(status, answer, 400, "empty file")
        status, answer = self.upload("a.txt", b"caf\xe9\n")
        self.assertError(status, answer, 400, "UTF-8")
        status, answer = self.upload("a.txt", "Hola", target="")
        self.assertError(status, answer, 400, "missing target parameter")
        status, answer = self.upload("a.txt", "Hola", target="zz")
        self.assertError(status, answer, 400, "not supported")
        # Over --max_file_mb (1 MiB): the file within a body the server reads, and a body larger
        # than it reads at all.
        status, answer = self.upload("big.txt", b"Hola.\n" * ((1 << 20) // 6 + 10))
        self.assertError(status, answer, 413, "limit")
        with socket.create_connection(("127.0.0.1", self.server.http_port), timeout=10) as s:
            s.sendall(b"POST /translate_file HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                      b"multipart/form-data; boundary=" + BOUNDARY.encode() +
                      b"\r\nContent-Length: 3000000\r\n\r\n")
            reply = s.recv(4096)
        self.assertTrue(reply.startswith(b"HTTP/1.1 413"), reply[:200])
        self.assertServerAlive()

    def test_malformed_multipart(self):
        good = multipart({"source": "es", "target": "en"}, [("file", "a.txt", b"Hola.")])
        bodies = [
            (good, "application/x-www-form-urlencoded"),
            (good, "multipart/form-data"),                      # no boundary
            (good, "multipart/form-data; boundary=other"),
            (good[:-20], None),                                 # no final boundary
            (good.replace(b"\r\n", b"\n"), None),               # bare line feeds
            (b"--" + BOUNDARY.encode() + b"\r\nno header\r\n\r\nx\r\n--" + BOUNDARY.encode() +
             b"--", None),
            (b"", None),
            (os.urandom(4096), None),
        ]
        for body, content_type in bodies:
            status, answer = self.upload("a.txt", None, body=body, content_type=content_type)
            self.assertError(status, answer, 400)
        # A body cut short by the client: the server answers others afterwards.
        with socket.create_connection(("127.0.0.1", self.server.http_port), timeout=10) as s:
            s.sendall(b"POST /translate_file HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                      b"multipart/form-data; boundary=" + BOUNDARY.encode() +
                      b"\r\nContent-Length: 100000\r\n\r\n" + good[:50])
        self.assertServerAlive()
        self.assertEqual(self.upload("ok.txt", "Hola.")[0], 200)

    def test_downloads(self):
        status, _, data = self.request("GET", "/download_file/" + "0" * 32)
        self.assertError(status, json.loads(data), 404)
        status, _, data = self.request("GET", "/download_file/../../etc/passwd")
        self.assertEqual(status, 404)
        status, _, data = self.request("POST", "/download_file/" + "0" * 32)
        self.assertError(status, json.loads(data), 405)
        status, _, data = self.request("GET", "/translate_file")
        self.assertError(status, json.loads(data), 405)


class FileKeysAndLimitsTest(FileTestCase):
    """With --auth_token_file and --req_limit: the file API checks keys and the rate as
    /translate does."""

    TOKEN = "file-token"

    @classmethod
    def setUpClass(cls):
        cls.SERVER_FLAGS = ("--auth_token_file", th.token_file(cls, cls.TOKEN), "--req_limit", "3")
        super().setUpClass()

    def test_key_and_rate(self):
        status, answer = self.upload("a.txt", "Hola.")
        self.assertError(status, answer, 403, "Invalid API key")
        status, answer = self.upload("a.txt", "Hola.", extra={"api_key": "wrong"})
        self.assertError(status, answer, 403, "Invalid API key")
        # The rate is counted per key, as /translate counts it: three a minute, then 429.
        for _ in range(3):
            status, answer = self.upload("a.txt", "Hola.", extra={"api_key": self.TOKEN})
            self.assertEqual(status, 200, answer)
        status, answer = self.upload("a.txt", "Hola.", extra={"api_key": self.TOKEN})
        self.assertError(status, answer, 429, "Slowdown: 3 per 1 minute")


class DocumentDeadlineTest(FileTestCase):
    """--document_timeout bounds a whole document: a long one ends with 504, its remaining
    segments unsent, and the server answers at once afterwards."""

    SERVER_FLAGS = ("--document_timeout", "1s")

    def test_a_document_past_its_deadline_is_cut_short(self):
        text = "\n\n".join([ts.LONG] * 600)  # minutes of work on these cores
        started = time.monotonic()
        status, answer = self.upload("long.txt", text)
        took = time.monotonic() - started
        self.assertEqual(status, 504, answer)
        self.assertIn("deadline", answer["error"])
        self.assertLess(took, 60, "the deadline did not end the document's work")
        status, _, _ = self.request("GET", "/health")
        self.assertEqual(status, 200)
        self.assertTranslatesNormally()


if __name__ == "__main__":
    unittest.main()
