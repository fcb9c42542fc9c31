#!/usr/bin/python3
"""End-to-end tests of glossa-server through Python's gRPC client.

Run from the repository root (ctest does this as the test `python_server`):
    GLOSSA_SERVER=build/glossa-server GLOSSA_TRANSLATE=build/glossa-translate \
        /usr/bin/python3 -m unittest -v tests/python/test_server.py

Environment:
    GLOSSA_SERVER     the glossa-server to test; every test skips without it
    GLOSSA_TRANSLATE  the offline glossa-translate the server must agree with (the comparison
                      tests skip without it)
    GLOSSA_MODEL      the model to serve (default: <repo>/models/opus-mt-es-en-bible.glossa)
    GLOSSA_SHARED     the shared data directory holding golden/dev.es (default: <repo>/../shared);
                      the tests that translate it skip without it

Needs Debian's Python (/usr/bin/python3: grpcio, protobuf) and /usr/bin/protoc with
/usr/bin/grpc_python_plugin: the Python stubs are generated from proto/ into a temporary
directory when the tests start. Each TestCase class starts its own server on a free port
(--listen 127.0.0.1:0) and stops it (SIGTERM, then SIGKILL) when its tests are done.
"""

import atexit
import concurrent.futures
import contextlib
import ctypes
import html
import importlib
import os
import queue
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

try:
    import grpc
except ImportError:  # not Debian's Python: setUpModule skips everything
    grpc = None

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SERVER = os.environ.get("GLOSSA_SERVER", "")
TRANSLATE = os.environ.get("GLOSSA_TRANSLATE", "")
MODEL = (os.environ.get("GLOSSA_MODEL") or
         os.path.join(REPO, "models", "opus-mt-es-en-bible.glossa"))
SHARED = os.environ.get("GLOSSA_SHARED") or os.path.join(REPO, "..", "shared")
DEV_ES = os.path.join(SHARED, "golden", "dev.es")

PROTOC = "/usr/bin/protoc"
GRPC_PYTHON_PLUGIN = "/usr/bin/grpc_python_plugin"

MODEL_NAME = "demo"
# A ThreadSanitizer build runs 5-15 times slower: the time allowed for what should succeed
# grows with it (the tests of deadlines and timeouts set their own).
SLOWDOWN = 5 if os.environ.get("GLOSSA_SANITIZE") == "thread" else 1
STARTUP_TIMEOUT_S = 60 * SLOWDOWN  # model load and bind
STOP_TIMEOUT_S = 15 * SLOWDOWN     # SIGTERM to exit, before SIGKILL
RPC_TIMEOUT_S = 60 * SLOWDOWN      # every call that should succeed

# Sentences for the tests that do not need the shared data.
SHORT = "Y dijo Dios: Sea la luz: y fué la luz."
LONG = ("Y sucedió que, al cabo de cuarenta días, abrió Noé la ventana del arca que había hecho, "
        "y envió al cuervo, el cual salió, y estuvo yendo y tornando hasta que las aguas se "
        "secaron de sobre la tierra.")

# Filled by setUpModule: the generated modules.
pb = None           # glossa.v1.translator_pb2
pb_grpc = None      # glossa.v1.translator_pb2_grpc
health_pb = None    # grpc.health.v1.health_pb2
health_grpc = None  # grpc.health.v1.health_pb2_grpc
_stub_dir = None


def setUpModule():
    global pb, pb_grpc, health_pb, health_grpc, _stub_dir
    if not SERVER:
        raise unittest.SkipTest("set GLOSSA_SERVER to a glossa-server binary (ctest does)")
    if grpc is None:
        raise unittest.SkipTest(f"{sys.executable} has no grpcio: run with /usr/bin/python3")
    for tool in (PROTOC, GRPC_PYTHON_PLUGIN):
        if not os.access(tool, os.X_OK):
            raise unittest.SkipTest(f"needs {tool} to generate the Python stubs")
    _stub_dir = tempfile.mkdtemp(prefix="glossa-stubs-")
    subprocess.run(
        [PROTOC, f"--python_out={_stub_dir}", f"--grpc_out={_stub_dir}",
         f"--plugin=protoc-gen-grpc={GRPC_PYTHON_PLUGIN}", "-I", os.path.join(REPO, "proto"),
         "glossa/v1/translator.proto", "grpc/health/v1/health.proto"],
        check=True, capture_output=True, timeout=60)
    sys.path.insert(0, _stub_dir)
    # The health stubs live in package grpc.health.v1, but `grpc` is grpcio's package: let it
    # find the generated grpc/health/ too.
    grpc.__path__.append(os.path.join(_stub_dir, "grpc"))
    importlib.invalidate_caches()
    pb = importlib.import_module("glossa.v1.translator_pb2")
    pb_grpc = importlib.import_module("glossa.v1.translator_pb2_grpc")
    health_pb = importlib.import_module("grpc.health.v1.health_pb2")
    health_grpc = importlib.import_module("grpc.health.v1.health_pb2_grpc")


def tearDownModule():
    if _stub_dir:
        shutil.rmtree(_stub_dir, ignore_errors=True)


def dev_lines(n):
    """The first n lines of the shared dev set, as glossa-translate reads them."""
    with open(DEV_ES, encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    return [line[:-1] if line.endswith("\r") else line for line in lines[:n]]


def run_cli(lines, *flags):
    """glossa-translate's translation of lines, one output line per input line."""
    out = subprocess.run([TRANSLATE, "--model", MODEL, *flags], input="\n".join(lines) + "\n",
                         capture_output=True, text=True, encoding="utf-8", timeout=120)
    if out.returncode != 0:
        raise AssertionError(f"glossa-translate {' '.join(flags)} failed ({out.returncode}): "
                             f"{out.stderr}")
    result = out.stdout.split("\n")
    assert result[-1] == "", "glossa-translate's output does not end with a newline"
    return result[:-1]


def _die_with_parent():
    """In the server's child process: SIGTERM it if the test process dies (Linux)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (AttributeError, OSError):
        pass


def main_or_skip():
    """unittest.main, then exit 77 (ctest's skip) when every test skipped, 0 or 1 otherwise."""
    result = unittest.main(verbosity=2, exit=False).result
    # A class or module that skips adds one skip and runs no test; a test that skips, one each.
    skipped_tests = sum(isinstance(test, unittest.TestCase) for test, _ in result.skipped)
    everything_skipped = bool(result.skipped) and result.testsRun == skipped_tests
    sys.exit(77 if result.wasSuccessful() and everything_skipped else
             0 if result.wasSuccessful() else 1)


def _start_child(preexec):
    _die_with_parent()
    if preexec is not None:
        preexec()


def raw_translate_request(model, texts):
    """A serialized TranslateRequest whose texts may hold any bytes (not only UTF-8)."""
    def field(number, payload):  # a length-delimited field: tag, varint length, bytes
        out = bytearray([number << 3 | 2])
        n = len(payload)
        while n >= 0x80:
            out.append(n & 0x7F | 0x80)
            n >>= 7
        out.append(n)
        return bytes(out) + payload
    return field(1, model.encode()) + b"".join(field(2, t) for t in texts)


class ServerProcess:
    """A glossa-server on a free local port, with its output collected."""

    def __init__(self, *flags, credentials=None, models=None, preexec=None):
        """credentials: grpc.ChannelCredentials for a TLS server (None: plaintext). models: the
        flags that name the models (default: --model demo=MODEL). preexec: also run in the child
        before the server starts (e.g. to enter a cgroup)."""
        self.stderr = tempfile.TemporaryFile(mode="w+b")
        if models is None:
            models = ("--model", f"{MODEL_NAME}={MODEL}")
        self.args = [SERVER, "--listen", "127.0.0.1:0", *models,
                     "--shutdown_timeout", "5s", *flags]
        env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="passive")
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=self.stderr,
                                     env=env, preexec_fn=lambda: _start_child(preexec))
        atexit.register(self.stop)  # should the class cleanup never run
        self.stdout_lines = []
        lines = queue.Queue()

        def pump():  # keeps reading so the server never blocks on a full pipe
            for raw in self.proc.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                self.stdout_lines.append(line)
                lines.put(line)
            lines.put(None)
        self.reader = threading.Thread(target=pump, daemon=True)
        self.reader.start()

        self.address = None
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while self.address is None:
            remaining = deadline - time.monotonic()
            try:
                line = lines.get(timeout=max(remaining, 0.01)) if remaining > 0 else None
            except queue.Empty:
                line = None
            if line is None:
                exited = self.proc.poll()
                self.stop()
                why = (f"exited with {exited}" if exited is not None else
                       f"did not report 'listening on' within {STARTUP_TIMEOUT_S} s")
                raise AssertionError(f"{' '.join(self.args)} {why}:\n{self.output()}")
            m = re.match(r"glossa-server: listening on (\S+):(\d+) \(models: (.*)\)$", line)
            if m:
                self.address = f"{m.group(1)}:{m.group(2)}"
        self.channel = (grpc.secure_channel(self.address, credentials) if credentials else
                        grpc.insecure_channel(self.address))
        try:
            grpc.channel_ready_future(self.channel).result(timeout=STARTUP_TIMEOUT_S)
        except grpc.FutureTimeoutError:
            self.stop()
            raise AssertionError(f"cannot connect to glossa-server at {self.address}:\n"
                                 f"{self.output()}") from None

    def output(self):
        self.stderr.seek(0)
        return ("stdout:\n" + "\n".join(self.stdout_lines) + "\nstderr:\n" +
                self.stderr.read().decode("utf-8", "replace"))

    def stop(self):
        """SIGTERM, wait; SIGKILL if it does not exit. Returns the exit code (None if killed)."""
        atexit.unregister(self.stop)
        if getattr(self, "channel", None) is not None:
            self.channel.close()
            self.channel = None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        self.reader.join(timeout=5)
        return self.proc.returncode


class ServerTestCase(unittest.TestCase):
    """One server per class, started with SERVER_FLAGS."""

    SERVER_FLAGS = ()

    @classmethod
    def setUpClass(cls):
        cls.server = ServerProcess(*cls.SERVER_FLAGS)
        cls.addClassCleanup(cls._stop_server)
        cls.translator = pb_grpc.TranslatorStub(cls.server.channel)
        cls.health = health_grpc.HealthStub(cls.server.channel)

    @classmethod
    def _stop_server(cls):
        code = cls.server.stop()
        # A crash (or a hang needing SIGKILL) on shutdown is a failure of the last test class run.
        if code != 0:
            raise AssertionError(f"glossa-server exited with {code} on SIGTERM:\n"
                                 f"{cls.server.output()}")

    def setUp(self):
        self.assertServerAlive()

    def tearDown(self):
        self.assertServerAlive()

    def assertServerAlive(self):
        code = self.server.proc.poll()
        if code is not None:
            self.fail(f"glossa-server exited with {code}:\n{self.server.output()}")

    def translate(self, texts, timeout=RPC_TIMEOUT_S, model=MODEL_NAME, **options):
        request = pb.TranslateRequest(model=model, texts=texts,
                                      options=pb.DecodingOptions(**options))
        return self.translator.Translate(request, timeout=timeout)

    def assertTranslatesNormally(self):
        response = self.translate([SHORT], beam_size=1)
        self.assertEqual(len(response.translations), 1)
        self.assertTrue(response.translations[0].hypotheses[0].text)

    def assertRpcError(self, call, code, *mentions):
        """call() fails with code and a message naming each of mentions; the server lives on."""
        with self.assertRaises(grpc.RpcError) as caught:
            call()
        error = caught.exception
        self.assertEqual(error.code(), code, f"details: {error.details()!r}")
        details = error.details() or ""
        self.assertTrue(details.strip(), "the error carries no message")
        for word in mentions:
            self.assertIn(word, details)
        self.assertServerAlive()
        self.assertTranslatesNormally()
        return details


@unittest.skipUnless(TRANSLATE, "set GLOSSA_TRANSLATE to glossa-translate (ctest does)")
@unittest.skipUnless(os.path.isfile(DEV_ES), f"needs {DEV_ES}")
class MatchesOfflineTranslateTest(ServerTestCase):
    """The server translates exactly as glossa-translate does."""

    def check_matches_cli(self, server_options, cli_flags):
        lines = dev_lines(20)
        self.assertEqual(len(lines), 20)
        response = self.translate(lines, **server_options)
        self.assertEqual(response.model, MODEL_NAME)
        self.assertEqual(len(response.translations), len(lines))
        for t in response.translations:
            self.assertEqual(len(t.hypotheses), 1)
        got = [t.hypotheses[0].text for t in response.translations]
        want = run_cli(lines, *cli_flags)
        self.assertEqual(len(want), len(lines))
        for i, (source, g, w) in enumerate(zip(lines, got, want)):
            self.assertEqual(g, w, f"line {i}: {source!r}")

    def test_greedy_matches_glossa_translate(self):
        self.check_matches_cli({"beam_size": 1, "max_output_tokens": 256},
                               ["--beam_size", "1", "--max_output_tokens", "256"])

    def test_default_beam_matches_glossa_translate(self):
        self.check_matches_cli({"max_output_tokens": 256}, ["--max_output_tokens", "256"])

    def test_explicit_beam_4_equals_default(self):
        lines = dev_lines(5)
        explicit = self.translate(lines, beam_size=4, max_output_tokens=256)
        default = self.translate(lines, max_output_tokens=256)
        self.assertEqual(explicit, default)


class TranslateTest(ServerTestCase):
    """Translate, TranslateStream, ListModels and health on a server with default limits."""

    # No result cache: the stream tests need the pieces of a translation being decoded.
    SERVER_FLAGS = ("--cache_bytes", "0")

    def test_model_may_be_left_empty_with_one_model(self):
        response = self.translate([SHORT], model="", beam_size=1)
        self.assertEqual(response.model, MODEL_NAME)
        self.assertEqual(response.translations[0].hypotheses[0].text,
                         self.translate([SHORT], beam_size=1).translations[0].hypotheses[0].text)

    def test_order_of_texts_is_kept(self):
        texts = [LONG, SHORT, "Hola.", LONG[:40]]
        together = self.translate(texts, beam_size=1)
        alone = [self.translate([t], beam_size=1).translations[0].hypotheses[0].text
                 for t in texts]
        self.assertEqual([t.hypotheses[0].text for t in together.translations], alone)

    def test_return_scores_gives_negative_scores(self):
        for beam in (1, 4):
            response = self.translate([SHORT, LONG], beam_size=beam, return_scores=True)
            for t in response.translations:
                h = t.hypotheses[0]
                self.assertLess(h.score, 0.0, f"beam {beam}: {h.text!r}")
                self.assertTrue(h.token_ids, f"beam {beam}: no token_ids")

    def test_greedy_without_scores_takes_the_same_tokens(self):
        # Without return_scores greedy steps use the argmax screen (runtime/ops/argmax_screen.h);
        # asked afterwards, the scores are computed, not a cached answer without them.
        for text in (SHORT, LONG):
            plain = self.translate([text], beam_size=1).translations[0].hypotheses[0]
            scored = self.translate([text], beam_size=1,
                                    return_scores=True).translations[0].hypotheses[0]
            self.assertEqual(list(plain.token_ids), list(scored.token_ids))
            self.assertEqual(plain.text, scored.text)
            self.assertLess(scored.score, 0.0)

    def test_scores_are_zero_unless_asked(self):
        response = self.translate([SHORT], beam_size=4)
        self.assertEqual(response.translations[0].hypotheses[0].score, 0.0)

    def test_n_best_sorted_by_score(self):
        response = self.translate([SHORT, LONG], beam_size=4, num_hypotheses=3,
                                  return_scores=True)
        self.assertEqual(len(response.translations), 2)
        for t in response.translations:
            self.assertEqual(len(t.hypotheses), 3)
            scores = [h.score for h in t.hypotheses]
            self.assertEqual(scores, sorted(scores, reverse=True))
            for h in t.hypotheses:
                self.assertLess(h.score, 0.0)
                self.assertTrue(h.token_ids)
            self.assertEqual(len({tuple(h.token_ids) for h in t.hypotheses}), 3,
                             "the n-best hypotheses are not distinct")

    def test_n_best_first_is_the_one_best(self):
        best = self.translate([LONG], beam_size=4, return_scores=True).translations[0]
        nbest = self.translate([LONG], beam_size=4, num_hypotheses=3,
                               return_scores=True).translations[0]
        self.assertEqual(nbest.hypotheses[0].text, best.hypotheses[0].text)
        self.assertEqual(list(nbest.hypotheses[0].token_ids), list(best.hypotheses[0].token_ids))

    def stream(self, text, **options):
        """The stream's messages with their arrival times (perf_counter_ns)."""
        request = pb.TranslateRequest(model=MODEL_NAME, texts=[text],
                                      options=pb.DecodingOptions(**options))
        messages = []
        for message in self.translator.TranslateStream(request, timeout=RPC_TIMEOUT_S):
            messages.append((time.perf_counter_ns(), message))
        return messages

    def check_stream(self, text, **options):
        messages = self.stream(text, **options)
        self.assertTrue(messages)
        *pieces, (_, last) = messages
        for _, m in pieces:
            self.assertFalse(m.done)
            self.assertEqual(len(m.result.hypotheses), 0)
        self.assertTrue(last.done)
        self.assertEqual(len(last.result.hypotheses), 1)
        best = last.result.hypotheses[0]
        self.assertEqual("".join(m.text_piece for _, m in messages), best.text)
        self.assertEqual([i for _, m in messages for i in m.token_ids], list(best.token_ids))
        unary = self.translate([text], **options).translations[0].hypotheses[0]
        self.assertEqual(best.text, unary.text)
        return messages

    def test_stream_greedy_pieces_add_up_and_arrive_early(self):
        messages = self.check_stream(LONG, beam_size=1)
        self.assertGreater(len(messages), 2)
        first, last = messages[0][0], messages[-1][0]
        self.assertLess(first, last, "the first piece did not arrive before the last message")

    def test_stream_beam_pieces_add_up(self):
        messages = self.check_stream(LONG)
        self.assertGreaterEqual(len(messages), 1)

    def test_stream_empty_text(self):
        messages = self.stream("")
        self.assertEqual(len(messages), 1)
        last = messages[0][1]
        self.assertTrue(last.done)
        self.assertEqual([h.text for h in last.result.hypotheses], [""])

    def test_list_models(self):
        response = self.translator.ListModels(pb.ListModelsRequest(), timeout=RPC_TIMEOUT_S)
        self.assertEqual(len(response.models), 1)
        m = response.models[0]
        self.assertEqual(m.name, MODEL_NAME)
        self.assertEqual(m.source_language, "es")
        self.assertEqual(m.target_language, "en")
        self.assertEqual(m.architecture, "marian")
        self.assertEqual(m.source_vocab_size, 15315)
        self.assertEqual(m.target_vocab_size, 15315)
        self.assertGreater(m.encoder_layers, 0)
        self.assertGreater(m.decoder_layers, 0)
        self.assertGreater(m.d_model, 0)
        self.assertGreater(m.max_input_tokens, 0)
        self.assertGreater(m.max_output_tokens, 0)
        self.assertEqual(list(m.source_languages), ["es"])
        self.assertEqual(list(m.target_languages), ["en"])
        # The file path is the operators' business: the server's log names it, clients never see it.
        self.assertEqual(m.path, "")
        self.assertTrue(any(os.path.realpath(MODEL) in line or MODEL in line
                            for line in self.server.stdout_lines if "glossa-server: model " in line),
                        self.server.stdout_lines)

    def test_health_serving(self):
        for service in ("", MODEL_NAME, "glossa.v1.Translator"):
            response = self.health.Check(health_pb.HealthCheckRequest(service=service),
                                         timeout=RPC_TIMEOUT_S)
            self.assertEqual(response.status, health_pb.HealthCheckResponse.SERVING, service)

    def test_health_unknown_service_not_found(self):
        with self.assertRaises(grpc.RpcError) as caught:
            self.health.Check(health_pb.HealthCheckRequest(service="nope"), timeout=RPC_TIMEOUT_S)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.NOT_FOUND)


class DecodingControlsTest(ServerTestCase):
    """Repetition penalty, no-repeat n-grams, minimum length, target prefix and token scores
    through the server (their parity with Hugging Face is controls_test's)."""

    PREFIX = "The man and"
    # No result cache: requests must meet in the engine's decoder steps, not in the cache.
    SERVER_FLAGS = ("--cache_bytes", "0")

    def test_prefix_starts_every_hypothesis_and_scores_cover_every_token(self):
        response = self.translate([SHORT, LONG], beam_size=4, num_hypotheses=2,
                                  target_prefix=self.PREFIX, return_token_scores=True)
        for translation in response.translations:
            self.assertEqual(len(translation.hypotheses), 2)
            for h in translation.hypotheses:
                self.assertTrue(h.text.startswith(self.PREFIX), h.text)
                self.assertEqual(len(h.token_scores), len(h.token_ids))
                self.assertTrue(all(s <= 0 for s in h.token_scores), list(h.token_scores))

    def test_token_scores_only_when_asked(self):
        h = self.translate([SHORT], beam_size=1).translations[0].hypotheses[0]
        self.assertEqual(len(h.token_scores), 0)

    def test_alignment_points_into_the_source_for_every_token_only_when_asked(self):
        response = self.translate([SHORT, LONG], beam_size=4, num_hypotheses=2,
                                  return_alignment=True)
        for text, translation in zip([SHORT, LONG], response.translations):
            source_tokens = len(text.split()) * 4 + 2  # far more than the text's pieces
            for h in translation.hypotheses:
                self.assertEqual(len(h.alignment), len(h.token_ids))
                self.assertTrue(all(0 <= a < source_tokens for a in h.alignment),
                                list(h.alignment))
        h = self.translate([SHORT], beam_size=1).translations[0].hypotheses[0]
        self.assertEqual(len(h.alignment), 0)

    def test_inline_tags_come_back_on_the_translation_whole_or_by_sentence(self):
        tagged = ("Y Jesús dijo a <b>sus discípulos</b>: <i>Venid</i> conmigo.<br/> "
                  "<a href=\"#x\">Sea la luz.</a> Y fue la luz &amp; más.")
        tags = re.compile(r"<[^>]*>")
        for split in (False, True):
            request = pb.TranslateRequest(model=MODEL_NAME, texts=[tagged], inline_tags=True,
                                          split_sentences=split,
                                          options=pb.DecodingOptions(beam_size=1))
            h = self.translator.Translate(request, timeout=RPC_TIMEOUT_S).translations[0] \
                .hypotheses[0]
            self.assertEqual(sorted(tags.findall(h.text)), sorted(tags.findall(tagged)), h.text)
            self.assertLess(h.text.index("<b>"), h.text.index("</b>"), h.text)
            self.assertEqual(len(h.alignment), 0)  # only when asked
            plain = pb.TranslateRequest(model=MODEL_NAME, texts=[html.unescape(
                tags.sub("", tagged))], split_sentences=split,
                options=pb.DecodingOptions(beam_size=1))
            untagged = self.translator.Translate(plain, timeout=RPC_TIMEOUT_S)
            self.assertEqual(html.unescape(tags.sub("", h.text)),
                             untagged.translations[0].hypotheses[0].text)

    def test_too_many_inline_tags_are_refused(self):
        request = pb.TranslateRequest(model=MODEL_NAME, texts=["<b>a</b> " * 513],
                                      inline_tags=True)
        self.assertRpcError(lambda: self.translator.Translate(request, timeout=RPC_TIMEOUT_S),
                            grpc.StatusCode.INVALID_ARGUMENT, "513 inline tags", "512")

    def test_inline_tags_not_in_stream(self):
        request = pb.TranslateRequest(model=MODEL_NAME, texts=["<b>Hola</b>"], inline_tags=True)
        self.assertRpcError(
            lambda: list(self.translator.TranslateStream(request, timeout=RPC_TIMEOUT_S)),
            grpc.StatusCode.INVALID_ARGUMENT, "inline_tags")

    def test_greedy_token_scores_sum_to_the_score(self):
        h = self.translate([LONG], beam_size=1, return_scores=True,
                           return_token_scores=True).translations[0].hypotheses[0]
        self.assertAlmostEqual(sum(h.token_scores), h.score, places=3)

    def test_stream_with_prefix_streams_the_completion(self):
        request = pb.TranslateRequest(model=MODEL_NAME, texts=[LONG], options=pb.DecodingOptions(
            beam_size=1, target_prefix=self.PREFIX))
        messages = list(self.translator.TranslateStream(request, timeout=RPC_TIMEOUT_S))
        best = messages[-1].result.hypotheses[0]
        completion = "".join(m.text_piece for m in messages)
        self.assertEqual(self.PREFIX + completion, best.text)
        self.assertFalse(completion.strip().startswith(self.PREFIX), completion)
        streamed_ids = [i for m in messages for i in m.token_ids]
        self.assertEqual(streamed_ids, list(best.token_ids)[-len(streamed_ids):])
        self.assertLess(len(streamed_ids), len(best.token_ids))  # the prefix's ids are not sent

    def test_controls_change_the_output_as_they_should(self):
        plain = self.translate([LONG], beam_size=1).translations[0].hypotheses[0]
        longer = self.translate([LONG], beam_size=1, min_output_tokens=len(plain.token_ids) + 5)
        self.assertGreater(len(longer.translations[0].hypotheses[0].token_ids),
                           len(plain.token_ids) + 5)
        ids = list(self.translate([LONG], beam_size=4, no_repeat_ngram_size=1)
                   .translations[0].hypotheses[0].token_ids)
        self.assertEqual(len(ids), len(set(ids)), "a token repeated despite no_repeat_ngram_size 1")

    def test_requests_with_and_without_controls_batched_together_equal_alone(self):
        variants = [dict(beam_size=1), dict(beam_size=4, repetition_penalty=1.3),
                    dict(beam_size=1, no_repeat_ngram_size=2, target_prefix=self.PREFIX),
                    dict(beam_size=4, min_output_tokens=12, target_prefix="And")]
        alone = [self.translate([LONG], **v).translations[0].hypotheses[0].text for v in variants]
        with concurrent.futures.ThreadPoolExecutor(len(variants) * 4) as pool:
            futures = [(i, pool.submit(self.translate, [LONG], **variants[i]))
                       for _ in range(4) for i in range(len(variants))]
            for i, future in futures:
                self.assertEqual(future.result().translations[0].hypotheses[0].text, alone[i])


class ResultCacheTest(ServerTestCase):
    """--cache_bytes: repeated texts answered from the cache, identical to computed answers."""

    CAPACITY = 20000
    SERVER_FLAGS = ("--metrics_listen", "127.0.0.1:0", "--cache_bytes", str(CAPACITY))

    def cache(self):
        """The glossa_cache_* samples of the server's /metrics, by name."""
        port = next(re.search(r":(\d+)/metrics", line).group(1)
                    for line in self.server.stdout_lines if "metrics on http" in line)
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
        return {m.group(1): float(m.group(2)) for m in
                re.finditer(r"^(glossa_cache_\w+) (\S+)$", text.decode(), re.M)}

    def test_a_cached_answer_equals_the_computed_one(self):
        options = dict(beam_size=4, num_hypotheses=2, return_scores=True,
                       return_token_scores=True, target_prefix="And")
        before = self.cache()
        first = self.translate([SHORT, LONG, ""], **options)
        middle = self.cache()
        second = self.translate([SHORT, LONG, ""], **options)
        after = self.cache()
        self.assertEqual(first, second)
        self.assertEqual(middle["glossa_cache_misses_total"] - before["glossa_cache_misses_total"],
                         2)
        self.assertEqual(after["glossa_cache_hits_total"] - middle["glossa_cache_hits_total"], 2)
        # Other options: other entries.
        other = self.translate([SHORT, LONG], beam_size=1)
        self.assertEqual(self.cache()["glossa_cache_hits_total"], after["glossa_cache_hits_total"])
        self.assertNotEqual(other.translations[0], first.translations[0])

    def test_a_request_is_answered_from_the_cache_for_the_texts_it_holds(self):
        cached = self.translate(["Y vió Dios la luz."], beam_size=1).translations[0]
        before = self.cache()
        both = self.translate(["Y vió Dios la luz.", "Y llamó Dios a la luz Día."], beam_size=1)
        after = self.cache()
        self.assertEqual(both.translations[0], cached)
        self.assertEqual(after["glossa_cache_hits_total"] - before["glossa_cache_hits_total"], 1)
        self.assertEqual(after["glossa_cache_misses_total"] - before["glossa_cache_misses_total"],
                         1)
        alone = self.translate(["Y llamó Dios a la luz Día."], beam_size=1).translations[0]
        self.assertEqual(both.translations[1], alone)

    def test_a_stream_of_a_cached_text_is_one_message_with_the_same_result(self):
        unary = self.translate([LONG], beam_size=2).translations[0]
        request = pb.TranslateRequest(model=MODEL_NAME, texts=[LONG],
                                      options=pb.DecodingOptions(beam_size=2))
        messages = list(self.translator.TranslateStream(request, timeout=RPC_TIMEOUT_S))
        self.assertEqual(len(messages), 1)
        self.assertTrue(messages[0].done)
        self.assertEqual(messages[0].text_piece, unary.hypotheses[0].text)
        self.assertEqual(messages[0].result, unary)

    def test_sampling_without_a_seed_is_not_cached(self):
        before = self.cache()
        for _ in range(2):
            self.translate([SHORT], beam_size=1, sampling_temperature=1.0)
        after = self.cache()
        for name in ("glossa_cache_hits_total", "glossa_cache_misses_total"):
            self.assertEqual(after[name], before[name], name)
        seeded = [self.translate([SHORT], beam_size=1, sampling_temperature=1.0, seed=5)
                  for _ in range(2)]
        self.assertEqual(seeded[0], seeded[1])
        self.assertEqual(self.cache()["glossa_cache_hits_total"],
                         after["glossa_cache_hits_total"] + 1)

    def test_the_byte_bound_holds(self):
        with open(DEV_ES, encoding="utf-8") if os.path.exists(DEV_ES) else contextlib.nullcontext(
                None) as f:
            lines = f.read().splitlines()[:120] if f else [f"{i} {SHORT}" for i in range(120)]
        self.translate(lines[:60], beam_size=1, max_output_tokens=20)
        self.translate(lines[60:], beam_size=1, max_output_tokens=20)
        c = self.cache()
        self.assertLessEqual(c["glossa_cache_bytes"], self.CAPACITY)
        self.assertEqual(c["glossa_cache_capacity_bytes"], self.CAPACITY)
        self.assertGreater(c["glossa_cache_evictions_total"], 0)
        self.assertGreater(c["glossa_cache_entries"], 0)


class RequestErrorsTest(ServerTestCase):
    """Bad requests get the right status and a message saying what to change."""

    MAX_TEXT_BYTES = 100
    MAX_TEXTS = 4
    SERVER_FLAGS = ("--max_text_bytes", str(MAX_TEXT_BYTES),
                    "--max_texts_per_request", str(MAX_TEXTS))

    def test_unknown_model_not_found_lists_models(self):
        details = self.assertRpcError(lambda: self.translate([SHORT], model="nope"),
                                      grpc.StatusCode.NOT_FOUND, MODEL_NAME)
        self.assertIn("nope", details)

    def test_unknown_model_in_stream_not_found(self):
        request = pb.TranslateRequest(model="nope", texts=[SHORT])
        self.assertRpcError(
            lambda: list(self.translator.TranslateStream(request, timeout=RPC_TIMEOUT_S)),
            grpc.StatusCode.NOT_FOUND, MODEL_NAME)

    def test_beam_size_too_large(self):
        self.assertRpcError(lambda: self.translate([SHORT], beam_size=1000),
                            grpc.StatusCode.INVALID_ARGUMENT, "beam_size")

    def test_num_hypotheses_over_beam_size(self):
        self.assertRpcError(lambda: self.translate([SHORT], beam_size=2, num_hypotheses=3),
                            grpc.StatusCode.INVALID_ARGUMENT, "num_hypotheses")

    def test_num_hypotheses_over_default_beam_size(self):
        self.assertRpcError(lambda: self.translate([SHORT], num_hypotheses=5),
                            grpc.StatusCode.INVALID_ARGUMENT, "num_hypotheses")

    def test_sampling_with_a_beam_is_refused(self):
        self.assertRpcError(lambda: self.translate([SHORT], sampling_temperature=0.7, beam_size=4),
                            grpc.StatusCode.INVALID_ARGUMENT, "beam_size")

    def test_top_k_without_temperature_is_refused(self):
        self.assertRpcError(lambda: self.translate([SHORT], sampling_top_k=5),
                            grpc.StatusCode.INVALID_ARGUMENT, "sampling_temperature")

    def test_sampling_with_a_seed_is_reproducible(self):
        def sample(seed):
            response = self.translate([SHORT] * 4, sampling_temperature=1.5, sampling_top_k=50,
                                      sampling_top_p=0.95, seed=seed)
            return [t.hypotheses[0].text for t in response.translations]
        first = sample(1234)
        self.assertEqual(first, sample(1234))
        self.assertEqual(len(set(first)), 1, "one seed for all texts of a request")
        self.assertNotEqual(first, sample(99), "another seed, another sample (very likely)")

    def test_text_over_max_text_bytes(self):
        text = "a" * (self.MAX_TEXT_BYTES + 1)
        self.translate(["a" * self.MAX_TEXT_BYTES], beam_size=1)  # at the limit: fine
        details = self.assertRpcError(lambda: self.translate([SHORT, text]),
                                      grpc.StatusCode.INVALID_ARGUMENT, str(self.MAX_TEXT_BYTES))
        self.assertIn("bytes", details)

    def test_too_many_texts(self):
        self.translate([SHORT] * self.MAX_TEXTS, beam_size=1)  # at the limit: fine
        self.assertRpcError(lambda: self.translate([SHORT] * (self.MAX_TEXTS + 1)),
                            grpc.StatusCode.INVALID_ARGUMENT, str(self.MAX_TEXTS))

    def test_stream_with_two_texts(self):
        request = pb.TranslateRequest(model=MODEL_NAME, texts=[SHORT, SHORT])
        self.assertRpcError(
            lambda: list(self.translator.TranslateStream(request, timeout=RPC_TIMEOUT_S)),
            grpc.StatusCode.INVALID_ARGUMENT, "one text")

    def test_stream_with_no_text(self):
        request = pb.TranslateRequest(model=MODEL_NAME, texts=[])
        self.assertRpcError(
            lambda: list(self.translator.TranslateStream(request, timeout=RPC_TIMEOUT_S)),
            grpc.StatusCode.INVALID_ARGUMENT, "one text")

    def test_empty_text_gives_one_empty_hypothesis(self):
        response = self.translate([""])
        self.assertEqual(len(response.translations), 1)
        self.assertEqual([h.text for h in response.translations[0].hypotheses], [""])
        response = self.translate([SHORT, "", SHORT], beam_size=1)
        self.assertEqual([len(t.hypotheses) for t in response.translations], [1, 1, 1])
        self.assertEqual(response.translations[1].hypotheses[0].text, "")
        self.assertTrue(response.translations[0].hypotheses[0].text)
        self.assertEqual(response.translations[0], response.translations[2])
        self.assertTranslatesNormally()

    def test_no_texts_gives_no_translations(self):
        response = self.translate([])
        self.assertEqual(len(response.translations), 0)
        self.assertEqual(response.model, MODEL_NAME)
        self.assertTranslatesNormally()

    def raw_translate(self, serialized):
        call = self.server.channel.unary_unary(
            "/glossa.v1.Translator/Translate", request_serializer=lambda b: b,
            response_deserializer=pb.TranslateResponse.FromString)
        return call(serialized, timeout=RPC_TIMEOUT_S)

    def test_raw_request_of_valid_utf8_translates(self):
        # The hand-made encoding itself is right: the same request with valid UTF-8 translates.
        response = self.raw_translate(raw_translate_request(MODEL_NAME, [SHORT.encode()]))
        self.assertEqual(response.translations[0].hypotheses[0].text,
                         self.translate([SHORT]).translations[0].hypotheses[0].text)

    def test_invalid_utf8(self):
        serialized = raw_translate_request(MODEL_NAME, [SHORT.encode(), b"hola \xc3("])
        self.assertRpcError(lambda: self.raw_translate(serialized),
                            grpc.StatusCode.INVALID_ARGUMENT, "UTF-8")

    def test_invalid_utf8_inside_an_inline_tag(self):
        # The tag would be written back as it came: its bytes are checked before it is taken out.
        inline_tags = bytes([10 << 3, 1])  # field 10, a varint: true
        serialized = raw_translate_request(MODEL_NAME, [b'<a href="\xea]">hola</a>']) + inline_tags
        self.assertRpcError(lambda: self.raw_translate(serialized),
                            grpc.StatusCode.INVALID_ARGUMENT, "text 0 is not valid UTF-8")
        fine = raw_translate_request(MODEL_NAME, [b'<a href="x">hola</a>']) + inline_tags
        self.assertIn('<a href="x">', self.raw_translate(fine).translations[0].hypotheses[0].text)

    def test_invalid_utf8_in_stream(self):
        call = self.server.channel.unary_stream(
            "/glossa.v1.Translator/TranslateStream", request_serializer=lambda b: b,
            response_deserializer=pb.TranslateStreamResponse.FromString)
        serialized = raw_translate_request(MODEL_NAME, [b"caf\xe9"])
        self.assertRpcError(lambda: list(call(serialized, timeout=RPC_TIMEOUT_S)),
                            grpc.StatusCode.INVALID_ARGUMENT, "UTF-8")

    def test_unparsable_request(self):
        self.assertRpcError(lambda: self.raw_translate(b"\x12\x7fhola"),
                            grpc.StatusCode.INVALID_ARGUMENT)


class DeadlineTest(ServerTestCase):
    """A request past its deadline fails with DEADLINE_EXCEEDED and does not wedge the server."""

    def test_1ms_deadline_exceeded_then_server_answers(self):
        texts = [LONG + " " + str(i) for i in range(64)]
        with self.assertRaises(grpc.RpcError) as caught:
            self.translate(texts, timeout=0.001, beam_size=4, max_output_tokens=256)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertServerAlive()
        self.assertTranslatesNormally()

    def test_1ms_deadline_on_stream(self):
        request = pb.TranslateRequest(model=MODEL_NAME, texts=[LONG],
                                      options=pb.DecodingOptions(max_output_tokens=256))
        with self.assertRaises(grpc.RpcError) as caught:
            list(self.translator.TranslateStream(request, timeout=0.001))
        self.assertEqual(caught.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertServerAlive()
        self.assertTranslatesNormally()


class DemoModelTest(unittest.TestCase):
    """With no model named, the server serves the bundled demo and says what it is: start-up
    lines, a try-line with a sentence it translates well, and the page at / with its examples,
    each translated as the demo translates it."""

    EXAMPLES = {  # server/demo_model.h's examples and the demo's translations (beam 4)
        "¡Cuán grandes son tus obras, oh Jehová!": "How great are your works, Yahweh!",
        "La gracia de nuestro Señor Jesucristo sea con vuestro espíritu. Amén.":
            "The grace of our Lord Jesus Christ be with your spirit. Amen.",
        "Y los hijos de Israel partieron de Egipto.": "The children of Israel traveled from Egypt.",
        "Y Moisés edificó un altar.": "Moses built an altar.",
    }

    @classmethod
    def setUpClass(cls):
        cls.server = ServerProcess("--http_listen", "127.0.0.1:0", models=())
        cls.addClassCleanup(cls.server.stop)

    def test_start_up_says_what_the_demo_is_and_how_to_try_it(self):
        lines = self.server.stdout_lines
        model = [line for line in lines if line.startswith("glossa-server: model opus-mt-es-en ")]
        self.assertEqual(len(model), 1, lines)
        self.assertTrue(model[0].endswith("(marian, float32, es -> en)"), model[0])
        self.assertTrue(any("trained only on Bible verses" in line for line in lines), lines)
        first = next(iter(self.EXAMPLES))
        self.assertIn(f"glossa-server: try  {os.path.dirname(SERVER)}/glossa-client --server "
                      f"{self.server.address} \"{first}\"", lines)

    def test_the_examples_translate_well_and_the_page_offers_them(self):
        http = next(re.match(r"glossa-server: HTTP on (http://\S+/)$", line).group(1)
                    for line in self.server.stdout_lines if line.startswith("glossa-server: HTTP"))
        page = urllib.request.urlopen(http, timeout=10).read().decode()
        self.assertIn("trained only on Bible verses", page)
        stub = pb_grpc.TranslatorStub(self.server.channel)
        for source, want in self.EXAMPLES.items():
            self.assertIn(f'<button type="button" class="example">{html.escape(source)}</button>',
                          page)
            got = stub.Translate(pb.TranslateRequest(texts=[source]), timeout=RPC_TIMEOUT_S)
            self.assertEqual(got.translations[0].hypotheses[0].text, want, source)

    def test_a_named_model_gets_no_demo_lines(self):
        server = ServerProcess()
        try:
            self.assertFalse(any("Bible" in line for line in server.stdout_lines))
            self.assertTrue(any(line.endswith(" --list") for line in server.stdout_lines),
                            server.stdout_lines)
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main()
