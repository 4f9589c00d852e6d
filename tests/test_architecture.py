"""The layers of docs/architecture.md, checked against every import of the package: module-level
and function-local ones alike (a function-local import is still a dependency, and it hid two
cycles), leaving out `if TYPE_CHECKING:` blocks, which import nothing at run time."""
import ast
import re
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "architecture.md").read_text()


def _modules() -> dict[str, Path]:
    """Every module of the installed package, by its import name, with its file."""
    mods = {}
    for p in (ROOT / "checker").rglob("*.py"):
        parts = p.relative_to(ROOT / "checker").with_suffix("").parts
        mods["kcheck" + "".join("." + x for x in parts if x != "__init__")] = p
    mods["kcheck.spec"] = ROOT / "spec" / "__init__.py"
    mods["kcheck.spec.lang"] = ROOT / "spec" / "lang.py"
    return mods


MODULES = _modules()


def _layers() -> dict[str, int]:
    out = {}
    for number, cells in re.findall(r"^\| (\d) [^|]*\| ([^|]+) \|$", DOC, re.M):
        for name in cells.split(","):
            out[name.strip()] = int(number)
    return out


LAYERS = _layers()


def _runtime_nodes(tree):
    """The tree's nodes, without those under `if TYPE_CHECKING:`."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return [n for n in ast.walk(tree) if id(n) not in skip]


def _imports(path: Path) -> tuple[set[str], dict[str, str], list]:
    """(the package's modules it imports, its local names bound to them, the nodes)."""
    nodes = _runtime_nodes(ast.parse(path.read_text()))
    targets, aliases = set(), {}
    for n in nodes:
        if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("kcheck"):
            if n.module != "kcheck" or any(f"kcheck.{a.name}" not in MODULES for a in n.names):
                targets.add(n.module)
            for a in n.names:
                sub = f"{n.module}.{a.name}"
                if sub in MODULES:
                    targets.add(sub)
                    aliases[a.asname or a.name] = sub
        elif isinstance(n, ast.Import):
            for a in n.names:
                if a.name.startswith("kcheck"):
                    targets.add(a.name)
                    if a.asname:
                        aliases[a.asname] = a.name
    return {t for t in targets if t in MODULES}, aliases, nodes


def _graph() -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(MODULES)
    for name, path in MODULES.items():
        for target, in ((t,) for t in _imports(path)[0]):
            if target != name and target != "kcheck":
                g.add_edge(name, target)
    return g


GRAPH = _graph()


def test_every_module_is_in_a_layer():
    assert sorted(set(MODULES) - set(LAYERS)) == []
    assert sorted(set(LAYERS) - set(MODULES)) == []      # nor a layer naming one that is gone


def test_every_import_goes_down_or_across():
    upward = [f"{a} (layer {LAYERS[a]}) imports {b} (layer {LAYERS[b]})"
              for a, b in GRAPH.edges if LAYERS[b] > LAYERS[a]]
    assert upward == []


def test_no_front_end_imports_another_but_the_recorded_exceptions():
    recorded = set(re.findall(r"\*\*Front end importing a front end: (\w+) → (\w+)\.\*\*", DOC))
    front = {m for m, layer in LAYERS.items() if layer == 6}
    found = {(a.split(".")[-1], b.split(".")[-1]) for a, b in GRAPH.edges
             if a in front and b in front}
    assert found == recorded


def test_the_import_cycles_are_the_recorded_ones():
    recorded = [set(f"kcheck.{m}" for m in re.split(r" ↔ ", c))
                for c in re.findall(r"\*\*Import cycle: ([\w ↔]+)\.\*\*", DOC)]
    cycles = [c for c in nx.strongly_connected_components(GRAPH) if len(c) > 1]
    assert sorted(map(sorted, cycles)) == sorted(map(sorted, recorded))


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_uses_another_modules_private_names(name):
    """In either form: `from kcheck.x import _y`, or `x._y` where x is a kcheck module."""
    _, aliases, nodes = _imports(MODULES[name])
    used = [f"{n.module}.{a.name}" for n in nodes if isinstance(n, ast.ImportFrom)
            and n.module and n.module.startswith("kcheck") for a in n.names
            if a.name.startswith("_") and not a.name.startswith("__")]
    used += [f"{aliases[n.value.id]}.{n.attr}" for n in nodes if isinstance(n, ast.Attribute)
             and isinstance(n.value, ast.Name) and n.value.id in aliases
             and aliases[n.value.id] != name
             and n.attr.startswith("_") and not n.attr.startswith("__")]
    assert used == []


@pytest.mark.slow
def test_each_module_imports_alone():
    """A cycle that only works in one import order fails here, whatever imported first."""
    code = ("import importlib, subprocess, sys\n"
            "bad = []\n"
            "for m in sys.argv[1:]:\n"
            "    p = subprocess.run([sys.executable, '-c', f'import {m}'], capture_output=True,"
            " text=True)\n"
            "    if p.returncode:\n"
            "        bad.append(m + ': ' + p.stderr.strip().splitlines()[-1])\n"
            "print('\\n'.join(bad))\n")
    p = subprocess.run([sys.executable, "-c", code, *sorted(MODULES)], capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0 and p.stdout.strip() == "", p.stdout + p.stderr


def test_one_exit_code_table():
    """options.py holds kcheck's exit codes (README, "Exit codes"); no other module defines
    one of its own (bugs and conform each had a table)."""
    tables = []
    for name, path in MODULES.items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Tuple, ast.Constant)):
                names = [t.id for target in node.targets
                         for t in (target.elts if isinstance(target, ast.Tuple) else [target])
                         if isinstance(t, ast.Name)]
                if {"OK", "VIOLATED", "BAD_INPUT", "DIVERGED", "NOT_REDISCOVERED"} & set(names):
                    tables.append(name)
    assert tables == ["kcheck.options"]


# -- one core loop, one result model -------------------------------------------------------------

# what a loop over breadth-first levels does: apply the stopping rule, expand a level or a
# block of one, or step to the next depth
_LEVEL_CALLS = {"stop_before", "expand_level", "expand_frontier", "expand_block", "replay_stop"}


def level_loops(source: str) -> list[str]:
    """The functions of ``source`` with a loop over breadth-first levels of their own: a
    ``for``/``while`` whose body (or ``else``) applies the stopping rule, expands a level or a
    block (``_LEVEL_CALLS``), or adds to a depth (``depth += 1``, ``self.depth += 1``). A
    function nested in a loop's body counts for the function that holds it."""
    found = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for loop in (n for n in ast.walk(fn) if isinstance(n, (ast.For, ast.While))):
            for n in ast.walk(loop):
                called = (n.func.attr if isinstance(n.func, ast.Attribute) else
                          getattr(n.func, "id", None)) if isinstance(n, ast.Call) else None
                target = getattr(n, "target", None) if isinstance(n, ast.AugAssign) else None
                deeper = target is not None and (getattr(target, "id", None) == "depth"
                                                 or getattr(target, "attr", None) == "depth")
                if called in _LEVEL_CALLS or deeper:
                    found.append(fn.name)
                    break
            else:
                continue
            break
    return sorted(set(found))


def test_the_level_loop_detector_sees_the_shapes_spark_owner_had():
    """The check below is not trivially true: the three shapes spark_owner.py had before it ran
    on the core (issue 31) are each found."""
    owner_loop = ("def task(rule, depth):\n"
                  "    while not rule.stop_before(depth):\n"
                  "        depth += 1\n")
    block_loop = ("def expand(comp, S):\n"
                  "    for start in range(0, S.shape[1], 8):\n"
                  "        blk = explore.expand_block(comp, S[:, start:start + 8], [])\n")
    replay = ("def barrier(srch, history, depth):\n"
              "    for sums in history:\n"
              "        if not srch.absorb(depth, sums):\n"
              "            break\n"
              "        depth += 1\n"
              "    else:\n"
              "        stop = srch.stop_before(depth)\n")
    assert level_loops(owner_loop) == ["task"]
    assert level_loops(block_loop) == ["expand"]
    assert level_loops(replay) == ["barrier"]
    walk = ("def walk(levels, fp, depth):\n"            # a trace's walk back is not a level loop
            "    while depth > 0:\n"
            "        fp, depth = levels[depth][fp], depth - 1\n")
    assert level_loops(walk) == []


def test_one_core_loop():
    """The loop over breadth-first levels, the block loop and the stopping rule are
    checker/explore.py's (``Explorer.run``, ``expand_level``, ``Pending``): no other module has a
    level loop of its own (Spark's ownership runs the core's over each owner's share), but the
    recorded exceptions of docs/architecture.md; and no other module defines a stopping rule."""
    recorded = set(re.findall(r"\*\*Level loop outside the core: ([\w.]+)\.\*\*", DOC))
    found = {f"{name.removeprefix('kcheck.')}.{fn}" for name, path in MODULES.items()
             if name != "kcheck.explore" for fn in level_loops(path.read_text())}
    assert found == recorded
    assert not [f for f in found if f.startswith("spark_owner.")]
    rules = [f"{name}.{node.name}" for name, path in MODULES.items() if name != "kcheck.explore"
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.ClassDef) and any(
                 isinstance(m, ast.FunctionDef) and m.name == "stop_before" for m in node.body)]
    assert rules == []


_RESULT_NAME = re.compile(r"\w*Result|\w*Outcome|Found|Violation|Counterexample")


def test_one_result_model():
    """A class named as a result (``*Result``, ``*Outcome``, ``Found``, ``Violation``,
    ``Counterexample``) is the result module's (checker/verdict.py), or an engine's extension
    of its ``RunResult``; the others are the recorded exceptions of docs/architecture.md."""
    recorded = set(re.findall(r"\*\*Result type outside the result model: ([\w.]+)\.\*\*", DOC))
    outside = set()
    for name, path in MODULES.items():
        if name == "kcheck.verdict":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and _RESULT_NAME.fullmatch(node.name):
                bases = {getattr(b, "id", None) or getattr(b, "attr", None) for b in node.bases}
                if "RunResult" not in bases:
                    outside.add(f"{name.removeprefix('kcheck.')}.{node.name}")
    assert outside == recorded
