"""The nightly report's near-tolerance rows (history/window.py ``headroom``) come in one
order whatever order the cases were ingested in: equal headroom (the same kernel bound hit
by two providers, as vLLM's and torch's bf16 attention decode do) is ordered by the test,
so two reports of the same runs are the same (scripts/before_after.py saw them swap)."""

from __future__ import annotations

from pathlib import Path

from harness.history.schema import connect
from harness.history.window import WindowReader


def _db(tmp_path: Path, keys: list[str]) -> tuple[WindowReader, int]:
    db = connect(tmp_path / "history.sqlite")
    run = db.execute("INSERT INTO runs (run_key, matrix, lane, started, source, ingested) "
                     "VALUES ('r', 'm', 'm', '2026-12-06T00:00:00Z', 's', 'now')").lastrowid
    suite = db.execute("INSERT INTO suites (run, name) VALUES (?, 's')", (run,)).lastrowid
    for key in keys:
        test = db.execute("INSERT INTO tests (nodeid, key) VALUES (?, ?)", (key, key)).lastrowid
        db.execute("INSERT INTO cases (run, suite, test, status, headroom) VALUES "
                   "(?, ?, ?, 'passed', 0.9)", (run, suite, test))
    db.commit()
    assert run is not None
    return WindowReader(db), run


def test_equal_headroom_is_ordered_by_the_test(tmp_path: Path) -> None:
    keys = ["t::case[bfloat16-vllm]", "t::case[bfloat16-torch]"]
    forward, run = _db(tmp_path / "a", keys)
    backward, run_b = _db(tmp_path / "b", keys[::-1])
    assert [r.key for r in forward.headroom([run], 0.5, 10)] == sorted(keys)
    assert [r.key for r in backward.headroom([run_b], 0.5, 10)] == sorted(keys)
