#include "harness.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace th {

int failures = 0;
const char *who = "A";

static void line(const std::string &s) {
    std::string l = std::string(who) + ": " + s + "\n";
    if (write(1, l.data(), l.size()) < 0) _exit(3);  // one write per line: the two processes do not interleave
}

void ok(const std::string &check) { line("ok " + check); }

void fail(const std::string &check, const std::string &why) {
    failures++;
    line("FAIL " + check + ": " + why);
}

bool expect(bool cond, const std::string &check, const std::string &why) {
    if (cond) ok(check);
    else fail(check, why.empty() ? "condition false" : why);
    return cond;
}

std::string fmt(const char *f, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    return buf;
}

void die(const std::string &why) {
    line("FAIL setup: " + why);
    _exit(2);
}

Pair fork_pair() {
    int ab[2], ba[2];
    if (pipe(ab) || pipe(ba)) die("pipe");
    fflush(stdout);
    Pair p;
    p.child = fork();
    if (p.child < 0) die("fork");
    if (p.child == 0) {
        p.a = false;
        who = "B";
        p.rd = ab[0];
        p.wr = ba[1];
        close(ab[1]);
        close(ba[0]);
    } else {
        p.rd = ba[0];
        p.wr = ab[1];
        close(ab[0]);
        close(ba[1]);
    }
    return p;
}

void put(Pair &p, const void *buf, size_t len) {
    const char *b = static_cast<const char *>(buf);
    while (len) {
        ssize_t n = write(p.wr, b, len);
        if (n <= 0) die("pipe write");
        b += n;
        len -= (size_t)n;
    }
}

void get(Pair &p, void *buf, size_t len) {
    char *b = static_cast<char *>(buf);
    while (len) {
        ssize_t n = read(p.rd, b, len);
        if (n <= 0) die("pipe read (peer gone)");
        b += n;
        len -= (size_t)n;
    }
}

void sync(Pair &p) {
    char c = 's';
    put(p, &c, 1);
    get(p, &c, 1);
}

void peer_status(int st) {
    // B prints its own failed checks, but a crash or an exit status of its own prints nothing: say how it ended.
    if (WIFSIGNALED(st)) fail("peer exits", fmt("B was killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st))));
    else if (!WIFEXITED(st)) fail("peer exits", fmt("B ended with wait status 0x%x", st));
    else if (WEXITSTATUS(st) != 0) fail("peer exits", fmt("B exited with status %d", WEXITSTATUS(st)));
}

int finish(Pair &p) {
    if (!p.a) exit(failures ? 1 : 0);  // exit, not _exit: atexit work (the statistics file) must run
    int st = 0;
    if (p.child > 0) {
        // B must be done within the scenario's own limits; a hang here is a failure, not a stuck test run.
        for (int i = 0; i < 600; i++) {
            pid_t r = waitpid(p.child, &st, WNOHANG);
            if (r == p.child) break;
            if (i == 599) {
                kill(p.child, SIGKILL);
                waitpid(p.child, &st, 0);
                fail("peer exits", "B did not finish within 60 s");
                return 1;
            }
            usleep(100000);
        }
        peer_status(st);
    }
    return failures ? 1 : 0;
}

Fab open_fab(uint64_t caps, enum fi_cq_format format, uint64_t cntr_flags, int nic) {
    Fab f;
    struct fi_info *hints = fi_allocinfo();
    hints->caps = caps;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_LOCAL | FI_MR_HMEM;
    hints->fabric_attr->prov_name = strdup("efa");
    if (nic >= 0) {
        hints->fabric_attr->name = strdup("efa");
        hints->domain_attr->name = strdup(fmt("efaemu%d-rdm", nic).c_str());
    }
    int ret = fi_getinfo(FI_VERSION(1, 9), nullptr, nullptr, 0, hints, &f.info);
    fi_freeinfo(hints);
    if (ret) die(nic >= 0 ? fmt("fi_getinfo(efaemu%d-rdm): %s", nic, fi_strerror(-ret)) : fmt("fi_getinfo: %s", fi_strerror(-ret)));
    if ((ret = fi_fabric(f.info->fabric_attr, &f.fabric, nullptr))) die(fmt("fi_fabric: %d", ret));
    if ((ret = fi_domain(f.fabric, f.info, &f.domain, nullptr))) die(fmt("fi_domain: %d", ret));
    struct fi_av_attr av_attr = {};
    av_attr.type = FI_AV_TABLE;
    if ((ret = fi_av_open(f.domain, &av_attr, &f.av, nullptr))) die(fmt("fi_av_open: %d", ret));
    struct fi_cq_attr cq_attr = {};
    cq_attr.format = format;
    cq_attr.wait_obj = FI_WAIT_NONE;
    if ((ret = fi_cq_open(f.domain, &cq_attr, &f.cq, nullptr))) die(fmt("fi_cq_open: %d", ret));
    struct fi_cntr_attr cntr_attr = {};
    cntr_attr.events = FI_CNTR_EVENTS_COMP;
    if ((ret = fi_cntr_open(f.domain, &cntr_attr, &f.cntr, nullptr))) die(fmt("fi_cntr_open: %d", ret));
    if ((ret = fi_endpoint(f.domain, f.info, &f.ep, nullptr))) die(fmt("fi_endpoint: %d", ret));
    if ((ret = fi_ep_bind(f.ep, &f.av->fid, 0))) die(fmt("bind av: %d", ret));
    if ((ret = fi_ep_bind(f.ep, &f.cq->fid, FI_TRANSMIT | FI_RECV))) die(fmt("bind cq: %d", ret));
    if (cntr_flags && (ret = fi_ep_bind(f.ep, &f.cntr->fid, cntr_flags))) die(fmt("bind cntr: %d", ret));
    if ((ret = fi_enable(f.ep))) die(fmt("fi_enable: %d", ret));
    size_t len = 128;
    f.name.resize(len);
    if ((ret = fi_getname(&f.ep->fid, f.name.data(), &len))) die(fmt("fi_getname: %d", ret));
    f.name.resize(len);
    return f;
}

void close_fab(Fab &f) {
    if (f.ep) fi_close(&f.ep->fid);
    if (f.cntr) fi_close(&f.cntr->fid);
    if (f.cq) fi_close(&f.cq->fid);
    if (f.av) fi_close(&f.av->fid);
    if (f.domain) fi_close(&f.domain->fid);
    if (f.fabric) fi_close(&f.fabric->fid);
    if (f.info) fi_freeinfo(f.info);
    f = Fab();
}

fi_addr_t insert(Fab &f, const std::vector<uint8_t> &addr) {
    fi_addr_t a = FI_ADDR_NOTAVAIL;
    int ret = fi_av_insert(f.av, addr.data(), 1, &a, 0, nullptr);
    if (ret != 1) die(fmt("fi_av_insert: %d", ret));
    return a;
}

struct fid_mr *reg(Fab &f, void *buf, size_t len, uint64_t access) {
    struct fid_mr *mr = nullptr;
    int ret = fi_mr_reg(f.domain, buf, len, access, 0, 0, 0, &mr, nullptr);
    if (ret) die(fmt("fi_mr_reg: %d", ret));
    return mr;
}

uint64_t now_ms() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

ssize_t wait_cq(struct fid_cq *cq, struct fi_cq_data_entry *e, struct fi_cq_err_entry *err, int timeout_ms,
                fi_addr_t *src) {
    const uint64_t end = now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        fi_addr_t from = FI_ADDR_NOTAVAIL;
        ssize_t r = fi_cq_readfrom(cq, e, 1, &from);
        if (r == 1) {
            if (src) *src = from;
            return 1;
        }
        if (r == -FI_EAVAIL) {
            memset(err, 0, sizeof *err);
            ssize_t n = fi_cq_readerr(cq, err, 0);
            if (n != 1) die(fmt("fi_cq_readerr: %zd", n));
            return -FI_EAVAIL;
        }
        if (r != -FI_EAGAIN) die(fmt("fi_cq_read: %zd", r));
        if (now_ms() > end) return -FI_EAGAIN;
        usleep(50);
    }
}

}  // namespace th
