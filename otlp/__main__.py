"""``python -m otlp``: the same command line as the ``otlp`` script."""

import sys

from otlp.cli import main

sys.exit(main())
