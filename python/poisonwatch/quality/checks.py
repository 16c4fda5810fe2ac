"""`poisonwatch check`: great-expectations suites over the raw tables and the marts.

The suites live in `suites/*.json`, one file per suite, in great-expectations' own suite format
(reviewed like code). Each file's `meta.poisonwatch` says which layer it checks, the Spark SQL that
builds the frame it validates (placeholders `{raw}`, `{marts}`, `{policy}` name the databases of
the current target) and the tables that must exist first. A suite whose tables are missing is
skipped with a message saying what to run (`poisonwatch ingest` or `dbt build`).

A landing table (`{raw}.<dataset>`, `{raw}.raw_rejects`) is read through its committed batches
only, wherever a suite names it: `poisonwatch ingest` appends the ledger (`{raw}.ingested_files`)
last, and the rows of a run killed before that are an orphan batch that the next ingest drops
and loads again, so no suite may count them (staging reads the same way: committed_batches_filter).

Expectations may use run-time parameters (`{"$PARAMETER": "now"}`, `{"$PARAMETER":
"freshness_days"}`), filled in by `run_checks`.

Each suite runs as one GX Checkpoint (GX 1.x, an ephemeral context) on a Spark DataFrame of the
project's own SparkSession (a dataframe asset with a whole-dataframe batch definition). After the
run, the Data Docs site (suites and validation results) is written to `$POISONWATCH_HOME/data_docs/`
in one build: building it after each suite cost more than validating.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import time
import warnings
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from poisonwatch.config import PoisonwatchError, home, load_profile
from poisonwatch.textsafe import terminal
from poisonwatch.warehouse.schemas import DATASETS, LEDGER_TABLE, RAW_DATABASE, REJECTS_TABLE
from poisonwatch.warehouse.server import running_server

if TYPE_CHECKING:
    from great_expectations.core.expectation_validation_result import (
        ExpectationValidationResult,
    )
    from great_expectations.data_context import AbstractDataContext
    from pyspark.sql import DataFrame, SparkSession

    from poisonwatch.warehouse.engine import Engine

SUITES_DIR = Path(__file__).with_name("suites")
LAYERS = ("raw", "marts")
DEFAULT_FRESHNESS_DAYS = 2.0
DATASOURCE_NAME = "poisonwatch_spark"
DOCS_SITE_NAME = "poisonwatch"
EXAMPLES_SHOWN = 5
# The tables whose rows belong to an ingest batch (`_batch_id`), and a suite's name for one.
LANDING_TABLES = frozenset([*DATASETS, REJECTS_TABLE])
RAW_TABLE_REFERENCE = re.compile(r"\{raw\}\.([A-Za-z_][A-Za-z0-9_]*)\b")


# ---------------------------------------------------------------------------------------------
# Suite definitions (suites/*.json)


@dataclass(frozen=True)
class SuiteDefinition:
    """One suite file: a GX expectation suite plus how to build the frame it validates."""

    name: str
    layer: str
    description: str
    sql: str
    requires: tuple[str, ...]
    expectations: tuple[dict[str, Any], ...]
    path: Path

    def rendered_sql(self, names: dict[str, str]) -> str:
        return _render(committed_only(self.sql), names)

    def required_tables(self, names: dict[str, str]) -> list[str]:
        """The tables the suite names in `requires`, and the ledger when it reads landing data
        (committed_only reads the ledger too)."""
        required = list(self.requires)
        ledger = "{raw}." + LEDGER_TABLE
        if committed_only(self.sql) != self.sql and ledger not in required:
            required.append(ledger)
        return [_render(t, names) for t in required]


def committed_only(sql: str) -> str:
    """`sql` with each landing table it names (`{raw}.<table>`) read as the rows of committed
    batches: a subquery on the partition column `_batch_id`, so that Spark still prunes the
    partitions of other batches."""

    def committed(match: re.Match[str]) -> str:
        table = match.group(1)
        if table not in LANDING_TABLES:
            return match.group(0)
        return (
            f"(select * from {{raw}}.{table} where _batch_id in "
            f"(select committed._batch_id from {{raw}}.{LEDGER_TABLE} as committed))"
        )

    return RAW_TABLE_REFERENCE.sub(committed, sql)


def _render(text: str, names: dict[str, str]) -> str:
    for key, value in names.items():
        text = text.replace("{" + key + "}", value)
    return text


def load_suites(directory: Path = SUITES_DIR) -> list[SuiteDefinition]:
    """Every suite in `directory`, sorted by layer (raw first) then name."""
    suites: list[SuiteDefinition] = []
    for path in sorted(directory.glob("*.json")):
        try:
            doc = json.loads(path.read_text())
            meta = doc["meta"]["poisonwatch"]
            sql = meta["sql"]
            suite = SuiteDefinition(
                name=doc["name"],
                layer=meta["layer"],
                description=meta.get("description", ""),
                sql="\n".join(sql) if isinstance(sql, list) else str(sql),
                requires=tuple(meta.get("requires", ())),
                expectations=tuple(doc["expectations"]),
                path=path,
            )
        except (KeyError, TypeError, json.JSONDecodeError) as exc:
            raise PoisonwatchError(f"{path}: not a poisonwatch suite ({exc!r})") from exc
        if suite.name != path.stem:
            raise PoisonwatchError(f"{path}: suite name {suite.name!r} differs from the file name")
        if suite.layer not in LAYERS:
            raise PoisonwatchError(f"{path}: layer {suite.layer!r} is not one of {LAYERS}")
        suites.append(suite)
    suites.sort(key=lambda s: (LAYERS.index(s.layer), s.name))
    return suites


def select_suites(suites: list[SuiteDefinition], selector: str | None) -> list[SuiteDefinition]:
    """The suites named by `selector`: comma-separated suite names, layers (`raw`, `marts`) or
    shell patterns (`marts_*`); all when None."""
    if not selector:
        return list(suites)
    chosen: list[SuiteDefinition] = []
    for part in (p.strip() for p in selector.split(",")):
        if not part:
            continue
        hits = [
            s
            for s in suites
            if s.name == part or s.layer == part or fnmatch.fnmatchcase(s.name, part)
        ]
        if not hits:
            names = ", ".join(s.name for s in suites)
            raise PoisonwatchError(
                f"no suite matches {part!r}. Layers: {', '.join(LAYERS)}. Suites: {names}"
            )
        chosen.extend(s for s in hits if s not in chosen)
    return chosen


def database_names(target: str | None = None) -> dict[str, str]:
    """Placeholder values for the suites' SQL on the current target."""
    schema = str(load_profile(target).get("schema") or "poisonwatch")
    return {"raw": RAW_DATABASE, "marts": schema, "policy": f"{schema}_policy"}


# ---------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class ExpectationOutcome:
    expectation: str
    description: str
    columns: str
    condition: str
    success: bool
    observed: str
    examples: str
    error: str | None = None


@dataclass
class SuiteOutcome:
    name: str
    layer: str
    status: str  # passed | failed | skipped | error
    reason: str = ""
    rows: int | None = None
    seconds: float = 0.0
    expectations: list[ExpectationOutcome] = field(default_factory=list)

    @property
    def evaluated(self) -> int:
        return len(self.expectations)

    @property
    def passed(self) -> int:
        return sum(1 for e in self.expectations if e.success)

    @property
    def failed(self) -> int:
        return self.evaluated - self.passed

    def failures(self) -> list[ExpectationOutcome]:
        return [e for e in self.expectations if not e.success]


@dataclass
class CheckReport:
    suites: list[SuiteOutcome]
    docs_index: Path | None
    seconds: float

    @property
    def success(self) -> bool:
        return all(s.status in ("passed", "skipped") for s in self.suites)

    @property
    def complete(self) -> bool:
        """Every suite ran and passed: what a CI run needs, where a skipped suite proves nothing."""
        return bool(self.suites) and all(s.status == "passed" for s in self.suites)

    def exit_code(self, *, require_all: bool = False) -> int:
        ok = self.complete if require_all else self.success
        return 0 if ok else 1

    def suite(self, name: str) -> SuiteOutcome:
        for s in self.suites:
            if s.name == name:
                return s
        raise KeyError(name)


# ---------------------------------------------------------------------------------------------
# Running


def docs_dir() -> Path:
    """Where the Data Docs site of the latest `poisonwatch check` is written."""
    return home() / "data_docs"


def _gx_context(site_dir: Path) -> AbstractDataContext:
    """An ephemeral GX context whose Data Docs site is written to `site_dir`.

    Ephemeral: the suites' source of truth is `suites/*.json`, so nothing else is kept; the site
    shows the latest run (its suites, their expectations and the validation results).
    """
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    site = {
        "class_name": "SiteBuilder",
        "show_how_to_buttons": False,
        "store_backend": {
            "class_name": "TupleFilesystemStoreBackend",
            "base_directory": str(site_dir),
        },
        "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
    }
    for name in list(context.list_data_docs_sites()):
        context.delete_data_docs_site(name)
    context.add_data_docs_site(site_name=DOCS_SITE_NAME, site_config=site)  # type: ignore[arg-type]
    return context


class _Catalog:
    """Which tables exist, one `show tables` per database and run."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.tables: dict[str, set[str]] = {}

    def missing(self, qualified_names: list[str]) -> list[str]:
        out = []
        for qualified in qualified_names:
            database, _, table = qualified.partition(".")
            if database not in self.tables:
                try:
                    _, rows = self.engine.query(f"show tables in `{database}`")
                    self.tables[database] = {str(r[1]).lower() for r in rows}
                except Exception:  # the database itself is missing
                    self.tables[database] = set()
            if table.lower() not in self.tables[database]:
                out.append(qualified)
        return out


def _skip_reason(missing: list[str], names: dict[str, str]) -> str:
    raw_missing = [t for t in missing if t.startswith(names["raw"] + ".")]
    other = [t for t in missing if t not in raw_missing]
    parts = []
    if other:
        parts.append(f"{', '.join(other)} not built yet: run `dbt build` first")
    if raw_missing:
        parts.append(
            f"{', '.join(raw_missing)} not there yet: run `poisonwatch ingest <landing>` first"
        )
    return "; ".join(parts)


def run_checks(
    engine: Engine,
    selector: str | None = None,
    *,
    freshness_days: float = DEFAULT_FRESHNESS_DAYS,
    now: datetime | None = None,
    databases: dict[str, str] | None = None,
    suites_dir: Path = SUITES_DIR,
) -> CheckReport:
    """Run the selected suites on the engine's SparkSession; write Data Docs; return results.

    `databases` overrides the databases the suites read (keys `raw`, `marts`, `policy`), e.g.
    to check a copy of the data before it replaces the real tables.
    """
    spark: SparkSession | None = getattr(engine, "spark", None)
    if spark is None:
        served = (
            running_server() if load_profile(engine.target).get("method") == "session" else None
        )
        if served is not None:
            raise PoisonwatchError(
                f"`poisonwatch check` validates DataFrames in a Spark driver of its own, and "
                f"`poisonwatch serve` (pid {served.pid}) holds the store: run it after "
                "`poisonwatch serve --stop`"
            )
        raise PoisonwatchError(
            f"`poisonwatch check` validates Spark DataFrames of a local SparkSession; target "
            f"{engine.target!r} is a Thrift server. Run it with a target of method `session`."
        )
    started = time.monotonic()
    suites = select_suites(load_suites(suites_dir), selector)
    names = database_names(engine.target)
    for key, value in (databases or {}).items():
        if key not in names:
            raise PoisonwatchError(f"unknown database key {key!r} (have: {', '.join(names)})")
        if value:
            names[key] = value
    parameters = {
        "now": now or datetime.now(UTC),
        "freshness_days": float(freshness_days),
    }
    site_dir = docs_dir()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        context = _gx_context(site_dir)
        catalog = _Catalog(engine)
        outcomes = [_run_suite(context, catalog, spark, s, names, parameters) for s in suites]
        docs = None
        if any(o.status in ("passed", "failed") for o in outcomes):
            # The site shows this run only: clear the previous run's pages first.
            if site_dir.is_dir():
                shutil.rmtree(site_dir)
            context.build_data_docs(site_names=[DOCS_SITE_NAME])
            docs = site_dir / "index.html"
    return CheckReport(outcomes, docs, time.monotonic() - started)


def _run_suite(
    context: AbstractDataContext,
    catalog: _Catalog,
    spark: SparkSession,
    suite: SuiteDefinition,
    names: dict[str, str],
    parameters: dict[str, Any],
) -> SuiteOutcome:
    import great_expectations as gx

    started = time.monotonic()
    outcome = SuiteOutcome(suite.name, suite.layer, "passed")
    missing = catalog.missing(suite.required_tables(names))
    if missing:
        outcome.status, outcome.reason = "skipped", _skip_reason(missing, names)
        return outcome

    df: DataFrame | None = None
    try:
        df = _html_inert(spark.sql(suite.rendered_sql(names))).cache()
        outcome.rows = df.count()

        try:
            datasource = context.data_sources.get(DATASOURCE_NAME)
        except KeyError:
            datasource = context.data_sources.add_spark(name=DATASOURCE_NAME)
        asset = datasource.add_dataframe_asset(name=suite.name)  # type: ignore[union-attr]
        batch = asset.add_batch_definition_whole_dataframe("whole_frame")

        gx_suite = gx.ExpectationSuite(
            name=suite.name,
            expectations=[dict(e) for e in suite.expectations],
            meta={"poisonwatch": {"layer": suite.layer, "description": suite.description}},
        )
        gx_suite = context.suites.add(gx_suite)
        validation = context.validation_definitions.add(
            gx.ValidationDefinition(name=suite.name, data=batch, suite=gx_suite)
        )
        checkpoint = context.checkpoints.add(
            gx.Checkpoint(
                name=f"poisonwatch_{suite.name}",
                validation_definitions=[validation],
                actions=[],  # Data Docs are built once, after every suite has run
                result_format={"result_format": "SUMMARY", "partial_unexpected_count": 20},
            )
        )
        result = checkpoint.run(
            batch_parameters={"dataframe": df}, expectation_parameters=parameters
        )
    except PoisonwatchError:
        raise
    except Exception as exc:  # the frame's SQL or GX failed: report it as this suite's error
        outcome.status = "error"
        outcome.reason = _first_line(str(exc)) or type(exc).__name__
        return outcome
    finally:
        if df is not None:
            df.unpersist()
        outcome.seconds = time.monotonic() - started

    for run_result in result.run_results.values():
        outcome.expectations.extend(_outcome(r) for r in run_result.results)
    if outcome.failed:
        outcome.status = "failed"
    return outcome


def _html_inert(df: DataFrame) -> DataFrame:
    """Text columns with `&`, `<`, `>` HTML-escaped: GX writes unexpected values into the Data
    Docs pages as raw HTML (its templates are not autoescaped), so a message body or error
    text could carry `<script>` into the site. The escaping is injective and the suites'
    sets and patterns contain none of these characters, so every expectation's verdict
    is unchanged; the report shows the examples as escaped text."""
    from pyspark.sql.types import StringType

    expressions = []
    for column in df.schema.fields:
        name = "`" + column.name.replace("`", "``") + "`"
        if isinstance(column.dataType, StringType):
            escaped = f"replace(replace(replace({name}, '&', '&amp;'), '<', '&lt;'), '>', '&gt;')"
            expressions.append(f"{escaped} as {name}")
        else:
            expressions.append(name)
    return df.selectExpr(*expressions)


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


# ---------------------------------------------------------------------------------------------
# Turning GX results into rows a person reads


def _columns(kwargs: dict[str, Any]) -> str:
    if "column" in kwargs:
        return str(kwargs["column"])
    if "column_A" in kwargs:
        return f"{kwargs['column_A']}, {kwargs['column_B']}"
    if "column_list" in kwargs:
        return ", ".join(map(str, kwargs["column_list"]))
    return ""


def render_condition(condition: Any) -> str:
    """A row_condition (GX Condition, its dict form, or a string) as short text."""
    if condition is None:
        return ""
    if hasattr(condition, "to_dict"):
        condition = condition.to_dict()
    elif hasattr(condition, "dict"):
        condition = condition.dict()
    if isinstance(condition, str):
        return condition
    if isinstance(condition, dict):
        kind = condition.get("type")
        if kind in ("and", "or"):
            parts = [render_condition(c) for c in condition.get("conditions", [])]
            return f" {kind} ".join(parts)
        if kind == "comparison":
            column = condition.get("column") or {}
            name = column.get("name") if isinstance(column, dict) else str(column)
            return f"{name} {condition.get('operator')} {condition.get('parameter')!r}"
        if kind == "pass_through":
            return str(condition.get("pass_through_filter"))
    return str(condition)


def _short(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(_short(v) for v in value) + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_short(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str):
        text = " ".join(value.split())
        return repr(text if len(text) <= 60 else text[:57] + "...")
    return str(value)


def _outcome(r: ExpectationValidationResult) -> ExpectationOutcome:
    config = r.expectation_config
    kwargs: dict[str, Any] = dict(config.kwargs) if config is not None else {}
    result: dict[str, Any] = dict(r.result or {})
    error = None
    info = r.exception_info or {}
    if isinstance(info, dict):
        infos = [info] if "raised_exception" in info else list(info.values())
        for item in infos:
            if isinstance(item, dict) and item.get("raised_exception"):
                error = _first_line(str(item.get("exception_message") or "exception"))
                break

    observed = ""
    examples = ""
    if "unexpected_count" in result and "element_count" in result:
        observed = f"{result['unexpected_count']} of {result['element_count']} rows unexpected"
        counts = result.get("partial_unexpected_counts") or []
        if counts:
            examples = ", ".join(
                f"{_short(c['value'])}×{c['count']}" for c in counts[:EXAMPLES_SHOWN]
            )
        else:
            examples = ", ".join(
                _short(v) for v in (result.get("partial_unexpected_list") or [])[:EXAMPLES_SHOWN]
            )
    elif "observed_value" in result:
        observed = f"observed {_short(result['observed_value'])}"
        details = result.get("details") or {}
        mismatched = details.get("mismatched") if isinstance(details, dict) else None
        if mismatched:
            examples = _short(mismatched)
        rows = details.get("unexpected_rows") if isinstance(details, dict) else None
        if rows:
            examples = "; ".join(_short(row) for row in list(rows)[:EXAMPLES_SHOWN])
    if error:
        observed = f"error: {error}"

    return ExpectationOutcome(
        expectation=config.type if config is not None else "?",
        description=(config.description if config is not None else None) or "",
        columns=_columns(kwargs),
        condition=render_condition(kwargs.get("row_condition")),
        success=bool(r.success) and error is None,
        observed=observed,
        examples=examples,
        error=error,
    )


# ---------------------------------------------------------------------------------------------
# Printing

_STATUS_STYLE = {
    "passed": "[green]passed[/green]",
    "failed": "[bold red]FAILED[/bold red]",
    "error": "[bold red]ERROR[/bold red]",
    "skipped": "[yellow]skipped[/yellow]",
}


EXAMPLES_CHARS = 300


def _expectation_table(suite: SuiteOutcome, only_failures: bool) -> Table:
    rows = suite.failures() if only_failures else suite.expectations
    title = (
        f"{suite.name}: {suite.failed} of {suite.evaluated} expectations failed"
        if suite.failed
        else f"{suite.name}: all {suite.evaluated} expectations passed"
    )
    table = Table(title=title, title_justify="left", show_lines=False, expand=False)
    table.add_column("", no_wrap=True)
    table.add_column("expectation")
    table.add_column("column")
    table.add_column("when")
    table.add_column("result")
    table.add_column("examples", overflow="fold")
    for e in rows:
        mark = Text("✓", style="green") if e.success else Text("✗", style="bold red")
        what = Text(e.description or e.expectation)
        if e.description:
            what.append(f"\n{e.expectation}", style="dim")
        # Unexpected values (examples) and conditions quote the data: inert text.
        table.add_row(
            mark,
            what,
            terminal(e.columns),
            terminal(e.condition),
            terminal(e.observed),
            terminal(e.examples, limit=EXAMPLES_CHARS),
        )
    return table


def print_report(
    report: CheckReport, console: Console | None = None, verbose: bool = False
) -> None:
    console = console or Console()
    summary = Table(title="poisonwatch check", title_justify="left")
    summary.add_column("suite")
    summary.add_column("layer")
    summary.add_column("status")
    summary.add_column("rows", justify="right")
    summary.add_column("expectations", justify="right")
    summary.add_column("passed", justify="right")
    summary.add_column("failed", justify="right")
    summary.add_column("seconds", justify="right")
    summary.add_column("note", overflow="fold")
    for s in report.suites:
        ran = s.status in ("passed", "failed")
        summary.add_row(
            s.name,
            s.layer,
            _STATUS_STYLE[s.status],
            "" if s.rows is None else str(s.rows),
            str(s.evaluated) if ran else "",
            str(s.passed) if ran else "",
            (f"[bold red]{s.failed}[/bold red]" if s.failed else "0") if ran else "",
            f"{s.seconds:.1f}" if s.status != "skipped" else "",
            terminal(s.reason, limit=EXAMPLES_CHARS),
        )
    console.print(summary)

    for s in report.suites:
        if s.expectations and (verbose or s.failed):
            console.print(_expectation_table(s, only_failures=not verbose))

    ran = [s for s in report.suites if s.status in ("passed", "failed")]
    failed_expectations = sum(s.failed for s in ran)
    counts = {k: sum(1 for s in report.suites if s.status == k) for k in _STATUS_STYLE}
    line = (
        f"{len(report.suites)} suites: {counts['passed']} passed, {counts['failed']} failed, "
        f"{counts['error']} errors, {counts['skipped']} skipped; "
        f"{sum(s.evaluated for s in ran)} expectations, {failed_expectations} failed "
        f"({report.seconds:.1f} s)"
    )
    console.print(("[green]" if report.success else "[bold red]") + line + "[/]")
    if report.docs_index is not None:
        console.print(f"Data Docs: {report.docs_index}")
