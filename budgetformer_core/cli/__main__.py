"""``python -m budgetformer_core.cli`` (as ``torchrun -m`` starts it): the ``budgetformer`` command."""

import sys

from . import main

sys.exit(main())
