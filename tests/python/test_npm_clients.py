#!/usr/bin/python3
"""LibreTranslate client libraries from npm, through glossa-server's routing, pivot and auto.

Run from the repository root (ctest does this as the test `python_npm_clients`):
    GLOSSA_SERVER=build/glossa-server /usr/bin/python3 tests/python/test_npm_clients.py

The server is multi_model.py's: the demo model (es -> en) and relabelled copies (en-fr, en-de,
fr-en), no model named in any request. Each client library in tests/clients (installed there by
`npm ci --prefix tests/clients`, which deploy/run.sh test runs) is driven by Node.js through
tests/clients/translate.mjs, and must return exactly the translatedText that the server answers
to the same /translate request made directly over HTTP: a direct pair (es -> en), a pair through
the pivot (es -> fr, as b-es-en then en-fr) and source "auto" on Spanish text, where the
library can send it.

Skips (exit code 77 when everything skipped, which ctest reports as skipped) without node or
without the installed packages, saying which.
"""

import json
import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402
from test_server import setUpModule, tearDownModule  # noqa: E402,F401

import multi_model  # noqa: E402

CLIENTS_DIR = os.path.join(ts.REPO, "tests", "clients")
DRIVER = os.path.join(CLIENTS_DIR, "translate.mjs")
NODE = os.environ.get("GLOSSA_NODE") or shutil.which("node") or "/usr/bin/node"
NODE_TIMEOUT_S = 60

DIRECT = {"q": ts.SHORT, "source": "es", "target": "en"}
PIVOT = {"q": ts.LONG, "source": "es", "target": "fr"}
AUTO = {"q": ts.LONG, "source": "auto", "target": "en"}


def missing_packages():
    """The dependencies of tests/clients/package.json not installed at their pinned version."""
    with open(os.path.join(CLIENTS_DIR, "package.json"), encoding="utf-8") as f:
        wanted = json.load(f)["dependencies"]
    missing = []
    for name, version in sorted(wanted.items()):
        try:
            with open(os.path.join(CLIENTS_DIR, "node_modules", name, "package.json"),
                      encoding="utf-8") as f:
                installed = json.load(f)["version"]
        except (OSError, ValueError, KeyError):
            installed = None
        if installed != version:
            missing.append(f"{name}@{version} (found {installed or 'none'})")
    return missing


class NpmClientsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        if not os.access(NODE, os.X_OK):
            raise unittest.SkipTest("needs Node.js (node) to run the npm clients")
        version = subprocess.run([NODE, "--version"], capture_output=True, text=True,
                                 timeout=NODE_TIMEOUT_S).stdout.strip()
        if int(version.lstrip("v").split(".")[0]) < 18:
            raise unittest.SkipTest(f"needs Node.js 18 or later (global fetch); {NODE} is "
                                    f"{version}")
        missing = missing_packages()
        if missing:
            raise unittest.SkipTest("npm packages not installed in tests/clients: " +
                                    ", ".join(missing) + "; install them with `npm ci --prefix "
                                    "tests/clients` (deploy/run.sh test does, when npm and the "
                                    "registry are reachable)")
        multi_model.start_server(cls)
        cls.base_url = f"http://127.0.0.1:{cls.http_port}"

    def post(self, path, body):
        return multi_model.post_json(self.http_port, path, body)

    def direct(self, request):
        """The server's answer to a LibreTranslate /translate request, over urllib."""
        status, answer = self.post("/translate", request)
        self.assertEqual(status, 200, (request, answer))
        return answer

    def run_client(self, client, requests):
        """What `client` returns for each request: {"translatedText": ...} or {"error": ...}."""
        out = subprocess.run([NODE, DRIVER, client, self.base_url], input=json.dumps(requests),
                             capture_output=True, text=True, encoding="utf-8",
                             cwd=CLIENTS_DIR, timeout=NODE_TIMEOUT_S)
        self.assertEqual(out.returncode, 0, f"node {client}: {out.stderr}")
        answers = json.loads(out.stdout)
        self.assertEqual(len(answers), len(requests), out.stdout)
        return answers

    def check_client(self, client, requests):
        """Each request through the client, then directly: the same translatedText."""
        answers = self.run_client(client, [r for _, r in requests])
        for (what, request), answer in zip(requests, answers):
            with self.subTest(client=client, case=what):
                sent = dict(request, source=request.get("source", "auto"))
                self.assertEqual(answer, {"translatedText": self.direct(sent)["translatedText"]})

    def test_the_direct_answers_route_pivot_and_detect(self):
        # What the clients are compared with: es -> en on the priority model, es -> fr through
        # en (a different text), auto detecting Spanish and giving what es -> en gives.
        status, answer = self.post("/v1/translate", {"texts": [ts.LONG], "source_language": "es",
                                                     "target_language": "fr"})
        self.assertEqual((status, answer["model"]), (200, "b-es-en+en-fr"), answer)
        status, answer = self.post("/v1/translate", {"texts": [ts.SHORT], "source_language": "es",
                                                     "target_language": "en"})
        self.assertEqual((status, answer["model"]), (200, "b-es-en"), answer)
        pivot, to_english = self.direct(PIVOT), self.direct(dict(PIVOT, target="en"))
        self.assertNotEqual(pivot["translatedText"], to_english["translatedText"])
        self.assertTrue(pivot["translatedText"])
        auto = self.direct(AUTO)
        self.assertEqual(auto["detectedLanguage"]["language"], "es", auto)
        self.assertEqual(auto["translatedText"], to_english["translatedText"])

    def test_libretranslate_ts(self):
        # tderflinger's SDK: source is a required argument; "auto" is passed as is.
        self.check_client("libretranslate-ts",
                          [("direct", DIRECT), ("pivot", PIVOT), ("auto", AUTO)])

    def test_libretranslate(self):
        # PugDEV-hub's wrapper: source defaults to "auto" (left out here for the auto case).
        auto = {k: v for k, v in AUTO.items() if k != "source"}
        self.check_client("libretranslate",
                          [("direct", DIRECT), ("pivot", PIVOT), ("auto by default", auto)])

    def test_translate(self):
        # franciscop's translate, engine "libre": only ISO 639-1 codes, so no "auto".
        self.check_client("translate", [("direct", DIRECT), ("pivot", PIVOT)])
        self.assertEqual(self.run_client("translate", [AUTO]),
                         [{"error": 'The language "auto" is not part of the ISO 639-1'}])


if __name__ == "__main__":
    ts.main_or_skip()
