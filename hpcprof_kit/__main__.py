import sys

from hpcprof_kit.cli import main

sys.exit(main())
