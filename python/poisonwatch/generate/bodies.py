"""Message bodies: the seeds' expense report XML and the background bodies rebuilt from a seed.

Imports nothing from the rest of the generator, so the catalog and the model can both use it."""

from __future__ import annotations

import random
from xml.sax.saxutils import escape

EXPENSE_REPORT = "//Adventure-Works.com/AccountsPayable/ExpenseReport"
PROGRESS_REPORT = "//Adventure-Works.com/Expenses/ProgressReport"

DESCRIPTIONS = [
    "Hotel for the Contoso audit",
    "Dinner at O'Brien's",
    "Taxi ';-- DROP TABLE dbo.Expense",
    "Café Zürich — 東京 ✓",
    "Командировка в Москву",
    "Conferência <Lisboa> & workshop",
]


def expense_report_xml(employee_id: int | None, amount: str, description: str) -> str:
    emp = "" if employee_id is None else str(employee_id)
    return (
        '<ExpenseReport xmlns="http://Adventure-Works.com/Expenses">'
        f"<EmployeeID>{emp}</EmployeeID><Amount>{amount}</Amount>"
        f"<Description>{escape(description)}</Description></ExpenseReport>"
    )


def sb_body(seed: int, type_name: str, validation: str) -> str | bytes:
    """A background message body, rebuilt from its seed when a snapshot shows it."""
    rng = random.Random(seed)
    if validation == "N":
        return bytes(rng.getrandbits(8) for _ in range(24))
    desc = DESCRIPTIONS[rng.randrange(len(DESCRIPTIONS))]
    if type_name == EXPENSE_REPORT:
        amount = f"{rng.randrange(5, 900)}.{rng.randrange(100):02d}"
        return expense_report_xml(rng.randrange(1, 300), amount, desc)
    if type_name == PROGRESS_REPORT:
        return f"<ProgressReport><Percent>{rng.randrange(101)}</Percent></ProgressReport>"
    tag = type_name.rsplit("/", 1)[-1]
    return f"<{tag}><Id>{rng.randrange(10**6)}</Id><Note>{escape(desc)}</Note></{tag}>"
