"""`python -m poisonwatch.bench --worker …`: the benchmark's child process, one per size."""

import sys

from poisonwatch.bench.run import main

if __name__ == "__main__":
    sys.exit(main())
