import sys

from simcast.cli.main import main

sys.exit(main())
