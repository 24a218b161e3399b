// What the emulated NIC carried: operations and bytes per path (RDM: libfabric calls; GDA: GPU-posted WQEs,
// phase 2), per NIC of this process (the local side of the operation: which rail carried it) and per peer
// process, split by where the local bytes lived (host or GPU), plus the faults injected. Written as JSON at
// process exit when EFAEMU_STATS=<dir> is set, and on demand by efaemu_stats_snapshot(label), so a test can
// prove which path and which NIC moved the payload (e.g. "GPU-sourced RDM write bytes = 0 with GDA on").
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "hmem.h"

namespace efaemu {

enum class Path : uint8_t { Rdm = 0, Gda = 1 };

// Initiator-side kinds (write/read/send) and target-side kinds (what peers did to us).
enum class Kind : uint8_t { Write = 0, Read, Send, Recv, RemoteWrite, RemoteRead, kCount };

// Operations of at most kSmallOp bytes are also counted apart: GDA signals (a 4- or 8-byte value written after
// its payload completed) and credit returns are that small and DeepEP's token messages never are, so a test can
// compare the payload the GDA path carried with what the RDM path carried when signals travel as atomics.
constexpr uint64_t kSmallOp = 8;

struct Tally {
    uint64_t ops = 0, bytes = 0, gpu_bytes = 0, errors = 0;
    uint64_t small_ops = 0, small_bytes = 0, small_gpu_bytes = 0;
};

class Stats {
public:
    // One finished operation on local NIC `nic` (efaemu<nic>): `status` != 0 counts an error and no bytes.
    void record(Path p, Kind k, int nic, const std::string &peer, uint64_t bytes, MemKind local, uint32_t status);
    void fault(const char *what);  // "failed", "delayed", "reordered", ...
    void note_nic(const std::string &nic);

    Tally total(Path p, Kind k) const;
    uint64_t faults(const char *what) const;

    // Renders the JSON document.
    std::string json() const;
    // Writes <dir>/efaemu-<pid><suffix>.json atomically (temp file + rename). Returns 0 or -errno with *why.
    int write(const std::string &dir, const std::string &suffix, std::string *why) const;

private:
    struct PerPath {
        Tally k[(int)Kind::kCount];
    };
    mutable std::mutex mu_;
    PerPath paths_[2];
    std::map<std::string, PerPath[2]> peers_;
    std::map<int, PerPath[2]> per_nic_;
    std::map<std::string, uint64_t> faults_;
    std::map<std::string, int> nics_;
};

Stats &stats();

// Writes the statistics once if EFAEMU_STATS is set (atexit and provider cleanup both call it).
void write_stats_at_exit();

// efaemu_stats_snapshot (exported, see prov.cpp): <EFAEMU_STATS>/efaemu-<pid>.<label>.json now. 0, -EINVAL for a
// label that is not one file-name component, -ENOENT without EFAEMU_STATS, or the -errno of the write.
int stats_snapshot(const char *label);

}  // namespace efaemu
