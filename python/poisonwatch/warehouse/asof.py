"""`poisonwatch sql --as-of`: a statement read as the warehouse's Delta tables were at a time.

Spark's own parser finds the tables the statement names; each gets Delta's
`timestamp as of` clause right after its name, so aliases, CTEs, subqueries and string
literals that merely look like table names are left as they are.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from poisonwatch.config import PoisonwatchError
from poisonwatch.textsafe import sql_string
from poisonwatch.warehouse.partitions import table_information


def as_of_clause(text: str) -> str:
    """Delta's `timestamp as of` clause for `text` (ISO 8601; UTC unless it says otherwise)."""
    try:
        moment = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise PoisonwatchError(
            f"--as-of {text!r} is not a time: give an ISO 8601 time such as "
            "2026-12-01T09:30:00Z or '2026-12-01 09:30' (UTC)"
        ) from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC).replace(tzinfo=None)
    return f"timestamp as of {sql_string(moment.isoformat(sep=' '))}"


def _seq(scala_seq: Any) -> list[Any]:
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


def _is_subquery(expression: Any) -> bool:
    """Whether a Catalyst expression holds a query of its own (IN, EXISTS, scalar, lateral)."""
    cls = expression.getClass()
    while cls is not None:
        if cls.getName() == "org.apache.spark.sql.catalyst.expressions.SubqueryExpression":
            return True
        cls = cls.getSuperclass()
    return False


def _table_references(plan: Any) -> list[tuple[int, int, str]]:
    """(start, stop, name) of every table the parsed statement reads: relations that are
    not CTE names and carry no time travel clause of their own."""
    found: dict[tuple[int, int], str] = {}
    cte_names: set[str] = set()

    def visit_plan(node: Any, parent: str) -> None:
        kind = node.getClass().getSimpleName()
        if kind == "UnresolvedWith":
            cte_names.update(str(pair._1()).lower() for pair in _seq(node.cteRelations()))
        if kind == "UnresolvedRelation" and parent != "RelationTimeTravel":
            origin = node.origin()
            if origin.startIndex().isDefined() and origin.stopIndex().isDefined():
                span = (int(origin.startIndex().get()), int(origin.stopIndex().get()))
                found[span] = str(node.multipartIdentifier().mkString("."))
        for child in _seq(node.children()) + _seq(node.innerChildren()):
            visit_plan(child, kind)
        for expression in _seq(node.expressions()):
            visit_expression(expression)

    def visit_expression(expression: Any) -> None:
        if _is_subquery(expression):
            visit_plan(expression.plan(), "")
        for child in _seq(expression.children()):
            visit_expression(child)

    visit_plan(plan, "")
    return sorted(
        (start, stop, name)
        for (start, stop), name in found.items()
        if "." in name or name.lower() not in cte_names
    )


def _check_delta(engine: Any, name: str) -> None:
    if not engine.spark.catalog.tableExists(name):
        raise PoisonwatchError(f"--as-of: no table {name!r} in the warehouse")
    info = table_information(engine, name)
    if info.get("type", "").lower() == "view":
        raise PoisonwatchError(
            f"--as-of: {name} is a view, and only tables keep their history; "
            "query the tables it reads instead"
        )
    provider = info.get("provider", "").lower()
    if provider != "delta":
        raise PoisonwatchError(
            f"--as-of: {name} is a {provider or 'non-Delta'} table, and only Delta tables "
            "keep their history (POISONWATCH_FILE_FORMAT=delta, the default)"
        )


def with_as_of(engine: Any, statement: str, as_of: str) -> str:
    """`statement` with `timestamp as of` after every table it reads (Delta tables only), in
    `engine`'s own Spark session (a LocalEngine)."""
    clause = as_of_clause(as_of)
    parser = engine.spark._jsparkSession.sessionState().sqlParser()
    plan = parser.parsePlan(statement)  # a syntax error is Spark's, raised as it words it
    references = _table_references(plan)
    if not references:
        raise PoisonwatchError("--as-of: the statement reads no table")
    for name in sorted({name for _, _, name in references}):
        _check_delta(engine, name)
    out = statement
    for _start, stop, _name in sorted(references, reverse=True):
        out = f"{out[: stop + 1]} {clause}{out[stop + 1 :]}"
    return out
