import sys

from fedavail.cli import main

sys.exit(main())
