"""Every pointer in the docs and the code resolves: Markdown links (file and #section), "README's "Section""
references, repository paths such as `trainer/plan.py`, and `tests/test_x.py::test_name` test names."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SOURCES = [p for pkg in ("app", "trainer", "simulator", "storage", "benchmarks", "testkit", "tests", "configs")
           for p in sorted((ROOT / pkg).rglob("*")) if p.suffix in (".py", ".yaml", ".md")]
TOP = ("app", "trainer", "simulator", "storage", "benchmarks", "testkit", "tests", "docs", "configs")

MD_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
README_SECTION = re.compile(r"README(?:'s|\.md)?,? \"([^\"]+)\"|README(?:\.md)?#([\w-]+)")
REPO_PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w./-]*\w\.(?:py|md|yaml|jsonl))(?:::(\w+)|#([\w-]+))?" % "|".join(TOP))


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", path.read_text(encoding="utf-8"), re.M)} | {
        m.group(1) for m in re.finditer(r'<a (?:id|name)="([^"]+)"', path.read_text(encoding="utf-8"))}


def headings(path: Path) -> list[str]:
    return [m.group(1).strip() for m in re.finditer(r"^#+\s+(.*)$", path.read_text(encoding="utf-8"), re.M)]


def broken_links(doc: Path, root: Path = ROOT) -> list[str]:
    text = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.S)
    bad = []
    for target in MD_LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # http:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (doc.parent / file_part).resolve() if file_part else doc
        if not dest.exists():
            bad.append(f"{doc.relative_to(root)}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{doc.relative_to(root)}: {target} (no such section)")
    return bad


def broken_paths(path: Path, root: Path = ROOT) -> list[str]:
    bad = []
    text = path.read_text(encoding="utf-8")
    for m in REPO_PATH.finditer(text):
        rel, test_name, anchor = m.group(1), m.group(2), m.group(3)
        target = root / rel
        if "*" in rel or rel.startswith("tests/data/") and path.suffix == ".py":
            continue
        if not target.exists():
            bad.append(f"{path.relative_to(root)}: {rel} (no such file)")
        elif test_name and not re.search(rf"^\s*(?:async )?def {test_name}\(", target.read_text(encoding="utf-8"),
                                         re.M):
            bad.append(f"{path.relative_to(root)}: {rel}::{test_name} (no such test)")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            bad.append(f"{path.relative_to(root)}: {rel}#{anchor} (no such section)")
    return bad


DOTTED = re.compile(r"(?<![\w./-])((?:app|trainer|simulator|storage|testkit|benchmarks)(?:\.[A-Za-z_]\w*)+)")


def top_level_names(module: Path) -> set[str]:
    """Names a module defines or imports at its top level (read with ast, never imported)."""
    names: set[str] = set()
    for node in ast.parse(module.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def unresolved_dotted(dotted: str, root: Path = ROOT) -> bool:
    """True when `pkg.module[.name]` names no module, or a name its module does not have."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        base = root.joinpath(*parts[:cut])
        module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if module.is_file():
            rest = parts[cut:]
            return bool(rest) and rest[0] not in top_level_names(module) and not (base / rest[0]).exists()
    return True


def broken_dotted_names(path: Path, root: Path = ROOT) -> list[str]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":  # in code, only comments and docstrings name things in prose
        text = "\n".join(n.value for n in ast.walk(ast.parse(text))
                         if isinstance(n, ast.Constant) and isinstance(n.value, str)) + "\n" + "\n".join(
            line.split("#", 1)[1] for line in text.splitlines() if "#" in line)
    found = {m.group(1).rstrip(".") for m in DOTTED.finditer(text)}
    return [f"{path.relative_to(root)}: {d} (not found)" for d in sorted(found)
            if not d.endswith((".py", ".md", ".yaml", ".jsonl", ".txt")) and not d.split(".")[-1].isupper()
            and unresolved_dotted(d, root)]


def broken_readme_sections(path: Path) -> list[str]:
    readme = ROOT / "README.md"
    names = [h.lower() for h in headings(readme)]
    bad = []
    for quoted, anchor in README_SECTION.findall(path.read_text(encoding="utf-8")):
        if quoted and not any(quoted.lower() in h for h in names):
            bad.append(f'{path.relative_to(ROOT)}: README "{quoted}" (no such section)')
        if anchor and anchor not in anchors(readme):
            bad.append(f"{path.relative_to(ROOT)}: README#{anchor} (no such section)")
    return bad


def test_markdown_links_resolve_to_files_and_sections():
    bad = [b for doc in DOCS for b in broken_links(doc)]
    assert bad == [], "\n".join(bad)


def test_repository_paths_named_in_docs_and_code_exist():
    here = Path(__file__)
    bad = [b for p in DOCS + SOURCES if p != here for b in broken_paths(p)]
    assert bad == [], "\n".join(bad)


def test_readme_sections_named_in_docs_and_code_exist():
    here = Path(__file__)
    bad = [b for p in DOCS + SOURCES + [ROOT / "requirements.txt"] if p != here for b in broken_readme_sections(p)]
    assert bad == [], "\n".join(bad)


def test_module_and_function_names_in_docs_and_code_exist():
    product = [s for s in SOURCES if s.suffix in (".py", ".md") and s.parts[len(ROOT.parts)] != "tests"]
    bad = [b for p in DOCS + product for b in broken_dotted_names(p)]
    assert bad == [], "\n".join(bad)


@pytest.mark.parametrize("text, expected", [
    ("see [the plan](presets-and-plan.md#no-such-part)", "no such section"),
    ("see [gone](gone.md)", "no such file"),
])
def test_a_planted_broken_link_is_caught(tmp_path, text, expected):
    (tmp_path / "presets-and-plan.md").write_text("# Presets\n## The plan\n")
    doc = tmp_path / "doc.md"
    doc.write_text(text + "\n")
    assert any(expected in b for b in broken_links(doc, root=tmp_path))
    doc.write_text("see [the plan](presets-and-plan.md#the-plan)\n")
    assert broken_links(doc, root=tmp_path) == []


def test_a_planted_missing_path_and_test_name_are_caught(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("def test_there():\n    pass\n")
    doc = tmp_path / "x.md"
    doc.write_text("read `trainer/no_such_module.py`, tests/test_x.py::test_gone and tests/test_x.py::test_there\n")
    bad = broken_paths(doc, root=tmp_path)
    assert bad == ["x.md: trainer/no_such_module.py (no such file)", "x.md: tests/test_x.py::test_gone (no such test)"]
