"""The package's shape in numbers, for a closing note before and after a structural change:
modules, the largest functions, the loops over breadth-first levels, the result types and the
import cycles. It measures with tests/test_architecture.py's own readers (the imports, function-
local ones included, and the level-loop detector), so the figures and the structural test agree.
Run: .venv/bin/python scripts/structure.py [--top N]"""
from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import networkx as nx                                        # noqa: E402
import test_architecture as arch                              # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--top", type=int, default=10, help="largest functions shown (default 10)")
    args = ap.parse_args()
    functions, loops, results = [], [], []
    for name, path in sorted(arch.MODULES.items()):
        short = name.removeprefix("kcheck.")
        source = path.read_text()
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((node.end_lineno - node.lineno + 1, f"{short}.{node.name}"))
            if isinstance(node, ast.ClassDef) and arch._RESULT_NAME.fullmatch(node.name):
                results.append(f"{short}.{node.name}")
        loops += [f"{short}.{fn}" for fn in arch.level_loops(source)]
    cycles = [sorted(m.removeprefix("kcheck.") for m in c)
              for c in nx.strongly_connected_components(arch.GRAPH) if len(c) > 1]
    print(f"modules: {len(arch.MODULES)} ({sum(1 for _ in functions)} functions)")
    print(f"largest functions (lines): " + ", ".join(
        f"{f} {n}" for n, f in sorted(functions, reverse=True)[:args.top]))
    print(f"level loops: {len(loops)} ({', '.join(loops)})")
    print(f"result types: {len(results)} ({', '.join(results)})")
    print(f"import cycles: {len(cycles)}" + "".join(f"; {' <-> '.join(c)}" for c in cycles))


if __name__ == "__main__":
    main()
