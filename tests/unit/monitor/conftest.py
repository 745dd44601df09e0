import sys
from pathlib import Path

FAKES = Path(__file__).resolve().parents[2] / "fakes"
if str(FAKES) not in sys.path:
    sys.path.insert(0, str(FAKES))
