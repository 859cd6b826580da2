from typing import Any, Dict, List, Tuple, Union

from ._errors import (
    ElasticityConfigError as ElasticityConfigError,
    ElasticityError as ElasticityError,
    ElasticityIncompatibleWorldSize as ElasticityIncompatibleWorldSize,
)

ELASTICITY: str
ENABLED: str
ENABLED_DEFAULT: bool
DEEPSPEED_ELASTICITY_CONFIG: str
LATEST_ELASTICITY_VERSION: float
MINIMUM_DEEPSPEED_VERSION: str

def elasticity_enabled(ds_config: Dict[str, Any]) -> bool: ...
def ensure_immutable_elastic_config(runtime_elastic_config_dict: Dict[str, Any]) -> None: ...
def compute_elastic_config(
    ds_config: Dict[str, Any],
    target_deepspeed_version: str,
    world_size: int = ...,
    return_microbatch: bool = ...,
) -> Union[Tuple[int, List[int]], Tuple[int, List[int], int]]: ...
