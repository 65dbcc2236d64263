"""Which SageMaker API takes which catalog type: the instance-type enums of the pinned botocore SageMaker model.

sagemaker_apis.yaml is generated from botocore's service model (`python -m tools.gen_sagemaker_apis`) and holds, per
enum, the catalog's types it lists; tests/test_sagemaker_apis.py regenerates it and fails when botocore or the catalog
moved. A claim that SageMaker does not take a type for an API comes from here, never from prices or memory. Read
through the package's YAML cache: the planner neither imports botocore nor parses its 2 MB model.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..packaged import read_packaged_yaml
from . import ML_PREFIX, strip_ml

DATA = Path(__file__).parent / "sagemaker_apis.yaml"
# The enum shapes, each with what takes it (botocore's sagemaker 2017-07-24 service-2.json).
APIS: dict[str, str] = {
    "ClusterInstanceType": "SageMaker HyperPod instance groups (CreateCluster)",
    "TrainingInstanceType": "SageMaker training jobs (CreateTrainingJob ResourceConfig)",
    "ReservedCapacityInstanceType": "SageMaker training plans (SearchTrainingPlanOfferings, CreateTrainingPlan)",
    "ProductionVariantInstanceType": "SageMaker endpoints (CreateEndpointConfig ProductionVariant)",
    "TransformInstanceType": "SageMaker batch transform (CreateTransformJob TransformResources)",
    "ProcessingInstanceType": "SageMaker Processing jobs (CreateProcessingJob ClusterConfig)",
    "InstanceType": "SageMaker notebook instances (CreateNotebookInstance)",
}
# The orchestrators' APIs: a HyperPod cluster's instance groups and a training job's resources.
ORCHESTRATOR_API = {"hyperpod": "ClusterInstanceType", "sagemaker-jobs": "TrainingInstanceType"}
# The inference kinds' APIs: endpoints (real-time, async) and transform jobs.
INFERENCE_API = {"realtime": "ProductionVariantInstanceType", "async": "ProductionVariantInstanceType",
                 "batch": "TransformInstanceType"}


@dataclass(frozen=True)
class SageMakerApis:
    """Which instance types each SageMaker API's enum lists, read from botocore's service model."""
    types: dict[str, frozenset[str]]  # enum shape -> the catalog types (EC2 names) it lists
    source: str  # botocore release and the model's path in it

    def takes(self, api: str, name: str) -> bool:
        """Whether `api`'s enum lists the type (EC2 or ml. name); an unknown api is a programming error."""
        return strip_ml(name) in self.types[api]

    def refusal(self, api: str, name: str) -> str:
        """Why SageMaker would refuse the type for `api`, from the model, or "" when it takes it."""
        if self.takes(api, name):
            return ""
        return f"SageMaker's {api} enum ({APIS[api]}) does not list {ML_PREFIX}{strip_ml(name)} ({self.source})"


@cache
def load_sagemaker_apis() -> SageMakerApis:
    data = read_packaged_yaml(DATA)
    return SageMakerApis(types={api: frozenset(data["apis"][api]) for api in APIS},
                         source=f"botocore {data['botocore']} {data['model']}")
