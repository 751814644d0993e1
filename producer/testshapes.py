"""The old home of ``cpfleet.core.testshapes``, kept so that code importing it from here keeps working.

Dataset-schema code is read by the trainer's client (inline tests) and by the application's
dataset tools alike, so it lives in the core, below both; this module is that module itself
under its old name (the same object in ``sys.modules``), not a copy.
"""

from __future__ import annotations

import sys

from cpfleet.core import testshapes

sys.modules[__name__] = testshapes
