#!/usr/bin/env python3
"""The reference pages agree with the product they describe.

  - docs/reference/flags.md has a table per binary; its flags are exactly the ones that
    binary's --help lists, both ways (a flag missing from the page, or a page row naming a flag
    that does not exist, fails).
  - Every repository path a page names in backticks (`tests/bench/peer_compare.py`,
    `deploy/k8s/`) exists. (Relative links are tests/repo/layout_test.py's.)
  - Every proto field docs/reference/api.md names exists: table rows `name` (number) as that
    field number, and `Message.field` as a field of that message.

Environment: GLOSSA_BUILD, the build directory holding the binaries.
Run: GLOSSA_BUILD=build /usr/bin/python3 tests/docs/reference_test.py
"""
import glob
import os
import re
import subprocess
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("GLOSSA_BUILD", os.path.join(ROOT, "build"))
PYTHON = "/usr/bin/python3"
# Each binary of flags.md and how to ask it for --help.
BINARIES = {
    "glossa-server": [os.path.join(BUILD, "glossa-server"), "--help"],
    "glossa-client": [os.path.join(BUILD, "glossa-client"), "--help"],
    "glossa-translate": [os.path.join(BUILD, "glossa-translate"), "--help"],
    "glossa-batch": [os.path.join(BUILD, "glossa-batch"), "--help"],
    "glossa-convert": [PYTHON, os.path.join(ROOT, "model_tools", "glossa-convert"), "--help"],
    "glossa-make-shape": [PYTHON, os.path.join(ROOT, "model_tools", "glossa-make-shape"),
                          "--help"],
}
# absl's own flags, which every absl binary has and --help does not list one by one.
ABSL_BUILTIN = {"--help", "--helpfull", "--helpshort", "--helppackage", "--version",
                "--only_check_args", "--flagfile", "--fromenv", "--tryfromenv", "--undefok",
                "--helpon", "--helpmatch"}
TOP_LEVEL = ("server/", "runtime/", "proto/", "model_tools/", "deploy/", "tests/", "docs/",
             "models/", ".ci/")


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def doc_pages():
    pages = ["README.md"] + sorted(glob.glob("docs/**/*.md", root_dir=ROOT, recursive=True))
    return [p for p in pages if os.path.isfile(os.path.join(ROOT, p))]


def help_flags(command):
    """The flags a binary's --help lists (absl: `--name (...)`; argparse: `--name VALUE`)."""
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    text = done.stdout.decode("utf-8", "replace")
    if "Flags from " in text:  # absl: "    --name (meaning); default: ...;"
        flags = set(re.findall(r"^    (--[a-z0-9_]+) \(", text, re.MULTILINE))
    else:  # argparse: "  --name VALUE  meaning" or "  -n VALUE, --name VALUE  meaning"
        flags = set(re.findall(r"^  (?:-\w(?: [A-Z_]+)?, )?(--[a-z0-9_-]+)\b", text, re.MULTILINE))
    return flags - ABSL_BUILTIN, text


def page_flags(text):
    """{binary: set of flags} from flags.md: the `--name` in the first cell of each table row
    under a `## binary` heading."""
    tables, binary = {}, None
    for line in text.splitlines():
        heading = re.match(r"^## `?(glossa-[\w-]+)`?\s*$", line)
        if heading:
            binary = heading.group(1)
            tables.setdefault(binary, set())
        elif line.startswith("## "):
            binary = None
        elif binary and line.startswith("|"):
            first = line.split("|")[1]
            tables[binary].update(re.findall(r"`(--[a-z0-9_-]+)", first))
    return tables


def proto_messages():
    """{message name: {field name: number}} of every .proto under proto/."""
    messages = {}
    for path in glob.glob(os.path.join(ROOT, "proto", "**", "*.proto"), recursive=True):
        with open(path, encoding="utf-8") as f:
            text = re.sub(r"//[^\n]*", "", f.read())
        stack = []
        for token in re.finditer(r"\b(message|enum|oneof)\s+(\w+)\s*\{|\}|"
                                 r"^\s*(?:repeated\s+|optional\s+)?(?:map<[^>]+>|[\w.]+)\s+"
                                 r"(\w+)\s*=\s*(\d+)", text, re.MULTILINE):
            if token.group(1):
                stack.append((token.group(1), token.group(2)))
            elif token.group(0) == "}":
                if stack:
                    stack.pop()
            elif token.group(3):
                owner = next((name for kind, name in reversed(stack) if kind == "message"), None)
                if owner:
                    messages.setdefault(owner, {})[token.group(3)] = int(token.group(4))
    return messages


class ReferenceTest(unittest.TestCase):
    def test_every_flag_of_every_binary_is_in_the_reference_and_no_other(self):
        tables = page_flags(read("docs/reference/flags.md"))
        self.assertEqual(set(tables), set(BINARIES), "flags.md's binaries (## headings)")
        for binary, command in BINARIES.items():
            with self.subTest(binary=binary):
                if not os.path.exists(command[-2] if command[0] == PYTHON else command[0]):
                    self.skipTest(f"{command[0]} is not built")
                flags, text = help_flags(command)
                self.assertTrue(flags, f"no flags read from {binary} --help:\n{text}")
                self.assertEqual(sorted(flags - tables[binary]), [],
                                 f"in {binary} --help but not in docs/reference/flags.md")
                self.assertEqual(sorted(tables[binary] - flags), [],
                                 f"in docs/reference/flags.md but not in {binary} --help")

    def test_every_path_the_docs_name_exists(self):
        missing = []
        for page in doc_pages():
            for number, line in enumerate(read(page).splitlines(), 1):
                for path in re.findall(r"`(?:\.\./)*([\w.-]+/[^`\s]*)`", line):
                    path = path.split("#")[0].split(":")[0].rstrip(".,")
                    if not path.startswith(TOP_LEVEL) or re.search(r"[*<>{}$]|\.\.\.", path):
                        continue
                    if not os.path.exists(os.path.join(ROOT, path)):
                        missing.append(f"{page}:{number}: {path}")
        self.assertEqual(missing, [], "paths named in the docs that do not exist")

    def test_every_proto_field_the_api_reference_names_exists(self):
        messages = proto_messages()
        fields = {}
        for message in messages.values():
            for name, number in message.items():
                fields.setdefault(name, set()).add(number)
        wrong, checked = [], 0
        for number, line in enumerate(read("docs/reference/api.md").splitlines(), 1):
            row = re.match(r"^\|\s*`(\w+)` \((\d+)\)", line)
            if row:
                checked += 1
                if int(row.group(2)) not in fields.get(row.group(1), set()):
                    wrong.append(f"api.md:{number}: field {row.group(1)} = {row.group(2)}")
            for message, name in re.findall(r"`([A-Z]\w+)\.([a-z]\w*)`", line):
                if message in messages:
                    checked += 1
                    if name not in messages[message]:
                        wrong.append(f"api.md:{number}: {message}.{name}")
        self.assertGreater(checked, 20, "too few proto fields recognised in api.md")
        self.assertEqual(wrong, [], "proto fields named in docs/reference/api.md")


if __name__ == "__main__":
    unittest.main(verbosity=2)
