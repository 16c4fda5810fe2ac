"""What the generated world contains: error texts, queues and consumer settings.

Error numbers and exception classes come from seeds/error_classes.csv plus a few that are not
listed there (SB 50000, 8152; JMS DocumentServiceException, SQLRecoverableException), so the
`unknown` failure class occurs. Texts carry apostrophes, `';--` and non-ASCII on purpose.
"""

from __future__ import annotations

from poisonwatch.generate.bodies import DESCRIPTIONS, EXPENSE_REPORT, PROGRESS_REPORT
from poisonwatch.generate.model import ErrorSpec, js
from poisonwatch.generate.policy import Policies

TUE = "com.example.agents.TemporaryUnavailableException"

SB_ERROR_TEXTS: dict[int, list[str]] = {
    1205: [
        "Transaction (Process ID {n}) was deadlocked on lock resources with another process "
        "and has been chosen as the deadlock victim. Rerun the transaction."
    ],
    1222: ["Lock request time out period exceeded."],
    701: ["There is insufficient system memory in resource pool 'default' to run this query."],
    2627: [
        "Violation of PRIMARY KEY constraint 'PK_ExpenseReport'. Cannot insert duplicate key in "
        "object 'dbo.ExpenseReport'. The duplicate key value is ({n})."
    ],
    2601: [
        "Cannot insert duplicate key row in object 'dbo.Inventory' with unique index "
        "'IX_Inventory_Sku'. The duplicate key value is (SKU-{n})."
    ],
    547: [
        'The INSERT statement conflicted with the FOREIGN KEY constraint "FK_Request_Product". '
        'The conflict occurred in database "{db}", table "Production.Product", column '
        "'ProductID'."
    ],
    515: [
        "Cannot insert the value NULL into column 'EmployeeID', table '{db}.dbo.ExpenseReport'; "
        "column does not allow nulls. INSERT fails."
    ],
    50001: ["Expense report without an employee id: it can never be processed."],
    50002: ["Expense report with employee id -{n} out of range: it can never be processed."],
    50000: [
        "Unexpected error in the activation procedure: customer 'O''Brien';-- not found",
        "Unexpected error: relatório «{n}» inválido — сбой обработки",
    ],
    8152: ["String or binary data would be truncated in table 'dbo.Notes', column 'Text'."],
}

JMS_ERROR_TEXTS: dict[str, list[str]] = {
    TUE: ["Document {n} not yet replicated to this server", "Replica lag: document {n} pending"],
    "java.net.ConnectException": ["Connection refused (Connection refused)"],
    "java.net.SocketTimeoutException": ["Read timed out"],
    "java.lang.NullPointerException": [
        'Cannot invoke "String.length()" because "customerName" is null'
    ],
    "java.lang.IllegalStateException": ["Document store rejected update {n}: version conflict"],
    "java.lang.ClassCastException": [
        "class java.lang.String cannot be cast to class java.lang.Long"
    ],
    "javax.jms.MessageFormatException": ["Property 'amount' is not a number: '12,50'"],
    "com.example.agents.InvalidDocumentException": [
        "Invalid document {n}: missing <Customer> element (Größe ';--)"
    ],
    "com.example.agents.DocumentServiceException": [
        "Document service answered HTTP 500: 'Erro interno' ';-- сервер недоступен"
    ],
    "java.sql.SQLRecoverableException": ["IO Error: Got minus one from a read call"],
}


def sb_error(
    policies: Policies, number: int, n: int = 0, db: str = "", variant: int = 0
) -> ErrorSpec:
    texts = SB_ERROR_TEXTS[number]
    text = texts[variant % len(texts)].format(n=n, db=db)
    return ErrorSpec(
        key=str(number),
        failure_class=policies.error_class("service_broker", str(number)),
        message=text,
        message_json=js(text),
        number_json=str(number),
    )


def jms_error(policies: Policies, cls: str, n: int = 0, variant: int = 0) -> ErrorSpec:
    texts = JMS_ERROR_TEXTS[cls]
    text = texts[variant % len(texts)].format(n=n)
    simple = cls.rsplit(".", 1)[-1]
    stack = (
        f"{cls}: {text}\n\tat com.example.agents.{simple}Agent.onMessage(Agent.java:{40 + n % 200})"
        "\n\tat org.apache.activemq.artemis.jms.client.JMSMessageListenerWrapper.onMessage"
        "(JMSMessageListenerWrapper.java:110)"
    )
    temporary = cls == TUE
    return ErrorSpec(
        key=cls,
        failure_class="transient" if temporary else policies.error_class("jms", cls),
        message=text,
        message_json=js(text),
        stack_json=js(stack),
        temporary=temporary,
    )


# Background error mixes: (error, weight)
SB_TRANSIENT = [1205, 1205, 1222, 701]
SB_PERMANENT = [2627, 547, 2601, 515]
SB_UNKNOWN = [50000, 8152]
JMS_TRANSIENT = [TUE, TUE, "java.net.ConnectException", "java.net.SocketTimeoutException"]
JMS_PERMANENT = [
    "java.lang.NullPointerException",
    "java.lang.IllegalStateException",
    "java.lang.ClassCastException",
    "com.example.agents.DocumentServiceException",
    "java.sql.SQLRecoverableException",
]
JMS_VALIDATION = ["javax.jms.MessageFormatException", "com.example.agents.InvalidDocumentException"]

END_DIALOG = "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog"
SB_ERROR_TYPE = "http://schemas.microsoft.com/SQL/ServiceBroker/Error"

# Background Service Broker queues: server, database, queue, style, main types (type, validation)
SB_BACKGROUND_QUEUES: list[tuple[str, str, str, str, list[tuple[str, str]]]] = [
    (
        "SQLPROD02",
        "Sales",
        "OrderQueue",
        "whole",
        [("//Adventure-Works.com/Sales/Order", "X")],
    ),
    (
        "SQLPROD02",
        "Sales",
        "CustomerQueue",
        "savepoint",
        [("//Adventure-Works.com/Sales/NewCustomer", "X")],
    ),
    (
        "SQLPROD02",
        "Sales",
        "InvoiceQueue",
        "whole",
        [("//Adventure-Works.com/Sales/Invoice", "X")],
    ),
    (
        "SQLPROD03",
        "Inventory",
        "StockQueue",
        "whole",
        [("//Adventure-Works.com/Inventory/StockUpdate", "N")],
    ),
    (
        "SQLPROD03",
        "AdventureWorks2008R2",
        "ExpenseAuditQueue",
        "savepoint",
        [(EXPENSE_REPORT, "X"), (PROGRESS_REPORT, "X")],
    ),
    (
        "SQLHR01",
        "HumanResources",
        "PayrollQueue",
        "savepoint",
        [("//Adventure-Works.com/HR/PayrollRun", "X")],
    ),
]

# Background JMS subscriptions: broker, address, [(queue, consumer_id)], message type, servers
JMS_BACKGROUND: list[tuple[str, str, list[tuple[str, str]], str, list[str]]] = [
    (
        "artemis-prod-1",
        "invoices",
        [("invoices.invoice-mailer", "agent.invoice-mailer")],
        "com.example.agents.InvoiceIssued",
        ["SRVAPP01", "SRVAPP02", "SRVAPP03"],
    ),
    (
        "artemis-prod-1",
        "documents.changed",
        [
            ("documents.changed.search-indexer", "agent.search-indexer"),
            ("documents.changed.audit-log", "agent.audit-log"),
        ],
        "com.example.agents.DocumentChanged",
        ["SRVAPP02", "SRVAPP03", "SRVAPP04", "SRVAPP05"],
    ),
    (
        "artemis-prod-1",
        "prices",
        [("prices.pricing", "agent.pricing")],
        "com.example.agents.PriceChanged",
        ["SRVAPP04", "SRVAPP05"],
    ),
    (
        "artemis-prod-1",
        "heartbeats",
        [("heartbeats.monitor", "agent.monitor")],
        "com.example.agents.Heartbeat",
        ["SRVAPP01", "SRVAPP05"],
    ),
    (
        "artemis-prod-2",
        "customers",
        [("customers.crm-sync", "agent.crm-sync")],
        "com.example.agents.CustomerUpdated",
        ["SRVAPP06", "SRVAPP07", "SRVAPP08"],
    ),
    (
        "artemis-prod-2",
        "mail",
        [("mail.email-sender", "agent.email-sender")],
        "com.example.agents.SendEmail",
        ["SRVAPP06", "SRVAPP07"],
    ),
]

DESCRIPTIONS_JSON = [js(d) for d in DESCRIPTIONS]
