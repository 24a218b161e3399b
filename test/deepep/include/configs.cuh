// Test-only stand-in (written for nvshmem-efa) for the DeepEP header the shim includes, as ibgda_device.cuh did.
#pragma once

// DeepEP's receive-wait bound as its configs.cuh defines it (567632d: 200G cycles ~= 100 s); the shim replaces it
// when NVSHMEM_EFA_SHIM_RECV_TIMEOUT_MS is set.
#define NUM_TIMEOUT_CYCLES 200000000000ull
