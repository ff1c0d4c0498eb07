"""``python -m clusterclip`` is the ``clusterclip`` command."""

import sys

from clusterclip.cli import main

sys.exit(main())
