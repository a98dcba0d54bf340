"""Turn a file's parsed cases into rows of the ``cases`` table, ready to insert.

Ingest spends most of its time parsing and here, so everything about a row that needs
no database id is done where the file is parsed (a parse worker, see ``parse_pool``):
the writer (``writer.Writer.insert_cases``) only adds each row's test id and runs one
INSERT per group.

A :data:`Batch` holds up to ``BATCH`` cases as tuples grouped by (suite, the optional
columns the rows have, judged), each group with its node ids beside its rows, so the
writer adds the test ids with C loops (``map``, ``zip``) and no Python line per row.
A row names only the columns it has a value for, and
its group goes to the INSERT of exactly those columns (a handful in practice), because
the sqlite3 module binds ``None`` slowly (it looks for an adapter on every one) and
most cases have no message and no properties. Judged rows (failed or error) end with
the cause the harness recorded on the case (``results/cause.py``, a case it wrote when
the suite stopped) or else the infrastructure label their message carries; the
writer decides with the suite's outcome what the row keeps. A node id's ``key`` and
``params`` travel the first time the parser meets it (see :func:`key_and_params`).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Mapping

from harness.history import infra
from harness.results.case_meaning import NEW_FAILURES
from harness.results.cause import CAUSE_PROPERTY, from_property
from harness.results.junit_read import COLUMN_PROPERTIES, NODEID_PROPERTY, Fields, Suite
from harness.results.testids import stable_ids

BATCH = 2048  # cases per batch (and per message from a parse worker)
_COLUMNS = frozenset(COLUMN_PROPERTIES)
# Not kept in ``extra`` either: the node id is the case's test (``tests.nodeid``); a
# harness-written case's cause becomes its label.
_NOT_EXTRA = _COLUMNS | {NODEID_PROPERTY, CAUSE_PROPERTY}
_FLOATS = frozenset({"max_abs_err", "max_rel_err", "atol", "rtol", "headroom"})
_SEEN_MAX = 1 << 16  # node ids remembered as sent; past this the memory starts again
Columns = tuple[str, ...]  # the optional columns of a row, in table order
# (suite name, optional columns, judged: the row ends with its message's label)
Group = tuple[str, Columns, bool]
# A row: (status, duration, reruns, the optional columns' values..., the message's
# label when judged); the node ids of a group's rows, in order, beside them.
Rows = tuple[list[str], list[tuple[object, ...]]]
Groups = dict[Group, Rows]
# (rows by group, {node id: (key, params)} for node ids this parser had not sent)
Batch = tuple[Groups, dict[str, tuple[str, str]]]
_PLAIN: Columns = ()
_MESSAGE: Columns = ("message",)
# The property names of a case, in their order -> (its columns without and with a
# message, (name, is a float) per column, whether some go to ``extra``).
_Plan = tuple[Columns, Columns, tuple[tuple[str, bool], ...], bool]
_PLANS: dict[tuple[str, ...], _Plan] = {}


def _plan(names: tuple[str, ...]) -> _Plan:
    present = set(names)
    columns = tuple(c for c in COLUMN_PROPERTIES if c in present)
    extra = not present <= _NOT_EXTRA
    tail: Columns = ("extra",) if extra else ()
    found = (
        columns + tail,
        _MESSAGE + columns + tail,
        tuple((c, c in _FLOATS) for c in columns),
        extra,
    )
    _PLANS[names] = found
    return found


def _extra(props: dict[str, str]) -> str:
    return json.dumps({k: v for k, v in props.items() if k not in _NOT_EXTRA}, sort_keys=True)


def _float(value: str) -> float | None:
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _with_numbers_missing(
    props: dict[str, str], head: tuple[object, ...], message: bool, plan: _Plan
) -> tuple[Columns, tuple[object, ...]]:
    """A number property that is not one (or is empty): that column stays NULL."""
    columns = ["message"] if message else []
    row = list(head)
    for name, is_float in plan[2]:
        value = _float(props[name]) if is_float else props[name]
        if value is not None:
            columns.append(name)
            row.append(value)
    if plan[3]:
        columns.append("extra")
        row.append(_extra(props))
    return tuple(columns), tuple(row)


def _with_properties(
    props: dict[str, str], head: tuple[object, ...], message: bool
) -> tuple[Columns, tuple[object, ...]]:
    """The row's optional columns, and the row: ``head`` and the property values."""
    plan = _PLANS.get(names := tuple(props)) or _plan(names)
    try:
        values = [float(props[c]) if is_float else props[c] for c, is_float in plan[2]]
    except ValueError:
        return _with_numbers_missing(props, head, message, plan)
    if plan[3]:
        values.append(_extra(props))
    return (plan[1] if message else plan[0]), (*head, *values)


class RowMaker:
    """Rows from one parser's cases (one process: it remembers the node ids it sent)."""

    def __init__(self) -> None:
        self.sent: set[str] = set()

    def batches(
        self, blocks: Iterable[list[Fields]], suites: Mapping[str, Suite] | None = None
    ) -> Iterator[Batch]:
        """The cases of one file, ``BATCH`` at a time. ``suites`` (the file's, filled in
        as it is read) names each testsuite's matrix: a case's ``platform`` property
        that says the same is not stored again (older plugins, and the fusion suite's
        numerics properties, record both)."""
        cases = itertools.chain.from_iterable(blocks)
        while chunk := list(itertools.islice(cases, BATCH)):
            yield self.batch(chunk, suites)

    def batch(self, cases: list[Fields], suites: Mapping[str, Suite] | None = None) -> Batch:
        matrix = {name: suite.properties.get("matrix") for name, suite in (suites or {}).items()}
        groups: Groups = {}
        new: dict[str, tuple[str, str]] = {}
        sent = self.sent
        group: Group = ("", (), False)
        nodeids: list[str] = []
        rows: list[tuple[object, ...]] = []
        for suite, nodeid, key, params, status, duration, message, reruns, props in cases:
            if nodeid not in sent:
                if len(sent) >= _SEEN_MAX:
                    sent.clear()
                sent.add(nodeid)
                new[nodeid] = (key, params)
            if message:
                row: tuple[object, ...] = (status, duration, reruns, message)
                columns = _MESSAGE
            else:
                row = (status, duration, reruns)
                columns = _PLAIN
            recorded = props.get(CAUSE_PROPERTY) if props else None
            if props:
                if "platform" in props and props["platform"] == matrix.get(suite):
                    del props["platform"]
                columns, row = _with_properties(props, row, bool(message))
            judged = status in NEW_FAILURES
            if judged:
                # A case the harness wrote says why (a CauseRecord, named by the writer
                # with its suite); only another producer's case is read by its message.
                cause = from_property(recorded) if recorded else None
                row = (*row, cause or infra.from_message(message))
            # Most rows share the group of the row before: no key to build then.
            if columns is not group[1] or suite is not group[0] or judged is not group[2]:
                group = (suite, columns, judged)
                found = groups.get(group)
                if found is None:
                    found = groups[group] = ([], [])
                nodeids, rows = found
            nodeids.append(nodeid)
            rows.append(row)
        return groups, new


def key_and_params(nodeid: str, new: dict[str, tuple[str, str]]) -> tuple[str, str]:
    """(key, params) of a node id the writer does not know: from the batch when the
    parser sent them, else derived again (it had sent them for a run since rolled
    back). Both come from ``stable_ids``: a node id is its own ``stable_ids`` input."""
    found = new.get(nodeid)
    return found if found is not None else stable_ids(nodeid)[1:]
