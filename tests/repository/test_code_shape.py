"""The code's shape: small modules, short functions (numba kernels aside), no import cycle
among symbnn's modules and no import from a lower floor to a higher one (every import counts:
at module level, inside functions and under ``if TYPE_CHECKING``), and a function-local import
of a symbnn module only where it keeps a heavy package (torch, ...) out of its module's
import, with a comment saying so. Read with `ast`, nothing imported.

The floors (`FLOORS`) are written down here and shown in docs/design.md, which a test keeps
equal to them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = "symbnn"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
DESIGN = SRC.parent / "docs" / "design.md"

# The package's floors, lowest first: a module imports only from its own floor and the floors
# below it. Each entry is a top-level module or subpackage of symbnn ("symbnn" is the package's
# own __init__).
FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "foundation",
        (
            "symbnn",
            "atomic",
            "cachedir",
            "child_process",
            "device",
            "docblocks",
            "ensemble_pass",
            "joblines",
            "linearize",
            "memory",
            "param_diff",
            "prefetch",
            "progress",
            "threads",
            "treefile",
            "trust",
            "user_code",
        ),
    ),
    ("settings", ("settings", "pulled")),
    ("models", ("models",)),
    ("stores", ("store", "runlog", "acceptance", "plateau")),
    (
        "data and training",
        ("data", "train", "posterior", "checkpoints", "fingerprint", "parameter_count"),
    ),
    ("symmetry and measures", ("symmetry", "mmd", "metrics")),
    ("methods", ("methods", "predictions", "config_code")),
    ("analyses and reports", ("alignment", "report", "analyses", "reference", "api")),
    ("planning and commands", ("plan", "jobenv", "rerun_plan", "commands", "cli")),
)

# Third-party packages whose import a function-local import may keep out of its module's.
HEAVY = frozenset(
    {
        "torch",
        "torchvision",
        "zarr",
        "polars",
        "scipy",
        "numba",
        "matplotlib",
        "snakemake",
        "sklearn",
        "cvxpy",
        "pandas",
        "PIL",
        "safetensors",
        "huggingface_hub",
        "playwright",
    }
)


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


def every_import(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import of the module: at module level, in functions, under TYPE_CHECKING."""
    return [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]


def function_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The imports inside functions (run when the function is called)."""
    found = {}
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(function):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    found[id(node)] = node
    return sorted(found.values(), key=lambda node: node.lineno)


def targets_of(name: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The dotted names one import statement of module ``name`` imports: ``from a import b``
    names the module ``a.b`` if there is one, else ``a``; relative imports are resolved."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    package = name if MODULES.get(name, Path()).name == "__init__.py" else name.rpartition(".")[0]
    base = node.module or ""
    if node.level:
        anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*anchor, *([base] if base else [])])
    return [
        f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
        for alias in node.names
    ]


def package_module(candidate: str) -> str | None:
    """The deepest of the package's modules a dotted name reaches, or None."""
    while candidate and candidate not in MODULES:
        candidate = candidate.rpartition(".")[0]
    return candidate or None


def imports_of(
    name: str, tree: ast.Module, nodes: list[ast.Import | ast.ImportFrom] | None = None
) -> set[str]:
    """The package's modules that ``name`` imports (by default every import of ``tree``)."""
    targets = set()
    for node in every_import(tree) if nodes is None else nodes:
        for candidate in targets_of(name, node):
            module = package_module(candidate)
            if module and module != name:
                targets.add(module)
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


def unit(module: str) -> str:
    """The top-level module or subpackage of symbnn a module belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def floor_of() -> dict[str, int]:
    return {name: index for index, (_, units) in enumerate(FLOORS) for name in units}


def upward_imports(graph: dict[str, set[str]], floors: dict[str, int]) -> list[str]:
    """Each import from a module to one on a higher floor."""
    return [
        f"{name} (floor {FLOORS[floors[unit(name)]][0]}) imports {target} "
        f"(floor {FLOORS[floors[unit(target)]][0]})"
        for name in sorted(graph)
        for target in sorted(graph[name])
        if floors[unit(target)] > floors[unit(name)]
    ]


def load_time_closure(name: str, cache: dict[str, tuple[set[str], set[str]]]) -> set[str]:
    """The third-party top-level packages that importing module ``name`` loads (its own
    load-time imports, those of the symbnn modules they load, parent packages included)."""
    seen, stack, third = set(), [name], set()
    while stack:
        module = stack.pop()
        if module in seen:
            continue
        seen.add(module)
        parts = module.split(".")
        stack.extend(
            ".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in MODULES
        )
        if module not in cache:
            own, others = set(), set()
            for node in load_time_imports(TREES[module]):
                for candidate in targets_of(module, node):
                    if candidate.split(".")[0] == PACKAGE:
                        found = package_module(candidate)
                        if found:
                            own.add(found)
                    else:
                        others.add(candidate.split(".")[0])
            cache[module] = (own, others)
        own, others = cache[module]
        third |= others
        stack.extend(own)
    return third


def has_reason(lines: list[str], node: ast.stmt) -> bool:
    """A comment on the import's lines or on the line above it."""
    above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
    own = lines[node.lineno - 1 : node.end_lineno]
    return above.startswith("#") or any("#" in line for line in own)


def unjustified_function_imports(name: str, tree: ast.Module, cache: dict) -> list[str]:
    """Function-local imports of symbnn modules that keep no heavy package out of ``name``'s
    import, or that have no comment saying why they are local."""
    lines = MODULES[name].read_text().splitlines()
    mine = HEAVY & load_time_closure(name, cache)
    found = []
    for node in function_imports(tree):
        targets = imports_of(name, tree, [node])
        if not targets:
            continue
        kept_out = set().union(*(HEAVY & load_time_closure(t, cache) for t in targets)) - mine
        where = f"{MODULES[name].relative_to(SRC)}:{node.lineno}"
        if not kept_out:
            found.append(
                f"{where}: keeps no heavy package out ({', '.join(sorted(targets))}): import it at module level"
            )
        elif not has_reason(lines, node):
            found.append(f"{where}: keeps {', '.join(sorted(kept_out))} out: say so in a comment")
    return found


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


def test_every_module_is_on_one_floor_and_imports_nothing_above_it():
    listed = [name for _, units in FLOORS for name in units]
    assert len(listed) == len(set(listed)), (
        f"on two floors: {sorted({n for n in listed if listed.count(n) > 1})}"
    )
    units = {unit(name) for name in MODULES}
    assert units <= set(listed), (
        f"on no floor (add them to FLOORS and docs/design.md): {sorted(units - set(listed))}"
    )
    upward = upward_imports(import_graph(), floor_of())
    assert not upward, "imports from a lower floor to a higher one:\n" + "\n".join(upward)


def test_function_local_imports_keep_a_heavy_package_out_and_say_so():
    cache: dict = {}
    found = [
        e for name, tree in TREES.items() for e in unjustified_function_imports(name, tree, cache)
    ]
    assert not found, "function-local imports:\n" + "\n".join(found)


def test_the_design_page_shows_the_floors():
    """docs/design.md's floor table (a row per floor, highest first: | n | floor | modules |)."""
    rows = re.findall(r"^\| (\d+) \| ([^|]+?) \| ([^|]+) \|$", DESIGN.read_text(), re.M)
    shown = [(title.strip(), tuple(re.findall(r"`([\w]+)`", units))) for _, title, units in rows]
    assert list(reversed(shown)) == [(title, units) for title, units in FLOORS]
    assert [int(number) for number, _, _ in reversed(rows)] == list(range(len(FLOORS)))


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


def test_every_import_counts_functions_and_type_checking_included():
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import symbnn.cli\n"
        "def f():\n    from symbnn import store\n"
    )
    assert imports_of("symbnn.atomic", tree) == {"symbnn.cli", "symbnn.store"}
    graph = {"symbnn.store": {"symbnn.cli"}, "symbnn.cli": set()}
    assert upward_imports(graph, floor_of()) == [
        "symbnn.store (floor stores) imports symbnn.cli (floor planning and commands)"
    ]


def test_a_function_local_import_needs_a_heavy_package_and_a_comment():
    cache: dict = {}
    assert "torch" in HEAVY & load_time_closure("symbnn.models", cache)
    assert not HEAVY & load_time_closure("symbnn.settings", cache)
    lines = ["def f():", "    # keeps torch out of planning", "    from symbnn import models"]
    tree = ast.parse("\n".join(lines))
    (node,) = function_imports(tree)
    assert has_reason(lines, node)
    assert not has_reason(["def f():", "    from symbnn import models"], node)
