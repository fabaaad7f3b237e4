// kernels/shim/selftest.cpp -- standalone check of the kvscope kernels on the CPU shim.
// Not part of the cargo build. Build and run (scripts/sanitize.sh does the same under ThreadSanitizer
// and under AddressSanitizer + UBSan, and CI runs it):
//   g++ -std=c++20 -O1 -pthread -I kernels/shim -I kernels
//       kernels/shim/selftest.cpp kernels/shim/sim.cpp -o /tmp/selftest && /tmp/selftest
// Every kernel entry point must be run here (tests/kernels.rs checks it).
//
// Every op is compared with a simple double-precision reference on random inputs,
// including odd sizes (T = 1, head_dim = 1 or 3, block_size = 1, block_size > T, empty
// contexts, sizes that are not multiples of 32). Prints the max abs error per op and
// exits non-zero on any mismatch.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kvs_sim.h"

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const float kNaNf = std::numeric_limits<float>::quiet_NaN();

std::mt19937_64 rng(12345);
float urand(float lo = -1.0f, float hi = 1.0f) {
    return std::uniform_real_distribution<float>(lo, hi)(rng);
}

std::vector<float> rand_vec(size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::vector<float> v(n);
    for (auto& x : v) x = urand(lo, hi);
    return v;
}

unsigned cdiv(int a, int b) { return (unsigned)((a + b - 1) / b); }

// ---- independent binary16 conversions (bit manipulation, not the shim's _Float16) ------
uint16_t f32_to_f16_bits(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t exp = (x >> 23) & 0xffu;
    uint32_t man = x & 0x7fffffu;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0u));  // inf / nan
    const int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);  // overflow -> inf
    if (e <= 0) {                                    // subnormal half (or zero)
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000u;
        const int shift = 14 - e;  // 14..24
        uint32_t h = man >> shift;
        const uint32_t rem = man & ((1u << shift) - 1);
        const uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1u))) ++h;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (man >> 13);
    const uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // carry may reach inf: correct
    return (uint16_t)(sign | h);
}

double f16_bits_to_double(uint16_t b) {
    const int sign = (b >> 15) & 1;
    const int exp = (b >> 10) & 0x1f;
    const int man = b & 0x3ff;
    double v;
    if (exp == 0)
        v = std::ldexp((double)man, -24);
    else if (exp == 31)
        v = man ? std::numeric_limits<double>::quiet_NaN() : kInf;
    else
        v = std::ldexp((double)(man | 0x400), exp - 25);
    return sign ? -v : v;
}

// ---- bookkeeping ---------------------------------------------------------------------
struct Stat {
    std::string name;
    double max_err = 0.0;
    long checked = 0;
    long bad = 0;
};
std::vector<Stat> stats;
Stat& stat(const std::string& name) {
    for (auto& s : stats)
        if (s.name == name) return s;
    stats.push_back(Stat{name});
    return stats.back();
}

// Compare got vs want with |got - want| <= atol + rtol*|want|; both -inf is a match.
void check(const std::string& op, const std::string& where, double got, double want,
           double atol = 2e-4, double rtol = 2e-4) {
    Stat& s = stat(op);
    ++s.checked;
    bool ok;
    double err = 0.0;
    if (std::isinf(want) || std::isinf(got)) {
        ok = (got == want);
        if (!ok) err = kInf;
    } else if (std::isnan(got) || std::isnan(want)) {
        ok = false;
        err = kInf;
    } else {
        err = std::fabs(got - want);
        ok = err <= atol + rtol * std::fabs(want);
    }
    if (err > s.max_err) s.max_err = err;
    if (!ok) {
        if (s.bad < 10)
            std::printf("  MISMATCH %-18s %s: got %.9g want %.9g\n", op.c_str(), where.c_str(),
                        got, want);
        ++s.bad;
    }
}

bool visible(int i, int j, int mask, int W, int S) {
    if (mask == 1) return j <= i;
    if (mask == 2) return j <= i && (j > i - W || j < S);
    return true;
}

// ---------------------------------------------------------------------------------------
// attention.cu: scores, softmax, pv, fused
// ---------------------------------------------------------------------------------------
struct AttnCase {
    int H, KVH, T, hd, mask, W, S;
    unsigned fused_threads;
};

void test_attention(const AttnCase& c) {
    const int H = c.H, KVH = c.KVH, T = c.T, hd = c.hd;
    const float scale = 1.0f / std::sqrt((float)hd);
    char tag[160];
    std::snprintf(tag, sizeof tag, "H%d KVH%d T%d hd%d mask%d W%d S%d", H, KVH, T, hd, c.mask,
                  c.W, c.S);
    const auto q = rand_vec((size_t)H * T * hd);
    const auto k = rand_vec((size_t)KVH * T * hd);
    const auto v = rand_vec((size_t)KVH * T * hd);
    const int grp = H / KVH;

    // reference in double
    std::vector<double> s_ref((size_t)H * T * T), p_ref((size_t)H * T * T),
        o_ref((size_t)H * T * hd, 0.0);
    for (int h = 0; h < H; ++h)
        for (int i = 0; i < T; ++i) {
            const int kvh = h / grp;
            double mx = -kInf;
            for (int j = 0; j < T; ++j) {
                double s = -kInf;
                if (visible(i, j, c.mask, c.W, c.S)) {
                    double dot = 0;
                    for (int d = 0; d < hd; ++d)
                        dot += (double)q[((size_t)h * T + i) * hd + d] *
                               k[((size_t)kvh * T + j) * hd + d];
                    s = dot * scale;
                }
                s_ref[((size_t)h * T + i) * T + j] = s;
                mx = std::max(mx, s);
            }
            double sum = 0;
            for (int j = 0; j < T; ++j) {
                const double s = s_ref[((size_t)h * T + i) * T + j];
                const double e = (mx == -kInf || s == -kInf) ? 0.0 : std::exp(s - mx);
                p_ref[((size_t)h * T + i) * T + j] = e;
                sum += e;
            }
            for (int j = 0; j < T; ++j) {
                double& p = p_ref[((size_t)h * T + i) * T + j];
                p = sum > 0 ? p / sum : 0.0;
                for (int d = 0; d < hd; ++d)
                    o_ref[((size_t)h * T + i) * hd + d] +=
                        p * v[((size_t)kvh * T + j) * hd + d];
            }
        }

    // 1. scores
    std::vector<float> scores((size_t)H * T * T, kNaNf);
    kvs_sim_attention_scores_f32(cdiv(T, 16), cdiv(T, 16), H, 16, 16, 1, q.data(), k.data(),
                                 scores.data(), H, KVH, T, hd, scale, c.mask, c.W, c.S);
    for (size_t x = 0; x < scores.size(); ++x)
        check("attention_scores", tag, scores[x], s_ref[x], 1e-5, 1e-5);

    // 2. softmax of the kernel's own scores (isolates the softmax kernel)
    std::vector<float> probs((size_t)H * T * T, kNaNf);
    kvs_sim_softmax_rows_f32(H * T, 1, 1, 128, 1, 1, scores.data(), probs.data(), H * T, T);
    for (int row = 0; row < H * T; ++row) {
        double mx = -kInf, sum = 0;
        for (int j = 0; j < T; ++j) mx = std::max(mx, (double)scores[(size_t)row * T + j]);
        std::vector<double> e(T);
        for (int j = 0; j < T; ++j) {
            const double s = scores[(size_t)row * T + j];
            e[j] = (mx == -kInf || s == -kInf) ? 0.0 : std::exp(s - mx);
            sum += e[j];
        }
        for (int j = 0; j < T; ++j)
            check("softmax_rows", tag, probs[(size_t)row * T + j], sum > 0 ? e[j] / sum : 0.0,
                  1e-6, 1e-5);
    }

    // 3. pv on the reference probabilities
    std::vector<float> pf(p_ref.begin(), p_ref.end());
    std::vector<float> out((size_t)H * T * hd, kNaNf);
    kvs_sim_attention_pv_f32(cdiv(hd, 16), cdiv(T, 16), H, 16, 16, 1, pf.data(), v.data(),
                             out.data(), H, KVH, T, hd);
    for (int h = 0; h < H; ++h)
        for (int i = 0; i < T; ++i)
            for (int d = 0; d < hd; ++d) {
                double want = 0;
                for (int j = 0; j < T; ++j)
                    want += (double)pf[((size_t)h * T + i) * T + j] *
                            v[((size_t)(h / grp) * T + j) * hd + d];
                check("attention_pv", tag, out[((size_t)h * T + i) * hd + d], want, 1e-5, 1e-5);
            }

    // v1 chain end to end: scores -> softmax -> pv
    std::vector<float> out_v1((size_t)H * T * hd, kNaNf);
    kvs_sim_attention_pv_f32(cdiv(hd, 16), cdiv(T, 16), H, 16, 16, 1, probs.data(), v.data(),
                             out_v1.data(), H, KVH, T, hd);
    for (size_t x = 0; x < out_v1.size(); ++x) check("attention_v1_chain", tag, out_v1[x], o_ref[x]);

    // 4. fused
    std::vector<float> out_f((size_t)H * T * hd, kNaNf);
    kvs_sim_attention_fused_f32(T, H, 1, c.fused_threads, 1, 1, q.data(), k.data(), v.data(),
                                out_f.data(), H, KVH, T, hd, scale, c.mask, c.W, c.S);
    for (size_t x = 0; x < out_f.size(); ++x) check("attention_fused", tag, out_f[x], o_ref[x]);
}

void test_softmax_edges() {
    struct C { int rows, cols; unsigned threads; };
    const C cases[] = {{3, 1, 128, }, {4, 3, 32}, {5, 300, 128}, {2, 1000, 256}, {3, 70, 1024},
                       {2, 33, 64}};
    for (const auto& c : cases) {
        char tag[64];
        std::snprintf(tag, sizeof tag, "rows%d cols%d threads%u", c.rows, c.cols, c.threads);
        std::vector<float> in((size_t)c.rows * c.cols);
        for (int r = 0; r < c.rows; ++r)
            for (int j = 0; j < c.cols; ++j) {
                float x = urand(-5.0f, 5.0f);
                if (r == 0) x = -std::numeric_limits<float>::infinity();  // fully masked row
                if (r == 1 && (j % 3 == 1)) x = -std::numeric_limits<float>::infinity();
                if (r == 2) x += 80.0f;  // large logits: must not overflow
                in[(size_t)r * c.cols + j] = x;
            }
        std::vector<float> out(in.size(), kNaNf);
        kvs_sim_softmax_rows_f32(c.rows, 1, 1, c.threads, 1, 1, in.data(), out.data(), c.rows,
                                 c.cols);
        for (int r = 0; r < c.rows; ++r) {
            double mx = -kInf, sum = 0;
            for (int j = 0; j < c.cols; ++j) mx = std::max(mx, (double)in[(size_t)r * c.cols + j]);
            std::vector<double> e(c.cols);
            for (int j = 0; j < c.cols; ++j) {
                const double s = in[(size_t)r * c.cols + j];
                e[j] = (mx == -kInf || s == -kInf) ? 0.0 : std::exp(s - mx);
                sum += e[j];
            }
            for (int j = 0; j < c.cols; ++j)
                check("softmax_rows", tag, out[(size_t)r * c.cols + j],
                      sum > 0 ? e[j] / sum : 0.0, 1e-6, 1e-5);
        }
    }
}

// Rows with no visible key at all (window = 0, no sinks: outside the contract's W >= 1,
// used here only to force empty rows) must give zeros, never NaN.
void test_fully_masked_rows() {
    const int H = 2, KVH = 1, T = 7, hd = 5;
    const auto q = rand_vec((size_t)H * T * hd), k = rand_vec((size_t)KVH * T * hd),
               v = rand_vec((size_t)KVH * T * hd);
    std::vector<float> scores((size_t)H * T * T, kNaNf), probs(scores.size(), kNaNf),
        out((size_t)H * T * hd, kNaNf), out_f(out.size(), kNaNf);
    kvs_sim_attention_scores_f32(1, 1, H, 16, 16, 1, q.data(), k.data(), scores.data(), H, KVH,
                                 T, hd, 0.5f, 2, 0, 0);
    kvs_sim_softmax_rows_f32(H * T, 1, 1, 128, 1, 1, scores.data(), probs.data(), H * T, T);
    kvs_sim_attention_pv_f32(1, 1, H, 16, 16, 1, probs.data(), v.data(), out.data(), H, KVH, T,
                             hd);
    kvs_sim_attention_fused_f32(T, H, 1, 128, 1, 1, q.data(), k.data(), v.data(), out_f.data(),
                                H, KVH, T, hd, 0.5f, 2, 0, 0);
    for (float x : scores) check("fully_masked_rows", "scores", x, -kInf);
    for (float x : probs) check("fully_masked_rows", "probs", x, 0.0);
    for (float x : out) check("fully_masked_rows", "v1 out", x, 0.0);
    for (float x : out_f) check("fully_masked_rows", "fused out", x, 0.0);
}

// ---------------------------------------------------------------------------------------
// kv_cache.cu
// ---------------------------------------------------------------------------------------
std::vector<float> rand_vec_with_specials(size_t n) {
    auto v = rand_vec(n, -3.0f, 3.0f);
    const float specials[] = {1.00048828125f,  // exact tie between 1 and 1+2^-10 -> even (1)
                              1.00146484375f,  // tie between 1+2^-10 and 1+2^-9 -> even
                              65520.0f,        // rounds to +inf
                              -65504.0f,       // largest finite half
                              1e-7f,           // subnormal half
                              -3e-8f,          // tie region of the smallest subnormal
                              0.0f,
                              -0.0f,
                              0.1f,
                              1e-9f};
    for (size_t i = 0; i < n && i < sizeof(specials) / sizeof(specials[0]); ++i)
        v[i * 7 % n] = specials[i];
    return v;
}

void test_static_append() {
    struct C { int L, B, KVH, S, hd, layer, pos; };
    const C cases[] = {{2, 3, 2, 5, 3, 1, 4}, {1, 1, 1, 1, 1, 0, 0}, {3, 2, 3, 9, 130, 2, 7},
                       {2, 1, 2, 4, 16, 0, 0}};
    for (const auto& c : cases) {
        char tag[96];
        std::snprintf(tag, sizeof tag, "L%d B%d KVH%d S%d hd%d layer%d pos%d", c.L, c.B, c.KVH,
                      c.S, c.hd, c.layer, c.pos);
        const size_t n = (size_t)c.L * c.B * c.KVH * c.S * c.hd;
        std::vector<uint16_t> kc(n, 0x1234), vc(n, 0x4321);
        const auto kn = rand_vec_with_specials((size_t)c.B * c.KVH * c.hd);
        const auto vn = rand_vec((size_t)c.B * c.KVH * c.hd);
        kvs_sim_static_cache_append_f16(c.B * c.KVH, 1, 1, 128, 1, 1, kc.data(), vc.data(),
                                        kn.data(), vn.data(), c.layer, c.pos, c.B, c.KVH, c.S,
                                        c.hd);
        std::vector<uint16_t> kw(n, 0x1234), vw(n, 0x4321);
        for (int b = 0; b < c.B; ++b)
            for (int h = 0; h < c.KVH; ++h)
                for (int d = 0; d < c.hd; ++d) {
                    const size_t dst =
                        ((((size_t)c.layer * c.B + b) * c.KVH + h) * c.S + c.pos) * c.hd + d;
                    const size_t src = ((size_t)b * c.KVH + h) * c.hd + d;
                    kw[dst] = f32_to_f16_bits(kn[src]);
                    vw[dst] = f32_to_f16_bits(vn[src]);
                }
        long diff = 0;
        for (size_t x = 0; x < n; ++x) diff += (kc[x] != kw[x]) + (vc[x] != vw[x]);
        Stat& s = stat("static_cache_append");
        s.checked += 2 * (long)n;
        if (diff) {
            std::printf("  MISMATCH static_cache_append %s: %ld elements differ\n", tag, diff);
            s.bad += diff;
            s.max_err = kInf;
        }
    }
}

void test_paged_append() {
    struct C { int num_blocks, KVH, bs, hd, tokens; };
    const C cases[] = {{7, 2, 3, 5, 6}, {4, 1, 1, 1, 3}, {5, 3, 16, 64, 20}, {2, 2, 40, 9, 5}};
    for (const auto& c : cases) {
        char tag[96];
        std::snprintf(tag, sizeof tag, "N%d KVH%d bs%d hd%d tokens%d", c.num_blocks, c.KVH, c.bs,
                      c.hd, c.tokens);
        const size_t n = (size_t)c.num_blocks * c.KVH * c.bs * c.hd;
        std::vector<uint16_t> kp(n, 0x1111), vp(n, 0x2222);
        const auto k = rand_vec_with_specials((size_t)c.tokens * c.KVH * c.hd);
        const auto v = rand_vec((size_t)c.tokens * c.KVH * c.hd);
        // distinct random slots, every third token padding (-1)
        std::vector<int> all(c.num_blocks * c.bs);
        for (int i = 0; i < (int)all.size(); ++i) all[i] = i;
        std::shuffle(all.begin(), all.end(), rng);
        std::vector<int> slots(c.tokens);
        for (int t = 0; t < c.tokens; ++t) slots[t] = (t % 3 == 2) ? -1 : all[t];
        kvs_sim_paged_append_f16(c.tokens, 1, 1, 128, 1, 1, kp.data(), vp.data(), k.data(),
                                 v.data(), slots.data(), c.tokens, c.KVH, c.bs, c.hd);
        std::vector<uint16_t> kw(n, 0x1111), vw(n, 0x2222);
        for (int t = 0; t < c.tokens; ++t) {
            if (slots[t] < 0) continue;
            const int blk = slots[t] / c.bs, off = slots[t] % c.bs;
            for (int h = 0; h < c.KVH; ++h)
                for (int d = 0; d < c.hd; ++d) {
                    const size_t dst = (((size_t)blk * c.KVH + h) * c.bs + off) * c.hd + d;
                    const size_t src = ((size_t)t * c.KVH + h) * c.hd + d;
                    kw[dst] = f32_to_f16_bits(k[src]);
                    vw[dst] = f32_to_f16_bits(v[src]);
                }
        }
        long diff = 0;
        for (size_t x = 0; x < n; ++x) diff += (kp[x] != kw[x]) + (vp[x] != vw[x]);
        Stat& s = stat("paged_append");
        s.checked += 2 * (long)n;
        if (diff) {
            std::printf("  MISMATCH paged_append %s: %ld elements differ\n", tag, diff);
            s.bad += diff;
            s.max_err = kInf;
        }
    }
}

// ---------------------------------------------------------------------------------------
// flash_attention.cu: the tiled forward pass against a double-precision reference, with
// ragged tiles, Br = 1, head_dim 1 and 3, GQA, none/causal/window masks
// ---------------------------------------------------------------------------------------
void test_flash_attention() {
    struct C { int H, KVH, T, hd, mask, W, S, br, bc; };
    const C cases[] = {{1, 1, 1, 1, 0, 0, 0, 1, 1},    {2, 1, 7, 3, 1, 0, 0, 2, 3},
                       {4, 2, 37, 16, 1, 0, 0, 8, 5},  {2, 2, 33, 1, 0, 0, 0, 1, 16},
                       {3, 3, 40, 8, 2, 5, 2, 16, 8},  {2, 1, 64, 32, 1, 0, 0, 16, 16},
                       {1, 1, 70, 12, 2, 100, 3, 32, 32}};
    for (const auto& c : cases) {
        char tag[160];
        std::snprintf(tag, sizeof tag, "H%d KVH%d T%d hd%d mask%d W%d S%d Br%d Bc%d", c.H, c.KVH,
                      c.T, c.hd, c.mask, c.W, c.S, c.br, c.bc);
        const int T = c.T, hd = c.hd, grp = c.H / c.KVH;
        const float scale = 1.0f / std::sqrt((float)hd);
        const auto q = rand_vec((size_t)c.H * T * hd);
        const auto k = rand_vec((size_t)c.KVH * T * hd);
        const auto v = rand_vec((size_t)c.KVH * T * hd);
        std::vector<float> out((size_t)c.H * T * hd, kNaNf);
        kvs_sim_flash_attention_f32(cdiv(T, c.br), c.H, 1, 128, 1, 1, q.data(), k.data(), v.data(),
                                    out.data(), c.H, c.KVH, T, hd, scale, c.mask, c.W, c.S, c.br,
                                    c.bc);
        for (int h = 0; h < c.H; ++h)
            for (int i = 0; i < T; ++i) {
                const int kvh = h / grp;
                std::vector<double> s(T, -kInf);
                double mx = -kInf;
                for (int j = 0; j < T; ++j) {
                    if (!visible(i, j, c.mask, c.W, c.S)) continue;
                    double dot = 0;
                    for (int d = 0; d < hd; ++d)
                        dot += (double)q[((size_t)h * T + i) * hd + d] * k[((size_t)kvh * T + j) * hd + d];
                    s[j] = dot * scale;
                    mx = std::max(mx, s[j]);
                }
                double sum = 0;
                for (int j = 0; j < T; ++j) sum += (s[j] == -kInf) ? 0.0 : std::exp(s[j] - mx);
                for (int d = 0; d < hd; ++d) {
                    double o = 0;
                    for (int j = 0; j < T; ++j)
                        if (s[j] != -kInf) o += std::exp(s[j] - mx) / sum * v[((size_t)kvh * T + j) * hd + d];
                    check("flash_attention", tag, out[((size_t)h * T + i) * hd + d], o, 2e-5, 2e-4);
                }
            }
    }
}

void test_copy_blocks() {
    struct C { int num_blocks, KVH, bs, hd; std::vector<int> pairs; };
    const C cases[] = {{6, 2, 3, 5, {4, 1, 0, 5}}, {3, 1, 1, 1, {2, 0}}, {9, 2, 16, 64, {8, 0, 3, 7, 1, 2}}};
    for (const auto& c : cases) {
        char tag[96];
        std::snprintf(tag, sizeof tag, "N%d KVH%d bs%d hd%d pairs%zu", c.num_blocks, c.KVH, c.bs, c.hd,
                      c.pairs.size() / 2);
        const int per = c.KVH * c.bs * c.hd;
        const size_t n = (size_t)c.num_blocks * per;
        std::vector<uint16_t> kp(n), vp(n);
        for (size_t x = 0; x < n; ++x) {
            kp[x] = f32_to_f16_bits(rand_vec(1)[0]);
            vp[x] = (uint16_t)(x * 2654435761u);
        }
        std::vector<uint16_t> kw = kp, vw = vp;
        const int pairs = (int)c.pairs.size() / 2;
        for (int p = 0; p < pairs; ++p)
            for (int e = 0; e < per; ++e) {
                kw[(size_t)c.pairs[2 * p + 1] * per + e] = kp[(size_t)c.pairs[2 * p] * per + e];
                vw[(size_t)c.pairs[2 * p + 1] * per + e] = vp[(size_t)c.pairs[2 * p] * per + e];
            }
        kvs_sim_copy_blocks_f16(pairs, 1, 1, 128, 1, 1, kp.data(), vp.data(), c.pairs.data(), pairs, per);
        long diff = 0;
        for (size_t x = 0; x < n; ++x) diff += (kp[x] != kw[x]) + (vp[x] != vw[x]);
        Stat& s = stat("copy_blocks");
        s.checked += 2 * (long)n;
        if (diff) {
            std::printf("  MISMATCH copy_blocks %s: %ld elements differ\n", tag, diff);
            s.bad += diff;
            s.max_err = kInf;
        }
    }
}

// ---------------------------------------------------------------------------------------
// rope.cu: rotary embeddings, "rotate half", a position per row, angles from a host table
// ---------------------------------------------------------------------------------------
void test_rope() {
    struct C { int n, H, hd, P; unsigned block; };
    const C cases[] = {{1, 1, 2, 1, 128}, {5, 3, 6, 16, 128}, {9, 5, 128, 4096, 32}, {3, 2, 256, 40, 128}};
    for (const auto& c : cases) {
        const int half = c.hd / 2;
        std::vector<float> x = rand_vec((size_t)c.n * c.H * c.hd, -2.0f, 2.0f), out(x.size(), kNaNf);
        std::vector<float> table((size_t)c.P * c.hd);
        for (int p = 0; p < c.P; ++p)
            for (int i = 0; i < half; ++i) {
                const double a = p / std::pow(10000.0, 2.0 * i / c.hd);
                table[(size_t)p * c.hd + i] = (float)std::cos(a);
                table[(size_t)p * c.hd + half + i] = (float)std::sin(a);
            }
        std::vector<uint32_t> pos(c.n);
        for (int r = 0; r < c.n; ++r) pos[r] = r == 0 ? (uint32_t)(c.P - 1) : (uint32_t)(rng() % c.P);
        kvs_sim_rope_f32(c.n, 1, 1, c.block, 1, 1, x.data(), pos.data(), table.data(), out.data(), c.n,
                         c.H, c.hd);
        for (int r = 0; r < c.n; ++r)
            for (int h = 0; h < c.H; ++h)
                for (int d = 0; d < half; ++d) {
                    const size_t b = ((size_t)r * c.H + h) * c.hd;
                    const double co = table[(size_t)pos[r] * c.hd + d], si = table[(size_t)pos[r] * c.hd + half + d];
                    const double x1 = x[b + d], x2 = x[b + d + half];
                    char where[96];
                    std::snprintf(where, sizeof where, "N%d H%d hd%d row %d head %d d %d", c.n, c.H, c.hd, r, h, d);
                    check("rope", where, out[b + d], x1 * co - x2 * si);
                    check("rope", where, out[b + d + half], x2 * co + x1 * si);
                }
    }
}

// ---------------------------------------------------------------------------------------
// stream_attention.cu: decode over a paged cache with keys turned on read at host-chosen
// positions (StreamingLLM); key_pos < 0 masks a token. Checked in double, weights included.
// ---------------------------------------------------------------------------------------
void test_stream_decode() {
    struct C { int H, KVH, hd, bs, P; std::vector<int> ctx; unsigned block; };
    const C cases[] = {
        {4, 2, 32, 16, 300, {70, 3}, 32},   // the lesson's model: GQA 2, hd 32
        {1, 1, 2, 1, 8, {5}, 32},           // hd 2, block size 1
        {6, 3, 64, 3, 1024, {300, 0, 9}, 64},  // an empty request, 64 threads
        {8, 1, 16, 8, 64, {33}, 32},        // MQA
    };
    for (const auto& c : cases) {
        const int R = (int)c.ctx.size(), G = c.H / c.KVH, half = c.hd / 2;
        int max_blocks = 1, total = 2;
        for (int x : c.ctx) {
            max_blocks = std::max(max_blocks, (x + c.bs - 1) / c.bs);
            total += (x + c.bs - 1) / c.bs;
        }
        std::vector<int> ids(total);
        for (int i = 0; i < total; ++i) ids[i] = i;
        std::shuffle(ids.begin(), ids.end(), rng);
        std::vector<int> table((size_t)R * max_blocks, -1);
        int next = 0;
        for (int r = 0; r < R; ++r)
            for (int b = 0; b < (c.ctx[r] + c.bs - 1) / c.bs; ++b) table[(size_t)r * max_blocks + b] = ids[next++];
        const int T = max_blocks * c.bs;
        const size_t pool_n = (size_t)total * c.KVH * c.bs * c.hd;
        std::vector<uint16_t> kp(pool_n, 0x7e00), vp(pool_n, 0x7e00);  // NaN: never read
        auto row_at = [&](int r, int t, int h) {
            return (((size_t)table[(size_t)r * max_blocks + t / c.bs] * c.KVH + h) * c.bs + t % c.bs) * c.hd;
        };
        std::vector<int> key_pos((size_t)R * T, -1), q_pos(R);
        for (int r = 0; r < R; ++r) {
            q_pos[r] = (int)(rng() % c.P);
            for (int t = 0; t < c.ctx[r]; ++t) {
                if (rng() % 5 != 0) key_pos[(size_t)r * T + t] = (int)(rng() % c.P);
                for (int h = 0; h < c.KVH; ++h)
                    for (int d = 0; d < c.hd; ++d) {
                        kp[row_at(r, t, h) + d] = f32_to_f16_bits(urand(-2.0f, 2.0f));
                        vp[row_at(r, t, h) + d] = f32_to_f16_bits(urand());
                    }
            }
        }
        std::vector<float> cs((size_t)c.P * c.hd);
        for (int p = 0; p < c.P; ++p)
            for (int i = 0; i < half; ++i) {
                const double a = p / std::pow(10000.0, 2.0 * i / c.hd);
                cs[(size_t)p * c.hd + i] = (float)std::cos(a);
                cs[(size_t)p * c.hd + half + i] = (float)std::sin(a);
            }
        const auto q = rand_vec((size_t)R * c.H * c.hd, -2.0f, 2.0f);
        std::vector<float> out((size_t)R * c.H * c.hd, kNaNf), probs((size_t)R * c.H * T, kNaNf);
        const float scale = 1.0f / std::sqrt((float)c.hd);
        kvs_sim_stream_decode_f16(c.H, R, 1, c.block, 1, 1, out.data(), probs.data(), q.data(), q_pos.data(),
                                  kp.data(), vp.data(), table.data(), c.ctx.data(), key_pos.data(), cs.data(),
                                  max_blocks, c.H, c.KVH, c.bs, c.hd, scale);
        auto rot = [&](std::vector<double> x, int pos) {
            std::vector<double> y(c.hd);
            for (int d = 0; d < half; ++d) {
                const double co = cs[(size_t)pos * c.hd + d], si = cs[(size_t)pos * c.hd + half + d];
                y[d] = x[d] * co - x[d + half] * si;
                y[d + half] = x[d + half] * co + x[d] * si;
            }
            return y;
        };
        for (int r = 0; r < R; ++r)
            for (int h = 0; h < c.H; ++h) {
                const int kvh = h / G, n = c.ctx[r];
                std::vector<double> qv(c.hd);
                for (int d = 0; d < c.hd; ++d) qv[d] = q[((size_t)r * c.H + h) * c.hd + d];
                qv = rot(qv, q_pos[r]);
                std::vector<double> s(n, -kInf);
                double m = -kInf;
                for (int t = 0; t < n; ++t) {
                    const int kpos = key_pos[(size_t)r * T + t];
                    if (kpos < 0) continue;
                    std::vector<double> kv(c.hd);
                    for (int d = 0; d < c.hd; ++d) kv[d] = f16_bits_to_double(kp[row_at(r, t, kvh) + d]);
                    kv = rot(kv, kpos);
                    double dot = 0;
                    for (int d = 0; d < c.hd; ++d) dot += qv[d] * kv[d];
                    s[t] = dot * scale;
                    m = std::max(m, s[t]);
                }
                double l = 0;
                for (int t = 0; t < n; ++t) l += s[t] == -kInf ? 0.0 : std::exp(s[t] - m);
                std::vector<double> acc(c.hd, 0.0);
                char w[128];
                std::snprintf(w, sizeof w, "H%d KVH%d hd%d bs%d r%d h%d", c.H, c.KVH, c.hd, c.bs, r, h);
                for (int t = 0; t < T; ++t) {
                    const double p = (t < n && s[t] != -kInf && l > 0) ? std::exp(s[t] - m) / l : 0.0;
                    check("stream_decode weights", w, probs[((size_t)r * c.H + h) * T + t], p);
                    if (p > 0)
                        for (int d = 0; d < c.hd; ++d) acc[d] += p * f16_bits_to_double(vp[row_at(r, t, kvh) + d]);
                }
                for (int d = 0; d < c.hd; ++d) check("stream_decode", w, out[((size_t)r * c.H + h) * c.hd + d], acc[d]);
            }
    }
}

// ---------------------------------------------------------------------------------------
// score_attention.cu: decode over a paged cache that returns the weights and their sums per
// KV head over its query group, with a validity mask per (KV head, slot). Checked in double.
// ---------------------------------------------------------------------------------------
void test_score_decode() {
    struct C { int H, KVH, hd, bs; std::vector<int> ctx; unsigned block; };
    const C cases[] = {
        {4, 2, 32, 16, {70, 3}, 32},       // the lesson's model: GQA 2, hd 32
        {1, 1, 2, 1, {5}, 32},             // hd 2, block size 1
        {6, 3, 64, 3, {300, 0, 9}, 64},    // an empty request, 64 threads
        {8, 1, 16, 8, {33}, 32},           // MQA: one group of 8
    };
    for (const auto& c : cases) {
        const int R = (int)c.ctx.size(), G = c.H / c.KVH;
        int max_blocks = 1, total = 2;
        for (int x : c.ctx) {
            max_blocks = std::max(max_blocks, (x + c.bs - 1) / c.bs);
            total += (x + c.bs - 1) / c.bs;
        }
        std::vector<int> ids(total);
        for (int i = 0; i < total; ++i) ids[i] = i;
        std::shuffle(ids.begin(), ids.end(), rng);
        std::vector<int> table((size_t)R * max_blocks, -1);
        int next = 0;
        for (int r = 0; r < R; ++r)
            for (int b = 0; b < (c.ctx[r] + c.bs - 1) / c.bs; ++b) table[(size_t)r * max_blocks + b] = ids[next++];
        const int T = max_blocks * c.bs;
        const size_t pool_n = (size_t)total * c.KVH * c.bs * c.hd;
        std::vector<uint16_t> kp(pool_n, 0x7e00), vp(pool_n, 0x7e00);  // NaN: never read
        std::vector<int> valid((size_t)total * c.KVH * c.bs);
        for (auto& v : valid) v = rng() % 4 != 0;
        auto slot_at = [&](int r, int t, int h) {
            return ((size_t)table[(size_t)r * max_blocks + t / c.bs] * c.KVH + h) * c.bs + t % c.bs;
        };
        for (int r = 0; r < R; ++r)
            for (int t = 0; t < c.ctx[r]; ++t)
                for (int h = 0; h < c.KVH; ++h)
                    for (int d = 0; d < c.hd; ++d) {
                        kp[slot_at(r, t, h) * c.hd + d] = f32_to_f16_bits(urand(-2.0f, 2.0f));
                        vp[slot_at(r, t, h) * c.hd + d] = f32_to_f16_bits(urand());
                    }
        const auto q = rand_vec((size_t)R * c.H * c.hd, -2.0f, 2.0f);
        std::vector<float> out((size_t)R * c.H * c.hd, kNaNf), probs((size_t)R * c.H * T, kNaNf),
            scores((size_t)R * c.KVH * T, kNaNf);
        const float scale = 1.0f / std::sqrt((float)c.hd);
        kvs_sim_score_decode_f16(c.KVH, R, 1, c.block, 1, 1, out.data(), probs.data(), scores.data(), q.data(),
                                 kp.data(), vp.data(), table.data(), c.ctx.data(), valid.data(), max_blocks, c.H,
                                 c.KVH, c.bs, c.hd, scale);
        for (int r = 0; r < R; ++r) {
            std::vector<double> want_scores((size_t)c.KVH * T, 0.0);
            for (int h = 0; h < c.H; ++h) {
                const int kvh = h / G, n = c.ctx[r];
                std::vector<double> s(n, -kInf);
                double m = -kInf;
                for (int t = 0; t < n; ++t) {
                    if (!valid[slot_at(r, t, kvh)]) continue;
                    double dot = 0;
                    for (int d = 0; d < c.hd; ++d)
                        dot += (double)q[((size_t)r * c.H + h) * c.hd + d] *
                               f16_bits_to_double(kp[slot_at(r, t, kvh) * c.hd + d]);
                    s[t] = dot * scale;
                    m = std::max(m, s[t]);
                }
                double l = 0;
                for (int t = 0; t < n; ++t) l += s[t] == -kInf ? 0.0 : std::exp(s[t] - m);
                std::vector<double> acc(c.hd, 0.0);
                char w[128];
                std::snprintf(w, sizeof w, "H%d KVH%d hd%d bs%d r%d h%d", c.H, c.KVH, c.hd, c.bs, r, h);
                for (int t = 0; t < T; ++t) {
                    const double p = (t < n && s[t] != -kInf && l > 0) ? std::exp(s[t] - m) / l : 0.0;
                    check("score_decode weights", w, probs[((size_t)r * c.H + h) * T + t], p);
                    want_scores[(size_t)kvh * T + t] += p;
                    if (p > 0)
                        for (int d = 0; d < c.hd; ++d) acc[d] += p * f16_bits_to_double(vp[slot_at(r, t, kvh) * c.hd + d]);
                }
                for (int d = 0; d < c.hd; ++d) check("score_decode", w, out[((size_t)r * c.H + h) * c.hd + d], acc[d]);
            }
            for (int k = 0; k < c.KVH; ++k)
                for (int t = 0; t < T; ++t) {
                    char w[96];
                    std::snprintf(w, sizeof w, "H%d KVH%d r%d kvh%d t%d", c.H, c.KVH, r, k, t);
                    check("score_decode scores", w, scores[((size_t)r * c.KVH + k) * T + t], want_scores[(size_t)k * T + t]);
                }
        }
    }
}

// ---------------------------------------------------------------------------------------
// mask_table.cu: the kernels' shared mask predicate (common.cuh) against this file's visible()
// ---------------------------------------------------------------------------------------
void test_mask_table() {
    struct C { int mask, W, S; };
    const C cases[] = {{0, 0, 0}, {1, 0, 0}, {2, 1, 0}, {2, 3, 0}, {2, 4, 2}, {2, 40, 3}, {2, 2, 50}};
    const int rows = 37, cols = 41;
    for (const auto& c : cases) {
        std::vector<int> out((size_t)rows * cols, -1);
        kvs_sim_mask_table_i32(cdiv(cols, 16), cdiv(rows, 16), 1, 16, 16, 1, out.data(), rows, cols, c.mask,
                               c.W, c.S);
        for (int i = 0; i < rows; ++i)
            for (int j = 0; j < cols; ++j) {
                char where[64];
                std::snprintf(where, sizeof where, "mask %d W%d S%d (%d, %d)", c.mask, c.W, c.S, i, j);
                check("mask_table", where, out[(size_t)i * cols + j], visible(i, j, c.mask, c.W, c.S) ? 1 : 0);
            }
    }
}

// ---------------------------------------------------------------------------------------
// bandwidth.cu: the read-only stream (every word read once; partial sums add up)
// ---------------------------------------------------------------------------------------
void test_read_stream() {
    for (long long words : {1LL, 255LL, 256LL, 257LL, 5000LL}) {
        std::vector<uint32_t> data((size_t)words * 4);
        uint32_t want = 0;
        for (size_t i = 0; i < data.size(); ++i) {
            data[i] = (uint32_t)(i * 2654435761u);
            want += data[i];
        }
        const unsigned grid = (unsigned)std::min<long long>((words + 255) / 256, 4096);
        std::vector<uint32_t> partial(grid, 0);
        kvs_sim_read_stream_u32(grid, 1, 1, 256, 1, 1, reinterpret_cast<const uint4*>(data.data()),
                                words, partial.data());
        uint32_t got = 0;
        for (uint32_t p : partial) got += p;
        Stat& s = stat("read_stream");
        s.checked += 1;
        if (got != want) {
            std::printf("  MISMATCH read_stream words %lld: %u != %u\n", words, got, want);
            s.bad += 1;
            s.max_err = kInf;
        }
    }
}

// ---------------------------------------------------------------------------------------
// paged_attention.cu: decode (split context) + reduce
// ---------------------------------------------------------------------------------------
const int kPartition = 512;

struct PagedCase {
    int H, KVH, hd, bs;
    std::vector<int> ctx;
};

void test_paged_attention(const PagedCase& c) {
    const int R = (int)c.ctx.size(), H = c.H, KVH = c.KVH, hd = c.hd, bs = c.bs;
    const int G = H / KVH;
    const float scale = 1.0f / std::sqrt((float)hd);
    int max_ctx = 0;
    for (int x : c.ctx) max_ctx = std::max(max_ctx, x);
    const int P = std::max(1, (max_ctx + kPartition - 1) / kPartition);
    char tag[128];
    std::snprintf(tag, sizeof tag, "R%d H%d KVH%d hd%d bs%d max_ctx%d P%d", R, H, KVH, hd, bs,
                  max_ctx, P);

    // Allocate physical blocks in a shuffled order, plus a few spare blocks.
    int max_blocks = 1, total_blocks = 3;
    for (int x : c.ctx) {
        const int nb = (x + bs - 1) / bs;
        max_blocks = std::max(max_blocks, nb);
        total_blocks += nb;
    }
    std::vector<int> ids(total_blocks);
    for (int i = 0; i < total_blocks; ++i) ids[i] = i;
    std::shuffle(ids.begin(), ids.end(), rng);
    std::vector<int> table((size_t)R * max_blocks, -1);
    int next = 0;
    for (int r = 0; r < R; ++r)
        for (int b = 0; b < (c.ctx[r] + bs - 1) / bs; ++b) table[(size_t)r * max_blocks + b] = ids[next++];

    // Pool: NaN everywhere (a row the kernel must never read), then the real rows.
    const size_t pool_n = (size_t)total_blocks * KVH * bs * hd;
    std::vector<uint16_t> kp(pool_n, 0x7e00), vp(pool_n, 0x7e00);
    auto row_at = [&](int r, int t, int h) {
        const int phys = table[(size_t)r * max_blocks + t / bs];
        return (((size_t)phys * KVH + h) * bs + t % bs) * hd;
    };
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < c.ctx[r]; ++t)
            for (int h = 0; h < KVH; ++h)
                for (int d = 0; d < hd; ++d) {
                    kp[row_at(r, t, h) + d] = f32_to_f16_bits(urand(-2.0f, 2.0f));
                    vp[row_at(r, t, h) + d] = f32_to_f16_bits(urand());
                }
    const auto q = rand_vec((size_t)R * H * hd, -2.0f, 2.0f);

    std::vector<float> tmp_out((size_t)R * H * P * hd, kNaNf), tmp_max((size_t)R * H * P, kNaNf),
        tmp_sum((size_t)R * H * P, kNaNf), out((size_t)R * H * hd, kNaNf);
    kvs_sim_paged_attention_decode_f16(KVH, R, P, 128, 1, 1, tmp_out.data(), tmp_max.data(),
                                       tmp_sum.data(), q.data(), kp.data(), vp.data(),
                                       table.data(), c.ctx.data(), max_blocks, P, H, KVH, bs, hd,
                                       scale);
    kvs_sim_paged_attention_reduce_f32(H, R, 1, 128, 1, 1, out.data(), tmp_out.data(),
                                       tmp_max.data(), tmp_sum.data(), c.ctx.data(), P, H, hd);

    for (int r = 0; r < R; ++r)
        for (int h = 0; h < H; ++h) {
            const int kvh = h / G;
            const int n = c.ctx[r];
            std::vector<double> s(n);
            for (int t = 0; t < n; ++t) {
                double dot = 0;
                for (int d = 0; d < hd; ++d)
                    dot += (double)q[((size_t)r * H + h) * hd + d] *
                           f16_bits_to_double(kp[row_at(r, t, kvh) + d]);
                s[t] = dot * scale;
            }
            // per-partition partial results
            for (int p = 0; p < P; ++p) {
                const int t0 = p * kPartition, t1 = std::min(n, t0 + kPartition);
                double m = -kInf, l = 0;
                for (int t = t0; t < t1; ++t) m = std::max(m, s[t]);
                std::vector<double> acc(hd, 0.0);
                for (int t = t0; t < t1; ++t) {
                    const double e = std::exp(s[t] - m);
                    l += e;
                    for (int d = 0; d < hd; ++d) acc[d] += e * f16_bits_to_double(vp[row_at(r, t, kvh) + d]);
                }
                const size_t o = ((size_t)r * H + h) * P + p;
                char w[256];
                std::snprintf(w, sizeof w, "%s r%d h%d p%d", tag, r, h, p);
                check("paged_decode_partial", w, tmp_max[o], m, 1e-5, 1e-5);
                check("paged_decode_partial", w, tmp_sum[o], l, 1e-4, 1e-4);
                for (int d = 0; d < hd; ++d)
                    check("paged_decode_partial", w, tmp_out[o * hd + d], acc[d], 1e-4, 1e-4);
            }
            // final output
            double m = -kInf, l = 0;
            for (int t = 0; t < n; ++t) m = std::max(m, s[t]);
            std::vector<double> acc(hd, 0.0);
            for (int t = 0; t < n; ++t) {
                const double e = std::exp(s[t] - m);
                l += e;
                for (int d = 0; d < hd; ++d) acc[d] += e * f16_bits_to_double(vp[row_at(r, t, kvh) + d]);
            }
            char w[256];
            std::snprintf(w, sizeof w, "%s r%d h%d", tag, r, h);
            for (int d = 0; d < hd; ++d)
                check("paged_attention", w, out[((size_t)r * H + h) * hd + d], l > 0 ? acc[d] / l : 0.0);
        }
}


// paged_prefill_f16 + reduce: chunks of C_r new tokens (already in the cache) attend causally to
// their request's cache through its block table; every query row is compared with double attention
// over tokens [0, ctx_r - C_r + j]. With one token a chunk, the rows are compared bit for bit with
// paged_attention_decode_f16's output on the same request (one kernel body serves both).
struct PrefillCase {
    int H, KVH, hd, bs;
    std::vector<int> ctx, chunk;  // tokens cached after the chunk, and the chunk's length
};

void test_paged_prefill(const PrefillCase& c) {
    const int R = (int)c.ctx.size(), H = c.H, KVH = c.KVH, hd = c.hd, bs = c.bs;
    const int G = H / KVH;
    const float scale = 1.0f / std::sqrt((float)hd);
    int max_ctx = 0, Q = 0;
    for (int x : c.ctx) max_ctx = std::max(max_ctx, x);
    for (int x : c.chunk) Q += x;
    const int P = std::max(1, (max_ctx + kPartition - 1) / kPartition);
    char tag[128];
    std::snprintf(tag, sizeof tag, "R%d Q%d H%d KVH%d hd%d bs%d P%d", R, Q, H, KVH, hd, bs, P);
    int max_blocks = 1, total_blocks = 2;
    for (int x : c.ctx) {
        max_blocks = std::max(max_blocks, (x + bs - 1) / bs);
        total_blocks += (x + bs - 1) / bs;
    }
    std::vector<int> ids(total_blocks);
    for (int i = 0; i < total_blocks; ++i) ids[i] = i;
    std::shuffle(ids.begin(), ids.end(), rng);
    std::vector<int> table((size_t)R * max_blocks, -1);
    int next = 0;
    for (int r = 0; r < R; ++r)
        for (int b = 0; b < (c.ctx[r] + bs - 1) / bs; ++b) table[(size_t)r * max_blocks + b] = ids[next++];
    const size_t pool_n = (size_t)total_blocks * KVH * bs * hd;
    std::vector<uint16_t> kp(pool_n, 0x7e00), vp(pool_n, 0x7e00);
    auto row_at = [&](int r, int t, int h) {
        const int phys = table[(size_t)r * max_blocks + t / bs];
        return (((size_t)phys * KVH + h) * bs + t % bs) * hd;
    };
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < c.ctx[r]; ++t)
            for (int h = 0; h < KVH; ++h)
                for (int d = 0; d < hd; ++d) {
                    kp[row_at(r, t, h) + d] = f32_to_f16_bits(urand(-2.0f, 2.0f));
                    vp[row_at(r, t, h) + d] = f32_to_f16_bits(urand());
                }
    std::vector<int> row_req, row_ctx;
    for (int r = 0; r < R; ++r)
        for (int j = 0; j < c.chunk[r]; ++j) {
            row_req.push_back(r);
            row_ctx.push_back(c.ctx[r] - c.chunk[r] + j + 1);
        }
    const auto q = rand_vec((size_t)Q * H * hd, -2.0f, 2.0f);
    std::vector<float> tmp_out((size_t)Q * H * P * hd, kNaNf), tmp_max((size_t)Q * H * P, kNaNf),
        tmp_sum((size_t)Q * H * P, kNaNf), out((size_t)Q * H * hd, kNaNf);
    kvs_sim_paged_prefill_f16(KVH, Q, P, 128, 1, 1, tmp_out.data(), tmp_max.data(), tmp_sum.data(),
                              q.data(), kp.data(), vp.data(), table.data(), row_req.data(),
                              row_ctx.data(), Q, max_blocks, P, H, KVH, bs, hd, scale);
    kvs_sim_paged_attention_reduce_f32(H, Q, 1, 128, 1, 1, out.data(), tmp_out.data(), tmp_max.data(),
                                       tmp_sum.data(), row_ctx.data(), P, H, hd);
    for (int i = 0; i < Q; ++i)
        for (int h = 0; h < H; ++h) {
            const int r = row_req[i], kvh = h / G, n = row_ctx[i];
            std::vector<double> s(n);
            double m = -kInf, l = 0;
            for (int t = 0; t < n; ++t) {
                double dot = 0;
                for (int d = 0; d < hd; ++d)
                    dot += (double)q[((size_t)i * H + h) * hd + d] * f16_bits_to_double(kp[row_at(r, t, kvh) + d]);
                s[t] = dot * scale;
                m = std::max(m, s[t]);
            }
            std::vector<double> acc(hd, 0.0);
            for (int t = 0; t < n; ++t) {
                const double e = std::exp(s[t] - m);
                l += e;
                for (int d = 0; d < hd; ++d) acc[d] += e * f16_bits_to_double(vp[row_at(r, t, kvh) + d]);
            }
            char w[256];
            std::snprintf(w, sizeof w, "%s row%d h%d", tag, i, h);
            for (int d = 0; d < hd; ++d)
                check("paged_prefill", w, out[((size_t)i * H + h) * hd + d], l > 0 ? acc[d] / l : 0.0);
        }
    // One token a chunk: the same bits as the decode entry on the same requests.
    bool single = true;
    for (int x : c.chunk) single = single && x == 1;
    if (single) {
        std::vector<float> d_out((size_t)R * H * P * hd, kNaNf), d_max((size_t)R * H * P, kNaNf),
            d_sum((size_t)R * H * P, kNaNf), dec((size_t)R * H * hd, kNaNf);
        kvs_sim_paged_attention_decode_f16(KVH, R, P, 128, 1, 1, d_out.data(), d_max.data(), d_sum.data(),
                                           q.data(), kp.data(), vp.data(), table.data(), c.ctx.data(),
                                           max_blocks, P, H, KVH, bs, hd, scale);
        kvs_sim_paged_attention_reduce_f32(H, R, 1, 128, 1, 1, dec.data(), d_out.data(), d_max.data(),
                                           d_sum.data(), c.ctx.data(), P, H, hd);
        Stat& st = stat("prefill_eq_decode");
        st.checked += (long)dec.size();
        if (std::memcmp(dec.data(), out.data(), dec.size() * sizeof(float)) != 0) {
            std::printf("  MISMATCH prefill_eq_decode %s: C = 1 rows differ from decode\n", tag);
            st.bad += 1;
            st.max_err = kInf;
        }
    }
}

}  // namespace


// ---- quant_kv.cu: the quantising append and the dequantising decode ---------------------
// Independent of the kernel's bit tricks: FP8 values from the formula in double, the code chosen by
// searching all 256 codes for the nearest (ties to the even code), INT8's scale from __float2half
// (round to nearest) stepped up to the next f16 when it fell below absmax / 127.
double fp8_value(unsigned c, int fmt) {
    const int mb = fmt == 2 ? 3 : 2, eb = fmt == 2 ? 4 : 5, bias = fmt == 2 ? 7 : 15;
    const unsigned e = (c >> mb) & ((1u << eb) - 1u), m = c & ((1u << mb) - 1u);
    const double sign = (c & 0x80u) ? -1.0 : 1.0;
    if (e == (1u << eb) - 1u) {
        if (fmt == 3) return m == 0 ? sign * kInf : std::nan("");
        if (m == (1u << mb) - 1u) return std::nan("");
    }
    if (e == 0) return sign * std::ldexp((double)m, 1 - bias - mb);
    return sign * std::ldexp((double)((1u << mb) + m), (int)e - bias - mb);
}
unsigned fp8_nearest(float x, int fmt) {
    if (std::isnan(x)) return 0x7Fu;
    const double maxv = fmt == 2 ? 448.0 : 57344.0;
    const unsigned maxc = fmt == 2 ? 0x7Eu : 0x7Bu;
    if (x >= maxv) return maxc;
    if (x <= -maxv) return 0x80u | maxc;
    unsigned best = 0;
    double bd = kInf;
    for (unsigned c = 0; c < 256; ++c) {
        const double v = fp8_value(c, fmt);
        if (!std::isfinite(v) || (v == 0.0 && ((c & 0x80u) != 0) != std::signbit(x))) continue;
        const double d = std::fabs(v - (double)x);
        if (d < bd || (d == bd && (c & 1u) == 0 && (best & 1u) == 1)) { best = c; bd = d; }
    }
    return best;
}
float int8_scale_ref(const float* row, int n) {
    float amax = 0.0f;
    for (int d = 0; d < n; ++d) amax = std::max(amax, std::fabs(row[d]));
    const float s = amax / 127.0f;
    if (s == 0.0f) return 0.0f;
    uint16_t h = f32_to_f16_bits(s);
    if (f16_bits_to_double(h) < (double)s) ++h;
    return (float)f16_bits_to_double(h);
}

void test_quant_kv() {
    const int N = 5, KVH = 2, B = 3, hd = 7;  // odd hd
    const std::vector<int> slots = {13, 0, -1, 5, 9, 14, 3};
    const int T = (int)slots.size();
    for (int fmt = 1; fmt <= 3; ++fmt) {
        const int mode = fmt == 1 ? 0 : 1;  // INT8 per row; FP8 per KV head
        const size_t pool_n = (size_t)N * KVH * B * hd, rows = (size_t)N * KVH * B;
        std::vector<uint8_t> kp(pool_n, 0), vp(pool_n, 0);
        std::vector<float> ks(fmt == 1 ? rows : KVH, 0.0f), vs(ks.size(), 0.0f);
        if (fmt != 1) { ks = {0.01f, 0.5f}; vs = {0.2f, 0.003f}; }
        auto k = rand_vec((size_t)T * KVH * hd, -2.0f, 2.0f), v = rand_vec(k.size(), -0.5f, 0.5f);
        if (fmt != 1) { k[3] = 1e9f; k[4] = -std::numeric_limits<float>::infinity(); k[5] = kNaNf; v[8] = 1e-12f; }
        kvs_sim_quant_append_u8(T, 1, 1, 32, 1, 1, kp.data(), vp.data(), ks.data(), vs.data(), k.data(), v.data(),
                                slots.data(), T, KVH, B, hd, fmt, mode);
        for (int t = 0; t < T; ++t) {
            if (slots[t] < 0) continue;
            for (int h = 0; h < KVH; ++h) {
                const size_t row = ((size_t)(slots[t] / B) * KVH + h) * B + slots[t] % B;
                const size_t si = mode == 0 ? row : (size_t)h;
                for (int w = 0; w < 2; ++w) {
                    const float* src = (w ? v : k).data() + ((size_t)t * KVH + h) * hd;
                    const auto& pool = w ? vp : kp;
                    const float sc = (w ? vs : ks)[si];
                    char where[64];
                    std::snprintf(where, sizeof where, "fmt%d t%d h%d %c", fmt, t, h, w ? 'v' : 'k');
                    if (fmt == 1) check("quant_append scales", where, sc, int8_scale_ref(src, hd), 0, 0);
                    for (int d = 0; d < hd; ++d) {
                        unsigned want;
                        if (fmt == 1) {
                            double r = sc > 0 ? std::nearbyint((double)(src[d] / sc)) : 0.0;
                            want = (unsigned)(int)std::clamp(r, -127.0, 127.0) & 0xffu;
                        } else {
                            want = fp8_nearest(src[d] / sc, fmt);
                        }
                        check("quant_append codes", where, pool[row * hd + d], want, 0, 0);
                    }
                }
            }
        }
        // Decode over what was written: two requests through shuffled blocks.
        const int H = 4, max_blocks = 3;
        const std::vector<int> table = {4, 0, 3, 1, 2, -1}, ctx = {8, 5};
        // Fill every slot of the used blocks (the append above wrote only some).
        for (size_t i = 0; i < pool_n; ++i) {
            kp[i] = (uint8_t)(fmt == 1 ? (rng() % 255) : (rng() % 0x70));
            vp[i] = (uint8_t)(fmt == 1 ? (rng() % 255) : ((rng() % 0x70) | (rng() % 2 ? 0x80 : 0)));
        }
        if (fmt == 1) for (size_t i = 0; i < rows; ++i) { ks[i] = urand(0.001f, 0.02f); vs[i] = urand(0.001f, 0.02f); }
        const auto q = rand_vec((size_t)2 * H * hd, -2.0f, 2.0f);
        std::vector<float> out((size_t)2 * H * hd, kNaNf), probs((size_t)2 * H * max_blocks * B, kNaNf);
        const float scale = 1.0f / std::sqrt((float)hd);
        kvs_sim_quant_decode_u8(KVH, 2, 1, 32, 1, 1, out.data(), probs.data(), q.data(), kp.data(), vp.data(),
                                ks.data(), vs.data(), table.data(), ctx.data(), max_blocks, H, KVH, B, hd, scale,
                                fmt, mode);
        auto val = [&](const std::vector<uint8_t>& pool, const std::vector<float>& sc, size_t row, int h, int d) {
            const unsigned c = pool[row * hd + d];
            const double x = fmt == 1 ? (double)(int8_t)c : fp8_value(c, fmt);
            return x * sc[mode == 0 ? row : (size_t)h];
        };
        for (int r = 0; r < 2; ++r)
            for (int h = 0; h < H; ++h) {
                const int kvh = h / (H / KVH);
                std::vector<double> s(ctx[r]);
                double m = -kInf, l = 0;
                for (int t = 0; t < ctx[r]; ++t) {
                    const size_t row = ((size_t)table[r * max_blocks + t / B] * KVH + kvh) * B + t % B;
                    double dot = 0;
                    for (int d = 0; d < hd; ++d) dot += (double)q[((size_t)r * H + h) * hd + d] * val(kp, ks, row, kvh, d);
                    s[t] = dot * scale;
                    m = std::max(m, s[t]);
                }
                for (double x : s) l += std::exp(x - m);
                for (int d = 0; d < hd; ++d) {
                    double acc = 0;
                    for (int t = 0; t < ctx[r]; ++t) {
                        const size_t row = ((size_t)table[r * max_blocks + t / B] * KVH + kvh) * B + t % B;
                        acc += std::exp(s[t] - m) / l * val(vp, vs, row, kvh, d);
                    }
                    char where[64];
                    std::snprintf(where, sizeof where, "fmt%d r%d h%d d%d", fmt, r, h, d);
                    check("quant_decode", where, out[((size_t)r * H + h) * hd + d], acc);
                }
            }
    }
}

// ---- group_kv.cu: the f16 residual rings, group quantisation and the grouped decode --------
// One request appends 13 tokens one at a time; the rule (K per channel in groups of G once R have
// gathered; KIVI's V per token as it leaves the last R, INT8 per channel's V with K) is written here
// again. Codes are checked against a scalar re-encoding of the ring's f16 values (conversions from
// the bit-level helpers above), the decode against double attention over the dequantised values.
float f16r_ref(float x) { return (float)f16_bits_to_double(f32_to_f16_bits(x)); }

void test_group_kv() {
    const int KVH = 2, hd = 16, T = 13, H = 4;
    struct Fmt { int bits, sym, vpt, G, R; };
    for (const Fmt f : {Fmt{8, 1, 0, 4, 4}, Fmt{2, 0, 1, 4, 8}, Fmt{4, 0, 1, 2, 4}}) {
        const int cap = f.R + 1, rb = hd * f.bits / 8, nb = (T + f.G - 1) / f.G + 1;
        const int vg = f.vpt ? (hd + f.G - 1) / f.G : 0;
        const size_t row = (size_t)KVH * hd;
        std::vector<uint8_t> kc((size_t)nb * KVH * f.G * rb, 0), vc(kc.size(), 0);
        std::vector<float> ks((size_t)nb * KVH * hd, 0), kz(ks.size(), 0);
        std::vector<float> vs(f.vpt ? (size_t)nb * KVH * f.G * vg : ks.size(), 0), vz(vs.size(), 0);
        std::vector<uint16_t> kr((size_t)cap * row, 0), vr(kr.size(), 0);
        std::vector<float> K((size_t)T * row), V(K.size());
        // Block of token i: reversed, so the table is not the identity.
        std::vector<int> table(nb);
        for (int b = 0; b < nb; ++b) table[b] = nb - 1 - b;
        for (int t = 0; t < T; ++t) {
            auto k = rand_vec(row, -2.0f, 2.0f), v = rand_vec(row, -0.5f, 0.5f);
            for (int h = 0; h < KVH; ++h) k[h * hd + 2] *= 10.0f;  // an outlier channel
            std::copy(k.begin(), k.end(), K.begin() + t * row);
            std::copy(v.begin(), v.end(), V.begin() + t * row);
            const int rows[2] = {0, t};
            kvs_sim_group_store_f16(1, 1, 1, 32, 1, 1, kr.data(), vr.data(), k.data(), v.data(), rows, 1, KVH, hd, cap);
            std::vector<int> jobs;
            if ((t + 1) % f.R == 0)
                for (int s = t + 1 - f.R; s < t + 1; s += f.G) {
                    jobs.insert(jobs.end(), {0, 0, s, table[s / f.G]});
                    if (!f.vpt) jobs.insert(jobs.end(), {1, 0, s, table[s / f.G]});
                }
            if (f.vpt && t >= f.R) jobs.insert(jobs.end(), {2, 0, t - f.R, table[(t - f.R) / f.G] * f.G + (t - f.R) % f.G});
            const int nj = (int)jobs.size() / 4;
            if (nj) kvs_sim_group_quant(nj, 1, 1, 32, 1, 1, kc.data(), vc.data(), ks.data(), kz.data(), vs.data(), vz.data(),
                                        kr.data(), vr.data(), jobs.data(), nj, KVH, hd, f.G, cap, f.bits, f.sym);
        }
        const int kq = T / f.R * f.R, vq = f.vpt ? std::max(0, T - f.R) : kq;
        const float levels = (float)((1 << f.bits) - 1);
        // The expected code of x with (scale, zero), and the ring's value of token t.
        auto code_of = [&](float x, float sc, float z) -> unsigned {
            if (!(sc > 0.0f)) return 0u;
            if (f.sym) return (unsigned)(int)std::clamp(std::nearbyint(x / sc), -127.0f, 127.0f) & 0xffu;
            return (unsigned)std::clamp(std::nearbyint((x - z) / sc), 0.0f, levels);
        };
        auto stored = [&](const std::vector<float>& X, int t, int h, int d) { return f16r_ref(X[t * row + h * hd + d]); };
        auto code_at = [&](const std::vector<uint8_t>& c, size_t r, int d) {
            return (unsigned)(c[r * rb + d * f.bits / 8] >> ((d * f.bits) % 8)) & ((1u << f.bits) - 1u);
        };
        // dq(w, t, h, d): the value the cache holds; checks codes and parameters on the way.
        auto dq = [&](int w, int t, int h, int d) -> double {
            const int q = w ? vq : kq;
            if (t >= q) {
                const auto& ring = w ? vr : kr;
                const double got = f16_bits_to_double(ring[((size_t)(t % cap) * KVH + h) * hd + d]);
                check("group_store_f16", "ring", got, stored(w ? V : K, t, h, d), 0, 0);
                return got;
            }
            const int blk = table[t / f.G];
            const size_t r = ((size_t)blk * KVH + h) * f.G + t % f.G;
            const auto& X = w ? V : K;
            float sc, z = 0.0f;
            size_t pi;
            int c0, c1, t0, t1;  // the group: channels [c0, c1) of tokens [t0, t1)
            if (w && f.vpt) { pi = r * vg + d / f.G; c0 = d / f.G * f.G; c1 = std::min(hd, c0 + f.G); t0 = t; t1 = t + 1; }
            else { pi = ((size_t)blk * KVH + h) * hd + d; c0 = d; c1 = d + 1; t0 = t / f.G * f.G; t1 = t0 + f.G; }
            float lo = kInf, hi = -kInf, amax = 0.0f;
            for (int tt = t0; tt < t1; ++tt)
                for (int dd = c0; dd < c1; ++dd) {
                    const float x = stored(X, tt, h, dd);
                    lo = std::min(lo, x); hi = std::max(hi, x); amax = std::max(amax, std::fabs(x));
                }
            if (f.sym) {
                const float s = amax / 127.0f;
                uint16_t b = f32_to_f16_bits(s);
                if (s > 0.0f && f16_bits_to_double(b) < (double)s) ++b;
                sc = s > 0.0f ? (float)f16_bits_to_double(b) : 0.0f;
            } else {
                z = f16r_ref(lo);
                sc = f16r_ref((hi - z) / levels);
            }
            const auto& S = w ? vs : ks; const auto& Z = w ? vz : kz;
            check("group_quant params", "scale", S[pi], sc, 0, 0);
            check("group_quant params", "zero", Z[pi], z, 0, 0);
            const unsigned c = code_at(w ? vc : kc, r, d);
            check("group_quant codes", "code", c, code_of(stored(X, t, h, d), sc, z), 0, 0);
            return f.sym ? (double)(int8_t)c * S[pi] : (double)c * S[pi] + Z[pi];
        };
        const auto q = rand_vec((size_t)H * hd, -2.0f, 2.0f);
        std::vector<float> out((size_t)H * hd, kNaNf), probs((size_t)H * nb * f.G, kNaNf);
        const int lens[1] = {T}, kqs[1] = {kq}, vqs[1] = {vq}, rings[1] = {0};
        const float scale = 1.0f / std::sqrt((float)hd);
        kvs_sim_group_decode(KVH, 1, 1, 32, 1, 1, out.data(), probs.data(), q.data(), kc.data(), vc.data(), ks.data(),
                             kz.data(), vs.data(), vz.data(), kr.data(), vr.data(), table.data(), lens, kqs, vqs, rings,
                             nb, H, KVH, hd, scale, f.G, cap, f.bits, f.sym, f.vpt);
        for (int h = 0; h < H; ++h) {
            const int kvh = h / (H / KVH);
            std::vector<double> s(T);
            double m = -kInf, l = 0;
            for (int t = 0; t < T; ++t) {
                double dot = 0;
                for (int d = 0; d < hd; ++d) dot += (double)q[h * hd + d] * dq(0, t, kvh, d);
                s[t] = dot * scale;
                m = std::max(m, s[t]);
            }
            for (double x : s) l += std::exp(x - m);
            for (int d = 0; d < hd; ++d) {
                double acc = 0;
                for (int t = 0; t < T; ++t) acc += std::exp(s[t] - m) / l * dq(1, t, kvh, d);
                char where[64];
                std::snprintf(where, sizeof where, "%d-bit h%d d%d", f.bits, h, d);
                check("group_decode", where, out[(size_t)h * hd + d], acc);
            }
        }
    }
}

// ---- mla_attention.cu: MLA decode over a paged latent cache (absorbed projections) ---------
// Scores over the whole cached row (latent and RoPE key) with the given scale, the output over the
// latent part only, in double from the f16 values (bit-level conversion above).
void test_mla_attention() {
    struct Case { int dc, dr, H, B; std::vector<int> ctx; };
    for (const Case& c : {Case{8, 4, 2, 4, {5, 1, 0}}, Case{64, 16, 3, 16, {70}}, Case{512, 64, 2, 16, {33}}}) {
        const int R = (int)c.ctx.size(), dim = c.dc + c.dr;
        int max_blocks = 1;
        for (int l : c.ctx) max_blocks = std::max(max_blocks, (l + c.B - 1) / c.B);
        const int N = R * max_blocks + 1;
        std::vector<uint16_t> lat((size_t)N * c.B * dim);
        for (auto& x : lat) x = f32_to_f16_bits(urand(-1.5f, 1.5f));
        std::vector<int> table((size_t)R * max_blocks);
        for (int i = 0; i < R * max_blocks; ++i) table[i] = (i * 5 + 1) % N;  // scattered, distinct
        const auto qa = rand_vec((size_t)R * c.H * c.dc, -1.0f, 1.0f), qr = rand_vec((size_t)R * c.H * c.dr + 1, -1.0f, 1.0f);
        const float scale = 1.0f / std::sqrt((float)(c.dc / 4 + c.dr + 1));
        std::vector<float> out((size_t)R * c.H * c.dc, kNaNf), probs((size_t)R * c.H * max_blocks * c.B + 1, kNaNf);
        kvs_sim_mla_decode_f16(c.H, R, 1, 32, 1, 1, out.data(), probs.data(), qa.data(), qr.data(), lat.data(), table.data(),
                               c.ctx.data(), max_blocks, c.H, c.B, c.dc, c.dr, scale);
        for (int r = 0; r < R; ++r)
            for (int h = 0; h < c.H; ++h) {
                const int len = c.ctx[r];
                auto val = [&](int t, int i) {
                    const size_t row = (size_t)table[r * max_blocks + t / c.B] * c.B + t % c.B;
                    return f16_bits_to_double(lat[row * dim + i]);
                };
                std::vector<double> s(len);
                double m = -kInf, l = 0;
                for (int t = 0; t < len; ++t) {
                    double dot = 0;
                    for (int i = 0; i < c.dc; ++i) dot += (double)qa[((size_t)r * c.H + h) * c.dc + i] * val(t, i);
                    for (int i = 0; i < c.dr; ++i) dot += (double)qr[((size_t)r * c.H + h) * c.dr + i] * val(t, c.dc + i);
                    s[t] = dot * scale;
                    m = std::max(m, s[t]);
                }
                for (double x : s) l += std::exp(x - m);
                for (int d = 0; d < c.dc; ++d) {
                    double acc = 0;
                    for (int t = 0; t < len; ++t) acc += std::exp(s[t] - m) / l * val(t, d);
                    char where[64];
                    std::snprintf(where, sizeof where, "dc%d r%d h%d d%d", c.dc, r, h, d);
                    check("mla_decode", where, out[((size_t)r * c.H + h) * c.dc + d], len ? acc : 0.0);
                }
            }
    }
}

int main() {
    std::printf("kvscope kernel selftest (CUDA source on the CPU shim)\n");

    const AttnCase attn_cases[] = {
        {1, 1, 1, 1, 1, 0, 0, 128},     // T = 1, head_dim = 1
        {2, 1, 5, 3, 0, 0, 0, 128},     // head_dim = 3, no mask, MQA
        {4, 2, 37, 16, 1, 0, 0, 128},   // causal, GQA
        {3, 3, 20, 8, 2, 4, 0, 32},     // sliding window, tiles of 32 keys
        {4, 1, 45, 33, 2, 5, 2, 32},    // window + sinks, odd hd, 2 tiles
        {2, 2, 130, 33, 1, 0, 0, 128},  // causal, 2 tiles of 128 keys
        {2, 1, 9, 256, 0, 0, 0, 128},   // head_dim = 256 (max)
        {2, 2, 17, 7, 2, 1, 0, 64},     // window 1: only the diagonal
        {1, 1, 70, 12, 2, 100, 3, 32},  // window wider than T
    };
    for (const auto& c : attn_cases) test_attention(c);
    test_softmax_edges();
    test_fully_masked_rows();
    test_static_append();
    test_paged_append();
    test_copy_blocks();
    test_flash_attention();
    test_rope();
    test_stream_decode();
    test_score_decode();
    test_quant_kv();
    test_group_kv();
    test_mla_attention();
    test_mask_table();
    test_read_stream();

    const PagedCase paged_cases[] = {
        {4, 1, 128, 16, {1, 17, 600}},   // G = 4 (one pass), hd 128, 2 partitions
        {8, 2, 64, 16, {0, 1100}},       // empty request, 3 partitions
        {3, 1, 3, 1, {5, 513}},          // hd 3 (element loads), block_size 1, G = 3
        {10, 2, 16, 5, {530}},           // G = 5 (passes of 4 + 1), block_size 5 (not 2^k)
        {2, 2, 256, 2048, {100, 7}},     // hd 256 (max), block_size > context, G = 1
        {1, 1, 1, 1, {1}},               // everything 1
        {2, 1, 12, 4, {40}},             // hd 12: 2 lanes per row, partly filled lane
        {16, 2, 32, 8, {77, 3}},         // G = 8: two passes
        {8, 1, 1, 3, {700, 9}},          // G = 8, hd 1: 128 one-lane groups, short 2nd pass
    };
    for (const auto& c : paged_cases) test_paged_attention(c);

    const PrefillCase prefill_cases[] = {
        {4, 1, 128, 16, {20, 600}, {7, 3}},       // two chunks, one spanning a block edge; 2 partitions
        {8, 2, 64, 4, {9, 1, 13}, {9, 1, 5}},     // a whole prompt, a one-token chunk, a middle chunk
        {3, 1, 3, 1, {6}, {6}},                   // hd 3 (element loads), block_size 1
        {10, 2, 16, 5, {530, 2}, {1, 1}},         // one token a chunk: equal to decode bit for bit
        {16, 2, 32, 8, {77, 3, 40}, {1, 1, 1}},   // G = 8, one token a chunk
    };
    for (const auto& c : prefill_cases) test_paged_prefill(c);

    bool ok = true;
    // Every entry point of the shim's list ran (a new entry's test case that main never calls fails here).
#define KVS_ENTRY(ns, entry, ...)                                                       \
    if (kvs_sim_launches(#entry) == 0) {                                                \
        std::printf("NOT RUN: %s (listed in kernels/shim/entries.def)\n", #entry);       \
        ok = false;                                                                     \
    }
#include "entries.def"
#undef KVS_ENTRY
    std::printf("\n%-22s %10s %14s %6s\n", "op", "checked", "max_abs_err", "bad");
    for (const auto& s : stats) {
        std::printf("%-22s %10ld %14.3e %6ld\n", s.name.c_str(), s.checked, s.max_err, s.bad);
        if (s.bad) ok = false;
    }
    std::printf("%s\n", ok ? "ALL OK" : "FAILED");
    return ok ? 0 : 1;
}
