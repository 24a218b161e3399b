// The device-side key of a registration. Every MR has two keys, as on a verbs NIC: the lkey a device-posted
// WQE names its local buffer with (get_mr_lkey, 24 bits: efa_io_tx_buf_desc) and the rkey peers name it with
// (fi_mr_key). They are different values from one process-wide space, so a client that swaps them is caught:
// an rkey used as an lkey fails LOCAL_ERROR_INVALID_LKEY, an lkey used as an rkey REMOTE_ERROR_BAD_ADDRESS.
#pragma once

#include <cstdint>

#include "efaemu.h"

namespace efaemu {

// The registration whose lkey this is (the initiator's check of a WQE's local buffer).
bool mr_by_lkey(uint32_t lkey, Mr *out);
// The lkey of a live registration, by its descriptor (get_mr_lkey). False for a stale or foreign descriptor.
bool mr_lkey(const void *desc, uint32_t *lkey);

}  // namespace efaemu
