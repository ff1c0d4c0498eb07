import sys
from pathlib import Path

# tests/product_support.py builds hand-made work directories shared by these tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
