"""SageMaker inference: one construct per kind."""
