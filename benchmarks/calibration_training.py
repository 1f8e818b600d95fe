"""The training_set admission section of ``calibration.py`` alone (``calibration.py --training-set-only``).

The tournaments ``calibration.one_size`` draws (same seeds), without the dbt marts: ``build_training_set``
reads the episodes, not the marts, so the figures equal those of the full run.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from calibration import tournament, tournament_admission_rows


def training_set_table(args) -> int:
    """Expected, realised and upper false admissions per size and threshold, printed."""
    print("training_set admission on the tournament warehouses (core.training.training_set.build_training_set, each "
          "tournament one warehouse, every model a learner; truth: true p_cold <= 0.25 and true p_hint >= 0.5):")
    for envs in args.envs:
        rng = np.random.default_rng(args.seed + envs)
        drawn = [tournament(rng, g, envs, args.seeds) for g in range(args.groups)]
        episodes = pd.concat([e for e, _ in drawn], ignore_index=True)
        true_rates = pd.concat([t for _, t in drawn], ignore_index=True)
        for r in tournament_admission_rows(envs, episodes, true_rates):
            print(f"  {envs:2d} envs/author, {r['note']}", flush=True)
    return 0
