"""The package layering, read from the source: app -> trainer -> simulator -> storage, never upwards;
views reach the store only through services; the rollout loop reports to hooks and never writes the
store itself; test fixtures (testkit/) stay out of the product packages."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("app", "trainer", "simulator", "storage")
# what each product package may import of the others (layering: app -> trainer -> simulator -> storage)
ALLOWED = {"storage": {"storage"}, "simulator": {"simulator", "storage"},
           "trainer": {"trainer", "simulator", "storage"}, "app": set(PACKAGES)}


def imported_modules(path: Path) -> list[str]:
    """Every module name a file imports (absolute imports; relative ones are within its package)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def offenders(files: list[Path], bad: callable) -> list[str]:
    return [f"{p.relative_to(ROOT)}: {m}" for p in files for m in imported_modules(p) if bad(m)]


def test_packages_import_only_downwards():
    for pkg in PACKAGES:
        files = sorted((ROOT / pkg).rglob("*.py"))
        assert files, pkg
        upward = offenders(files, lambda m: m.split(".")[0] in PACKAGES and m.split(".")[0] not in ALLOWED[pkg])
        assert upward == [], upward


def test_no_product_module_imports_the_test_fixtures():
    files = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]
    assert offenders(files, lambda m: m.split(".")[0] in ("testkit", "tests")) == []


def test_views_reach_the_store_only_through_services():
    """No module under app/views imports sqlalchemy (queries live in storage/ and the service modules)."""
    views = sorted((ROOT / "app" / "views").glob("*.py"))
    assert len(views) >= 6
    assert offenders(views, lambda m: m.split(".")[0] == "sqlalchemy") == []


def test_the_rollout_loop_does_not_touch_the_store():
    loop = [p for p in sorted((ROOT / "trainer").glob("rollout*.py")) if not p.name.endswith("_cli.py")]
    assert loop
    assert offenders(loop, lambda m: m.split(".")[0] in ("storage", "sqlalchemy")) == []
