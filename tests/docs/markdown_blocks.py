"""The shell examples of a Markdown page, as the docs test reads them.

A ```sh block is a command a reader types; a ```text block right after it (blank lines between
at most) is what that command prints. A line `...` of the printed text stands for any number of
lines, and `...` inside a line for any text on that line. HTML comments on the lines right
before a ```sh block steer the test (a reader does not see them):

  <!-- docs-test: skip: REASON -->       not run (REASON is printed)
  <!-- docs-test: instead: COMMAND -->   COMMAND runs in the block's place (printed too)
  <!-- docs-test: background -->         the block keeps running (a server) while the page's
                                         later blocks run; its printed text is waited for
"""
import re
from dataclasses import dataclass, field

FENCE = re.compile(r"^(\s*)(`{3,})\s*([\w+-]*)\s*$")
DIRECTIVE = re.compile(r"^\s*<!--\s*docs-test:\s*(skip|instead|background)\s*:?\s*(.*?)\s*-->\s*$")


@dataclass
class Block:
    line: int                 # where the ```sh fence is (1-based)
    code: str
    expected: str | None = None
    directives: dict = field(default_factory=dict)


def shell_blocks(text):
    """The page's ```sh blocks in order, each with its expected output and directives."""
    lines = text.splitlines()
    blocks, i = [], 0
    pending = {}
    last_sh = None  # the sh block an output block may still follow
    while i < len(lines):
        directive = DIRECTIVE.match(lines[i])
        if directive:
            pending[directive.group(1)] = directive.group(2)
            i += 1
            continue
        fence = FENCE.match(lines[i])
        if not fence:
            if lines[i].strip():
                last_sh = None
                pending = {}
            i += 1
            continue
        indent, ticks, info = fence.groups()
        body, i = [], i + 1
        while i < len(lines) and not re.match(r"^\s*" + ticks + r"\s*$", lines[i]):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        start = i - len(body)  # the fence's own line number, 1-based
        i += 1
        content = "\n".join(body)
        if info == "sh":
            last_sh = Block(line=start, code=content, directives=pending)
            blocks.append(last_sh)
        elif info == "text" and last_sh is not None and last_sh.expected is None:
            last_sh.expected = content
            last_sh = None
        else:
            last_sh = None
        pending = {}
    return blocks


def expected_pattern(expected):
    """A regular expression for printed text: `...` lines and `...` within lines are wildcards."""
    parts = []
    for line in normalize(expected)[:-1].split("\n"):
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(re.escape(piece) for piece in line.split("...")) + r"\n")
    return re.compile("".join(parts))


def normalize(output):
    """Trailing spaces and blank lines at the end dropped; one newline at the end."""
    lines = [line.rstrip() for line in output.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"


def matches(expected, output, whole=True):
    pattern = expected_pattern(expected)
    text = normalize(output)
    return bool(pattern.fullmatch(text) if whole else pattern.match(text))
