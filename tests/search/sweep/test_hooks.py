"""The sweep's seams: nightly plugs in through hooks (search/sweep/hooks.py), and
the sweep's subpackages import no command module (search/commands)."""
from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO
from search.nightly.sweep_hooks import NightlyHooks, sweep_hooks
from search.sweep.hooks import NoHooks

BELOW_COMMANDS = ("sweep", "trial", "measure", "tracking", "reports", "nightly", "record")


def test_a_plain_sweep_has_no_hooks_and_nightly_has_its_own() -> None:
    plain = sweep_hooks({"enabled": False, "metric": "throughput_samples_per_s"})
    assert isinstance(plain, NoHooks)
    assert (plain.named_metrics(), plain.run_tags(), plain.max_wall_s(), plain.top_up()) == ({}, {}, None, 0)
    assert plain.finish(["throughput_samples_per_s"], Path("report"), None, []) == 0
    nightly = sweep_hooks({"enabled": True, "metric": "throughput_samples_per_s", "max_wall_s": 60.0})
    assert isinstance(nightly, NightlyHooks)
    assert nightly.named_metrics() == {"throughput_samples_per_s": "hydra.sweeper.nightly.metric"}
    assert nightly.max_wall_s() == 60.0
    assert (nightly.run_tags(), nightly.top_up()) == ({}, 0)  # before its night started: nothing to add


def test_the_sweep_imports_no_command_module() -> None:
    offending = []
    for part in BELOW_COMMANDS:
        for path in sorted((REPO / "search" / part).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                    [a.name for a in node.names] if isinstance(node, ast.Import) else []
                offending += [f"{path.relative_to(REPO)} imports {n}" for n in names if n.startswith("search.commands")]
    assert offending == []
