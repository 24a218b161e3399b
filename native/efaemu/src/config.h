// Environment knobs of the emulator, read once. A malformed value is an error the user sees (fi_getinfo fails
// and says which variable), never a silent default: a fault-injection run that injected nothing would pass.
#pragma once

#include <cstdint>
#include <string>

namespace efaemu {

enum class HmemMode { Auto, On, Off };

struct Config {
    int nics = 1;                  // EFAEMU_NICS: how many NICs (efaemu0..N-1) the provider reports
    HmemMode hmem = HmemMode::Auto;  // EFAEMU_HMEM: claim FI_HMEM (auto: when libcuda.so.1 finds a GPU)
    std::string stats_dir;         // EFAEMU_STATS: write <dir>/efaemu-<pid>.json at exit
    uint64_t fail_every = 0;       // EFAEMU_FAIL_EVERY=N: every Nth operation completes with an error
    int fail_path = -1;            // EFAEMU_FAIL_PATH=rdm|gda: count and fail only that path's operations (-1: all)
    uint32_t fail_status = 13;     // EFAEMU_FAIL_STATUS: the EFA status it completes with (13: UNRESP_REMOTE)
    int fail_as_target = -2;       // EFAEMU_FAIL_AS_TARGET=rdm|gda|all: this process's NICs refuse every remote write
                                   //   and read of that path (-1: all; -2: none), which complete at their initiator
                                   //   with EFAEMU_FAIL_STATUS: a peer that stopped answering, the others unharmed
    uint32_t reorder = 0;          // EFAEMU_REORDER=W: hold up to W completions and release them shuffled
    uint64_t delay_min_ns = 0;     // EFAEMU_DELAY_US=min[-max]: delay every completion by a random amount
    uint64_t delay_max_ns = 0;
    uint64_t seed = 1;             // EFAEMU_SEED: seeds reordering and delays
    std::string gda_order;         // EFAEMU_GDA_ORDER: softefa's completion order for device-posted WQEs
                                   //   (inorder, large:BYTES:N, reverse, random:SEED[:W]); default: random with
                                   //   EFAEMU_REORDER's window when that is set, else in order
    uint64_t timeout_ns = 30ull * 1000 * 1000 * 1000;  // EFAEMU_TIMEOUT_MS: unanswered op -> UNRESP_REMOTE
    // Placement faults at the target (placement.h): EFAEMU_PLACE_ORDER=random:SEED[:WINDOW] places the writes of one
    // initiator to one target NIC in a seeded random order within WINDOW; EFAEMU_PLACE_DEFER_US=MIN-MAX acks a write
    // once the target NIC holds it and lands its bytes MIN..MAX us later (FIFO per NIC); EFAEMU_DUPLICATE=RATE[:MAX_US]
    // places a write's bytes once more within MAX_US after it completed, with probability RATE.
    bool place_order = false;
    uint64_t place_seed = 0;
    uint32_t place_window = 8;
    bool place_defer = false;
    uint64_t place_defer_min_ns = 0, place_defer_max_ns = 0;
    double dup_rate = 0;
    uint64_t dup_max_ns = 1000000;
    size_t tx_size = 1024;         // FI_EFA_TX_SIZE (the real provider's knob): per-endpoint TX credits
    size_t rx_size = 1024;         // FI_EFA_RX_SIZE
    uint64_t dump_after_s = 0;     // EFAEMU_DUMP_AFTER_S=N: a state dump after N s, then every N s (dump.h)
    bool dump_signal = false;      // EFAEMU_DUMP_SIGNAL=1: SIGUSR1 takes a state dump
    // EFAEMU_SILENT_AFTER_ERROR=1: after a QP error (a malformed WQE, a doorbell rule broken, any error completion) a
    // device queue completes nothing more until destroyed (rdma-core's efa_io_defs.h documents FLUSHED for QP destroy
    // only: later WQEs may never complete). Off: they complete FLUSHED.
    bool silent_after_error = false;
    uint32_t wqe_size = 64;        // EFAEMU_WQE_SIZE=64|128: the SQ entry size efa-direct reports (128: wide-WQE devices)
    std::string error;             // non-empty: a variable could not be parsed
};

// Parses the environment (once); later calls return the same object.
const Config &config();

}  // namespace efaemu
