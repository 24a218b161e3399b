// The state dump (see dump.h). The dump thread gathers it: the engine's state under the engine lock (waiting at
// most 2 s for it; an engine stuck while holding it is itself the finding), softgdr's through its exported
// softgdr_describe (found in the process, never loaded by us), and every thread's native backtrace, taken by the
// thread itself in a signal handler one thread at a time.
#include "dump.h"

#include <dirent.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "config.h"
#include "engine.h"

namespace efaemu {
namespace dump {

namespace {

std::atomic<uint32_t> g_act{(uint32_t)Act::Idle};
std::atomic<uint64_t> g_act_since{0};
uint64_t g_start_ns = 0;

sem_t g_wake;                          // posted by SIGUSR1
// Held while a dump is built and written; stop() takes it for good.
std::mutex g_dump_mu;
std::atomic<bool> g_stopped{false};
std::atomic<int> g_signalled{0};
struct sigaction g_old_usr1;

// One thread's backtrace at a time: the dumper names the thread, signals it, waits for `done`.
constexpr int kFrames = 40;
struct BtRequest {
    std::atomic<long> tid{0};
    std::atomic<uint64_t> gen{0};
    void *frames[kFrames];
    int n = 0;
    sem_t done;
};
BtRequest g_bt;
int bt_signal() { return SIGRTMAX - 3; }

void on_bt(int, siginfo_t *, void *) {
    const int saved = errno;
    if (syscall(SYS_gettid) == g_bt.tid.load()) {
        const uint64_t gen = g_bt.gen.load();
        void *f[kFrames];
        const int n = backtrace(f, kFrames);  // warmed up by the dumper: no allocation here
        if (gen == g_bt.gen.load()) {
            memcpy(g_bt.frames, f, sizeof f);
            g_bt.n = n;
            sem_post(&g_bt.done);
        }
    }
    errno = saved;
}

void on_usr1(int sig, siginfo_t *si, void *uc) {
    const int saved = errno;
    g_signalled.store(1);
    sem_post(&g_wake);
    errno = saved;
    if (g_old_usr1.sa_flags & SA_SIGINFO) {
        if (g_old_usr1.sa_sigaction) g_old_usr1.sa_sigaction(sig, si, uc);
    } else if (g_old_usr1.sa_handler != SIG_DFL && g_old_usr1.sa_handler != SIG_IGN) {
        g_old_usr1.sa_handler(sig);
    }
}

std::string read_file(const std::string &path) {
    FILE *f = fopen(path.c_str(), "r");
    if (!f) return "";
    char buf[512];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    std::string s(buf);
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

// "<state> cpu <seconds>" from /proc/self/task/<tid>/stat (fields 3, 14 and 15).
std::string thread_state(long tid) {
    const std::string st = read_file("/proc/self/task/" + std::to_string(tid) + "/stat");
    const size_t close = st.rfind(')');
    if (close == std::string::npos) return "?";
    char state = '?';
    unsigned long long ut = 0, stt = 0;
    // After ") ": state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime
    if (sscanf(st.c_str() + close + 2, "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &state, &ut, &stt) < 3)
        return "?";
    const double hz = (double)sysconf(_SC_CLK_TCK);
    char out[64];
    snprintf(out, sizeof out, "%c cpu %.2f s", state, (double)(ut + stt) / hz);
    return out;
}

std::string frame_text(void *pc) {
    Dl_info di;
    char buf[512];
    if (dladdr(pc, &di) && di.dli_fname) {
        const char *base = strrchr(di.dli_fname, '/');
        base = base ? base + 1 : di.dli_fname;
        const uintptr_t off = (uintptr_t)pc - (uintptr_t)di.dli_fbase;
        if (di.dli_sname)
            snprintf(buf, sizeof buf, "%s(+0x%lx) %s+0x%lx", base, (unsigned long)off, di.dli_sname,
                     (unsigned long)((uintptr_t)pc - (uintptr_t)di.dli_saddr));
        else snprintf(buf, sizeof buf, "%s(+0x%lx)", base, (unsigned long)off);
    } else {
        snprintf(buf, sizeof buf, "%p", pc);
    }
    return buf;
}

std::string threads() {
    std::string o;
    static std::once_flag once;
    std::call_once(once, [] {
        void *warm[2];
        backtrace(warm, 2);  // loads the unwinder now, so the handler never allocates
        sem_init(&g_bt.done, 0, 0);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sa.sa_sigaction = on_bt;
        sigemptyset(&sa.sa_mask);
        sigaction(bt_signal(), &sa, nullptr);
    });
    const long self = syscall(SYS_gettid);
    std::vector<long> tids;
    if (DIR *d = opendir("/proc/self/task")) {
        while (struct dirent *e = readdir(d))
            if (e->d_name[0] != '.') tids.push_back(atol(e->d_name));
        closedir(d);
    }
    o += "threads: " + std::to_string(tids.size()) + "\n";
    for (long tid : tids) {
        const std::string name = read_file("/proc/self/task/" + std::to_string(tid) + "/comm");
        o += "  thread " + std::to_string(tid) + " \"" + name + "\" " + thread_state(tid);
        if (tid == self) {
            o += " (the dump thread)\n";
            continue;
        }
        while (sem_trywait(&g_bt.done) == 0) {
        }
        g_bt.gen++;
        g_bt.tid = tid;
        if (syscall(SYS_tgkill, getpid(), tid, bt_signal()) != 0) {
            o += " (gone)\n";
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        int r;
        while ((r = sem_timedwait(&g_bt.done, &ts)) != 0 && errno == EINTR) {
        }
        g_bt.tid = 0;
        g_bt.gen++;
        if (r != 0) {
            o += " (no backtrace: it did not take the signal within 100 ms)\n";
            continue;
        }
        o += "\n";
        // Frame 0 and 1 are the handler and the signal trampoline.
        for (int i = 2; i < g_bt.n; i++) o += "    #" + std::to_string(i - 2) + " " + frame_text(g_bt.frames[i]) + "\n";
    }
    return o;
}

std::string softgdr() {
    // NVSHMEM dlopens libgdrapi.so.2 with RTLD_LOCAL: look it up by name, never load it.
    void *h = dlopen("libgdrapi.so.2", RTLD_NOW | RTLD_NOLOAD);
    if (!h) return "softgdr: not loaded in this process\n";
    auto fn = reinterpret_cast<int (*)(char *, size_t)>(dlsym(h, "softgdr_describe"));
    std::string o;
    if (!fn) {
        o = "softgdr: libgdrapi.so.2 is loaded but is not softgdr (no softgdr_describe)\n";
    } else {
        std::vector<char> buf(4096);
        fn(buf.data(), buf.size());
        o = buf.data();
        if (o.empty() || o.back() != '\n') o += "\n";
    }
    dlclose(h);
    return o;
}

void emit(const std::string &text, int seq) {
    const std::string prefix = "efaemu-dump[" + std::to_string(getpid()) + "] ";
    std::string lines;
    size_t i = 0;
    while (i < text.size()) {
        size_t j = text.find('\n', i);
        if (j == std::string::npos) j = text.size();
        lines += prefix + text.substr(i, j - i) + "\n";
        i = j + 1;
    }
    ssize_t w = write(2, lines.data(), lines.size());
    (void)w;
    const Config &c = config();
    if (c.stats_dir.empty()) return;
    const std::string path = c.stats_dir + "/efaemu-" + std::to_string(getpid()) + "-dump" + std::to_string(seq) + ".txt";
    const std::string tmp = path + ".tmp";
    FILE *f = fopen(tmp.c_str(), "w");
    if (!f) return;
    fwrite(text.data(), 1, text.size(), f);
    if (fclose(f) == 0) rename(tmp.c_str(), path.c_str());
}

void *loop(void *) {
    pthread_setname_np(pthread_self(), "efaemu-dump");
    const uint64_t every = config().dump_after_s * 1000000000ull;
    uint64_t next = every ? g_start_ns + every : 0;
    for (int seq = 1;; seq++) {
        if (next) {
            const uint64_t now = now_ns();
            if (now < next) {
                // sem_timedwait takes CLOCK_REALTIME: convert the remaining monotonic time.
                const uint64_t left = next - now;
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                uint64_t ns = (uint64_t)ts.tv_nsec + left % 1000000000ull;
                ts.tv_sec += (time_t)(left / 1000000000ull + ns / 1000000000ull);
                ts.tv_nsec = (long)(ns % 1000000000ull);
                while (sem_timedwait(&g_wake, &ts) != 0 && errno == EINTR) {
                }
            }
        } else {
            while (sem_wait(&g_wake) != 0 && errno == EINTR) {
            }
        }
        const bool sig = g_signalled.exchange(0) != 0;
        if (!sig && next) next += every;
        std::unique_lock<std::mutex> g(g_dump_mu);
        if (g_stopped.load()) break;
        emit(build(sig ? "SIGUSR1" : "EFAEMU_DUMP_AFTER_S"), seq);
    }
    return nullptr;
}

}  // namespace

const char *act_name(Act a) {
    switch (a) {
        case Act::Idle: return "working";
        case Act::Sleeping: return "sleeping (nothing to do)";
        case Act::Submissions: return "taking posted operations";
        case Act::Inbox: return "handling its inbox";
        case Act::Targets: return "delivering buffered messages";
        case Act::Pump: return "pushing to peers";
        case Act::Sources: return "serving GDA doorbells";
        case Act::Completions: return "releasing completions";
        case Act::Checks: return "checking peers and timeouts";
        case Act::CudaDtoH: return "in a CUDA device-to-host copy";
        case Act::CudaHtoD: return "in a CUDA host-to-device copy";
        case Act::CudaSync: return "waiting for its CUDA stream";
    }
    return "?";
}

void set_activity(Act a) {
    g_act_since.store(now_ns(), std::memory_order_relaxed);
    g_act.store((uint32_t)a, std::memory_order_release);
}

Scope::Scope(Act a) : prev_(g_act.load()), prev_since_(g_act_since.load()) { set_activity(a); }
Scope::~Scope() {
    g_act_since.store(prev_since_, std::memory_order_relaxed);
    g_act.store(prev_, std::memory_order_release);
}

std::string age(uint64_t t, uint64_t now) {
    if (!t) return "-";
    char b[32];
    snprintf(b, sizeof b, "%.3f s", (double)(now > t ? now - t : 0) / 1e9);
    return b;
}

std::string build(const char *reason) {
    const uint64_t now = now_ns();
    std::string o;
    char head[256];
    snprintf(head, sizeof head, "efaemu state dump: pid %d, %s after the emulator started, reason %s\n", (int)getpid(),
             age(g_start_ns ? g_start_ns : now, now).c_str(), reason);
    o += head;
    const Act a = (Act)g_act.load(std::memory_order_acquire);
    o += std::string("engine thread: ") + act_name(a) + " for " + age(g_act_since.load(), now) + "\n";
    std::vector<std::string> findings;
    if ((a == Act::CudaDtoH || a == Act::CudaHtoD || a == Act::CudaSync) && now - g_act_since.load() > 1000000000ull)
        findings.push_back(std::string("the engine thread has been ") + act_name(a) + " for " + age(g_act_since.load(), now) +
                           ": nothing else moves in this process's NIC meanwhile; a CUDA call that synchronizes the context "
                           "(lazy module loading of a first-launched kernel, cudaDeviceSynchronize, cudaFree) waits for a "
                           "kernel that may spin on this data (CUDA_MODULE_LOADING=" +
                           std::string(getenv("CUDA_MODULE_LOADING") ? getenv("CUDA_MODULE_LOADING") : "unset") + ")");
    o += Engine::instance().describe(now, &findings);
    const std::string sg = softgdr();
    o += sg;
    if (sg.find("STUCK") != std::string::npos)
        findings.push_back("softgdr: an access is stuck in its fault handler (see the softgdr line); its CUDA copy waits "
                           "like the engine's would (CUDA_MODULE_LOADING=" +
                           std::string(getenv("CUDA_MODULE_LOADING") ? getenv("CUDA_MODULE_LOADING") : "unset") + ")");
    o += threads();
    o += "findings: " + std::to_string(findings.size()) + (findings.empty() ? " (nothing looks stalled at the NIC)" : "") + "\n";
    for (const std::string &f : findings) o += "  - " + f + "\n";
    return o;
}

void start() {
    const Config &c = config();
    if (!c.dump_after_s && !c.dump_signal) return;
    static std::once_flag once;
    std::call_once(once, [&c] {
        g_start_ns = now_ns();
        sem_init(&g_wake, 0, 0);
        if (c.dump_signal) {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_flags = SA_SIGINFO | SA_RESTART;
            sa.sa_sigaction = on_usr1;
            sigemptyset(&sa.sa_mask);
            sigaction(SIGUSR1, &sa, &g_old_usr1);
        }
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        // No signal of the application's may land on this thread: it must stay free to take the dump.
        sigset_t all, old;
        sigfillset(&all);
        sigdelset(&all, SIGUSR1);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        pthread_create(&t, &attr, loop, nullptr);
        pthread_sigmask(SIG_SETMASK, &old, nullptr);
        pthread_attr_destroy(&attr);
    });
}

void stop() {
    if (g_stopped.exchange(true)) return;
    // Never unlocked: the process is going away. The thread, detached, parks on this lock at its next wake; the
    // library is linked -z nodelete so that the code it wakes into is still mapped after libfabric dlcloses us.
    g_dump_mu.lock();
}

}  // namespace dump
}  // namespace efaemu
