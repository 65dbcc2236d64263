"""Planning: one Workload -> one Plan (planner.py), its training half (training.py) and serving half
(serving.py), and the arithmetic and definitions they and the stacks share. Pure Python: no aws_cdk, no sagemaker."""
