"""A glossa-server of several models made from the demo model, for the routing tests.

The demo model (Spanish -> English) is served under two names, one with priority=5, next to
copies of its weights relabelled as other pairs (en-fr, en-de, fr-en): they translate nonsense,
but deterministically, which is all routing needs. Used by test_routing.py and
test_npm_clients.py, after test_server's setUpModule has generated the gRPC stubs.
"""

import json
import os
import re
import shutil
import sys
import tempfile
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402

sys.path.insert(0, os.path.join(ts.REPO, "model_tools"))
import glossa_model  # noqa: E402

RELABELLED_PAIRS = ("en-fr", "en-de", "fr-en")


def relabel(source_path, out_path, source_language, target_language):
    """A copy of a bilingual model file that declares another language pair."""
    header, arrays = glossa_model.read_model(source_path)
    first_at = {}  # offset -> the first tensor stored there; later ones are aliases
    tensors, aliases = {}, {}
    for entry in header["tensors"]:
        name, offset = entry["name"], entry["offset"]
        if offset in first_at:
            aliases[name] = first_at[offset]
        else:
            first_at[offset] = name
            value = arrays[name]
            tensors[name] = value.tobytes() if entry["dtype"] == "bytes" else value
    header = dict(header, source_language=source_language, target_language=target_language)
    glossa_model.write_model(out_path, header, tensors, aliases)


def start_server(cls, *flags):
    """Starts the server for a TestCase class (stopped and cleaned up with the class), with
    `flags` added: sets cls.dir (the relabelled models and models.conf), cls.server
    (test_server.ServerProcess), cls.http_port and cls.metrics_port."""
    cls.dir = tempfile.mkdtemp(prefix="glossa-routing-")
    cls.addClassCleanup(shutil.rmtree, cls.dir, ignore_errors=True)
    for pair in RELABELLED_PAIRS:
        source, target = pair.split("-")
        relabel(ts.MODEL, os.path.join(cls.dir, pair + ".glossa"), source, target)
    config = os.path.join(cls.dir, "models.conf")
    with open(config, "w", encoding="utf-8") as f:
        model = os.path.abspath(ts.MODEL)
        f.write(f"a-es-en={model}\n"
                f"b-es-en={model} priority=5\n" +
                "".join(f"{pair}={pair}.glossa\n" for pair in RELABELLED_PAIRS))
    cls.server = ts.ServerProcess("--http_listen", "127.0.0.1:0",
                                  "--metrics_listen", "127.0.0.1:0",
                                  "--cache_bytes", "0", "--workers", "1", *flags,
                                  models=("--model_config", config))
    cls.addClassCleanup(cls.server.stop)

    def port(prefix):
        return next(int(re.search(r":(\d+)/", line).group(1))
                    for line in cls.server.stdout_lines if line.startswith(prefix))
    cls.http_port = port("glossa-server: HTTP on http://")
    cls.metrics_port = port("glossa-server: metrics on http://")


def post_json(port, path, body):
    """POSTs body as JSON to the server's HTTP port: (status, the decoded JSON answer)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=ts.RPC_TIMEOUT_S) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
