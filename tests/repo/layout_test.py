#!/usr/bin/env python3
"""The repository's shape, checked: what a reader meets when walking it.

  - Every file speaks of the product as it is now: none names how it was made (the words of
    NARRATIVE below) or an issue of this project by number. Other projects' issues are cited
    with the project's name ("LibreTranslate #545"). npm's package-lock.json files are not
    checked: they list other projects' package names.
  - Every relative link in a Markdown file resolves to a file or folder of the repository.
  - server/ is in rooms (SERVER_ROOMS, lowest first): a room includes only rooms below it,
    holds at most MAX_ROOM_FILES files, and every folder of server/ is a listed room.
  - runtime/ includes no gRPC, Prometheus or server header: it is a library of its own.
  - No function in server/ or runtime/engine/ is longer than MAX_FUNCTION_LINES.

Run from the repository root: python3 tests/repo/layout_test.py (stdlib only).
"""
import os
import re
import subprocess
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# Patterns are written so that this file does not match them itself.
NARRATIVE = [
    re.compile(r"\bsess" r"ions?\b", re.IGNORECASE),
    re.compile(r"\bhelp" r"ers?\b", re.IGNORECASE),
    re.compile(r"\bgoals? of #", re.IGNORECASE),
    re.compile(r"\bPEER-" r"HISTORY\b"),
]
# A hash and digits, or "issue" and a number, is an issue number unless one of these names the
# project it belongs to.
ISSUE_NUMBER = re.compile(r"(?<![#&\w])#(\d+)\b(?![0-9a-fA-F])|\b(?:issue|task)s? #?(\d+)\b",
                          re.IGNORECASE)
OTHER_PROJECTS = re.compile(
    r"\b(sacreBLEU|UAX|LibreTranslate|CTranslate2|argos-translate|argos|Bergamot|transformers|"
    r"Hugging Face|oneDNN|Marian|gRPC|SentencePiece|civetweb|prometheus-cpp|Abseil|PR)"
    r"(?: (?:issue|PR|pull request))?s?\s*$", re.IGNORECASE)
CSS_COLOR = re.compile(r":\s*$")

SERVER_ROOMS = ["common", "text", "documents", "files", "models", "live", "glossaries", "request",
                "cache", "metrics", "grpc", "http", "http_api", "deepl", "jobs", "file_api",
                "batch/io", "batch/client", "batch/folders", "batch"]
MAX_ROOM_FILES = 8
MAX_FUNCTION_LINES = 80
FUNCTION_TREES = ["server", "runtime/engine"]

TEXT_SUFFIXES = (".cc", ".h", ".py", ".md", ".txt", ".sh", ".yml", ".yaml", ".json", ".proto",
                 ".toml", ".cfg", ".in", ".cmake", ".html", ".js", ".css")
TEXT_NAMES = ("Dockerfile", "CMakeLists.txt", "run", ".gitignore", ".dockerignore",
              "glossa-convert", "glossa-make-shape", ".clang-format")


def tracked_files():
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                             capture_output=True).stdout.decode()
        files = [f for f in out.split("\0") if f and os.path.isfile(os.path.join(ROOT, f))]
    except (OSError, subprocess.CalledProcessError):  # not a checkout: walk the tree
        files = []
        for top, dirs, names in os.walk(ROOT):
            dirs[:] = [d for d in dirs if not d.startswith((".git", "build"))]
            files += [os.path.relpath(os.path.join(top, n), ROOT) for n in names]
    return sorted(files)


def is_text(path):
    name = os.path.basename(path)
    return path.endswith(TEXT_SUFFIXES) or name in TEXT_NAMES


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
        return f.read()


def narrative_findings(path, text):
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for pattern in NARRATIVE:
            for m in pattern.finditer(line):
                found.append(f"{path}:{number}: '{m.group(0)}'")
        for m in ISSUE_NUMBER.finditer(line):
            before = line[:m.start()]
            if OTHER_PROJECTS.search(before) or (m.group(1) and CSS_COLOR.search(before)):
                continue
            found.append(f"{path}:{number}: issue number '{m.group(0)}'")
    return found


MD_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def broken_links(path, text):
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)  # code blocks hold no links
    text = re.sub(r"`[^`\n]*`", "", text)
    broken = []
    for m in MD_LINK.finditer(text):
        target = m.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # absolute URL, mailto:, or an anchor in the same page
        file_part = target.split("#", 1)[0]
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
        if resolved.startswith("..") or not os.path.exists(os.path.join(ROOT, resolved)):
            broken.append(f"{path}: link '{target}' does not resolve inside the repository")
    return broken


def strip_code(text):
    """C++ without comments, string and character literals (raw strings too); lines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not text[i - 1].isalnum()):
            open_paren = text.find("(", i + 2)
            delim = text[i + 2:open_paren]
            j = text.find(")" + delim + '"', open_paren)
            j = n if j < 0 else j + len(delim) + 2
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator 1'000
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def long_functions(path, text, limit):
    """Functions (definitions at namespace or class scope) longer than `limit` lines."""
    code = strip_code(text)
    stack = []  # per open brace: (kind, start line)
    header_start, header, found = None, "", []
    last_function = None  # (start line) of the function whose brace closed last at this scope
    line = 1
    for c in code:
        if c == "\n":
            line += 1
        if c in ";{}":
            if c == "{":
                scope_ok = all(kind in ("namespace", "class") for kind, _ in stack)
                h = header.strip()
                start = header_start or line
                if re.search(r"\b(namespace|extern)\b", h):
                    kind = "namespace"
                elif re.search(r"\b(class|struct|union|enum)\b", h) and "(" not in h:
                    kind = "class"
                elif scope_ok and ")" in h and not h.endswith("="):
                    kind = "function"
                    if re.match(r"^[,:]", h) and last_function is not None:
                        start = last_function  # a constructor's member initializer braces
                elif scope_ok and (not h or h.startswith(",")) and last_function is not None:
                    kind, start = "function", last_function
                else:
                    kind = "block"
                stack.append((kind, start))
            elif c == "}" and stack:
                kind, start = stack.pop()
                if kind == "function":
                    last_function = start
                    if line - start + 1 > limit:
                        found.append((start, line - start + 1))
                elif kind != "block":
                    last_function = None
            header, header_start = "", None
            if c == ";":
                last_function = None
            continue
        if header_start is None and not c.isspace():
            header_start = line
        header += c
    merged = {}
    for start, length in found:  # a constructor's pieces: keep the whole
        merged[start] = max(length, merged.get(start, 0))
    return [f"{path}:{start}: a function of {length} lines (at most {limit})"
            for start, length in sorted(merged.items())]


INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.MULTILINE)


class LayoutTest(unittest.TestCase):
    files = tracked_files()

    def test_no_narrative_or_issue_numbers(self):
        found = []
        for path in self.files:
            # npm's lock files hold other projects' package names (call-bind-apply-..., say),
            # not prose about this one.
            if is_text(path) and os.path.basename(path) != "package-lock.json":
                found += narrative_findings(path, read(path))
        self.assertEqual(found, [], "\n".join(["speak of the product as it is now:"] + found))

    def test_markdown_links_resolve(self):
        broken = []
        for path in self.files:
            if path.endswith(".md"):
                broken += broken_links(path, read(path))
        self.assertEqual(broken, [], "\n".join(broken))

    def test_server_rooms_import_only_downward(self):
        problems, rooms = [], {}
        for path in self.files:
            if not path.startswith("server/") or path.count("/") < 2:
                continue  # server/'s own files (the programs' main) may include any room
            room = os.path.dirname(path)[len("server/"):]
            rooms.setdefault(room, []).append(path)
            if room not in SERVER_ROOMS:
                problems.append(f"{path}: server/{room}/ is not a room listed in SERVER_ROOMS")
                continue
            if not path.endswith((".h", ".cc")):
                continue
            for include in INCLUDE.findall(read(path)):
                if not include.startswith("server/"):
                    continue
                other = os.path.dirname(include)[len("server/"):]
                if other not in SERVER_ROOMS:
                    problems.append(f"{path}: includes {include}, outside the rooms")
                elif SERVER_ROOMS.index(other) > SERVER_ROOMS.index(room):
                    problems.append(f"{path}: includes {include}, a room above server/{room}/")
        for room, paths in rooms.items():
            sources = [p for p in paths if p.endswith((".h", ".cc"))]
            if len(sources) > MAX_ROOM_FILES:
                problems.append(f"server/{room}/ holds {len(sources)} source files "
                                f"(at most {MAX_ROOM_FILES}): split it")
        self.assertEqual(problems, [], "\n".join(problems))

    def test_runtime_is_a_library_of_its_own(self):
        problems = []
        for path in self.files:
            if path.startswith("runtime/") and path.endswith((".h", ".cc")):
                for include in INCLUDE.findall(read(path)):
                    if re.match(r"(grpc|grpcpp|prometheus|civetweb|server)/", include):
                        problems.append(f"{path}: includes {include}")
        self.assertEqual(problems, [], "\n".join(problems))

    def test_functions_are_short(self):
        found = []
        for path in self.files:
            if path.endswith((".h", ".cc")) and \
                    any(path.startswith(tree + "/") for tree in FUNCTION_TREES):
                found += long_functions(path, read(path), MAX_FUNCTION_LINES)
        self.assertEqual(found, [], "\n".join(found))


class CheckerTest(unittest.TestCase):
    """The checks find what they look for (each check's own mistakes would hide the tree's)."""

    def test_narrative_and_numbers(self):
        bad = ("the fifth sess" "ion moved it\nsee iss" "ue 12\nas in (#" "7)\n"
               "the goals of \x2314\n")  # \x23: a hash
        self.assertEqual(len(narrative_findings("x.md", bad)), 5)
        good = ("LibreTranslate #545 and CTranslate2 issue #739\ncolor: #222;\nr##0\n"
                "UAX #29 breaks\n&#160;\n")
        self.assertEqual(narrative_findings("x.md", good), [])

    def test_links(self):
        text = "[a](README.md) [b](docs/missing.md) [c](https://x.org) [d](#top) `[e](no.md)`"
        self.assertEqual(len(broken_links("README.md", text)), 1)
        self.assertEqual(len(broken_links("README.md", "[s](../shared/DESIGN.md)")), 1)

    def test_function_lengths(self):
        body = "\n".join(["  x();"] * 90)
        code = ("namespace a {\nclass C {\n void Short() { x(); }\n};\n"
                f"int Long(int a,\n         int b) {{\n{body}\n}}\n"
                "const char* kPage = R\"(}}{{ { )\";\n"
                f"C::C() : a_(1), b_{{2}} {{\n{body}\n}}\n}}\n")
        found = long_functions("x.cc", code, 80)
        self.assertEqual(len(found), 2, found)
        self.assertIn(":5: a function of 93 lines", found[0])
        self.assertEqual(long_functions("x.cc", code, 100), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
