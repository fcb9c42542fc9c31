"""TLS, mutual TLS and the bearer tokens of glossa-server, from a Python client; token files
that are refused; gRPC's resource quota; glossa-client writing a document only where it was
told to.

Certificates are made at test time with openssl: a CA, a server certificate for 127.0.0.1 and a
client certificate, all signed by the CA. Run by ctest (see CMakeLists.txt), or by hand:
  GLOSSA_SERVER=build/glossa-server /usr/bin/python3 -m unittest tests/python/test_security.py
"""
import concurrent.futures
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402  (stubs, server process, constants)

grpc = ts.grpc
TOKEN = "s3cret-token-for-tests"
_certs = None


def setUpModule():
    global _certs
    ts.setUpModule()
    if shutil.which("openssl") is None:
        raise unittest.SkipTest("needs openssl to make test certificates")
    _certs = tempfile.mkdtemp(prefix="glossa-certs-")

    def openssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=_certs, timeout=60)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=Test CA",
            "-keyout", "ca.key", "-out", "ca.pem")
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
                      ("client", "extendedKeyUsage=clientAuth")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
                "-keyout", f"{name}.key", "-out", f"{name}.csr")
        with open(os.path.join(_certs, f"{name}.ext"), "w") as f:
            f.write(ext + "\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem")
    with open(os.path.join(_certs, "token"), "w") as f:
        f.write(TOKEN + "\n")


def tearDownModule():
    if _certs:
        shutil.rmtree(_certs, ignore_errors=True)
    ts.tearDownModule()


def stop_cleanly(server):
    code = server.stop()
    if code != 0:
        raise AssertionError(f"glossa-server exited with {code} on SIGTERM:\n{server.output()}")


def cert(name):
    with open(os.path.join(_certs, name), "rb") as f:
        return f.read()


def request():
    return ts.pb.TranslateRequest(model=ts.MODEL_NAME, texts=[ts.SHORT],
                                  options=ts.pb.DecodingOptions(beam_size=1))


class TlsAndTokenTest(unittest.TestCase):
    """TLS with a bearer token."""

    @classmethod
    def setUpClass(cls):
        credentials = grpc.ssl_channel_credentials(root_certificates=cert("ca.pem"))
        cls.server = ts.ServerProcess(
            "--tls_cert", os.path.join(_certs, "server.pem"),
            "--tls_key", os.path.join(_certs, "server.key"),
            "--auth_token_file", os.path.join(_certs, "token"), credentials=credentials)
        cls.addClassCleanup(stop_cleanly, cls.server)
        cls.stub = ts.pb_grpc.TranslatorStub(cls.server.channel)

    def test_with_the_token(self):
        response = self.stub.Translate(request(), timeout=ts.RPC_TIMEOUT_S,
                                       metadata=[("authorization", f"Bearer {TOKEN}")])
        self.assertTrue(response.translations[0].hypotheses[0].text)

    def test_without_a_token_is_unauthenticated(self):
        with self.assertRaises(grpc.RpcError) as caught:
            self.stub.Translate(request(), timeout=ts.RPC_TIMEOUT_S)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        self.assertIn("authorization: Bearer", caught.exception.details())

    def test_a_wrong_token_is_unauthenticated(self):
        for value in (f"Bearer {TOKEN}x", TOKEN, "Bearer ", f"bearer {TOKEN}"):
            with self.assertRaises(grpc.RpcError) as caught:
                self.stub.Translate(request(), timeout=ts.RPC_TIMEOUT_S,
                                    metadata=[("authorization", value)])
            self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAUTHENTICATED, value)

    def test_list_models_and_streams_need_the_token_too(self):
        with self.assertRaises(grpc.RpcError) as caught:
            self.stub.ListModels(ts.pb.ListModelsRequest(), timeout=ts.RPC_TIMEOUT_S)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        with self.assertRaises(grpc.RpcError) as caught:
            list(self.stub.TranslateStream(request(), timeout=ts.RPC_TIMEOUT_S))
        self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAUTHENTICATED)

    def test_health_stays_open_for_probes(self):
        health = ts.health_grpc.HealthStub(self.server.channel)
        reply = health.Check(ts.health_pb.HealthCheckRequest(service=""), timeout=ts.RPC_TIMEOUT_S)
        self.assertEqual(reply.status, ts.health_pb.HealthCheckResponse.SERVING)

    def test_plaintext_clients_cannot_talk_to_a_tls_server(self):
        with grpc.insecure_channel(self.server.address) as channel:
            stub = ts.pb_grpc.TranslatorStub(channel)
            with self.assertRaises(grpc.RpcError) as caught:
                stub.Translate(request(), timeout=10,
                               metadata=[("authorization", f"Bearer {TOKEN}")])
            self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAVAILABLE)

    def test_glossa_client_speaks_tls_with_a_token(self):
        client = os.path.join(os.path.dirname(ts.SERVER), "glossa-client")
        if not os.access(client, os.X_OK):
            self.skipTest(f"no glossa-client beside {ts.SERVER}")
        run = subprocess.run([client, "--server", self.server.address, "--tls_ca",
                              os.path.join(_certs, "ca.pem"), "--token", TOKEN, "--beam_size", "1",
                              ts.SHORT], capture_output=True, text=True, timeout=60)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertTrue(run.stdout.strip())


class MutualTlsTest(unittest.TestCase):
    """--tls_client_ca: only clients with a certificate signed by that CA get in."""

    @classmethod
    def setUpClass(cls):
        credentials = grpc.ssl_channel_credentials(
            root_certificates=cert("ca.pem"), private_key=cert("client.key"),
            certificate_chain=cert("client.pem"))
        cls.server = ts.ServerProcess(
            "--tls_cert", os.path.join(_certs, "server.pem"),
            "--tls_key", os.path.join(_certs, "server.key"),
            "--tls_client_ca", os.path.join(_certs, "ca.pem"), credentials=credentials)
        cls.addClassCleanup(stop_cleanly, cls.server)

    def test_a_client_with_a_certificate_gets_in(self):
        stub = ts.pb_grpc.TranslatorStub(self.server.channel)
        response = stub.Translate(request(), timeout=ts.RPC_TIMEOUT_S)
        self.assertTrue(response.translations[0].hypotheses[0].text)

    def test_a_client_without_a_certificate_is_refused(self):
        credentials = grpc.ssl_channel_credentials(root_certificates=cert("ca.pem"))
        with grpc.secure_channel(self.server.address, credentials) as channel:
            stub = ts.pb_grpc.TranslatorStub(channel)
            with self.assertRaises(grpc.RpcError) as caught:
                stub.Translate(request(), timeout=10)
            self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAVAILABLE)


class BadTlsFlagsTest(unittest.TestCase):
    def test_a_key_without_a_certificate_is_refused_at_start(self):
        if not ts.SERVER:
            self.skipTest("set GLOSSA_SERVER")
        run = subprocess.run([ts.SERVER, "--listen", "127.0.0.1:0", "--metrics_listen", "",
                              "--model", f"demo={ts.MODEL}", "--tls_key",
                              os.path.join(_certs, "server.key")],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(run.returncode, 2)
        self.assertIn("--tls_cert", run.stderr)

    def test_a_token_file_without_a_token_is_refused_at_start(self):
        if not ts.SERVER:
            self.skipTest("set GLOSSA_SERVER")
        for content in ("", "\n", "  \t\r\n"):
            with self.subTest(content=content), tempfile.NamedTemporaryFile("w") as f:
                f.write(content)
                f.flush()
                run = subprocess.run([ts.SERVER, "--listen", "127.0.0.1:0", "--metrics_listen",
                                      "", "--http_listen", "", "--model", f"demo={ts.MODEL}",
                                      "--auth_token_file", f.name],
                                     capture_output=True, text=True, timeout=60)
                self.assertEqual(run.returncode, 2, run.stdout + run.stderr)
                self.assertRegex(run.stderr, "holds no token|is missing or empty")


class ClientTokenFileTest(unittest.TestCase):
    """--auth_token_file's named clients: a file that is not one bare token or lines of
    'NAME TOKEN' stops the server at start, naming the line and never a token."""

    SECRET = "tok-never-printed"

    def start(self, content):
        # The file is read before any model loads: a model that does not exist is never reached.
        with tempfile.NamedTemporaryFile("w") as f:
            f.write(content)
            f.flush()
            return subprocess.run([ts.SERVER, "--listen", "127.0.0.1:0", "--metrics_listen", "",
                                   "--http_listen", "", "--model", "demo=/nonexistent.glossa",
                                   "--auth_token_file", f.name],
                                  capture_output=True, text=True, timeout=60)

    def test_malformed_files_are_refused_with_the_line(self):
        if not ts.SERVER:
            self.skipTest("set GLOSSA_SERVER")
        s = self.SECRET
        cases = {
            f"# clients\nalice {s}1\nalice {s}2\n": "line 3: the client's name is that of line 2",
            f"alice {s}1\nbob {s}1\n": "line 2: the token is that of line 1",
            f"alice {s}1\n\nbob {s}2 extra\n": "line 3: expected 'NAME TOKEN', found 3 fields",
            f"alice {s}1\n{s}2\n": "line 2: expected 'NAME TOKEN', found 1 fields",
            f"anonymous {s}1\n": "line 1: a client's name is 1 to 64 letters",
            f"al/ice {s}1\n": "line 1: a client's name is 1 to 64 letters",
            "# only a comment\n\n": "holds no token",
        }
        for content, message in cases.items():
            with self.subTest(content=content):
                run = self.start(content)
                self.assertEqual(run.returncode, 2, run.stdout + run.stderr)
                self.assertIn(message, run.stderr)
                self.assertNotIn(s, run.stdout + run.stderr)

    def test_one_bare_token_is_the_default_client(self):
        if not ts.SERVER:
            self.skipTest("set GLOSSA_SERVER")
        server = ts.ServerProcess("--auth_token_file", os.path.join(_certs, "token"),
                                  "--metrics_listen", "", "--http_listen", "")
        self.addCleanup(stop_cleanly, server)
        self.assertIn("glossa-server: requests need a client's token (--auth_token_file): default",
                      server.stdout_lines)
        stub = ts.pb_grpc.TranslatorStub(server.channel)
        response = stub.Translate(request(), timeout=ts.RPC_TIMEOUT_S,
                                  metadata=[("authorization", f"Bearer {TOKEN}")])
        self.assertTrue(response.translations[0].hypotheses[0].text)


class GrpcResourceQuotaTest(unittest.TestCase):
    """--grpc_memory_mb and --grpc_max_threads bound what gRPC takes: a message larger than the
    memory quota is refused (RESOURCE_EXHAUSTED) where the default quota receives it, and server
    reflection, gRPC's one synchronous service, gets no thread past the thread quota; the other
    calls are served all along."""

    BIG = "a" * 3_000_000  # past --max_text_bytes: a server that receives it says so

    def big_request(self, server):
        stub = ts.pb_grpc.TranslatorStub(server.channel)
        try:
            stub.Translate(ts.pb.TranslateRequest(model=ts.MODEL_NAME, texts=[self.BIG]),
                           timeout=ts.RPC_TIMEOUT_S)
        except grpc.RpcError as e:
            return e.code()
        return grpc.StatusCode.OK

    def reflection(self, server):
        """Whether server reflection lists glossa.v1.Translator (a list_services request)."""
        call = server.channel.stream_stream(
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
        try:
            return b"glossa.v1.Translator" in next(iter(call(iter([b"\x3a\x00"]),
                                                            timeout=ts.RPC_TIMEOUT_S)))
        except grpc.RpcError as e:
            return e.code()

    def serve(self, *flags):
        server = ts.ServerProcess("--metrics_listen", "", "--http_listen", "", *flags)
        self.addCleanup(stop_cleanly, server)
        return server

    def test_the_quotas_bound_memory_and_threads(self):
        if not ts.SERVER:
            self.skipTest("set GLOSSA_SERVER")
        default = self.serve()
        self.assertEqual(self.big_request(default), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIs(self.reflection(default), True)
        small = self.serve("--grpc_memory_mb", "1", "--grpc_max_threads", "1")
        self.assertEqual(self.big_request(small), grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertEqual(self.reflection(small), grpc.StatusCode.RESOURCE_EXHAUSTED)
        stub = ts.pb_grpc.TranslatorStub(small.channel)
        response = stub.Translate(request(), timeout=ts.RPC_TIMEOUT_S)
        self.assertTrue(response.translations[0].hypotheses[0].text)
        health = ts.health_grpc.HealthStub(small.channel)
        reply = health.Check(ts.health_pb.HealthCheckRequest(service=""), timeout=ts.RPC_TIMEOUT_S)
        self.assertEqual(reply.status, ts.health_pb.HealthCheckResponse.SERVING)

    def test_bad_quotas_are_refused_at_start(self):
        if not ts.SERVER:
            self.skipTest("set GLOSSA_SERVER")
        for flag, value in (("--grpc_memory_mb", "0"), ("--grpc_max_threads", "0")):
            with self.subTest(flag=flag):
                run = subprocess.run([ts.SERVER, "--listen", "127.0.0.1:0", "--metrics_listen",
                                      "", "--http_listen", "", "--model", f"demo={ts.MODEL}",
                                      flag, value], capture_output=True, text=True, timeout=60)
                self.assertEqual(run.returncode, 2, run.stdout + run.stderr)
                self.assertIn(flag, run.stderr)


class ClientWritesOnlyWhereToldTest(unittest.TestCase):
    """glossa-client --document writes beside its input under the name the server gives only
    when that is a plain file name, and sends the server the input's name, not its path."""

    def serve(self, file_name):
        seen = []

        class Translator(ts.pb_grpc.TranslatorServicer):
            def TranslateDocument(self, request, context):
                seen.append(request.file_name)
                return ts.pb.TranslateDocumentResponse(content=b"translated", file_name=file_name,
                                                       segments=1, source_language="es")
        server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=2))
        ts.pb_grpc.add_TranslatorServicer_to_server(Translator(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self.addCleanup(server.stop, None)
        return port, seen

    def run_client(self, port, document):
        client = os.path.join(os.path.dirname(ts.SERVER), "glossa-client")
        return subprocess.run([client, "--server", f"127.0.0.1:{port}", "--document", document],
                              capture_output=True, text=True, timeout=60)

    def test_a_name_that_leaves_the_folder_is_refused(self):
        if not ts.SERVER:
            self.skipTest("set GLOSSA_SERVER")
        top = tempfile.mkdtemp(prefix="glossa-client-")
        self.addCleanup(shutil.rmtree, top)
        folder = os.path.join(top, "in")
        os.mkdir(folder)
        document = os.path.join(folder, "informe.txt")
        with open(document, "w") as f:
            f.write("Hola.\n")
        for name in ("../escaped.txt", "sub/x.txt", "/tmp/glossa-absolute.txt", "..", ""):
            with self.subTest(name=name):
                port, seen = self.serve(name)
                run = self.run_client(port, document)
                self.assertEqual(run.returncode, 2, run.stdout + run.stderr)
                self.assertIn("not a plain file name", run.stderr)
                self.assertEqual(seen, ["informe.txt"])
        self.assertEqual(sorted(os.listdir(top)), ["in"])
        self.assertEqual(os.listdir(folder), ["informe.txt"])
        self.assertFalse(os.path.exists("/tmp/glossa-absolute.txt"))
        port, _ = self.serve("informe.en.txt")
        run = self.run_client(port, document)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        with open(os.path.join(folder, "informe.en.txt"), "rb") as f:
            self.assertEqual(f.read(), b"translated")


if __name__ == "__main__":
    unittest.main()
