#include "reorder.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>

namespace softefa {

namespace {

bool parse_u64(const std::string &s, uint64_t *v) {
    if (s.empty()) return false;
    char *end = nullptr;
    unsigned long long n = strtoull(s.c_str(), &end, 0);
    uint64_t mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1ull << 10, end++;
    else if (*end == 'M' || *end == 'm') mul = 1ull << 20, end++;
    else if (*end == 'G' || *end == 'g') mul = 1ull << 30, end++;
    if (*end) return false;
    *v = n * mul;
    return true;
}

std::vector<std::string> split(const std::string &s) {
    std::vector<std::string> parts;
    size_t start = 0;
    for (;;) {
        size_t c = s.find(':', start);
        parts.push_back(s.substr(start, c - start));
        if (c == std::string::npos) return parts;
        start = c + 1;
    }
}

}  // namespace

bool parse_reorder(const std::string &spec, Reorder *out, std::string *why) {
    const std::vector<std::string> p = split(spec);
    Reorder r;
    uint64_t a = 0, b = 0;
    if ((p[0] == "inorder" || p[0] == "none") && p.size() == 1) {
        r.mode = Reorder::InOrder;
    } else if (p[0] == "reverse" && p.size() == 1) {
        r.mode = Reorder::Reverse;
    } else if (p[0] == "large" && p.size() == 3 && parse_u64(p[1], &a) && parse_u64(p[2], &b) && b <= 1u << 20) {
        r.mode = Reorder::Large;
        r.large_bytes = a;
        r.after = (uint32_t)b;
    } else if (p[0] == "random" && (p.size() == 2 || p.size() == 3) && parse_u64(p[1], &a) &&
               (p.size() == 2 || (parse_u64(p[2], &b) && b <= 1u << 20))) {
        r.mode = Reorder::Random;
        r.seed = a;
        if (p.size() == 3) r.window = (uint32_t)b;
    } else if (p[0] == "pace" && p.size() == 2 && parse_u64(p[1], &a) && a > 0) {
        r.mode = Reorder::Pace;
        r.pace_us = a;
    } else {
        *why = "reorder mode '" + spec + "' is not one of inorder, large:BYTES:N, reverse, random:SEED[:WINDOW], pace:US";
        return false;
    }
    *out = r;
    return true;
}

std::string to_string(const Reorder &r) {
    switch (r.mode) {
    case Reorder::InOrder: return "inorder";
    case Reorder::Reverse: return "reverse";
    case Reorder::Large: return "large:" + std::to_string(r.large_bytes) + ":" + std::to_string(r.after);
    case Reorder::Random: return "random:" + std::to_string(r.seed) + ":" + std::to_string(r.window);
    case Reorder::Pace: return "pace:" + std::to_string(r.pace_us);
    }
    return "?";
}

void Scheduler::take(size_t i, std::vector<uint64_t> &out) {
    out.push_back(items_[i].id);
    // Every held WQE fetched before this one has one more later WQE completed.
    for (size_t j = 0; j < i; j++) items_[j].later_done++;
    items_.erase(items_.begin() + (std::ptrdiff_t)i);
}

void Scheduler::release(std::vector<uint64_t> &out, bool idle) {
    if (items_.empty()) return;
    const Reorder::Mode mode = r_.mode;
    if (mode == Reorder::Pace) {
        const auto now = std::chrono::steady_clock::now();
        if (now - last_ < std::chrono::microseconds(r_.pace_us)) return;
        last_ = now;
        take(0, out);
        return;
    }
    if (mode == Reorder::InOrder || (idle && mode == Reorder::Large)) {
        for (const Item &it : items_) out.push_back(it.id);
        items_.clear();
    } else if (mode == Reorder::Reverse) {
        for (size_t i = items_.size(); i-- > 0;) out.push_back(items_[i].id);
        items_.clear();
    } else if (mode == Reorder::Random) {
        const size_t keep = idle ? 0 : r_.window;
        while (items_.size() > keep) take((size_t)(rng_() % items_.size()), out);
    } else {  // Large
        bool progress = true;
        while (progress) {
            progress = false;
            for (size_t i = 0; i < items_.size(); i++) {
                const Item &it = items_[i];
                if (it.bytes < r_.large_bytes || it.later_done >= r_.after) {
                    take(i, out);
                    progress = true;
                    break;
                }
            }
        }
    }
}

}  // namespace softefa
