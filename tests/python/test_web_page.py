#!/usr/bin/python3
"""The page at / in a real browser: headless Chromium (Debian's `chromium`) driven over the
DevTools protocol loads the page, types Spanish into it and waits for the English translation,
which must equal LibreTranslate's POST /translate answer for the same text; with the bundled demo
model, the page says what it is and a click on one of its example sentences translates it. A
screenshot of that page is written to $GLOSSA_SCREENSHOT (the one in the README is a copy of it).
A page of another origin, in the same browser, can neither read from the server nor change what
it stores.

Skips, saying why, without chromium or Python's websocket client (Debian python3-websocket).
Run by ctest (python_web_page), or by hand from the repository root:
    GLOSSA_SERVER=build/glossa-server /usr/bin/python3 -m unittest -v tests/python/test_web_page.py
"""

import base64
import http.server
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_http  # noqa: E402
import test_server as ts  # noqa: E402

try:
    import websocket  # Debian python3-websocket (websocket-client)
except ImportError:
    websocket = None

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOT = os.environ.get("GLOSSA_SCREENSHOT", "")
BROWSER_TIMEOUT_S = 60
# What the person types: two sentences, so that the page's text goes through the sentence split.
SPANISH = "Y dijo Dios: Sea la luz: y fué la luz. Y vió Dios que la luz era buena."


def setUpModule():
    if not CHROMIUM:
        raise unittest.SkipTest("needs chromium (Debian package chromium; deploy/setup.sh)")
    if websocket is None:
        raise unittest.SkipTest("needs Python's websocket client (python3-websocket)")
    ts.setUpModule()


def tearDownModule():
    ts.tearDownModule()


class Browser:
    """Headless Chromium with one page, driven over the DevTools protocol."""

    def __init__(self):
        self.profile = tempfile.mkdtemp(prefix="glossa-chromium-")
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
             "--disable-dev-shm-usage", "--no-first-run", "--remote-debugging-port=0",
             "--remote-allow-origins=*", f"--user-data-dir={self.profile}",
             "--window-size=1100,640", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.stderr_lines = []
        port = self._devtools_port()
        pages = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10))
        page = next(p for p in pages if p["type"] == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"],
                                              timeout=BROWSER_TIMEOUT_S, suppress_origin=True)
        self.ids = itertools.count(1)

    def _devtools_port(self):
        found = []

        def read():  # keeps draining stderr so that Chromium never blocks on it
            for line in self.proc.stderr:
                self.stderr_lines.append(line)
                m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
                if m and not found:
                    found.append(int(m.group(1)))
        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + BROWSER_TIMEOUT_S
        while not found and time.monotonic() < deadline and self.proc.poll() is None:
            time.sleep(0.1)
        if not found:
            self.close()
            raise AssertionError("chromium did not start its DevTools endpoint:\n" +
                                 "".join(self.stderr_lines[-30:]))
        return found[0]

    def call(self, method, **params):
        """Sends one command and returns its result (events in between are skipped)."""
        ident = next(self.ids)
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == ident:
                if "error" in message:
                    raise AssertionError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression, what):
        deadline = time.monotonic() + BROWSER_TIMEOUT_S
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.1)
        status = self.evaluate("document.getElementById('status').textContent")
        raise AssertionError(f"timed out waiting for {what} ({expression}); "
                             f"status line: {status!r}")

    def close(self):
        if getattr(self, "ws", None) is not None:
            self.ws.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


class BrowserTestCase(test_http.HttpTestCase):
    """A server (its models named by MODELS: None, the demo model by name; (), none, so the
    bundled demo) and a browser, one each per class."""

    MODELS = None

    @classmethod
    def setUpClass(cls):
        cls.server = test_http.HttpServer(*cls.SERVER_FLAGS, models=cls.MODELS)
        cls.addClassCleanup(cls._stop_server)
        cls.translator = ts.pb_grpc.TranslatorStub(cls.server.channel)
        cls.browser = Browser()
        cls.addClassCleanup(cls.browser.close)

    def open_page(self):
        """The server's page, once it has loaded the languages."""
        self.browser.call("Page.navigate", url=f"http://127.0.0.1:{self.server.http_port}/")
        self.browser.wait_for("document.body && document.body.dataset.ready === '1'",
                              "the languages")
        return self.browser


class WebPageTest(BrowserTestCase):

    def test_typing_spanish_shows_the_english_translation(self):
        b = self.open_page()
        self.assertEqual(b.evaluate("document.getElementById('source').value"), "es")
        self.assertEqual(b.evaluate("document.getElementById('target').value"), "en")

        b.evaluate("document.getElementById('input').focus()")
        b.call("Input.insertText", text=SPANISH)  # as typing: fires the input event
        got = b.wait_for("document.getElementById('status').textContent.startsWith('Translated')"
                         " && document.getElementById('output').value", "the translation")
        status, answer = self.post_json("/translate", {"q": SPANISH, "source": "es",
                                                       "target": "en"})
        self.assertEqual(status, 200, answer)
        self.assertEqual(got, answer["translatedText"])
        self.assertIn("light", got)

        # The copy button puts the translation on the clipboard (or says how to copy it).
        b.evaluate("document.getElementById('copy').click()")
        b.wait_for("document.getElementById('status').textContent !== ''"
                   " && !document.getElementById('status').textContent.startsWith('Translated')",
                   "the copy button's answer")
        self.assertNotEqual(b.evaluate("document.getElementById('status').className"), "error")

    def test_an_error_is_shown_not_swallowed(self):
        b = self.open_page()
        b.evaluate("document.getElementById('input').focus()")
        b.call("Input.insertText", text="a " * 6000)  # over --max_text_bytes: the server's 400
        message = b.wait_for("document.getElementById('status').className === 'error'"
                             " && document.getElementById('status').textContent", "the error")
        self.assertIn("limit", message)


class DemoPageTest(BrowserTestCase):
    """With the bundled demo (no model named), the page says what the demo is and offers
    sentences it translates well; a click translates one. The README's screenshot is this page."""

    MODELS = ()

    def test_an_example_translates_when_clicked(self):
        b = self.open_page()
        about = b.evaluate("document.getElementById('about').textContent")
        self.assertIn("trained only on Bible verses", about)
        examples = b.evaluate("[...document.querySelectorAll('button.example')]"
                              ".map((e) => e.textContent)")
        self.assertGreaterEqual(len(examples), 3, examples)
        b.evaluate("document.querySelector('button.example').click()")
        got = b.wait_for("document.getElementById('status').textContent.startsWith('Translated')"
                         " && document.getElementById('output').value", "the translation")
        self.assertEqual(b.evaluate("document.getElementById('input').value"), examples[0])
        self.assertEqual(got, "How great are your works, Yahweh!")
        if SCREENSHOT:
            shot = b.call("Page.captureScreenshot", format="png")
            with open(SCREENSHOT, "wb") as f:
                f.write(base64.b64decode(shot["data"]))


# A page of another origin (another port) that tries what the attacker did: read a
# translation, and change stored state with requests a browser sends without a preflight.
FOREIGN_PAGE = """<!DOCTYPE html><html><body><script>
const glossa = "http://127.0.0.1:PORT";
const glossary = JSON.stringify({name: "planted", sourceLanguage: "es", targetLanguage: "en",
                                 entriesText: "a\\tb", entriesFormat: "tsv"});
async function attempt(name, request) {
  try {
    const response = await request();
    return [name, response.type === "opaque" ? "opaque" : "read " + response.status];
  } catch (e) {
    return [name, "failed"];
  }
}
(async () => {
  const results = Object.fromEntries(await Promise.all([
    attempt("translate", () => fetch(glossa + "/translate", {method: "POST",
        headers: {"Content-Type": "application/json"},
        body: JSON.stringify({q: "Hola", source: "es", target: "en"})})),
    attempt("languages", () => fetch(glossa + "/languages")),
    attempt("glossary_text_plain", () => fetch(glossa + "/v1/glossaries", {method: "POST",
        mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: glossary})),
    attempt("translate_form", () => fetch(glossa + "/translate", {method: "POST",
        mode: "no-cors", body: new URLSearchParams({q: "Hola", source: "es", target: "en"})})),
  ]));
  document.body.dataset.result = JSON.stringify(results);
})();
</script></body></html>"""


class CrossOriginPageTest(BrowserTestCase):
    """A page of another origin, in a real browser, can neither read from the server nor change
    what it stores; the server's own page (WebPageTest) translates as before."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        page = FOREIGN_PAGE.replace("PORT", str(cls.server.http_port)).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, *args):
                pass
        cls.foreign = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=cls.foreign.serve_forever, daemon=True).start()
        cls.addClassCleanup(cls.foreign.server_close)
        cls.addClassCleanup(cls.foreign.shutdown)

    def test_a_page_of_another_origin_reads_nothing_and_changes_nothing(self):
        b = self.browser
        b.call("Page.navigate", url=f"http://127.0.0.1:{self.foreign.server_port}/")
        result = json.loads(b.wait_for("document.body && document.body.dataset.result",
                                       "the page's attempts"))
        self.assertEqual(result["translate"], "failed", result)
        self.assertEqual(result["languages"], "failed", result)
        # Sent without a preflight: the browser shows the page nothing either way; what matters
        # is that the server did not act on them.
        self.assertEqual(result["glossary_text_plain"], "opaque", result)
        self.assertEqual(result["translate_form"], "opaque", result)
        status, answer = self.request("GET", "/v1/glossaries")[0::2]
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(answer).get("glossaries", []), [])


if __name__ == "__main__":
    unittest.main()
