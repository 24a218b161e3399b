// nvshmem-efa-probe: checks whether this host can run NVSHMEM over EFA, and GPU-initiated EFA (GDA).
//
//   nvshmem-efa-probe [--human] [--root PREFIX]
//
// Prints one JSON document (schema "nvshmem-efa-probe/1", see src/core/probe-schema.ts), or a table with
// --human. --root reads /sys, /proc and /dev under PREFIX (fake trees in tests). Exit status: 0 when no check
// failed, 1 otherwise, 2 on a usage error.
#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "probe.h"

namespace probe {

const char *status_name(Status s) {
    switch (s) {
        case Status::Pass: return "pass";
        case Status::Warn: return "warn";
        case Status::Fail: return "fail";
        case Status::Skip: return "skip";
    }
    return "skip";
}

bool read_file(const std::string &path, std::string *out) {
    std::ifstream f(path);
    if (!f) return false;
    std::stringstream ss;
    ss << f.rdbuf();
    *out = ss.str();
    return true;
}

std::string trim(std::string s) {
    while (!s.empty() && isspace((unsigned char)s.back())) s.pop_back();
    size_t i = 0;
    while (i < s.size() && isspace((unsigned char)s[i])) i++;
    return s.substr(i);
}

std::vector<std::string> list_dir(const std::string &path) {
    std::vector<std::string> out;
    if (DIR *d = opendir(path.c_str())) {
        while (dirent *e = readdir(d))
            if (e->d_name[0] != '.') out.push_back(e->d_name);
        closedir(d);
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::string real_path(const std::string &path) {
    char buf[PATH_MAX];
    return realpath(path.c_str(), buf) ? std::string(buf) : std::string();
}

}  // namespace probe

namespace {

std::string json_escape(const std::string &s) {
    std::string o;
    for (unsigned char ch : s) {
        switch (ch) {
            case '"': o += "\\\""; break;
            case '\\': o += "\\\\"; break;
            case '\n': o += "\\n"; break;
            case '\t': o += "\\t"; break;
            default:
                if (ch < 0x20) {
                    char b[8];
                    snprintf(b, sizeof b, "\\u%04x", ch);
                    o += b;
                } else {
                    o += (char)ch;
                }
        }
    }
    return o;
}

}  // namespace

int main(int argc, char **argv) {
    using namespace probe;
    bool human = false;
    Context c;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--human")) human = true;
        else if (!strcmp(argv[i], "--json")) human = false;
        else if (!strcmp(argv[i], "--root") && i + 1 < argc) c.root = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--human] [--root PREFIX]\n", argv[0]);
            return 2;
        }
    }
    host_checks(c);
    fabric_checks(c);
    gpu_checks(c);

    int counts[4] = {0, 0, 0, 0};
    for (auto &k : c.checks) counts[(int)k.status]++;
    const bool efa = !c.efa_devices.empty();
    std::string verdict;
    if (counts[(int)Status::Fail] && !efa) verdict = "no EFA device: this host cannot run NVSHMEM over EFA (GPU checks below still apply)";
    else if (counts[(int)Status::Fail]) verdict = "not ready: fix the failed checks";
    else if (counts[(int)Status::Warn]) verdict = "ready for NVSHMEM over EFA, with warnings";
    else verdict = "ready for NVSHMEM over EFA";
    bool gda_ready = false;
    for (auto &k : c.checks)
        if (k.id == "gda-ops" && k.status == Status::Pass) gda_ready = true;
    if (gda_ready) verdict += "; EFA GDA ready";

    char host[256] = "";
    gethostname(host, sizeof host);
    if (human) {
        printf("nvshmem-efa probe on %s%s%s\n\n", host, c.root.empty() ? "" : ", root ", c.root.c_str());
        size_t w = 5;
        for (auto &k : c.checks) w = std::max(w, k.title.size());
        for (auto &k : c.checks) {
            printf("%-4s  %-*s  %s\n", status_name(k.status), (int)w, k.title.c_str(), k.evidence.c_str());
            if (!k.fix.empty() && (k.status == Status::Fail || k.status == Status::Warn))
                printf("      %-*s  fix: %s\n", (int)w, "", k.fix.c_str());
        }
        printf("\n%d pass, %d warn, %d fail, %d skip\nverdict: %s\n", counts[0], counts[1], counts[2], counts[3], verdict.c_str());
    } else {
        printf("{\n  \"schema\": \"nvshmem-efa-probe/1\",\n  \"host\": \"%s\",\n  \"root\": \"%s\",\n  \"checks\": [\n",
               json_escape(host).c_str(), json_escape(c.root).c_str());
        for (size_t i = 0; i < c.checks.size(); i++) {
            auto &k = c.checks[i];
            printf("    {\"id\": \"%s\", \"title\": \"%s\", \"status\": \"%s\", \"evidence\": \"%s\", \"fix\": \"%s\"}%s\n",
                   json_escape(k.id).c_str(), json_escape(k.title).c_str(), status_name(k.status),
                   json_escape(k.evidence).c_str(), json_escape(k.fix).c_str(), i + 1 < c.checks.size() ? "," : "");
        }
        printf("  ],\n  \"topology\": [");
        for (size_t i = 0; i < c.topology.size(); i++) {
            auto &t = c.topology[i];
            printf("%s\n    {\"gpu\": \"%s\", \"gpuNuma\": \"%s\", \"nic\": \"%s\", \"nicNuma\": \"%s\"}", i ? "," : "", json_escape(t.gpu).c_str(),
                   json_escape(t.gpu_numa).c_str(), json_escape(t.nic).c_str(), json_escape(t.nic_numa).c_str());
        }
        printf("%s],\n", c.topology.empty() ? "" : "\n  ");
        printf("  \"libfabric\": {\"version\": \"%s\", \"path\": \"%s\"},\n", json_escape(c.libfabric_version).c_str(),
               json_escape(c.libfabric_path).c_str());
        printf("  \"summary\": {\"pass\": %d, \"warn\": %d, \"fail\": %d, \"skip\": %d},\n  \"verdict\": \"%s\"\n}\n",
               counts[0], counts[1], counts[2], counts[3], json_escape(verdict).c_str());
    }
    return counts[(int)Status::Fail] ? 1 : 0;
}
