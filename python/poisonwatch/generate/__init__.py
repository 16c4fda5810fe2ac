"""`poisonwatch generate`: a deterministic, seeded workload of landing files plus ground truth.

Owns the simulation (`state`, `run`), the seeds' fixed scenarios (`scenarios`), what the world
contains (`catalog`, `model`, `bodies`), the policy seeds as the generator reads them (`policy`)
and the landing-file writers (`io`). May import `poisonwatch.config` and
`poisonwatch.warehouse.schemas`; other jobs use only what is exported here.
"""

from poisonwatch.generate.run import generate, print_summary
from poisonwatch.generate.state import DATASET_NAMES, GenerateSummary

__all__ = ["DATASET_NAMES", "GenerateSummary", "generate", "print_summary"]
