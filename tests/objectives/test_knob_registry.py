"""The knob registry (objectives.knobs.KNOBS) is the one list: conf/, the README table, run.py's order and
the field docstrings all agree with it."""
from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import yaml

from objectives.config import _RULES, _SECTIONS, _TOP_LEVEL, TrialConfig
from objectives.knobs import KNOBS, RUN_ORDER

REPO = Path(__file__).resolve().parents[2]


def test_conf_defaults_equal_the_dataclass_defaults() -> None:
    conf = yaml.safe_load((REPO / "conf" / "config.yaml").read_text())
    defaults = TrialConfig()
    for name in _TOP_LEVEL:
        assert conf[name] == getattr(defaults, name), name
    for name in _SECTIONS:
        assert conf[name] == dataclasses.asdict(getattr(defaults, name)), name


def test_every_config_field_has_a_docstring() -> None:
    """A string right after each field, as Sphinx reads attribute docstrings."""
    modules = {Path(__import__(cls.__module__, fromlist=["_"]).__file__) for cls in [*_SECTIONS.values(), TrialConfig]}
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ClassDef) and node.name.endswith("Config")):
                continue
            body = node.body
            for i, stmt in enumerate(body):
                if isinstance(stmt, ast.AnnAssign):
                    following = body[i + 1] if i + 1 < len(body) else None
                    assert isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant), \
                        f"{path.name}: {node.name}.{stmt.target.id} has no docstring"


def test_every_rule_names_a_field_and_every_key_has_one_owner() -> None:
    defaults = TrialConfig()
    for key in _RULES:
        section, _, name = key.partition(".")
        assert hasattr(defaults, section) and (not name or hasattr(getattr(defaults, section), name)), key
    owned = [key for knob in KNOBS for key in knob.rules]
    assert len(owned) == len(set(owned))


def test_run_py_applies_the_knobs_in_the_registry_order() -> None:
    """run.py, then the builds it calls (objectives/build.py), call each apply step once, in RUN_ORDER."""
    steps = [name for name, _ in RUN_ORDER]
    assert sorted(steps) == sorted(step for knob in KNOBS for step in knob.applies)
    called = []
    for path in (REPO / "objectives" / "run.py", REPO / "objectives" / "build.py"):
        calls = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)]
        for call in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):
            name = getattr(call.func, "id", getattr(call.func, "attr", None))
            if name in steps:
                called.append(name)
    assert called == steps


def test_the_readme_knob_table_agrees_with_the_registry() -> None:
    """Each row's key is a knob field with the dataclass default, and every knob has a row."""
    readme = (REPO / "README.md").read_text()
    table = readme[readme.index("## Knobs (conf/config.yaml)"):]
    table = table[:table.index("\n\n", table.index("| key |"))]
    rows = re.findall(r"^\| `([\w.]+)` \| ([^|]+) \|", table, re.M)
    defaults = TrialConfig()
    knob_rows = [(key, shown.strip()) for key, shown in rows if key.split(".")[0] in (*_SECTIONS, *_TOP_LEVEL)]
    for key, shown in knob_rows:
        value = defaults
        for part in key.split("."):
            value = getattr(value, part)
        expected = {True: "true", False: "false", None: "null"}.get(value, value) if not isinstance(value, (int, float)) \
            or isinstance(value, bool) else value
        assert shown == str(expected), (key, shown, expected)
    sections = {key.split(".")[0] for key, _ in knob_rows} | {key for key, _ in knob_rows}
    for knob in KNOBS:
        assert knob.section in sections or any(k in sections for k in knob.rules), f"no README row for {knob.name}"
