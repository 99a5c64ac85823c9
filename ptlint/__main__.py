import sys

from ptlint.cli import main

sys.exit(main())
