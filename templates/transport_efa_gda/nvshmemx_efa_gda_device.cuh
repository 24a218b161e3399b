/* nvshmem-efa template transport_efa_gda: installed by nvshmem-efa, which rewrites this file on each run.
 *
 * GPU-initiated RDMA over EFA: kernels write WQEs straight into the NIC's send queue and ring its doorbell.
 * Include from CUDA code; pass the pointer from nvshmemx_efa_gda_get_device_state() to the kernel.
 *
 * Rules this code keeps (the NIC and docs/research/efa_gda.md §2 set them):
 *  - a WQE is 64 bytes written with 64-bit stores at the ring stride (64 or 128; a 128-byte WQE's tail is
 *    zero); meta_desc, first, last and comp_req are always set;
 *  - the phase bit of slot s is bit 0 of (s >> log2(entries)), 0 on the first pass;
 *  - the doorbell takes the producer counter masked to 16 bits (as rdma-core writes it), only ever grows,
 *    is rung in slot order, and never covers more than max_batch WQEs written since the last ring;
 *  - a slot is reused only after its own previous WQE completed (SQ-full waits on the retired prefix);
 *  - RDMA messages are split at the device's max RDMA size and at the ends of registered regions;
 *  - every CQE must be this queue's (q_type, qp_num, a request id in flight); one that is not makes the
 *    queue unusable and every wait returns NVSHMEMX_EFA_GDA_ERR_BAD_CQE instead of hanging.
 *
 * Completions are exact under concurrency: EFA completes out of order, so the CQ poller marks each
 * completed slot (by request id) and advances sq_retired, the contiguous prefix of completed slots. quiet()
 * waits until that prefix covers every WQE reserved before it was called, its own included; counting
 * completions instead would let later WQEs of other threads stand in for its own.
 *
 * Signals (efa_gda_signal) are RDMA writes of a value from a per-slot scratch entry, posted once the payload
 * they announce has completed.
 *
 * Rails (several NICs per PE, nvshmemx_efa_gda_rail_t): every rail is a queue of its own with everything
 * above (its own retired prefix, slot marks, credits and RX CQ); a WQE is posted on one rail and only that
 * rail's completions retire it. Which rail (the policy, efa_gda_rail_of): rail = (destination PE + channel)
 * % n_rails, where the channel is the calling warp's global index unless the caller names one (the *_on
 * functions take the rail itself). So the warps of a kernel spread over the rails, each warp's posts to one
 * PE stay on one rail, and different destinations start on different rails; a message split into pieces
 * keeps all of its pieces on its rail; a warp batch goes to the rail of its warp's channel. Completion is
 * exact per rail, and the operations that promise "everything before me completed" wait on every rail:
 * efa_gda_quiet and efa_gda_signal take a snapshot of every rail's reserved count and wait until each rail's
 * retired prefix covers it, whichever rails the payload took. Receiving (efa_gda_rx_poll) polls every rail.
 * A prepared handle (efa_gda_handle) binds one rail.
 *
 * Owned queues (efa_gda_owned, ABI 6): a rail may also have queues that one thread at a time owns; the owner
 * reserves slots from a counter in its registers instead of the shared fetch-and-add, so its post waits for
 * no round trip before storing the WQE. efa_gda_quiet and efa_gda_signal wait on them as well.
 *
 * Any number of threads may post at once (slots are reserved with one fetch-and-add and doorbells handed
 * over in slot order). A post issues its slot's fetch-and-add together with every load it needs (all at
 * fixed offsets from the state and its rail, see nvshmemx_efa_gda.h), so the common post waits for one
 * round trip to L2 before it stores its WQE, after one read of n_rails to choose the rail; a slot reserved
 * for a post that then fails is filled with a WQE that moves nothing. Callers that post to one peer
 * repeatedly can resolve it once (efa_gda_handle). Write-with-immediate is flow controlled by credits
 * (nvshmemx_efa_gda_credits_t, per rail): a sender may have at most imm_window immediates a receiver has
 * not taken, so the receiver's CQ cannot overrun.
 *
 * No wait without a bound (ABI 7): every wait (slot claim, SQ room, doorbell turn, quiet, owned-queue room,
 * credits refresh, efa_gda_rx_wait) gives up after the state's timeout_ns (NVSHMEM_EFA_GDA_TIMEOUT_MS) with
 * NVSHMEMX_EFA_GDA_ERR_TIMEOUT, and marks the queue so later waits on it fail at once. Each queue records the
 * PE the WQE of every slot was addressed to, so its first error names the peer; efa_gda_check and
 * efa_gda_check_quiet print the operation, the PEs, the failed queue and the last completion it saw.
 *
 * The API is split by object, each part a header of its own, all included here (include only this one):
 *   _base   loads, counters, queue constants, the clock and the bound of a wait, error texts
 *   _wqe    building a WQE and storing it into a slot
 *   _queue  one send queue: completions, slot claim, doorbell, waits
 *   _lookup the rail policy, regions, hot regions, the piece a WQE carries
 *   _rx     credits and receiving immediates
 *   _post   puts, gets, immediates, value writes, handles, warp forms
 *   _quiet  quiet and signals
 *   _owned  owned queues
 *   _check  trapping with a message when an operation failed */
#ifndef NVSHMEMX_EFA_GDA_DEVICE_CUH
#define NVSHMEMX_EFA_GDA_DEVICE_CUH

#include "nvshmemx_efa_gda_device_base.cuh"
#include "nvshmemx_efa_gda_device_wqe.cuh"
#include "nvshmemx_efa_gda_device_queue.cuh"
#include "nvshmemx_efa_gda_device_lookup.cuh"
#include "nvshmemx_efa_gda_device_rx.cuh"
#include "nvshmemx_efa_gda_device_post.cuh"
#include "nvshmemx_efa_gda_device_quiet.cuh"
#include "nvshmemx_efa_gda_device_owned.cuh"
#include "nvshmemx_efa_gda_device_check.cuh"

#endif
