#include "config.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "reorder.h"

namespace efaemu {

namespace {

bool parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s) return false;
    char *end = nullptr;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || s[0] == '-') return false;
    *out = v;
    return true;
}

// Reads NAME into *out if set; records the first malformed variable in cfg->error.
template <typename T>
void env_uint(Config *cfg, const char *name, T *out, uint64_t min, uint64_t max) {
    const char *v = getenv(name);
    if (!v) return;
    uint64_t x;
    if (!parse_u64(v, &x) || x < min || x > max) {
        if (cfg->error.empty())
            cfg->error = std::string(name) + "=" + v + ": expected an integer in [" + std::to_string(min) + ", " +
                         std::to_string(max) + "]";
        return;
    }
    *out = (T)x;
}

// EFAEMU_PLACE_ORDER, EFAEMU_PLACE_DEFER_US, EFAEMU_DUPLICATE (placement.h). Each names itself in its error.
void parse_placement(Config &c) {
    auto bad = [&](const char *name, const char *v, const char *want) {
        if (c.error.empty()) c.error = std::string(name) + "=" + v + ": expected " + want;
    };
    if (const char *v = getenv("EFAEMU_PLACE_ORDER")) {
        const char *want = "random:SEED[:WINDOW] (WINDOW 1..1024, default 8)";
        std::string s(v);
        size_t c2 = s.find(':', 7);
        uint64_t seed = 0, window = 8;
        bool ok = s.compare(0, 7, "random:") == 0 &&
                  parse_u64(s.substr(7, c2 == std::string::npos ? std::string::npos : c2 - 7).c_str(), &seed) &&
                  (c2 == std::string::npos || parse_u64(s.substr(c2 + 1).c_str(), &window)) && window >= 1 &&
                  window <= 1024;
        if (!ok) bad("EFAEMU_PLACE_ORDER", v, want);
        else {
            c.place_order = true;
            c.place_seed = seed;
            c.place_window = (uint32_t)window;
        }
    }
    if (const char *v = getenv("EFAEMU_PLACE_DEFER_US")) {
        std::string s(v);
        size_t dash = s.find('-');
        uint64_t lo = 0, hi = 0;
        bool ok = dash != std::string::npos && parse_u64(s.substr(0, dash).c_str(), &lo) &&
                  parse_u64(s.substr(dash + 1).c_str(), &hi) && lo <= hi && hi > 0 && hi <= 10ull * 1000 * 1000;
        if (!ok) bad("EFAEMU_PLACE_DEFER_US", v, "MIN-MAX microseconds, 0 <= MIN <= MAX, 0 < MAX <= 10000000");
        else {
            c.place_defer = true;
            c.place_defer_min_ns = lo * 1000;
            c.place_defer_max_ns = hi * 1000;
        }
    }
    if (const char *v = getenv("EFAEMU_DUPLICATE")) {
        std::string s(v);
        size_t colon = s.find(':');
        std::string rate = s.substr(0, colon);
        char *end = nullptr;
        errno = 0;
        double r = rate.empty() ? -1 : strtod(rate.c_str(), &end);
        uint64_t us = 1000;
        bool ok = !errno && end && !*end && r >= 0 && r <= 1 &&
                  (colon == std::string::npos || (parse_u64(s.substr(colon + 1).c_str(), &us) && us >= 1 &&
                                                  us <= 10ull * 1000 * 1000));
        if (!ok) bad("EFAEMU_DUPLICATE", v, "RATE[:MAX_US], RATE in [0, 1], MAX_US in [1, 10000000] (default 1000)");
        else {
            c.dup_rate = r;
            c.dup_max_ns = us * 1000;
        }
    }
}

Config load() {
    Config c;
    env_uint(&c, "EFAEMU_NICS", &c.nics, 1, 32);
    if (const char *v = getenv("EFAEMU_HMEM")) {
        if (!strcmp(v, "auto")) c.hmem = HmemMode::Auto;
        else if (!strcmp(v, "on") || !strcmp(v, "1")) c.hmem = HmemMode::On;
        else if (!strcmp(v, "off") || !strcmp(v, "0")) c.hmem = HmemMode::Off;
        else if (c.error.empty()) c.error = std::string("EFAEMU_HMEM=") + v + ": expected auto, on or off";
    }
    if (const char *v = getenv("EFAEMU_STATS")) c.stats_dir = v;
    env_uint(&c, "EFAEMU_FAIL_EVERY", &c.fail_every, 1, UINT64_MAX);
    env_uint(&c, "EFAEMU_FAIL_STATUS", &c.fail_status, 1, 15);
    if (const char *v = getenv("EFAEMU_FAIL_PATH")) {
        if (!strcmp(v, "rdm")) c.fail_path = 0;
        else if (!strcmp(v, "gda")) c.fail_path = 1;
        else if (strcmp(v, "all") && c.error.empty()) c.error = std::string("EFAEMU_FAIL_PATH=") + v + ": expected rdm, gda or all";
    }
    if (const char *v = getenv("EFAEMU_FAIL_AS_TARGET")) {
        if (!strcmp(v, "rdm")) c.fail_as_target = 0;
        else if (!strcmp(v, "gda")) c.fail_as_target = 1;
        else if (!strcmp(v, "all")) c.fail_as_target = -1;
        else if (c.error.empty()) c.error = std::string("EFAEMU_FAIL_AS_TARGET=") + v + ": expected rdm, gda or all";
    }
    env_uint(&c, "EFAEMU_REORDER", &c.reorder, 0, 1u << 20);
    env_uint(&c, "EFAEMU_SEED", &c.seed, 0, UINT64_MAX);
    uint64_t ms = 0;
    if (getenv("EFAEMU_TIMEOUT_MS")) {
        env_uint(&c, "EFAEMU_TIMEOUT_MS", &ms, 1, 24ull * 3600 * 1000);
        if (ms) c.timeout_ns = ms * 1000000ull;
    }
    if (const char *v = getenv("EFAEMU_DELAY_US")) {
        std::string s(v);
        size_t dash = s.find('-');
        uint64_t lo = 0, hi = 0;
        bool ok = dash == std::string::npos ? parse_u64(s.c_str(), &lo) && (hi = lo, true)
                                            : parse_u64(s.substr(0, dash).c_str(), &lo) &&
                                                  parse_u64(s.substr(dash + 1).c_str(), &hi) && lo <= hi;
        if (!ok || hi > 60ull * 1000 * 1000) {
            if (c.error.empty()) c.error = std::string("EFAEMU_DELAY_US=") + v + ": expected MIN or MIN-MAX microseconds";
        } else {
            c.delay_min_ns = lo * 1000;
            c.delay_max_ns = hi * 1000;
        }
    }
    if (const char *v = getenv("EFAEMU_GDA_ORDER")) {
        softefa::Reorder r;
        std::string why;
        if (softefa::parse_reorder(v, &r, &why)) c.gda_order = v;
        else if (c.error.empty()) c.error = std::string("EFAEMU_GDA_ORDER: ") + why;
    }
    parse_placement(c);
    env_uint(&c, "FI_EFA_TX_SIZE", &c.tx_size, 1, 1u << 20);
    env_uint(&c, "FI_EFA_RX_SIZE", &c.rx_size, 1, 1u << 20);
    env_uint(&c, "EFAEMU_DUMP_AFTER_S", &c.dump_after_s, 1, 24ull * 3600);
    uint32_t sig = 0;
    env_uint(&c, "EFAEMU_DUMP_SIGNAL", &sig, 0, 1);
    c.dump_signal = sig != 0;
    uint32_t silent = 0;
    env_uint(&c, "EFAEMU_SILENT_AFTER_ERROR", &silent, 0, 1);
    c.silent_after_error = silent != 0;
    if (const char *v = getenv("EFAEMU_WQE_SIZE")) {
        if (!strcmp(v, "64")) c.wqe_size = 64;
        else if (!strcmp(v, "128")) c.wqe_size = 128;
        else if (c.error.empty()) c.error = std::string("EFAEMU_WQE_SIZE=") + v + ": expected 64 or 128 (bytes per SQ entry)";
    }
    return c;
}

}  // namespace

const Config &config() {
    // Never destroyed: the exit-time statistics writer reads it after static destructors may have run.
    static std::once_flag once;
    static Config *cfg;
    std::call_once(once, [] { cfg = new Config(load()); });
    return *cfg;
}

}  // namespace efaemu
