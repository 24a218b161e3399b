// Shared pieces of the efaemu test programs: two processes joined by pipes (the out-of-band channel a real job
// has through its launcher), result lines ("ok <check>" / "FAIL <check>: why") and libfabric setup shortcuts.
// The programs assert; the vitest file asserts on their lines.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#ifndef FI_OPT_CUDA_API_PERMITTED
#define FI_OPT_CUDA_API_PERMITTED 10
#endif

namespace th {

// ---- results ---------------------------------------------------------------------------------------------------
extern int failures;
extern const char *who;  // "A" or "B": prefixes lines so two processes' output stays attributable
void ok(const std::string &check);
void fail(const std::string &check, const std::string &why);
// Records ok/fail; returns cond.
bool expect(bool cond, const std::string &check, const std::string &why = "");
std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] void die(const std::string &why);

// ---- two processes ---------------------------------------------------------------------------------------------
struct Pair {
    bool a = true;  // this side is A (the parent)
    int rd = -1, wr = -1;
    pid_t child = -1;
};
// Forks B. Both sides return; `a` says which one this is. Must run before any libfabric call.
Pair fork_pair();
void put(Pair &p, const void *buf, size_t len);
void get(Pair &p, void *buf, size_t len);
template <typename T>
void put(Pair &p, const T &v) { put(p, &v, sizeof v); }
template <typename T>
T get(Pair &p) {
    T v;
    get(p, &v, sizeof v);
    return v;
}
void sync(Pair &p);  // both sides wait for each other
// B: exits with its result. A: waits for B and folds B's result into its own; returns the process exit code.
// A: a FAIL line unless B's wait status is a clean exit 0.
void peer_status(int st);
int finish(Pair &p);

// ---- libfabric -------------------------------------------------------------------------------------------------
struct Fab {
    struct fi_info *info = nullptr;
    struct fid_fabric *fabric = nullptr;
    struct fid_domain *domain = nullptr;
    struct fid_av *av = nullptr;
    struct fid_cq *cq = nullptr;
    struct fid_cntr *cntr = nullptr;
    struct fid_ep *ep = nullptr;
    std::vector<uint8_t> name;
};
// fi_getinfo with RDM + caps, fabric, domain, AV (table), CQ (format), counter bound to `cntr_flags`, endpoint,
// enable; dies on failure (a setup failure is not what these tests examine).
// nic >= 0: the RDM domain of that NIC (efaemu<nic>-rdm) rather than the first that matches.
Fab open_fab(uint64_t caps, enum fi_cq_format format, uint64_t cntr_flags, int nic = -1);
void close_fab(Fab &f);
fi_addr_t insert(Fab &f, const std::vector<uint8_t> &addr);
struct fid_mr *reg(Fab &f, void *buf, size_t len, uint64_t access);

// Polls the CQ (calling fi_cq_read, as a manual-progress application would) until an entry, an error or the
// timeout. Returns 1 (entry in *e), -FI_EAVAIL (error in *err), or -FI_EAGAIN on timeout.
ssize_t wait_cq(struct fid_cq *cq, struct fi_cq_data_entry *e, struct fi_cq_err_entry *err, int timeout_ms,
                fi_addr_t *src = nullptr);
uint64_t now_ms();

}  // namespace th
