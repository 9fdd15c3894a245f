"""Every code block of docs/*.md runs here, so the guides cannot drift from the code they describe.

A page's blocks run in order in a scratch copy of the repository (ROOTS), with the copy's src/ first on PYTHONPATH and
this interpreter's environment on PATH. What a block is, is said by its language and by its first line, which the
reader sees too:

- `text`: a formula, pseudo-code or a program's output, not code;
- first line `# fragment: ...` (`<!-- fragment: ... -->` in Markdown): a piece of a file, shown to be read, not run;
- first line `# new file: PATH`: the rest of the block is the file PATH;
- first line `# added to: PATH`: the rest is appended to PATH, or with `# added to: PATH, after the line with TEXT`
  inserted after the one line of PATH that contains TEXT;
- `sh` without such a line: commands that bash runs in the copy's root, stopping at the first that fails;
- `python` without such a line: a program that python runs there.

Any other block (another language, or none) fails the test until it is marked."""

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
ROOTS = ("Snakefile", "pyproject.toml", "config", "docs", "profiles", "src", "tests", "workflow")

_OPENING = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<language>[^\s`]*)[^`]*$")
_MARKER = re.compile(r"^(?:#|<!--)\s*(?P<kind>fragment|new file|added to)\b:?\s*(?P<rest>.*?)\s*(?:-->)?$")
_ADDED = re.compile(r"^(?P<path>[^\s,]+)(?:,\s*after the line with (?P<anchor>.+))?$")
RUN = {"sh": ["bash", "-e", "-c"], "python": [sys.executable, "-c"]}


@dataclass
class Block:
    page: str
    line: int  # of the opening fence
    language: str
    text: str

    def __str__(self) -> str:
        return f"docs/{self.page}:{self.line}"

    def marker(self) -> re.Match | None:
        return _MARKER.match(self.text.split("\n", 1)[0])

    def body(self) -> str:
        """The block without its marker line."""
        return self.text.split("\n", 1)[1] if self.marker() else self.text


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page, in order."""
    found, lines = [], page.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = _OPENING.match(lines[index])
        index += 1
        if not opening:
            continue
        fence, indent, start, content = opening["fence"], len(opening["indent"]), index, []
        while index < len(lines) and not re.fullmatch(rf" {{0,3}}{fence[0]}{{{len(fence)},}}\s*", lines[index]):
            line = lines[index]
            content.append(line[indent:] if not line[:indent].strip() else line.lstrip())
            index += 1
        index += 1
        found.append(Block(page.name, start, opening["language"], "\n".join(content) + "\n"))
    return found


def action(block: Block) -> str:
    """What the test does with a block: 'display', 'fragment', 'new file', 'added to' or 'run'; ValueError for a
    block that is neither runnable nor marked."""
    marker = block.marker()
    if block.language == "text":
        return "display"
    if marker:
        return marker["kind"]
    if block.language not in RUN:
        raise ValueError(f"{block}: a{'n unlabelled' if not block.language else f' `{block.language}`'} block that "
                         f"runs nowhere: mark it (`text`, `# fragment: ...`, `# new file: PATH`, `# added to: PATH`) "
                         f"or make it `sh` or `python` (tests/test_docs.py)")
    return "run"


PAGES = sorted(DOCS.glob("*.md"))


def test_every_block_is_run_or_marked():
    problems = []
    for block in (block for page in PAGES for block in blocks(page)):
        try:
            action(block)
        except ValueError as problem:
            problems.append(str(problem))
    assert PAGES and not problems, "\n".join(problems)


def scratch_copy(destination: Path) -> Path:
    destination.mkdir(parents=True)
    for name in ROOTS:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, destination / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(source, destination / name)
    return destination


def add_to(block: Block, root: Path) -> None:
    added = _ADDED.match(block.marker()["rest"])
    assert added, f"{block}: `added to:` takes PATH or `PATH, after the line with TEXT`"
    path = root / added["path"]
    assert path.is_file(), f"{block}: {added['path']} does not exist"
    text = path.read_text(encoding="utf-8")
    if added["anchor"] is None:
        path.write_text(text.rstrip("\n") + "\n\n\n" + block.body(), encoding="utf-8")
        return
    lines = text.splitlines(keepends=True)
    matching = [number for number, line in enumerate(lines) if added["anchor"] in line]
    assert len(matching) == 1, f"{block}: {len(matching)} lines of {added['path']} contain {added['anchor']!r}"
    lines.insert(matching[0] + 1, block.body())
    path.write_text("".join(lines), encoding="utf-8")


def run(block: Block, root: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root / "src"), *filter(None, [env.get("PYTHONPATH")])])
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    result = subprocess.run([*RUN[block.language], block.text], cwd=root, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, (f"{block} failed ({result.returncode}):\n{block.text}\n"
                                    f"{result.stdout[-5000:]}\n{result.stderr[-5000:]}")


def shown_only(block: Block) -> bool:
    return block.language == "text" or bool(block.marker() and block.marker()["kind"] == "fragment")


# Pages with a block to write or run (an unmarked block counts: the test then says how to mark it).
RUNNING = [page for page in PAGES if not all(map(shown_only, blocks(page)))]


@pytest.mark.parametrize("page", RUNNING, ids=[page.name for page in RUNNING])
def test_the_blocks_of_a_page_run_in_order(page, tmp_path):
    root = scratch_copy(tmp_path / "repository")
    for block in blocks(page):
        kind = action(block)
        if kind == "new file":
            path = root / block.marker()["rest"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(block.body(), encoding="utf-8")
        elif kind == "added to":
            add_to(block, root)
        elif kind == "run":
            run(block, root)
