#!/usr/bin/python3
"""--model_config: models added, replaced and removed while clients translate without pause.

Run from the repository root (ctest does this as the test `python_live_models`):
    GLOSSA_SERVER=build/glossa-server /usr/bin/python3 -m unittest -v \\
        tests/python/test_live_models.py

One server, started from a config file naming the demo model twice (a, b). Client threads send
Translate and TranslateStream requests all along, while the test
  (a) adds c by editing the file (the server notices by itself),
  (b) replaces a (another path to the same weights, another worker count) with SIGHUP,
  (c) removes b with SIGHUP,
  (d) points c at a corrupt file, then writes a file that does not parse, each with SIGHUP.
No request may fail, except NOT_FOUND for b once its removal began; health follows each name;
the failed load is counted in glossa_model_load_failures_total and changes nothing.

And a served model file overwritten in place, as `cp` does it (the same inode truncated, then
written): the server stays up, refuses the truncated file with its size and the size it should
have, answers DATA_LOSS for what the model loaded before would have to read from the file, and
loads the whole file once it is back.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402  (stubs, ServerProcess, constants)
from test_server import setUpModule, tearDownModule  # noqa: E402,F401  (run by unittest)

WAIT_S = 30  # for a change to show


class LiveModelsTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="glossa-live-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.config = os.path.join(self.dir, "models.conf")

    def write_config(self, text):
        """Replaces the file at once (rename), as an operator's tools should."""
        tmp = self.config + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, self.config)

    def start(self, *flags):
        server = ts.ServerProcess(
            "--metrics_listen", "127.0.0.1:0", "--http_listen", "", "--cache_bytes", "0",
            "--workers", "1", "--model_config_poll", "0.2s", *flags,
            models=("--model_config", self.config))
        self.addCleanup(server.stop)
        return server

    def metrics(self, server):
        port = next(re.search(r":(\d+)/metrics", line).group(1)
                    for line in server.stdout_lines if "metrics on http" in line)
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()

    def sample(self, server, name, labels=""):
        m = re.search(rf"^{name}{re.escape(labels)} (\S+)$", self.metrics(server), re.M)
        return float(m.group(1)) if m else None

    def health(self, stub, name):
        try:
            return stub.Check(ts.health_pb.HealthCheckRequest(service=name), timeout=10).status
        except ts.grpc.RpcError as e:
            return e.code()

    def wait_for(self, what, predicate, server):
        deadline = time.monotonic() + WAIT_S
        while not predicate():
            if time.monotonic() > deadline or server.proc.poll() is not None:
                self.fail(f"{what}: not within {WAIT_S} s\n{server.output()}")
            time.sleep(0.05)

    def wait_reload(self, server, result, before):
        self.wait_for(f"a reload counted as {result}",
                      lambda: (self.sample(server, "glossa_model_reloads_total",
                                           f'{{result="{result}"}}') or 0) > before, server)

    def reloads(self, server, result):
        return self.sample(server, "glossa_model_reloads_total", f'{{result="{result}"}}') or 0

    def test_model_config_with_model_is_refused(self):
        self.write_config(f"a={ts.MODEL}\n")
        out = subprocess.run([ts.SERVER, "--model_config", self.config, "--model",
                              f"x={ts.MODEL}", "--listen", "127.0.0.1:0"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn("--model_config", out.stderr)

    def test_add_replace_remove_and_a_broken_file_under_load(self):
        SERVING = ts.health_pb.HealthCheckResponse.SERVING
        NOT_SERVING = ts.health_pb.HealthCheckResponse.NOT_SERVING
        self.write_config(f"# two names, one file\na={ts.MODEL}\nb={ts.MODEL}\n")
        server = self.start()
        stub = ts.pb_grpc.TranslatorStub(server.channel)
        health = ts.health_grpc.HealthStub(server.channel)
        self.assertEqual(self.health(health, "a"), SERVING)
        self.assertEqual(self.health(health, "b"), SERVING)
        self.assertEqual(self.health(health, "c"), ts.grpc.StatusCode.NOT_FOUND)

        def translate(name, text=ts.SHORT):
            request = ts.pb.TranslateRequest(model=name, texts=[text],
                                             options=ts.pb.DecodingOptions(beam_size=2))
            return stub.Translate(request, timeout=ts.RPC_TIMEOUT_S)

        expected = translate("a").translations[0].hypotheses[0].text
        # The clients: each request picks a name in turn from `targets`; b's NOT_FOUND is
        # accepted once `b_removal` is set (before that, it is a failure).
        lock = threading.Lock()
        targets = ["a", "b"]
        b_removal = threading.Event()
        stop = threading.Event()
        counts, failures = {}, []

        def client(index):
            k = index
            while not stop.is_set():
                with lock:
                    name = targets[k % len(targets)]
                k += 1
                try:
                    if k % 3 == 0:  # a stream, one in three
                        request = ts.pb.TranslateRequest(
                            model=name, texts=[ts.LONG],
                            options=ts.pb.DecodingOptions(beam_size=1))
                        last = None
                        for last in stub.TranslateStream(request, timeout=ts.RPC_TIMEOUT_S):
                            pass
                        ok = last is not None and last.done
                        text = None
                    else:
                        text = translate(name).translations[0].hypotheses[0].text
                        ok = True
                    outcome = "OK" if ok else "EMPTY_STREAM"
                    if text is not None and text != expected:
                        outcome = "WRONG_TEXT"
                except ts.grpc.RpcError as e:
                    outcome = e.code().name
                # Read when the answer is in: a request sent just before the removal began may
                # reach the server after it (a loaded machine delays it by seconds).
                removal_began = b_removal.is_set()
                with lock:
                    counts[(name, outcome)] = counts.get((name, outcome), 0) + 1
                    allowed = outcome == "OK" or (name == "b" and outcome == "NOT_FOUND" and
                                                  removal_began)
                    if not allowed:
                        failures.append((name, outcome, time.monotonic()))

        threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(3)]
        for t in threads:
            t.start()
        self.addCleanup(stop.set)
        time.sleep(1.0)

        # (a) Add c by editing the file: no signal, the server notices.
        ok = self.reloads(server, "ok")
        self.write_config(f"a={ts.MODEL}\nb={ts.MODEL}\nc={ts.MODEL}\n")
        self.wait_for("c serving", lambda: self.health(health, "c") == SERVING, server)
        self.wait_reload(server, "ok", ok)
        self.assertEqual(translate("c").translations[0].hypotheses[0].text, expected)
        with lock:
            targets.append("c")
        time.sleep(1.0)

        # (b) Replace a: another path to the same weights, one more worker; SIGHUP.
        link = os.path.join(self.dir, "a.glossa")
        os.symlink(ts.MODEL, link)
        ok = self.reloads(server, "ok")
        self.write_config(f"a=a.glossa workers=2\nb={ts.MODEL}\nc={ts.MODEL}\n")  # relative
        server.proc.send_signal(signal.SIGHUP)
        self.wait_reload(server, "ok", ok)
        self.assertIn("model a: replaced", server.output())
        self.assertEqual(self.health(health, "a"), SERVING)
        time.sleep(1.0)

        # (c) Remove b: NOT_FOUND from now on, NOT_SERVING in health; in-flight requests finish.
        ok = self.reloads(server, "ok")
        b_removal.set()
        self.write_config(f"a=a.glossa workers=2\nc={ts.MODEL}\n")
        server.proc.send_signal(signal.SIGHUP)
        self.wait_reload(server, "ok", ok)
        self.assertEqual(self.health(health, "b"), NOT_SERVING)
        with self.assertRaises(ts.grpc.RpcError) as raised:
            translate("b")
        self.assertEqual(raised.exception.code(), ts.grpc.StatusCode.NOT_FOUND)
        self.wait_for("b unloaded", lambda: "model b (" in server.output() and
                      self.sample(server, "glossa_models_retiring") == 0, server)
        def b_refused():  # a client has met NOT_FOUND for b (slow builds take longer)
            with lock:
                return counts.get(("b", "NOT_FOUND"), 0) > 0
        self.wait_for("a client refused b", b_refused, server)
        with lock:
            targets.remove("b")

        # (d) A corrupt file for c: the reload fails, c keeps serving the model it had.
        corrupt = os.path.join(self.dir, "corrupt.glossa")
        with open(ts.MODEL, "rb") as f:
            head = f.read(4096)
        with open(corrupt, "wb") as f:
            f.write(head)  # truncated
        failed = self.reloads(server, "failed")
        self.write_config(f"a=a.glossa workers=2\nc={corrupt}\n")
        server.proc.send_signal(signal.SIGHUP)
        self.wait_reload(server, "failed", failed)
        self.assertEqual(
            self.sample(server, "glossa_model_load_failures_total", '{model="c"}'), 1)
        self.assertEqual(self.sample(server, "glossa_model_config_last_reload_successful"), 0)
        self.assertEqual(self.health(health, "c"), SERVING)
        self.assertEqual(translate("c").translations[0].hypotheses[0].text, expected)
        self.assertIn("model c: cannot load", server.output())
        # And a file that does not parse: nothing changes either.
        failed = self.reloads(server, "failed")
        self.write_config(f"a=a.glossa workers=2\nc={ts.MODEL} colour=red\n")
        server.proc.send_signal(signal.SIGHUP)
        self.wait_reload(server, "failed", failed)
        self.assertIn("unknown option 'colour'", server.output())
        time.sleep(0.5)

        stop.set()
        for t in threads:
            t.join(timeout=ts.RPC_TIMEOUT_S)
        self.assertEqual(failures, [], f"requests failed: {failures}\ncounts: {counts}\n"
                         f"{server.output()}")
        for name in ("a", "b", "c"):
            self.assertGreater(counts.get((name, "OK"), 0), 0, counts)
        self.assertGreater(counts.get(("b", "NOT_FOUND"), 0), 0, counts)
        self.assertEqual(self.sample(server, "glossa_models_loaded"), 2)
        self.assertEqual(self.health(health, "a"), SERVING)
        self.assertEqual(self.health(health, "b"), NOT_SERVING)
        listed = [m.name for m in stub.ListModels(ts.pb.ListModelsRequest(), timeout=10).models]
        self.assertEqual(listed, ["a", "c"])
        self.assertEqual(server.stop(), 0, server.output())
        print(f"\nrequests by (model, outcome): {sorted(counts.items())}", file=sys.stderr)
        if os.environ.get("GLOSSA_TEST_VERBOSE"):
            print(server.output(), file=sys.stderr)

    def test_a_served_file_overwritten_in_place(self):
        served = os.path.join(self.dir, "served.glossa")
        shutil.copyfile(ts.MODEL, served)
        with open(ts.MODEL, "rb") as f:
            whole = f.read()
        self.write_config(f"m={served}\n")
        server = self.start()
        stub = ts.pb_grpc.TranslatorStub(server.channel)

        def translate(text):
            request = ts.pb.TranslateRequest(model="m", texts=[text],
                                             options=ts.pb.DecodingOptions(beam_size=1))
            return stub.Translate(request, timeout=ts.RPC_TIMEOUT_S).translations[0]

        expected = translate(ts.SHORT).hypotheses[0].text
        failed = self.reloads(server, "failed")
        with open(served, "wb") as f:  # O_TRUNC: the same inode, as cp writes its destination
            f.write(whole[:len(whole) // 2])
        self.wait_reload(server, "failed", failed)
        # Words the model has not read yet: their embedding rows are still in the file.
        with self.assertRaises(ts.grpc.RpcError) as raised:
            translate("Los pescadores remendaban sus redes junto al mar.")
        if raised.exception.code() != ts.grpc.StatusCode.DATA_LOSS:
            try:  # a server that died (SIGBUS: -7) may not have been reaped yet
                server.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            self.fail(f"{raised.exception.code()}, server exit status {server.proc.poll()}\n"
                      f"{server.output()}")
        self.assertIsNone(server.proc.poll(), server.output())
        self.assertIn("changed on disk after it was loaded", raised.exception.details())
        self.assertIn(f"is truncated: {len(whole) // 2} bytes", server.output())
        self.assertIn(f"so it should be {len(whole)} bytes", server.output())

        ok = self.reloads(server, "ok")
        with open(served, "wb") as f:
            f.write(whole)
        self.wait_reload(server, "ok", ok)
        self.assertEqual(translate(ts.SHORT).hypotheses[0].text, expected)
        self.assertEqual(server.stop(), 0, server.output())


if __name__ == "__main__":
    unittest.main()
