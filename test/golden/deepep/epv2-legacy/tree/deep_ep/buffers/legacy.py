# Fixture written for nvshmem-efa tests: the environment block of DeepEP EPv2's legacy buffer.
import os


def enable_nvshmem_env(num_qps_per_rank: int) -> None:
    # Enable IBGDA
    os.environ['NVSHMEM_IB_ENABLE_IBGDA'] = '1'
    os.environ['NVSHMEM_IBGDA_NUM_RC_PER_PE'] = f'{num_qps_per_rank}'
