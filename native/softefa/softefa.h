// Software EFA: a model of the EFA NIC's queues, strict enough to catch a device-side driver that would
// misbehave on the real NIC, and out of order like the real NIC.
//
// Library (libsoftefa.a), one job per header:
//   memory.h            Memory: where DMA goes (payload copies, CQE writes); backends live in backends/
//   wqe.h               parse_wqe(): one TX WQE decoded with every check the NIC makes
//   send_queue.h        SendQueue: doorbell + LLQ ring, the doorbell rules, slot reuse, staged WQEs
//   completion_queue.h  CompletionQueue: phase-correct CQE writer with overrun detection; CQE builders
//   reorder.h           Reorder / Scheduler: completion order (inorder, large:B:N, reverse, random:SEED[:W])
//   violation.h         ViolationLog: what a driver did wrong, bounded
//   device.h            Device: an in-process NIC composing the above (regions, QPs, AVs, RDMA, QP errors)
// Backends (header-only, not in the library): backends/host_memory.h (CPU), backends/cuda_memory.h (GPU).
#pragma once

#include "completion_queue.h"
#include "device.h"
#include "memory.h"
#include "reorder.h"
#include "send_queue.h"
#include "violation.h"
#include "wqe.h"
