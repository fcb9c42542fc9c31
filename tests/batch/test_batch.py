#!/usr/bin/python3
"""End-to-end tests of glossa-batch against two real glossa-server processes.

Run from the repository root (ctest does this as the test `python_batch`):
    GLOSSA_BATCH=build/glossa-batch GLOSSA_SERVER=build/glossa-server \
    GLOSSA_TRANSLATE=build/glossa-translate /usr/bin/python3 -m unittest -v tests/batch/test_batch.py

Environment:
    GLOSSA_BATCH      the glossa-batch to test; every test skips without it (and GLOSSA_SERVER)
    GLOSSA_SERVER     the glossa-server to translate with
    GLOSSA_TRANSLATE  the offline glossa-translate whose output glossa-batch must equal
    GLOSSA_MODEL      the model (default: <repo>/models/opus-mt-es-en-bible.glossa)
    GLOSSA_SHARED     the shared data directory holding corpus/train.es (default: <repo>/../shared);
                      the tests on real files skip without it
    GLOSSA_SANITIZE   the build's sanitizer (ctest sets it); every test skips under "thread"

The module starts two servers on free ports (one thread each) and, in the background,
glossa-translate --beam_size 1 over the first 5,000 lines of train.es: the reference every
translated file is compared with, byte for byte (the tests that need only a prefix wait for its
first chunk). Every process started is killed when the module ends, whatever happens.
"""

import atexit
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BATCH = os.environ.get("GLOSSA_BATCH", "")
SERVER = os.environ.get("GLOSSA_SERVER", "")
TRANSLATE = os.environ.get("GLOSSA_TRANSLATE", "")
MODEL = (os.environ.get("GLOSSA_MODEL") or
         os.path.join(REPO, "models", "opus-mt-es-en-bible.glossa"))
SHARED = os.environ.get("GLOSSA_SHARED") or os.path.join(REPO, "..", "shared")
TRAIN_ES = os.path.join(SHARED, "corpus", "train.es")
SANITIZE = os.environ.get("GLOSSA_SANITIZE", "")  # the build's: "", "address" or "thread"

# The file compared whole with glossa-translate; under AddressSanitizer (several times slower,
# and there to find memory errors, which a shorter job finds as well) a shorter one.
FULL_LINES = 2000 if SANITIZE == "address" else 5000
STARTUP_TIMEOUT_S = 60
JOB_TIMEOUT_S = 240      # one glossa-batch run, on a loaded 2-core machine
ENV = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="passive")

SENTENCES = [
    "Y dijo Dios: Sea la luz: y fué la luz.",
    "En el principio creó Dios los cielos y la tierra.",
    "Bienaventurados los pobres en espíritu.",
    "Y vió Dios que la luz era buena.",
]

_processes = []  # every process started, killed by _kill_all
_tmp = None
_reference = None
servers = []


def _die_with_parent():
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (AttributeError, OSError):
        pass


def _start(args, **kwargs):
    proc = subprocess.Popen(args, env=ENV, preexec_fn=_die_with_parent, **kwargs)
    _processes.append(proc)
    return proc


def _kill_all():
    for proc in _processes:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


class Server:
    """A glossa-server on a local port; kill() and restart() (on the same port) for the tests."""

    def __init__(self, name):
        self.name = name
        self.port = 0
        self.proc = None
        self.start()

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def start(self):
        self.log = open(os.path.join(_tmp, f"{self.name}.log"), "ab")
        # No result cache: several tests translate the same lines, and those that kill a server
        # mid-job need the job to take real decoding time.
        self.proc = _start([SERVER, "--listen", f"127.0.0.1:{self.port}", "--model",
                            f"demo={MODEL}", "--threads", "1", "--shutdown_timeout", "2s",
                            "--cache_bytes", "0"],
                           stdout=subprocess.PIPE, stderr=self.log)
        port = []

        def pump():  # read the port, then keep the pipe drained
            for raw in self.proc.stdout:
                m = re.search(rb"listening on 127\.0\.0\.1:(\d+)", raw)
                if m and not port:
                    port.append(int(m.group(1)))
        self.pump = threading.Thread(target=pump, daemon=True)
        self.pump.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not port:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{self.name} did not start; see {self.log.name}")
            time.sleep(0.05)
        self.port = port[0]

    def kill(self):
        self.proc.kill()
        self._reap()

    def _reap(self):
        self.proc.wait()
        self.pump.join(timeout=5)
        self.proc.stdout.close()
        self.log.close()

    def restart(self):
        """Starts again on the same port (after kill())."""
        self.start()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self._reap()


def setUpModule():
    global _tmp, _reference, servers
    if not BATCH or not SERVER:
        raise unittest.SkipTest("set GLOSSA_BATCH and GLOSSA_SERVER (ctest does)")
    if SANITIZE == "thread":
        raise unittest.SkipTest(
            "ThreadSanitizer build: the 5,000-line files, translated several times over by "
            "instrumented servers and glossa-translate, take far longer than the test's limits "
            "(glossa_batch_unit_test runs under ThreadSanitizer)")
    _tmp = tempfile.mkdtemp(prefix="glossa-batch-test-")
    atexit.register(_kill_all)
    try:
        servers = [Server("server-a"), Server("server-b")]
    except Exception:
        _kill_all()
        raise
    if TRANSLATE and os.path.isfile(TRAIN_ES):
        _reference = Reference()


def tearDownModule():
    for server in servers:
        server.stop()
    _kill_all()
    if _tmp:
        shutil.rmtree(_tmp, ignore_errors=True)


class Reference:
    """glossa-translate --beam_size 1 over the first FULL_LINES lines of train.es, running in the
    background; lines(n) waits until the first n lines are written."""

    def __init__(self):
        with open(TRAIN_ES, "rb") as f:
            self.source = b"".join(f.readline() for _ in range(FULL_LINES))
        self.input = write(os.path.join(_tmp, "full.es"), self.source)
        self.output = os.path.join(_tmp, "full.offline.en")
        self.proc = _start([TRANSLATE, "--model", MODEL, "--beam_size", "1", "--input",
                            self.input, "--output", self.output], stderr=subprocess.DEVNULL)

    def lines(self, n):
        deadline = time.monotonic() + JOB_TIMEOUT_S
        while True:
            done = self.proc.poll() is not None
            data = read(self.output) if os.path.exists(self.output) else b""
            if data.count(b"\n") >= n or done:
                break
            if time.monotonic() > deadline:
                raise AssertionError("glossa-translate is too slow")
            time.sleep(0.2)
        if done and self.proc.returncode != 0:
            raise AssertionError(f"glossa-translate failed ({self.proc.returncode})")
        return b"".join(data.splitlines(keepends=True)[:n])

    def source_lines(self, n):
        return b"".join(self.source.splitlines(keepends=True)[:n])


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def read(path):
    with open(path, "rb") as f:
        return f.read()


def journal(output):
    with open(output + ".journal", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.endswith("\n")]


def last_written(output):
    """The last line the journal says is in the output (0 when none)."""
    try:
        ranges = [r["written"] for r in journal(output) if "written" in r]
    except (OSError, ValueError):
        return 0
    return ranges[-1][1] if ranges else 0


class BatchTestCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix=self.id().rsplit(".", 1)[-1] + "-", dir=_tmp)
        for server in servers:
            self.assertIsNone(server.proc.poll(), f"{server.name} is down")

    def path(self, name):
        return os.path.join(self.dir, name)

    def args(self, input_path, output_path, *flags, server_list=None):
        targets = server_list or [s.address for s in servers]
        return [BATCH, "--server", ",".join(targets), "--model", "demo", "--input", input_path,
                "--output", output_path, "--beam_size", "1", "--progress_interval", "1s",
                "--concurrency", "4", *flags]

    def run_batch(self, *args, **kwargs):
        proc = _start(list(self.args(*args, **kwargs)), stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE)
        try:
            out, err = proc.communicate(timeout=JOB_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        return proc.returncode, err.decode("utf-8", "replace")

    def start_batch(self, *args, **kwargs):
        err = open(self.path("stderr.%d" % time.monotonic_ns()), "w+b")
        return _start(list(self.args(*args, **kwargs)), stdout=subprocess.DEVNULL, stderr=err), err

    def wait_for_line(self, output, line, proc):
        """Waits until the journal of `output` shows `line` written (the job still running)."""
        deadline = time.monotonic() + JOB_TIMEOUT_S
        while last_written(output) < line:
            self.assertIsNone(proc.poll(), "glossa-batch ended before the test could interrupt it")
            self.assertLess(time.monotonic(), deadline, "glossa-batch makes no progress")
            time.sleep(0.05)

    def finish(self, proc, err):
        try:
            proc.wait(timeout=JOB_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        err.seek(0)
        log = err.read().decode("utf-8", "replace")
        err.close()
        return proc.returncode, log

    def assertWrittenOnce(self, output, lines, first_line=1):
        """The journal's checkpoints cover lines first_line..lines, each exactly once, and it is
        complete."""
        records = journal(output)
        ranges = [tuple(r["written"]) for r in records if "written" in r]
        expected_first = first_line
        for first, last in ranges:
            self.assertEqual(first, expected_first, f"journal ranges overlap or skip: {ranges}")
            self.assertLessEqual(first, last)
            expected_first = last + 1
        self.assertEqual(expected_first - 1, lines, f"journal ranges: {ranges}")
        self.assertTrue(any("complete" in r for r in records), "no complete record")
        return records

    def assertSameFile(self, got, want, what):
        if got == want:
            return
        got_lines, want_lines = got.splitlines(True), want.splitlines(True)
        self.assertEqual(len(got_lines), len(want_lines), f"{what}: line counts differ")
        for i, (g, w) in enumerate(zip(got_lines, want_lines)):
            self.assertEqual(g, w, f"{what}: line {i + 1} differs")
        self.fail(f"{what}: files differ")


@unittest.skipUnless(TRANSLATE, "set GLOSSA_TRANSLATE to glossa-translate (ctest does)")
@unittest.skipUnless(os.path.isfile(TRAIN_ES), f"needs {TRAIN_ES} (the shared corpus)")
class TranslateFileTest(BatchTestCase):
    """Real files through two servers: equal to glossa-translate, resumable, sharded."""

    def prefix(self, n):
        """A file of the first n corpus lines and glossa-translate's translation of it."""
        return write(self.path("in.es"), _reference.source_lines(n)), _reference.lines(n)

    def test_full_lines_through_two_servers_equal_glossa_translate(self):
        out = self.path("out.en")
        rc, err = self.run_batch(_reference.input, out, "--texts_per_request", "16")
        self.assertEqual(rc, 0, err)
        self.assertSameFile(read(out), _reference.lines(FULL_LINES), "glossa-batch vs offline")
        self.assertEqual(read(out).count(b"\n"), FULL_LINES)
        self.assertWrittenOnce(out, FULL_LINES)
        self.assertRegex(err, rf"\d+/{FULL_LINES} segments \(\d+\.\d%\), [\d.]+ segments/s, "
                              r"\d+ tokens/s, ETA \w+")
        self.assertIn(f"done: {FULL_LINES}/{FULL_LINES} segments (0 failed", err)

    def test_sigterm_and_kill_9_then_resume_give_the_same_file(self):
        source, want = self.prefix(1000)
        out = self.path("out.en")
        flags = ("--resume", "--checkpoint_interval", "0.1s")
        # SIGTERM: the job stops cleanly (exit 3) with the output a checkpointed prefix.
        proc, err = self.start_batch(source, out, *flags)
        self.wait_for_line(out, 250, proc)
        proc.terminate()
        rc, log = self.finish(proc, err)
        self.assertEqual(rc, 3, log)
        self.assertRegex(log, r"rerun with --resume to continue from line \d+")
        stopped_at = last_written(out)
        self.assertEqual(read(out), b"".join(want.splitlines(True)[:stopped_at]))
        # kill -9 of the resumed run, mid-job.
        proc, err = self.start_batch(source, out, *flags)
        self.wait_for_line(out, stopped_at + 250, proc)
        proc.kill()
        proc.wait()
        err.close()
        killed_at = last_written(out)
        self.assertLess(killed_at, 1000, "the job finished before it was killed")
        rc, log = self.run_batch(source, out, *flags)
        self.assertEqual(rc, 0, log)
        self.assertIn(f"resuming {out} at line ", log)
        self.assertSameFile(read(out), want, "resumed vs uninterrupted")
        records = self.assertWrittenOnce(out, 1000)
        resumes = [r["resume"]["line"] for r in records if "resume" in r]
        self.assertEqual(resumes[0], stopped_at + 1)
        self.assertEqual(len(resumes), 2)
        self.assertGreaterEqual(resumes[1], killed_at + 1)  # continued, did not start over
        # Resuming a complete job does nothing.
        rc, log = self.run_batch(source, out, "--resume")
        self.assertEqual(rc, 0, log)
        self.assertIn("already complete", log)
        self.assertSameFile(read(out), want, "after a second resume")

    def test_one_of_two_servers_killed_and_restarted(self):
        source, want = self.prefix(1000)
        out = self.path("out.en")
        proc, err = self.start_batch(source, out, "--max_backoff", "1s", "--max_attempts", "30")
        self.wait_for_line(out, 200, proc)
        servers[0].kill()
        try:
            down_at = last_written(out)
            self.wait_for_line(out, down_at + 200, proc)  # the other server carries on
        finally:
            servers[0].restart()
        rc, log = self.finish(proc, err)
        # (Requests in flight on the killed server, if any, were retried on the other.)
        self.assertEqual(rc, 0, log)
        self.assertSameFile(read(out), want, "with a server killed")
        self.assertWrittenOnce(out, 1000)

    def test_only_server_killed_and_restarted(self):
        # 2000 lines and checkpoints every 0.1 s: with 500 lines and the default 1 s checkpoints,
        # the job once finished (its output ahead of the journal) before the kill reached it.
        source, want = self.prefix(2000)
        out = self.path("out.en")
        proc, err = self.start_batch(source, out, "--max_backoff", "1s", "--max_attempts", "30",
                                     "--checkpoint_interval", "0.1s",
                                     server_list=[servers[1].address])
        self.wait_for_line(out, 100, proc)
        servers[1].kill()
        try:
            time.sleep(1.0)
            self.assertLess(last_written(out), 2000, "the job finished before the server was killed")
            self.assertIsNone(proc.poll(), "glossa-batch gave up while the server was down")
        finally:
            servers[1].restart()
        rc, log = self.finish(proc, err)
        self.assertEqual(rc, 0, log)
        self.assertRegex(log, r"UNAVAILABLE .*; retry \d+/29 in")
        self.assertSameFile(read(out), want, "with the server restarted")
        self.assertWrittenOnce(out, 2000)

    def test_shards_merged_equal_the_whole(self):
        source, want = self.prefix(900)
        outs = [self.path(f"out.en.{k}") for k in range(3)]
        procs = [self.start_batch(source, outs[k], "--shard", f"{k}/3", "--concurrency", "2")
                 for k in range(3)]
        for k, (proc, err) in enumerate(procs):
            rc, log = self.finish(proc, err)
            self.assertEqual(rc, 0, log)
            self.assertWrittenOnce(outs[k], 300 * (k + 1), first_line=300 * k + 1)
        merged = self.path("merged.en")
        # Shards in any order; an incomplete set is refused and writes nothing.
        rc = subprocess.run([BATCH, "--merge", merged, outs[0], outs[2]], capture_output=True,
                            text=True, timeout=60)
        self.assertEqual(rc.returncode, 2, rc.stderr)
        self.assertIn("shard", rc.stderr)
        self.assertFalse(os.path.exists(merged))
        rc = subprocess.run([BATCH, "--merge", merged, outs[2], outs[0], outs[1]],
                            capture_output=True, text=True, timeout=60)
        self.assertEqual(rc.returncode, 0, rc.stderr)
        self.assertSameFile(read(merged), want, "merged shards vs the whole")
        # Once every shard is complete, cat in shard order is the same.
        self.assertEqual(b"".join(read(o) for o in outs), want)


class FormatsTest(BatchTestCase):
    """TSV and JSONL keep what is not translated; bad lines are reported, never dropped."""

    @classmethod
    def translations(cls):
        """glossa-batch's text-format translation of SENTENCES (computed once)."""
        if not hasattr(cls, "_translations"):
            d = tempfile.mkdtemp(dir=_tmp)
            src = write(os.path.join(d, "s.txt"), "".join(s + "\n" for s in SENTENCES).encode())
            out = os.path.join(d, "s.en")
            rc = subprocess.run(
                [BATCH, "--server", servers[0].address, "--input", src, "--output", out,
                 "--beam_size", "1"], capture_output=True, text=True, timeout=JOB_TIMEOUT_S)
            assert rc.returncode == 0, rc.stderr
            cls._translations = read(out).decode().split("\n")[:-1]
            assert len(cls._translations) == len(SENTENCES) and all(cls._translations)
        return cls._translations

    def test_text_empty_lines_crlf_and_unterminated_last_line(self):
        t = self.translations()
        src = write(self.path("in.txt"), (f"{SENTENCES[0]}\n\n{SENTENCES[1]}\r\n\r\n"
                                          f"{SENTENCES[2]}").encode())
        out = self.path("out.txt")
        rc, err = self.run_batch(src, out)
        self.assertEqual(rc, 0, err)
        self.assertEqual(read(out).decode(), f"{t[0]}\n\n{t[1]}\r\n\r\n{t[2]}")

    def test_tsv_keeps_other_columns_and_reports_malformed_lines(self):
        t = self.translations()
        lines = [f"id-{i}\t{s}\tnote {i}\t\t" for i, s in enumerate(SENTENCES)]
        lines.insert(2, "no tab on this line")      # line 3: malformed
        lines.insert(4, "")                         # line 5: empty
        src = write(self.path("in.tsv"), ("\r\n".join(lines) + "\r\n").encode())
        out = self.path("out.tsv")
        rc, err = self.run_batch(src, out, "--column", "2", "--texts_per_request", "2")
        self.assertEqual(rc, 1, err)
        self.assertIn("line 3: MALFORMED_LINE: the line has 1 TSV column; --column 2 needs 2", err)
        got = read(out).decode().split("\r\n")
        self.assertEqual(got[-1], "")
        got = got[:-1]
        self.assertEqual(len(got), len(lines))
        self.assertEqual(got[2], "no tab on this line")  # copied unchanged
        self.assertEqual(got[4], "")
        rows = [g.split("\t") for i, g in enumerate(got) if i not in (2, 4)]
        for i, row in enumerate(rows):
            self.assertEqual(row, [f"id-{i}", t[i], f"note {i}", "", ""])
        failed = [r for r in journal(out) if "failed" in r]
        self.assertEqual([(r["failed"], r["code"]) for r in failed], [(3, "MALFORMED_LINE")])
        # --output_column appends the translation after the source.
        out2 = self.path("out2.tsv")
        rc, err = self.run_batch(src, out2, "--column", "2", "--output_column", "6")
        self.assertEqual(rc, 1, err)
        first = read(out2).decode().split("\r\n")[0].split("\t")
        self.assertEqual(first, ["id-0", SENTENCES[0], "note 0", "", "", t[0]])

    def test_jsonl_keeps_other_fields_and_reports_invalid_json(self):
        t = self.translations()
        objects = [{"id": i, "src": s, "meta": {"n": [1, 2.5, None], "ok": True}, "z": "ñ€"}
                   for i, s in enumerate(SENTENCES)]
        lines = [json.dumps(o, ensure_ascii=False, separators=(",", ":")) for o in objects]
        lines.insert(1, '{"id": 9, "src": "unterminated')  # line 2: invalid JSON
        lines.insert(3, '{"id": 10}')                       # line 4: no "src"
        src = write(self.path("in.jsonl"), ("\n".join(lines) + "\n").encode())
        out = self.path("out.jsonl")
        rc, err = self.run_batch(src, out, "--field", "src", "--output_field", "en")
        self.assertEqual(rc, 1, err)
        self.assertIn("line 2: MALFORMED_LINE: the line is not valid JSON", err)
        self.assertIn('line 4: MALFORMED_LINE: the object has no field "src"', err)
        got = read(out).decode().split("\n")[:-1]
        self.assertEqual(len(got), len(lines))
        self.assertEqual(got[1], lines[1])
        self.assertEqual(got[3], lines[3])
        parsed = [json.loads(g) for i, g in enumerate(got) if i not in (1, 3)]
        for i, obj in enumerate(parsed):
            self.assertEqual(list(obj), ["id", "src", "meta", "z", "en"])  # order kept
            self.assertEqual(obj, dict(objects[i], en=t[i]))

    def test_a_segment_the_server_refuses_is_reported_and_left_empty(self):
        t = self.translations()
        too_long = "palabra " * 2000  # over the server's --max_text_bytes (10000)
        src = write(self.path("in.txt"),
                    "".join(x + "\n" for x in [SENTENCES[0], too_long, SENTENCES[1]]).encode())
        out = self.path("out.txt")
        rc, err = self.run_batch(src, out)
        self.assertEqual(rc, 1, err)
        self.assertRegex(err, r"line 2: INVALID_ARGUMENT: text 0 is 16000 bytes")
        self.assertIn("1 segment could not be translated", err)
        self.assertEqual(read(out).decode(), f"{t[0]}\n\n{t[1]}\n")
        failed = [r for r in journal(out) if "failed" in r]
        self.assertEqual([(r["failed"], r["code"]) for r in failed], [(2, "INVALID_ARGUMENT")])

    def test_merge_reports_the_failed_segments_of_its_shards(self):
        t = self.translations()
        src = write(self.path("in.txt"), "".join(
            x + "\n" for x in [SENTENCES[0], "palabra " * 2000, SENTENCES[1], SENTENCES[2]]).encode())
        outs = [self.path("out.0"), self.path("out.1")]
        self.assertEqual(self.run_batch(src, outs[0], "--shard", "0/2")[0], 1)
        self.assertEqual(self.run_batch(src, outs[1], "--shard", "1/2")[0], 0)
        merged = self.path("merged.txt")
        rc = subprocess.run([BATCH, "--merge", merged, *outs], capture_output=True, text=True,
                            timeout=60)
        self.assertEqual(rc.returncode, 1, rc.stderr)
        self.assertIn("1 segment had failed", rc.stderr)
        self.assertEqual(read(merged).decode(), f"{t[0]}\n\n{t[1]}\n{t[2]}\n")


class UsageTest(BatchTestCase):
    def batch(self, *flags):
        return subprocess.run([BATCH, *flags], capture_output=True, text=True, timeout=60)

    def test_help_documents_every_flag(self):
        help_text = self.batch("--help")
        for flag in ["--server", "--model", "--input", "--output", "--concurrency", "--resume",
                     "--shard", "--format", "--column", "--field", "--output_field",
                     "--texts_per_request", "--beam_size", "--max_output_tokens", "--merge",
                     "--source_language", "--target_language", "--glossary",
                     "--max_attempts", "Exit codes"]:
            self.assertIn(flag, help_text.stdout + help_text.stderr)

    def test_usage_errors_exit_2(self):
        src = write(self.path("in.txt"), b"Hola\n")
        out = self.path("out.txt")
        self.assertEqual(self.batch("--output", out).returncode, 2)
        self.assertEqual(self.batch("--input", src, "--output", out, "--shard", "3/3").returncode, 2)
        self.assertEqual(self.batch("--input", self.path("missing"), "--output", out,
                                    "--server", servers[0].address).returncode, 2)
        rc, err = self.run_batch(src, out, "--model", "nonexistent")
        self.assertEqual(rc, 2, err)
        self.assertIn("NOT_FOUND", err)
        self.assertFalse(os.path.exists(out))  # refused before any file was touched

    def test_a_bad_command_line_exits_2_and_help_0(self):
        # Exit 1 is a job complete with failed segments, which a Kubernetes Job counts as done:
        # a command line Abseil's parser refuses must not look like one.
        for flags in (["--no_such_flag"], ["--concurrency=many"], ["--concurrency"],
                      ["--resume=perhaps"], ["--input_dir"]):
            with self.subTest(flags=flags):
                run = self.batch(*flags)
                self.assertEqual(run.returncode, 2, run.stderr)
                self.assertIn("ERROR", run.stderr)
        for flags in (["--help"], ["--helpfull"], ["--version"]):
            with self.subTest(flags=flags):
                self.assertEqual(self.batch(*flags).returncode, 0)

    def test_languages_are_sent_and_journaled_and_a_wrong_one_stops_the_job(self):
        src = write(self.path("in.txt"), "".join(s + "\n" for s in SENTENCES).encode())
        out = self.path("out.txt")
        rc, err = self.run_batch(src, out, "--source_language", "spa", "--target_language", "en")
        self.assertEqual(rc, 0, err)
        self.assertEqual(journal(out)[0]["job"]["source_language"], "spa")
        self.assertEqual(journal(out)[0]["job"]["target_language"], "en")
        plain = self.path("plain.txt")
        self.assertEqual(self.run_batch(src, plain)[0], 0)
        self.assertEqual(read(out), read(plain))
        self.assertNotIn("source_language", json.dumps(journal(plain)[0]))  # old journals stay valid
        wrong = self.path("wrong.txt")
        rc, err = self.run_batch(src, wrong, "--target_language", "fr")
        self.assertEqual(rc, 2, err)
        self.assertIn("target_language 'fr'", err)
        self.assertFalse(os.path.exists(wrong))  # refused before any file was touched

    def test_unreachable_servers_stop_the_job_with_exit_3(self):
        src = write(self.path("in.txt"), b"Hola\n")
        out = self.path("out.txt")
        rc = subprocess.run([BATCH, "--server", "127.0.0.1:1", "--input", src, "--output", out,
                             "--max_attempts", "2", "--retry_backoff", "10ms"],
                            capture_output=True, text=True, timeout=60)
        self.assertEqual(rc.returncode, 3, rc.stderr)
        self.assertIn("UNAVAILABLE", rc.stderr)
        self.assertFalse(os.path.exists(out))

    def test_resume_refuses_a_journal_of_another_job(self):
        src = write(self.path("in.txt"), "".join(s + "\n" for s in SENTENCES).encode())
        out = self.path("out.txt")
        rc, err = self.run_batch(src, out)
        self.assertEqual(rc, 0, err)
        rc, err = self.run_batch(src, out, "--resume", "--max_output_tokens", "5")
        self.assertEqual(rc, 2, err)
        self.assertIn("belongs to another job", err)


class FolderOutputTest(BatchTestCase):
    """--input_dir: every translation is written under --output_dir, whatever the names and
    links in either folder; a link out of --input_dir is neither read nor followed."""

    def folder_run(self, src, out):
        return subprocess.run([BATCH, "--server", servers[0].address, "--input_dir", src,
                               "--output_dir", out, "--concurrency", "2", "--source_language", "es",
                               "--target_language", "en"],
                              capture_output=True, text=True, timeout=JOB_TIMEOUT_S)

    def test_links_cannot_take_a_translation_out_of_the_output_folder(self):
        src, out, outside = self.path("in"), self.path("out"), self.path("outside")
        for folder in (src, os.path.join(src, "sub"), out, outside):
            os.makedirs(folder)
        write(os.path.join(src, "a.txt"), "Y dijo Dios.\n".encode())
        write(os.path.join(src, "sub", "b.txt"), "Y vio Dios.\n".encode())
        secret = write(os.path.join(outside, "secret.txt"), b"Hola, secreto.\n")
        victim = write(os.path.join(outside, "victim.txt"), b"untouched\n")
        # A link in the input to a file outside it (its resolved path would lead out of OUT);
        # links planted in the output: a folder to elsewhere, a temporary name to a file.
        os.symlink(secret, os.path.join(src, "leak.txt"))
        os.symlink(outside, os.path.join(out, "sub"))
        os.symlink(victim, os.path.join(out, "a.txt.part"))
        run = self.folder_run(src, out)
        self.assertEqual(run.returncode, 1, run.stderr)
        self.assertIn("leak.txt: a symbolic link out of --input_dir: left alone", run.stderr)
        self.assertIn("sub/b.txt: its translation would be written outside --output_dir",
                      run.stderr)
        self.assertIn("documents: 2, translated 1, resumed 0, failed 1; other files left "
                      "alone: 1", run.stderr)
        self.assertEqual(read(secret), b"Hola, secreto.\n")
        self.assertEqual(read(victim), b"untouched\n")
        self.assertEqual(sorted(os.listdir(outside)), ["secret.txt", "victim.txt"])
        self.assertEqual(sorted(os.listdir(out)), [".glossa-batch-folder.journal", "a.txt", "sub"])
        self.assertFalse(os.path.islink(os.path.join(out, "a.txt")))
        self.assertTrue(read(os.path.join(out, "a.txt")).strip())
        for top, _, names in os.walk(self.dir):
            for name in names:  # nothing was written anywhere but OUT
                self.assertFalse(name.endswith(".part"), os.path.join(top, name))

    def test_a_link_inside_the_input_folder_is_translated_under_its_own_name(self):
        src, out = self.path("in"), self.path("out")
        os.makedirs(os.path.join(src, "docs"))
        write(os.path.join(src, "docs", "a.txt"), "Y dijo Dios.\n".encode())
        os.symlink(os.path.join("docs", "a.txt"), os.path.join(src, "alias.txt"))
        run = self.folder_run(src, out)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(read(os.path.join(out, "alias.txt")),
                         read(os.path.join(out, "docs", "a.txt")))


class GlossaryTest(BatchTestCase):
    """--glossary: the file's entries go with every request and belong to the job's identity."""

    def test_glossary_is_sent_journaled_and_checked(self):
        src = write(self.path("in.txt"), "".join(s + "\n" for s in SENTENCES[:2]).encode())
        glossary = write(self.path("terms.tsv"), "Dios\tLord\nDios\tYahweh\n".encode())
        plain = self.path("plain.txt")
        self.assertEqual(self.run_batch(src, plain)[0], 0)
        self.assertNotIn(b"Lord", read(plain))
        out = self.path("out.txt")
        rc, err = self.run_batch(src, out, "--glossary", glossary, "--beam_size", "4")
        self.assertEqual(rc, 0, err)
        lines = read(out).decode().splitlines()
        self.assertEqual(len(lines), 2)
        for line in lines:  # both sources hold "Dios"
            self.assertTrue("Lord" in line or "Yahweh" in line, line)
        recorded = journal(out)[0]["job"]["glossary"]
        self.assertEqual(recorded["entries"], 1)
        self.assertNotIn("glossary", journal(plain)[0]["job"])  # old journals stay valid

        # Another glossary (or none) is another job.
        other = write(self.path("other.json"), '{"Dios": "God", "luz": ["light"]}'.encode())
        for flags in (["--glossary", other], []):
            rc, err = self.run_batch(src, out, "--resume", "--beam_size", "4", *flags)
            self.assertEqual(rc, 2, err)
            self.assertIn("belongs to another job", err)
        rc, err = self.run_batch(src, out, "--resume", "--beam_size", "4", "--glossary", glossary)
        self.assertEqual(rc, 0, err)
        self.assertIn("already complete", err)

    def test_a_bad_glossary_is_a_usage_error_naming_the_line(self):
        src = write(self.path("in.txt"), b"Hola\n")
        out = self.path("out.txt")
        cases = [
            ("bad.tsv", "Dios\tLord\nluz\n", "line 2: 1 column"),
            ("bad.csv", "Dios,Lord\n\"luz,light\n", "line 2: a quoted field is not closed"),
            ("bad.json", '{"Dios": "Lord",\n "luz": ""}', "line 2: the target term is empty"),
            ("terms.txt", "Dios\tLord\n", "a glossary file is .tsv, .csv or .json"),
        ]
        for name, text, message in cases:
            with self.subTest(name=name):
                path = write(self.path(name), text.encode())
                rc, err = self.run_batch(src, out, "--glossary", path)
                self.assertEqual(rc, 2, err)
                self.assertIn(message, err)
        rc, err = self.run_batch(src, out, "--glossary", self.path("missing.tsv"))
        self.assertEqual(rc, 2, err)
        self.assertIn("cannot read", err)
        # Beam search enforces a glossary: the servers refuse greedy search before any file.
        good = write(self.path("good.tsv"), b"Hola\tHello\n")
        rc, err = self.run_batch(src, out, "--glossary", good, "--beam_size", "1")
        self.assertEqual(rc, 2, err)
        self.assertIn("INVALID_ARGUMENT", err)
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    unittest.main()
