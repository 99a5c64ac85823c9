import os
import sys

from ptlint.cli import main

code = main()
if code == 130:
    # Interrupted. Under `python -m`, CPython turns any exit into death by SIGINT
    # when a KeyboardInterrupt once passed through exec() of a string (dataclasses
    # do that at import time), even though ptlint caught it: exit 130 for sure.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130)
sys.exit(code)
