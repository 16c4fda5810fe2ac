"""The warehouse layer: the Spark session (`engine`), the dbt runner (`dbtrun`), the SQL runner
(`sqlrun`) and the landing contract's raw tables (`schemas`).

Every job (ingest, generate, remediation, quality, bench, broker, backtest, alerts, report) reaches
Spark and dbt through here. It may import `poisonwatch.config` and nothing else of poisonwatch.
"""
