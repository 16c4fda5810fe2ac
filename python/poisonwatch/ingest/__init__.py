"""`poisonwatch ingest`: landing files into the raw tables, idempotent per file, rejects kept.

Owns reading and validating landing files (`files`), the Spark SQL that types and loads them
(`sql`) and the run with its ledger and crash recovery (`loader`). May import
`poisonwatch.config` and `poisonwatch.warehouse`; other jobs use only what is exported here.
"""

from poisonwatch.ingest.loader import BATCH_RE, IngestSummary, ingest, print_summary

__all__ = ["BATCH_RE", "IngestSummary", "ingest", "print_summary"]
