import os
import sys

# Spawned rank processes import the test modules and the harness by name.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
