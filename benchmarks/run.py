"""Kept so ``python benchmarks/run.py MODE ...`` still works: same as ``python -m benchmarks``."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
