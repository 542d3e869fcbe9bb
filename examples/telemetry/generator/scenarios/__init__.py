"""The scenarios, one module per family, in the order the generator writes them."""

from __future__ import annotations

from collections.abc import Callable

from ..builders.scenario import Scenario
from .accelerator_memory import scenario_gpu_cuda_oom, scenario_tpu_hbm_oom
from .eviction import scenario_jobset_eviction, scenario_tfjob_eviction
from .gpu_xid import (
    scenario_gpu_xid79_stays_ready,
    scenario_gpu_xid_application,
    scenario_gpu_xid_hardware_once,
    scenario_gpu_xid_hardware_twice,
)
from .healthy_nodes import (
    scenario_capacity,
    scenario_nccl_hang,
    scenario_no_restarts,
    scenario_unknown,
)
from .image_pull import scenario_jobset_image_pull, scenario_tfjob_image_pull
from .infrastructure import (
    scenario_faulty_host,
    scenario_maintenance,
    scenario_single_node_failure,
    scenario_spot_preemption,
)
from .kubeflow import scenario_pytorchjob_nccl_timeout, scenario_tfjob_faulty_host
from .oom import scenario_jobset_oom, scenario_tfjob_oom
from .precedence import (
    scenario_eviction_then_faulty_host,
    scenario_oom_then_nccl,
    scenario_spot_with_preempted_pods,
)
from .priority import (
    scenario_jobset_priority_preemption,
    scenario_tfjob_priority_preemption,
)
from .restarts import scenario_recreated_after_ttl, scenario_restartjob_gauge_flat
from .trainjob import scenario_trainjob_faulty_host

SCENARIOS: list[Callable[[], Scenario]] = [
    scenario_spot_preemption,
    scenario_faulty_host,
    scenario_single_node_failure,
    scenario_maintenance,
    scenario_capacity,
    scenario_nccl_hang,
    scenario_no_restarts,
    scenario_unknown,
    scenario_tfjob_faulty_host,
    scenario_pytorchjob_nccl_timeout,
    scenario_jobset_oom,
    scenario_tfjob_oom,
    scenario_jobset_priority_preemption,
    scenario_tfjob_priority_preemption,
    scenario_jobset_eviction,
    scenario_tfjob_eviction,
    scenario_jobset_image_pull,
    scenario_tfjob_image_pull,
    scenario_oom_then_nccl,
    scenario_spot_with_preempted_pods,
    scenario_eviction_then_faulty_host,
    scenario_gpu_xid_application,
    scenario_gpu_xid_hardware_twice,
    scenario_gpu_xid_hardware_once,
    scenario_gpu_cuda_oom,
    scenario_tpu_hbm_oom,
    scenario_gpu_xid79_stays_ready,
    scenario_restartjob_gauge_flat,
    scenario_recreated_after_ttl,
    scenario_trainjob_faulty_host,
]
