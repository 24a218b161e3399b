# Fixture written for nvshmem-efa tests: the environment block of DeepEP V1's Buffer.__init__.
import os


class Buffer:
    def __init__(self, num_qps_per_rank: int, low_latency_mode: bool, allow_nvlink_for_low_latency_mode: bool = True):
        if low_latency_mode:
            # Enable IBGDA
            assert num_qps_per_rank > 0
            os.environ['NVSHMEM_DISABLE_P2P'] = '0' if allow_nvlink_for_low_latency_mode else '1'
            # IBGDA only when the NVSHMEM in use has it (nvshmem-efa builds NVSHMEM without IBGDA)
            if os.environ.get('NVSHMEM_EFA_DEEPEP_IBGDA', '0') == '1':
                os.environ['NVSHMEM_IB_ENABLE_IBGDA'] = '1'
            os.environ['NVSHMEM_IBGDA_NUM_RC_PER_PE'] = f'{num_qps_per_rank}'
            os.environ['NVSHMEM_MAX_TEAMS'] = '7'
