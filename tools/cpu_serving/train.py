"""Train the benchmark's models on synthetic rows: `train.py OUT ROUNDS DEPTH FEATURES`.

Prediction time depends on the number and depth of trees and the width of a row, not on what
the data mean, so random features and a labelled linear rule are enough.
"""

import sys

import numpy as np
import xgboost as xgb

out, rounds, depth, features = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(0)
x = rng.normal(size=(20_000, features))
y = (x @ rng.normal(size=features) + rng.normal(size=20_000) > 0).astype(int)
params = {"objective": "binary:logistic", "max_depth": depth, "eta": 0.1, "tree_method": "hist", "nthread": 2}
xgb.train(params, xgb.DMatrix(x, label=y), num_boost_round=rounds).save_model(out)
