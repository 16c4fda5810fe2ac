"""Is the `poisonwatch serve --status --format json` given ready for scripts/test.sh's lane two?

Exit 0: running, its first cycle done and waiting, no cycle error, and that cycle built nothing
(the demo recorded its builds, so the server found nothing new). Exit 1: not yet (starting, or no
status). Exit 2: the first cycle failed or built, with the reason. When ready it prints the
server's port."""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    try:
        status = json.loads(argv[0]) if argv else {}
    except ValueError:
        return 1
    if not status.get("running") or status.get("step") != "waiting":
        return 1
    if status.get("last_error") is not None:
        print(f"serve's first cycle failed: {status['last_error']}", file=sys.stderr)
        return 2
    built = (status.get("last_cycle") or {}).get("build_seconds")
    if built is not None:
        print(f"serve's first cycle built ({built} s): the demo's builds were not recorded",
              file=sys.stderr)  # fmt: skip
        return 2
    print(status["port"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
