"""`python -m tilemark.options` prints docs/options.md (`make docs`)."""

import sys

from tilemark.options.table import markdown

sys.stdout.write(markdown())
