import sys

from adaexplore_mcp.cli import main

sys.exit(main())
