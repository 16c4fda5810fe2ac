"""poisonwatch: find poison messages in message queues and remove them safely."""

__version__ = "0.1.0"
