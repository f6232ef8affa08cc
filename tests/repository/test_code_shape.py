"""The code's shape: small modules, short functions (numba kernels aside), and no import
cycle among symbnn's modules. Read with `ast`, nothing imported."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = "symbnn"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def module_files() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    modules = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


MODULES = module_files()
TREES = {name: ast.parse(path.read_text(), str(path)) for name, path in MODULES.items()}


def imported_names(tree: ast.Module) -> dict[str, str]:
    """Local name -> the dotted name it stands for, from the module's imports."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    names[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def dotted(node: ast.expr, names: dict[str, str]) -> str | None:
    """The dotted name a decorator expression refers to (``nb.njit(cache=True)`` with
    ``import numba as nb``: ``numba.njit``), or None."""
    if isinstance(node, ast.Call):
        node = node.func
    attributes = []
    while isinstance(node, ast.Attribute):
        attributes.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([names.get(node.id, node.id), *reversed(attributes)])


def is_numba_kernel(function: ast.FunctionDef | ast.AsyncFunctionDef, names) -> bool:
    for decorator in function.decorator_list:
        name = dotted(decorator, names)
        if name and name.startswith("numba.") and name.rsplit(".", 1)[-1] in {"jit", "njit"}:
            return True
    return False


def long_functions(name: str, tree: ast.Module) -> list[str]:
    """Functions of more than MAX_FUNCTION_LINES lines (from ``def`` to their last line),
    numba kernels and the functions inside them aside."""
    names = imported_names(tree)
    found = []

    def visit(node: ast.AST, qualname: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                if is_numba_kernel(child, names):
                    continue
                length = child.end_lineno - child.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{name}:{child.lineno} {qualname}{child.name} ({length} lines)")
                visit(child, f"{qualname}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{qualname}{child.name}.")
            else:
                visit(child, qualname)

    visit(tree, "")
    return found


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def load_time_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The imports that run when the module is imported: at module level (inside ``if``,
    ``try``, ``with`` and class bodies too), not in functions nor under ``if TYPE_CHECKING``."""
    found = []

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.append(node)
            elif isinstance(node, ast.If):
                if not is_type_checking(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                for block in (node.body, node.orelse, node.finalbody):
                    visit(block)
                for handler in node.handlers:
                    visit(handler.body)
            elif isinstance(node, ast.With | ast.ClassDef):
                visit(node.body)

    visit(tree.body)
    return found


def imports_of(name: str, tree: ast.Module) -> set[str]:
    """The package's modules ``name`` imports when loaded: ``from a import b`` names the
    module ``a.b`` if there is one, else ``a``; relative imports are resolved."""
    package = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in load_time_imports(tree):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            candidates = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                for alias in node.names
            ]
        for candidate in candidates:
            # the deepest of the package's modules the dotted name reaches
            while candidate and candidate not in MODULES:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                targets.add(candidate)
    return targets


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan's
    algorithm, iterative), each as its modules in import order, back to the first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
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
                    components.append(set(component))
    return [cycle_in(graph, component) for component in components]


def cycle_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle through the first module of a strongly connected component."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & component):
                if child == start:
                    return [*paths[node], start]
                if child not in paths:
                    paths[child] = [*paths[node], child]
                    following.append(child)
        frontier = following
    raise AssertionError(f"{sorted(component)} is not strongly connected")


def import_graph() -> dict[str, set[str]]:
    return {name: imports_of(name, tree) for name, tree in TREES.items()}


def test_modules_are_at_most_600_lines():
    long = {
        name: n
        for name, path in MODULES.items()
        if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_functions_are_at_most_80_lines_except_numba_kernels():
    long = [entry for name, tree in TREES.items() for entry in long_functions(name, tree)]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(long)


def test_no_import_cycle_among_the_modules():
    cycles = import_cycles(import_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


# --- the checks themselves ---------------------------------------------------------------


@pytest.mark.parametrize(
    "header",
    [
        "import numba\n@numba.njit\n",
        "import numba as nb\n@nb.njit(cache=True)\n",
        "from numba import njit\n@njit(parallel=True)\n",
        "from numba import jit as compiled\n@compiled(nopython=True)\n",
    ],
)
def test_a_numba_kernel_is_recognized_by_its_decorator_and_may_be_long(header):
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    tree = ast.parse(f"{header}def kernel():\n{body}")
    assert long_functions("m", tree) == []


def test_a_long_function_is_reported_with_its_length_and_a_lookalike_decorator_is_no_excuse():
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    source = f"def njit(f):\n    return f\n\n@njit\ndef f():\n{body}"
    assert long_functions("m", ast.parse(source)) == [f"m:5 f ({MAX_FUNCTION_LINES + 1} lines)"]
    short = f"def f():\n{''.join(body.splitlines(keepends=True)[1:])}"
    assert long_functions("m", ast.parse(short)) == []


def test_imports_at_load_time_exclude_functions_and_type_checking():
    tree = ast.parse(
        "import a\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import b\nelse:\n    import c\n"
        "try:\n    import d\nexcept ImportError:\n    import e\n"
        "def f():\n    import g\n"
        "class K:\n    import h\n"
    )
    modules = [alias.name for node in load_time_imports(tree) for alias in node.names]
    assert modules == ["a", "TYPE_CHECKING", "c", "d", "e", "h"]


def test_relative_and_absolute_imports_resolve_to_the_packages_modules():
    assert "symbnn.store.format" in imports_of("symbnn.store", TREES["symbnn.store"])
    tree = ast.parse("from . import format\nfrom .layout import read_layout\nimport symbnn.cli\n")
    assert imports_of("symbnn.store.checks", tree) == {
        "symbnn.store.format",
        "symbnn.store.layout",
        "symbnn.cli",
    }


def test_a_cycle_is_reported_by_its_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert import_cycles(graph) == [["a", "b", "c", "a"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []
