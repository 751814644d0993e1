import sys

from cpfleet.cli import main

sys.exit(main())
