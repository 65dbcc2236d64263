"""The workload config: a YAML file or preset read strictly, validated, and what it says the model is."""
