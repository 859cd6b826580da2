from os import PathLike
from typing import Any, Callable, Dict, List, Optional, TypedDict, Union

from ._errors import (
    CommError as CommError,
    CommTimeoutError as CommTimeoutError,
    ConfigError as ConfigError,
    ElasticityConfigError as ElasticityConfigError,
    ElasticityError as ElasticityError,
    ElasticityIncompatibleWorldSize as ElasticityIncompatibleWorldSize,
    InternalError as InternalError,
    IoError as IoError,
    StoreError as StoreError,
    StoreTimeoutError as StoreTimeoutError,
    StretchError as StretchError,
)

__version__: str
COMPATIBLE_DEEPSPEED_VERSION: str

Config = Union[Dict[str, Any], str, "PathLike[str]"]

class ElasticPlan(TypedDict):
    final_batch_size: int
    valid_gpus: List[int]
    micro_batch: Optional[int]

def elastic(
    config: Config, world_size: Optional[int] = ..., version: Optional[str] = ...
) -> ElasticPlan: ...
def config(config: Config, world_size: Optional[int] = ...) -> Dict[str, Any]: ...
def simulate(
    scenario: Config,
    seeds: int = ...,
    threads: Optional[int] = ...,
    events: bool = ...,
    step_level: bool = ...,
    progress: Optional[Callable[[float], None]] = ...,
    base_dir: Optional[Union[str, "PathLike[str]"]] = ...,
) -> Dict[str, Any]: ...
def plan(
    job: Config,
    seeds: Optional[int] = ...,
    threads: Optional[int] = ...,
    progress: Optional[Callable[[float], None]] = ...,
    base_dir: Optional[Union[str, "PathLike[str]"]] = ...,
) -> Dict[str, Any]: ...

class WorkerBatch:
    train_batch_size: int
    micro_batch_size: int
    gradient_accumulation_steps: int
    generation: Optional[int]
    ds_config: Optional[str]

def worker_batch() -> WorkerBatch: ...
