"""The mutants of a host script (eq_tui/hosts/scripts/*.sh): one per place a shell bug takes.

Only shell code is mutated. Left alone: comments; quoted strings (single or double, and the
`$(...)` inside double quotes), `${...}` expansions, `$((...))` arithmetic; and heredoc bodies
that are data (`done <<READINGS`), while a heredoc named in SHELL_HEREDOCS is a script of its
own (launch.sh's attempt wrapper, `<<'WRAPPER'`) and is mutated as code. The awk and sed
programs the scripts hold are single-quoted strings: their operators are not mutated (an awk
comparison is awk's bug, not the shell's; mutating them is left for a harness that parses awk).

Operators, one mutant per occurrence:
  -lt/-le ...   a numeric test swapped: -lt→-le, -lt→-gt, -le→-lt, -gt→-ge, -gt→-lt, -ge→-gt,
                -eq→-ne, -ne→-eq
  &&/|| ||/&&   a list operator swapped
  !/drop        a `!` dropped (a pipeline's or a test's)
  !/add         a `!` added before an if/elif/while/until condition
  exit0/1 ...   `exit N` or `return N` changed: 0→1, any other N→0; not a `return N` of a
                function whose status no caller reads (every call of it, in any of the
                scripts given, a statement of its own: not in a condition, a pipeline or an
                &&/|| list after it, not the last of a body or branch, not followed by `$?`):
                that mutant would change nothing
  if/true if/false   an if or elif condition replaced by `true` or `false` (a branch dropped)
  test/true     a `[ ... ]` test in an &&/|| list replaced by `true`
  >/>> >>/>     a redirection's truncate and append swapped (not `>&`, not to /dev/null, where
                both are the same, not inside `[ ]`)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SHELL_HEREDOCS = frozenset({"WRAPPER"})
QUOTED = "\x00"  # a blanked character that is still part of a word
WORD_EDGE = " \t\n;&|()"
NUMERIC = {"lt": ("le", "gt"), "le": ("lt",), "gt": ("ge", "lt"), "ge": ("gt",),
           "eq": ("ne",), "ne": ("eq",)}
_HEREDOC = re.compile(r"<<(-?)[ \t]*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")
_KEYWORD = re.compile(r"(?<![^\s;&|(])(if|elif|while|until)[ \t]+")
_COMMAND_START = (";", "&&", "||", "|", "then", "do", "else", "{", "(")
_THEN = re.compile(r"[ \t]*(?:;|\n)[ \t\n]*then(?=[\s;]|$)")
_FUNCTION = re.compile(r"^[ \t]*([A-Za-z_][A-Za-z0-9_]*)\(\)[ \t]*\{", re.M)
_LIST_END = re.compile(r"&&|\|\||;;|[;|\n]")
_COMPOUND_END = ("fi", "done", "esac")


@dataclass(frozen=True)
class Mutant:
    name: str  # "L42:-lt/-le": the line (of the script as it is) and the operator
    start: int
    end: int
    replacement: str

    def apply(self, text: str) -> str:
        return text[:self.start] + self.replacement + text[self.end:]

    def diff(self, text: str) -> str:
        """The changed line(s), before and after."""
        first = text.rfind("\n", 0, self.start) + 1
        last = text.find("\n", self.end)
        last = len(text) if last < 0 else last
        after = text[first:self.start] + self.replacement + text[self.end:last]
        return f"- {text[first:last].strip()}\n+ {after.strip()}"


class _Scanner:
    """Blanks what is not shell code, keeping every offset: a comment becomes spaces, a quoted
    string or an expansion QUOTED characters (one word still)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.view = list(text)

    def blank(self, start: int, end: int, fill: str = QUOTED) -> None:
        for i in range(start, end):
            if self.text[i] != "\n":  # the view keeps the text's lines
                self.view[i] = fill

    def code(self, i: int, stop: int) -> None:
        text = self.text
        pending: list[tuple[str, bool]] = []
        while i < stop:
            c = text[i]
            if c == "\\":
                if text[i + 1:i + 2] not in ("", "\n"):
                    self.blank(i + 1, i + 2)  # an escaped character is a word's, not an operator
                i += 2
            elif c in "'`":
                end = text.find(c, i + 1)
                end = stop - 1 if end < 0 else end
                self.blank(i, end + 1)
                i = end + 1
            elif c == '"' or (c == "$" and text[i + 1:i + 2] == "{") \
                    or text.startswith("$((", i):
                end = self.skip(i)
                self.blank(i, end)
                i = end
            elif c == "#" and (i == 0 or text[i - 1] in WORD_EDGE):
                end = text.find("\n", i)
                end = stop if end < 0 else end
                self.blank(i, end, " ")
                i = end
            elif text.startswith("<<", i):
                match = _HEREDOC.match(text, i)
                if match:
                    pending.append((match[3], match[1] == "-"))
                    i = match.end()
                else:
                    i += 2
            elif c == "\n" and pending:
                i = self.heredocs(i + 1, pending)
                pending = []
            else:
                i += 1

    def heredocs(self, i: int, pending: list[tuple[str, bool]]) -> int:
        """The bodies that start at `i`; where the code after them starts."""
        for word, tabs in pending:
            body = i
            while i < len(self.text):
                end = self.text.find("\n", i)
                end = len(self.text) if end < 0 else end
                line = self.text[i:end]
                if (line.lstrip("\t") if tabs else line) == word:
                    if word in SHELL_HEREDOCS:
                        self.code(body, i)
                    else:
                        self.blank(body, i)
                    self.blank(i, end)
                    i = end + 1
                    break
                i = end + 1
        return i

    def skip(self, i: int) -> int:
        """The end of the quoted string or expansion that starts at `i`."""
        text = self.text
        if text[i] == '"':
            j = i + 1
            while j < len(text) and text[j] != '"':
                if text[j] == "\\":
                    j += 2
                elif text[j] == "$" and text[j + 1:j + 2] in ("(", "{"):
                    j = self.skip(j)
                else:
                    j += 1
            return j + 1
        close = "}" if text[i + 1] == "{" else ")"
        depth, j = 0, i + 1
        while j < len(text):
            c = text[j]
            if c == "\\":
                j += 2
                continue
            if c == "'":
                j = text.find("'", j + 1) + 1 or len(text)
                continue
            if c == '"' or (c == "$" and text[j + 1:j + 2] in ("(", "{")):
                j = self.skip(j)
                continue
            if c == text[i + 1]:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        return j


def code_view(text: str) -> str:
    """`text` with what is not shell code blanked (the same length: offsets hold)."""
    scanner = _Scanner(text)
    scanner.code(0, len(text))
    return "".join(scanner.view)


def _word_at(view: str, start: int, end: int) -> bool:
    return (start == 0 or view[start - 1] in WORD_EDGE) and (
        end >= len(view) or view[end] in WORD_EDGE)


def _at_command_start(view: str, start: int) -> bool:
    before = view[view.rfind("\n", 0, start) + 1:start].rstrip()
    return not before or before.endswith(_COMMAND_START)


def _tests(view: str) -> list[tuple[int, int]]:
    """The `[ ... ]` tests: where each starts and ends."""
    spans = []
    for match in re.finditer(r"\[[ \t]", view):
        if not _word_at(view, match.start(), match.start() + 1):
            continue
        line_end = view.find("\n", match.start())
        close = re.compile(r"[ \t]\](?=[\s;&|)]|$)").search(
            view, match.end() - 1, len(view) if line_end < 0 else line_end)
        if close:
            spans.append((match.start(), close.end()))
    return spans


def _body_end(view: str, start: int) -> int:
    """Where the `{ ... }` that opens at `start` closes."""
    depth = 0
    for i in range(start, len(view)):
        if view[i] == "{":
            depth += 1
        elif view[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(view)


def _next_word(text: str, view: str, i: int) -> tuple[str, int]:
    """The next command's first word after offset `i` (blank lines and data heredocs
    skipped), and where it starts."""
    while i < len(view) and (view[i] in " \t\n;" or (view[i] == QUOTED and text[i] != '"'
                                                      and text[i] != "'")):
        i += 1
    match = re.match(r"[^\s;]*", view[i:])
    return (match[0] if match else ""), i


def _status_read(text: str, view: str, at: int, name: str) -> bool:
    """Whether the status of the call of `name` at offset `at` can reach anything."""
    line_start = view.rfind("\n", 0, at) + 1
    before = view[line_start:at].rstrip()
    if before.endswith(("if", "elif", "while", "until", "!", "$(")) or (
            before.endswith("|") and not before.endswith("||")):
        return True
    if "$(" in before and before.count("(") > before.count(")"):
        return True
    i = at + len(name)
    while True:
        end = _LIST_END.search(view, i)
        if end is None:
            return True
        if end[0] == "\n" and view[end.start() - 1:end.start()] == "\\":
            i = end.end()
            continue
        if end[0] in ("&&", "||", "|", ";;"):
            return True
        word, start = _next_word(text, view, end.end())
        if word in ("then", "do"):  # the call was a condition's last command
            return True
        line = text[start:text.find("\n", start) if "\n" in text[start:] else len(text)]
        if "$?" in line:
            return True
        if word not in _COMPOUND_END:
            # a body's or a branch's last command: its status is the body's (`}`, `;;`,
            # `)`, `else`, end of text); taken as read
            return word in ("}", "else", "elif", ")", "") or word.startswith((")", "}"))
        i = start + len(word)  # after fi/done/esac: the compound's status is the call's


def _unread_statuses(views: list[tuple[str, str]], text: str, view: str) -> list[tuple[int, int]]:
    """The bodies of the functions defined in `text` whose status no call in `views` reads."""
    spans = []
    for match in _FUNCTION.finditer(view):
        name = match[1]
        calls = [(t, v, m.start()) for t, v in views
                 for m in re.finditer(rf"(?<![\w$-]){name}(?![\w(-])", v)
                 if not v.startswith(f"{name}()", m.start())]
        if not any(_status_read(t, v, at, name) for t, v, at in calls):
            spans.append((match.end() - 1, _body_end(view, match.end() - 1)))
    return spans


def _edits(text: str, view: str, unread: list[tuple[int, int]]
           ) -> list[tuple[str, int, int, str]]:
    edits: list[tuple[str, int, int, str]] = []
    for match in re.finditer(r"-(lt|le|gt|ge|eq|ne)", view):
        if _word_at(view, match.start(), match.end()):
            edits += [(f"-{match[1]}/-{to}", match.start(), match.end(), f"-{to}")
                      for to in NUMERIC[match[1]]]
    for match in re.finditer(r"&&|\|\|", view):
        other = "||" if match[0] == "&&" else "&&"
        edits.append((f"{match[0]}/{other}", match.start(), match.end(), other))
    for match in re.finditer(r"!(?=[ \t])", view):
        if _word_at(view, match.start(), match.end()):
            edits.append(("!/drop", match.start(), match.end() + 1, ""))
    for match in _KEYWORD.finditer(view):
        if not _at_command_start(view, match.start()):
            continue
        if view[match.end()] != "!":
            edits.append(("!/add", match.end(), match.end(), "! "))
        then = _THEN.search(view, match.end()) if match[1] in ("if", "elif") else None
        if then:
            edits += [(f"if/{to}", match.end(), then.start(), to) for to in ("true", "false")]
    for match in re.finditer(r"(exit|return)[ \t]+(\d+)", view):
        if match[1] == "return" and any(a < match.start() < b for a, b in unread):
            continue
        if _word_at(view, match.start(), match.end()):
            to = "1" if match[2] == "0" else "0"
            edits.append((f"{match[1]}{match[2]}/{to}", match.start(2), match.end(2), to))
    tests = _tests(view)
    for start, end in tests:
        before = view[:start].rstrip()
        after = view[end:].lstrip(" \t")
        if before.endswith(("&&", "||")) or after.startswith(("&&", "||")):
            edits.append(("test/true", start, end, "true"))
    for match in re.finditer(r">>|>", view):
        start, end = match.span()
        if (start and view[start - 1] in "<>") or view[end:end + 1] in ("&", "(", "|"):
            continue
        target = text[end:].lstrip(" \t").lstrip("\"'")
        if target.startswith("/dev/null") or any(a <= start < b for a, b in tests):
            continue
        other = ">" if match[0] == ">>" else ">>"
        edits.append((f"{match[0]}/{other}", start, end, other))
    return edits


def script_mutants(path: Path) -> list[Mutant]:
    """The mutants of a script file, its functions' callers read from the scripts beside it."""
    others = tuple(p.read_text() for p in sorted(path.parent.glob("*.sh")) if p != path)
    return mutants(path.read_text(), others)


def mutants(text: str, others: tuple[str, ...] = ()) -> list[Mutant]:
    """Every mutant of a script's text, in the order of the text, each name unique. `others`:
    the scripts that include it or that it includes (where its functions are called)."""
    view = code_view(text)
    views = [(text, view), *((other, code_view(other)) for other in others)]
    unread = _unread_statuses(views, text, view)
    found: list[Mutant] = []
    seen: dict[str, int] = {}
    edits = _edits(text, view, unread)
    for op, start, end, replacement in sorted(edits, key=lambda e: (e[1], e[0])):
        name = f"L{text.count(chr(10), 0, start) + 1}:{op}"
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name = f"{name}#{seen[name]}"
        found.append(Mutant(name, start, end, replacement))
    return found
