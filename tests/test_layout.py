"""The package layering, read from the source: app -> trainer -> simulator -> storage, never upwards;
no import cycles (imports inside functions included) and no private name taken from another module;
packages of about a dozen modules and modules under 400 lines; views reach the store only through
services; the rollout loop reports to hooks and never writes the store itself; queries are built only in
storage/ and the packages that own a stored concept, and only storage/ reads a table's columns (rows become
dicts through storage.rows); test fixtures (testkit/) stay out of the product packages; no module of the lab
is imported under an alias shorter than its name."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("app", "trainer", "simulator", "storage")
CHECKED = PACKAGES + ("benchmarks", "testkit")  # every package whose imports are checked for cycles
MAX_MODULES = 12  # per package, __init__ not counted
MAX_LINES = 400
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


def is_test_file(module: str) -> bool:
    return module.split(".")[-1].startswith("test_")


def test_no_test_file_imports_another():
    """Shared test pieces live in helpers.py, scripted_rollout.py or conftest.py, not in a test file."""
    assert offenders(sorted((ROOT / "tests").glob("*.py")), is_test_file) == []


def test_a_planted_import_of_a_test_file_is_caught(tmp_path):
    planted = tmp_path / "test_planted.py"
    planted.write_text("from test_rollout import Factory\nimport tests.test_compare\nfrom helpers import wait_for\n",
                       encoding="utf-8")
    assert [m for m in imported_modules(planted) if is_test_file(m)] == ["test_rollout", "tests.test_compare"]


def test_views_reach_the_store_only_through_services():
    """No module under app/views imports sqlalchemy (queries live in storage/ and the service modules)."""
    views = sorted((ROOT / "app" / "views").glob("*.py"))
    assert len(views) >= 6
    assert offenders(views, lambda m: m.split(".")[0] == "sqlalchemy") == []


# the folders outside storage/ whose modules build queries over the models (storage/__init__.py says why)
QUERY_FOLDERS = ("app/services", "simulator/evaluation", "simulator/personas", "trainer/benchmarking",
                 "trainer/experiments", "trainer/jobs", "trainer/learning")
STORE_URL_READERS = ("app/preflight.py",)  # import sqlalchemy to parse a store URL, never to query


def test_only_storage_and_the_packages_owning_a_concept_import_sqlalchemy():
    files = [p for pkg in ("app", "trainer", "simulator") for p in sorted((ROOT / pkg).rglob("*.py"))
             if str(p.parent.relative_to(ROOT)) not in QUERY_FOLDERS
             and str(p.relative_to(ROOT)) not in STORE_URL_READERS]
    assert offenders(files, lambda m: m.split(".")[0] == "sqlalchemy") == []


def table_readers(root: Path, folders: tuple[str, ...]) -> list[str]:
    """`X.__table__` / `X.__mapper__` anywhere in these folders (inside functions too): a module reading a
    table's columns itself, e.g. a hand-written row -> dict. storage.rows.as_dict / column_names do that."""
    found = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            found += [f"{path.relative_to(root)}:{node.lineno}: {node.attr}"
                      for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                      if isinstance(node, ast.Attribute) and node.attr in ("__table__", "__mapper__")]
    return found


def test_only_storage_reads_a_tables_columns():
    assert table_readers(ROOT, ("app", "trainer", "simulator", "benchmarks", "testkit", "tests")) == []
    assert table_readers(ROOT, ("storage",))  # the check sees storage's own (storage/rows.py)


def test_a_planted_row_to_dict_is_caught(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "jobs.py").write_text("from storage import Job, as_dict\n\ndef job_dict(job):\n"
                                 "    return {c: getattr(job, c) for c in Job.__table__.columns.keys()}\n\n"
                                 "def fine(job):\n    return as_dict(job)\n", encoding="utf-8")
    (pkg / "runs.py").write_text("def keys(row):\n    return [a.key for a in type(row).__mapper__.column_attrs]\n",
                                 encoding="utf-8")
    assert table_readers(tmp_path, ("pkg",)) == ["pkg/jobs.py:4: __table__", "pkg/runs.py:2: __mapper__"]
    (pkg / "jobs.py").write_text("from storage import as_dict\n\ndef job_dict(job):\n    return as_dict(job)\n",
                                 encoding="utf-8")
    (pkg / "runs.py").unlink()
    assert table_readers(tmp_path, ("pkg",)) == []


def test_the_rollout_loop_does_not_touch_the_store():
    loop = sorted((ROOT / "trainer" / "rollout").glob("*.py"))
    assert loop
    assert offenders(loop, lambda m: m.split(".")[0] in ("storage", "sqlalchemy")) == []


def module_files(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """Dotted module name -> file, for every module under the given top-level packages."""
    found = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def import_graph(root: Path, packages: tuple[str, ...]) -> tuple[dict[str, set[str]], list[str]]:
    """(module -> the modules it imports anywhere in its body, the private names taken across modules)."""
    modules = module_files(root, packages)

    def owner(name: str) -> str:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {}
    private: list[str] = []
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets |= {owner(a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                for alias in node.names:
                    target = owner(f"{base}.{alias.name}") or owner(base)
                    targets.add(target)
                    if alias.name.startswith("_") and not alias.name.startswith("__") and target != module:
                        private.append(f"{path.relative_to(root)}: {alias.name} from {target}")
        graph[module] = {t for t in targets if t and t != module}
    return graph, private


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_no_import_cycles_and_no_private_names_across_modules():
    graph, private = import_graph(ROOT, CHECKED)
    assert len(graph) > 150
    assert import_cycles(graph) == []
    assert private == []


def test_a_planted_cycle_and_a_private_import_are_caught(tmp_path):
    """The check itself: two modules that import each other, one inside a function, and a private name."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from pkg import a\n    return a\n")
    (pkg / "c.py").write_text("from pkg.a import _hidden\n")
    graph, private = import_graph(tmp_path, ("pkg",))
    assert import_cycles(graph) == [["pkg.a", "pkg.sub.b"]]
    assert private == ["pkg/c.py: _hidden from pkg.a"]
    (pkg / "sub" / "b.py").write_text("def f():\n    return 1\n")
    assert import_cycles(import_graph(tmp_path, ("pkg",))[0]) == []


def test_packages_and_modules_stay_small():
    modules = module_files(ROOT, CHECKED)
    per_package: dict[str, int] = {}
    for name, path in modules.items():
        if path.name != "__init__.py":
            per_package[str(path.parent.relative_to(ROOT))] = per_package.get(str(path.parent.relative_to(ROOT)), 0) + 1
    assert {p: n for p, n in per_package.items() if n > MAX_MODULES} == {}
    long = {str(p.relative_to(ROOT)): n for p in modules.values()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def package_of(module: str, modules: dict[str, Path]) -> str:
    """The package a module sits in (a package's __init__ is the package itself)."""
    return module if modules[module].name == "__init__.py" else module.rpartition(".")[0]


def two_way_package_pairs(root: Path, packages: tuple[str, ...]) -> list[tuple[str, str]]:
    """Pairs of packages that import each other, each by some module (imports inside functions counted). A
    package and its own sub-packages are one family (simulator/user and simulator/user/backends): arrows inside
    a family are the cycle check's business."""
    graph, _ = import_graph(root, packages)
    modules = module_files(root, packages)
    arrows = {(package_of(m, modules), package_of(t, modules)) for m, targets in graph.items() for t in targets
              if t in modules}
    related = lambda a, b: a.startswith(b + ".") or b.startswith(a + ".")  # noqa: E731
    return sorted((a, b) for a, b in arrows if a < b and (b, a) in arrows and not related(a, b))


def test_no_two_packages_import_each_other():
    assert two_way_package_pairs(ROOT, CHECKED) == []


def test_a_planted_two_way_package_pair_is_caught(tmp_path):
    for folder in ("pkg/one", "pkg/two"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "one" / "a.py").write_text("from pkg.two import b\n")
    (tmp_path / "pkg" / "two" / "b.py").write_text("def f():\n    from pkg.one.c import g\n    return g\n")
    (tmp_path / "pkg" / "one" / "c.py").write_text("def g():\n    return 1\n")
    assert two_way_package_pairs(tmp_path, ("pkg",)) == [("pkg.one", "pkg.two")]
    (tmp_path / "pkg" / "two" / "b.py").write_text("def f():\n    return 1\n")
    assert two_way_package_pairs(tmp_path, ("pkg",)) == []


def short_module_aliases(root: Path, packages: tuple[str, ...], folders: tuple[str, ...]) -> list[str]:
    """`import pkg.mod as m` / `from pkg import mod as m` where `mod` is a module of `packages` and the alias
    is shorter than its name: a reader meets `m.save(...)` and has to look up what `m` is. Other libraries'
    conventions (np, gr, go, sa) are not modules of the lab and stay."""
    ours = set(module_files(root, packages))
    found = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    pairs = [(a.name, a.asname) for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    pairs = [(f"{node.module}.{a.name}", a.asname) for a in node.names]
                else:
                    continue
                found += [f"{path.relative_to(root)}:{node.lineno}: {module} as {alias}" for module, alias in pairs
                          if alias and module in ours and len(alias) < len(module.rsplit(".", 1)[-1])]
    return found


def test_no_module_is_imported_under_a_shorter_alias():
    assert short_module_aliases(ROOT, CHECKED, CHECKED + ("tests",)) == []


def test_a_planted_short_alias_is_caught(tmp_path):
    """The check itself: a short alias of a module (caught, in a function too), of a function and of another
    library (both left alone), and an alias as long as the module's name (fine)."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "store.py").write_text("def save():\n    return 1\n")
    (pkg / "user.py").write_text("import pkg.store as ps\nfrom pkg.store import save as s\nimport numpy as np\n"
                                 "def f():\n    from pkg import store as st\n    return st\n")
    (pkg / "fine.py").write_text("from pkg import store as depot\nimport pkg.store as persona_store\n")
    assert short_module_aliases(tmp_path, ("pkg",), ("pkg",)) == ["pkg/user.py:1: pkg.store as ps",
                                                                  "pkg/user.py:5: pkg.store as st"]


def missing_imported_names(root: Path, packages: tuple[str, ...], folders: tuple[str, ...]) -> list[str]:
    """`from pkg.module import name` (anywhere, inside functions too) where pkg.module is the project's and has
    no top-level `name` (defined, assigned or imported) and no sub-module of that name: what a move leaves
    behind and only an import at run time would find."""
    modules = module_files(root, packages)
    names_of: dict[str, set[str]] = {}

    def top_level(module: str) -> set[str]:
        if module not in names_of:
            found: set[str] = set()
            for node in ast.parse(modules[module].read_text(encoding="utf-8")).body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    found.add(node.name)
                elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    found |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    found |= {(a.asname or a.name).split(".")[0] for a in node.names}
                elif isinstance(node, (ast.If, ast.Try)):  # names bound under a guard count too
                    found |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
                    found |= {(a.asname or a.name).split(".")[0] for n in ast.walk(node)
                              if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
            names_of[module] = found
        return names_of[module]

    bad = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in modules):
                    continue
                for alias in node.names:
                    if alias.name != "*" and alias.name not in top_level(node.module) and \
                            f"{node.module}.{alias.name}" not in modules:
                        bad.append(f"{path.relative_to(root)}:{node.lineno}: {alias.name} from {node.module}")
    return bad


def test_every_name_imported_from_the_project_exists_there():
    assert missing_imported_names(ROOT, CHECKED, CHECKED + ("tests",)) == []


def test_a_planted_import_of_a_moved_name_is_caught(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "queue.py").write_text("from pkg.layout import STATE\n\ndef launch():\n    return STATE\n")
    (pkg / "layout.py").write_text("STATE = 'state'\n")
    (pkg / "runner.py").write_text("def f():\n    from pkg.queue import launch, policy_path\n    return launch\n")
    assert missing_imported_names(tmp_path, ("pkg",), ("pkg",)) == ["pkg/runner.py:2: policy_path from pkg.queue"]
