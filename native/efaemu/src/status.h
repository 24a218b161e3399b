// Completion statuses the emulated NIC reports. The numbers, meanings and the mapping to libfabric errors are
// those of the EFA device (efa_io_defs.h / the efa provider's efa_errno.h), so an application's error path
// sees on the emulator what it would see on the NIC: err = the libfabric errno, prov_errno = the status.
#pragma once

#include <rdma/fi_errno.h>

#include <cstdint>

namespace efaemu {

enum Status : uint32_t {
    kOk = 0,
    kFlushed = 1,
    kLocalQpInternalError = 2,
    kLocalUnsupportedOp = 3,
    kLocalInvalidAh = 4,
    kLocalInvalidLkey = 5,
    kLocalBadLength = 6,
    kRemoteBadAddress = 7,
    kRemoteAbort = 8,
    kRemoteBadDestQpn = 9,
    kRemoteRnr = 10,
    kRemoteBadLength = 11,
    kRemoteBadStatus = 12,
    kLocalUnrespRemote = 13,
    kRemoteUnknownPeer = 14,
    kLocalUnreachRemote = 15,
};

inline const char *status_name(uint32_t s) {
    switch (s) {
        case kOk: return "OK";
        case kFlushed: return "FLUSHED";
        case kLocalQpInternalError: return "LOCAL_ERROR_QP_INTERNAL_ERROR";
        case kLocalUnsupportedOp: return "LOCAL_ERROR_UNSUPPORTED_OP";
        case kLocalInvalidAh: return "LOCAL_ERROR_INVALID_AH";
        case kLocalInvalidLkey: return "LOCAL_ERROR_INVALID_LKEY";
        case kLocalBadLength: return "LOCAL_ERROR_BAD_LENGTH";
        case kRemoteBadAddress: return "REMOTE_ERROR_BAD_ADDRESS";
        case kRemoteAbort: return "REMOTE_ERROR_ABORT";
        case kRemoteBadDestQpn: return "REMOTE_ERROR_BAD_DEST_QPN";
        case kRemoteRnr: return "REMOTE_ERROR_RNR";
        case kRemoteBadLength: return "REMOTE_ERROR_BAD_LENGTH";
        case kRemoteBadStatus: return "REMOTE_ERROR_BAD_STATUS";
        case kLocalUnrespRemote: return "LOCAL_ERROR_UNRESP_REMOTE";
        case kRemoteUnknownPeer: return "REMOTE_ERROR_UNKNOWN_PEER";
        case kLocalUnreachRemote: return "LOCAL_ERROR_UNREACH_REMOTE";
        default: return "UNKNOWN";
    }
}

inline const char *status_text(uint32_t s) {
    switch (s) {
        case kOk: return "Success";
        case kFlushed: return "Flushed during queue pair destroy";
        case kLocalQpInternalError: return "Internal queue pair error (local)";
        case kLocalUnsupportedOp: return "Unsupported operation type";
        case kLocalInvalidAh: return "Invalid address handle (local)";
        case kLocalInvalidLkey: return "Local memory registration is invalid, has insufficient access flags or does not match IOVA";
        case kLocalBadLength: return "Message too long";
        case kRemoteBadAddress: return "Remote memory registration is invalid, has insufficient access flags or does not match IOVA";
        case kRemoteAbort: return "Connection was reset by remote peer";
        case kRemoteBadDestQpn: return "Bad queue pair (QP) number (QP does not exist or is in error state)";
        case kRemoteRnr: return "Destination resource not ready (no work queue entries posted on receive queue)";
        case kRemoteBadLength: return "Remote scatter-gather list too short";
        case kRemoteBadStatus: return "Unexpected status returned by responder";
        case kLocalUnrespRemote: return "Unresponsive remote (was previously responsive)";
        case kRemoteUnknownPeer: return "No valid address handle at remote side (required for RDMA operations)";
        case kLocalUnreachRemote: return "Unreachable remote (never received a response)";
        default: return "Unknown error";
    }
}

// libfabric errno (positive) for a status, as the efa provider maps it.
inline int status_errno(uint32_t s) {
    switch (s) {
        case kOk: return 0;
        case kFlushed: return FI_ECANCELED;
        case kLocalQpInternalError:
        case kLocalInvalidAh:
        case kLocalInvalidLkey:
        case kLocalUnsupportedOp:
        case kRemoteBadAddress: return FI_EINVAL;
        case kLocalUnreachRemote: return FI_EHOSTUNREACH;
        case kLocalBadLength:
        case kRemoteBadLength: return FI_EMSGSIZE;
        case kRemoteAbort:
        case kLocalUnrespRemote: return FI_ECONNABORTED;
        case kRemoteBadDestQpn:
        case kRemoteUnknownPeer: return FI_ENOTCONN;
        case kRemoteRnr: return FI_ENORX;
        case kRemoteBadStatus: return FI_EREMOTEIO;
        default: return FI_EOTHER;
    }
}

}  // namespace efaemu
