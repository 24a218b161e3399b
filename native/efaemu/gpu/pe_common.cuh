// What the GPU test programs of native/efaemu/gpu (pe_test.cu, deepep_pattern.cu) share: their output lines, CUDA
// error handling, clocks and NVSHMEM's unique-id bootstrap through a file (no MPI). Test-only; each program is one
// translation unit that includes this once, inside its anonymous namespace.
//
// Lines: "PE<r> ok <check> [: evidence]" / "PE<r> FAIL <check>: why" / "PE<r> RESULT <name> <value>".
#pragma once

int g_rank = -1, g_failures = 0;

void line(const char *kind, const std::string &what) {
    printf("PE%d %s %s\n", g_rank, kind, what.c_str());
    fflush(stdout);
}
void ok(const std::string &c) { line("ok", c); }
void fail(const std::string &c, const std::string &why) {
    g_failures++;
    line("FAIL", c + ": " + why);
}
bool expect(bool cond, const std::string &c, const std::string &why = "") {
    if (cond) ok(c);
    else fail(c, why.empty() ? "condition false" : why);
    return cond;
}
std::string fmt(const char *f, ...) {
    char b[1024];
    va_list ap;
    va_start(ap, f);
    vsnprintf(b, sizeof b, f, ap);
    va_end(ap);
    return b;
}
#define CUDA_OK(call)                                                                                   \
    do {                                                                                                \
        cudaError_t e_ = (call);                                                                        \
        if (e_ != cudaSuccess) {                                                                        \
            fail(#call, cudaGetErrorString(e_));                                                        \
            exit(2);                                                                                    \
        }                                                                                               \
    } while (0)

double now_s() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double wall_s() {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// PE 0 writes the unique id (temp file + rename), PE 1 waits for it.
void bootstrap(const char *uid_file) {
    nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
    if (g_rank == 0) {
        if (nvshmemx_get_uniqueid(&id) != 0) {
            fail("nvshmemx_get_uniqueid", "failed");
            exit(2);
        }
        std::string tmp = std::string(uid_file) + ".tmp";
        FILE *f = fopen(tmp.c_str(), "wb");
        if (!f || fwrite(&id, sizeof id, 1, f) != 1 || fclose(f) != 0 || rename(tmp.c_str(), uid_file) != 0) {
            fail("writing the unique id", uid_file);
            exit(2);
        }
    } else {
        const double end = now_s() + 60;
        for (;;) {
            FILE *f = fopen(uid_file, "rb");
            if (f) {
                const bool got = fread(&id, sizeof id, 1, f) == 1;
                fclose(f);
                if (got) break;
            }
            if (now_s() > end) {
                fail("reading the unique id", std::string(uid_file) + " did not appear within 60 s");
                exit(2);
            }
            usleep(20000);
        }
    }
    nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
    nvshmemx_set_attr_uniqueid_args(g_rank, 2, &id, &attr);
    nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr);  // aborts the process on failure
    expect(nvshmem_my_pe() == g_rank && nvshmem_n_pes() == 2, "nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID) on 2 PEs",
           fmt("pe %d of %d", nvshmem_my_pe(), nvshmem_n_pes()));
}
