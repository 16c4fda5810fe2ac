"""`poisonwatch check` and `poisonwatch verify`: data quality.

Owns the great-expectations suites (`suites/*.json`, run by `checks`) and the comparison of the
marts with a generator's ground-truth labels (`labels`). May import `poisonwatch.config` and
`poisonwatch.warehouse`; other jobs use only what is exported here.
"""

from poisonwatch.quality.checks import CheckReport, run_checks
from poisonwatch.quality.checks import print_report as print_check_report
from poisonwatch.quality.labels import LabelReport, compare_labels
from poisonwatch.quality.labels import print_report as print_label_report

__all__ = [
    "CheckReport",
    "LabelReport",
    "compare_labels",
    "print_check_report",
    "print_label_report",
    "run_checks",
]
