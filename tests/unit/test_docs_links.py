"""The docs are a front door a user reads in ten minutes, and everything they point at is there
(issue 43, items 5 and 6): README.md is at most 400 lines with at most 3 commit hashes and a
contents list of its sections; every relative link of README.md and docs/*.md names a file, and
its #anchor a heading of it (GitHub's slugs); every module path the docs name exists, each module
of architecture.md's layers and rooms is where it says, every test the docs cite is a test, and
the attempt dirs' root on an SSH host is the one the code makes."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
SOURCE_DIRS = ("eq_tui", "tests", "bench", "docs", "sample_manifests", ".ci")
# scripts that stand for the reader's own in examples (`python train.py`), no file of ours;
# run.sh is the wrapper launch.sh writes into each attempt dir on the host
EXAMPLE_SCRIPTS = {"train.py", "analyse.py", "t.py", "distill.py", "eval.py", "baseline.py",
                   "bench.py", "teach.py", "tokenize.py", "plot.py", "run_queue.sh", "conda.sh",
                   "run.sh"}
HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
MODULE_PATH = re.compile(r"(?<![\w./~-])((?:[\w.-]+/)*[\w-]+\.(?:py|sh))\b")


def prose(text: str) -> str:
    """The text outside fenced code blocks."""
    return re.sub(r"^```.*?^```[^\n]*$", "", text, flags=re.MULTILINE | re.DOTALL)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", prose(path.read_text(encoding="utf-8")),
                              re.MULTILINE):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


@functools.cache
def repo_files() -> list[str]:
    files = [p.name for p in ROOT.iterdir() if p.is_file()]
    for top in SOURCE_DIRS:
        files += [str(p.relative_to(ROOT)) for p in (ROOT / top).rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts]
    return files


def links(path: Path) -> Iterator[str]:
    for link in LINK.findall(prose(path.read_text(encoding="utf-8"))):
        if not re.match(r"[a-z]+:", link):
            yield link


def test_the_readme_is_read_in_ten_minutes() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 400
    hashes = HASH.findall(text)
    assert len(hashes) <= 3, hashes


def test_the_contents_list_names_every_section_and_each_anchor_is_one() -> None:
    text = README.read_text(encoding="utf-8")
    start = text.index("## Contents\n")
    listed = re.findall(r"^- \[[^\]]+\]\(#([^)]+)\)", text[start:text.index("\n## ", start + 1)],
                        re.MULTILINE)
    sections = [slug(h) for h in re.findall(r"^## (.+)$", prose(text), re.MULTILINE)]
    assert listed == [s for s in sections if s != "contents"]
    assert set(listed) <= anchors(README)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_relative_link_names_a_file_and_a_heading_of_it(doc: Path) -> None:
    for link in links(doc):
        target, _, anchor = link.partition("#")
        path = (doc.parent / target).resolve() if target else doc
        assert path.is_relative_to(ROOT) and path.exists(), f"{doc.name}: {link}"
        if anchor:
            assert anchor in anchors(path), f"{doc.name}: {link}: no such heading"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_module_path_the_docs_name_exists(doc: Path) -> None:
    files = repo_files()
    names = {Path(f).name for f in files}
    for named in set(MODULE_PATH.findall(doc.read_text(encoding="utf-8"))):
        if "/" in named:
            assert any(f == named or f.endswith("/" + named) for f in files), (doc.name, named)
        else:
            assert named in names or named in EXAMPLE_SCRIPTS, (doc.name, named)


def test_the_layers_name_each_module_in_its_own_package() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text[text.index("## Layers"):]
    block = block[block.index("```\n") + 4:]
    package = ROOT / "eq_tui"
    for line in block[:block.index("```")].splitlines():
        where = re.findall(r"eq_tui/([\w/]+)/", line)
        if where:
            package = ROOT / "eq_tui" / where[-1]
        for name in re.findall(r"(?<![\w/])(\w+\.py)\b", line):
            assert list(package.rglob(name)), f"{name} is not in {package.relative_to(ROOT)}"


def test_each_part_of_the_engine_is_in_its_room() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    engine = ROOT / "eq_tui" / "engine"
    rows = 0
    for room, modules in re.findall(r"^\| ((?:`\w+/`(?:, )?)+|\(root\)) \| [^|]+ \| ([^|]+) \|",
                                    text, re.MULTILINE):
        rows += 1
        rooms = re.findall(r"`(\w+)/`", room) or [""]
        for name in re.findall(r"`([\w/]+\.(?:py|sh))`", modules):
            places = [engine / r / name for r in rooms] + [
                engine / name, ROOT / "eq_tui" / name, ROOT / "eq_tui" / "hosts" / "scripts" / name]
            assert any(p.exists() for p in places), f"{room}: {name}"
    assert rows >= 20


def test_every_test_the_docs_cite_is_a_test() -> None:
    tests = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "tests").rglob("*.py"))
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for path, name in re.findall(r"(tests/[\w/]+\.py)::(\w+)", text):
            assert f"def {name}(" in (ROOT / path).read_text(encoding="utf-8"), f"{path}::{name}"
        for name in re.findall(r"`(test_\w+)`", text):
            assert f"def {name}(" in tests, (doc.name, name)


async def test_the_log_root_the_docs_give_is_the_one_an_ssh_host_uses() -> None:
    from eq_tui.hosts.local import LocalRunner
    from eq_tui.hosts.shell_host import ShellHost

    runner = LocalRunner({"HOME": "/home/me", "PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    root = await ShellHost("box1", runner).log_root("demo", "4f2a1c")  # no log_dir: as ssh
    events = (ROOT / "docs" / "events.md").read_text(encoding="utf-8")
    paths = re.findall(r'"(?:log|attempt_dir)": "(/home/me/[^"]+)"', events)
    assert paths and all(path.startswith(root + "/") for path in paths), (root, paths)
    template = (root.replace("/home/me", "~", 1).replace("demo", "<project>")
                .replace("4f2a1c", "<token>"))
    for name in ("architecture.md", "events.md"):
        assert f"`{template}`" in (ROOT / "docs" / name).read_text(encoding="utf-8"), name


def test_every_event_type_has_its_section_in_docs_events() -> None:
    from eq_tui.api.events import EVENT_TYPES

    events = (ROOT / "docs" / "events.md").read_text(encoding="utf-8")
    missing = [name for name in EVENT_TYPES if f"### `{name}`" not in events]
    assert not missing, f"docs/events.md has no section for {missing}"
