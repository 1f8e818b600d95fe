"""No function in the package takes more than 7 parameters (issue 47): parameters that travel together travel as
one object (``CallConfig``, ``PlayConfig``/``PairOptions``, ``StudyConfig``, ``PilotConfig``, ``RankingConfig``,
``ValueConfig``, ...), as inspect-ai's ``GenerateConfig`` does. docs/DECISIONS.md "Parameters travel in bundles".

How parameters count (a static walk of every ``def``, ``async def`` and ``lambda``, nested ones included):
every parameter a caller can fill counts, positional-only, positional and keyword-only alike (a keyword-only
tail is still a parameter); ``*args`` and ``**kwargs`` count one each; the first parameter of a method (a
function defined directly in a class body, not a ``@staticmethod``), ``self`` or ``cls``, does not count: the
caller never passes it. There is no list of exceptions.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers.paths import REPO

MAX_PARAMETERS = 7
PACKAGE = REPO / "envduels_dagster"


def parameter_count(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, method: bool) -> int:
    args = node.args
    named = [*args.posonlyargs, *args.args]
    if method and named:
        named = named[1:]  # self / cls
    return len(named) + len(args.kwonlyargs) + (args.vararg is not None) + (args.kwarg is not None)


def _is_static(node: ast.AST) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in getattr(node, "decorator_list", []))


def too_many(source: str, where: str = "<source>", limit: int = MAX_PARAMETERS) -> list[str]:
    """``where:line name (count)`` for every function of ``source`` with more than ``limit`` parameters."""
    tree = ast.parse(source)
    methods = {id(f) for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for f in c.body
               if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and not _is_static(f)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            count = parameter_count(node, id(node) in methods)
            if count > limit:
                name = getattr(node, "name", "<lambda>")
                found.append(f"{where}:{node.lineno} {name} ({count})")
    return found


def test_no_function_in_the_package_takes_more_than_seven_parameters():
    found = [hit for path in sorted(PACKAGE.rglob("*.py"))
             for hit in too_many(path.read_text(), str(path.relative_to(REPO)))]
    assert found == [], (f"functions with more than {MAX_PARAMETERS} parameters: {found}. Bundle the ones that "
                         "travel together into one object named for what they are (a config of the call, the play, "
                         "the study ...: docs/DECISIONS.md 'Parameters travel in bundles'); a keyword-only tail "
                         "is not a fix")


def test_the_count_catches_a_function_with_eight_parameters_and_counts_as_documented():
    eight = "def play(gateway, solver, envs, limits, concurrency, on_progress, budget_s, slot):\n    pass\n"
    assert too_many(eight) == ["<source>:1 play (8)"]
    # a keyword-only tail is still counted
    assert too_many("async def f(a, b, c, *, d, e, f, g, h=1):\n    pass\n") == ["<source>:1 f (8)"]
    # *args and **kwargs count one each; so do positional-only parameters
    assert too_many("def f(a, b, /, c, d, e, f, *args, **kwargs):\n    pass\n") == ["<source>:1 f (8)"]
    # self and cls are not counted (the caller never passes them), a static method's first parameter is
    methods = ("class C:\n"
               "    def m(self, a, b, c, d, e, f, g):\n        pass\n"
               "    @classmethod\n    def k(cls, a, b, c, d, e, f, g):\n        pass\n"
               "    @staticmethod\n    def s(a, b, c, d, e, f, g, h):\n        pass\n")
    assert too_many(methods) == ["<source>:8 s (8)"]
    # nested functions and lambdas are walked too
    nested = "def outer():\n    def inner(a, b, c, d, e, f, g, h):\n        pass\n    return lambda *a, **k: 0\n"
    assert too_many(nested) == ["<source>:2 inner (8)"]
    assert too_many("f = lambda a, b, c, d, e, f, g, h: 0\n") == ["<source>:1 <lambda> (8)"]


def test_the_walk_reads_every_module_of_the_package():
    modules = list(PACKAGE.rglob("*.py"))
    assert len(modules) > 150 and Path(PACKAGE / "core" / "models" / "fast_client.py") in modules
