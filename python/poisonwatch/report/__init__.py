"""`poisonwatch report`: one self-contained HTML page with plots of what the marts say.

Owns: the aggregate queries behind the page (`queries.py`, Spark SQL only: every series is
grouped in the warehouse, never raw attempts pulled into Python), the charts (`charts.py`,
matplotlib drawn to inline SVG: no JavaScript, no fonts, no network) and the page (`page.py`).
May import: `poisonwatch.config`, `poisonwatch.textsafe`, `poisonwatch.warehouse`.
"""

from __future__ import annotations

from poisonwatch.report.run import ReportResult, run_report, write_report

__all__ = ["ReportResult", "run_report", "write_report"]
