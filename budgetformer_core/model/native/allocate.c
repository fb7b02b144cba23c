/* One layer's head allocation at inference, for every input of a batch, in one call:
 * summary h of the layer input -> (standardised) -> the budgeting networks' stacked first layer
 * -> GELU -> s = sigmoid(f_θ) and z = g_φ -> k = max(1, floor(s·H)) -> heads ranked by z, or
 * by p = softmax(z / τ) as float32 holds it.
 *
 * The arithmetic of the eager path (budgetformer_core.model.budget) with double accumulators, in
 * one C function: at batch 1 the eager path is a dozen tensor operations of a few µs each.
 * Built by `make` (budgetformer_core/model/native/__init__.py); without a compiler the eager
 * path runs. Everything is row-major and contiguous:
 *   x (B, T, D) float; mask (B, T) bytes, or NULL when every token is real;
 *   dims: M, Mf, H, pooling (0 mean, 1 first token), norm (0 none, 1 running statistics,
 *         2 layer norm), tanh GELU (0/1), rank by (0 z, 1 p);
 *   packed floats: w1t (D, M) the stacked first layers transposed, b1 (M,), f2 (Mf,) and f2b (1,)
 *         f_θ's last layer reading hidden units [0, Mf), g2 (H, M - Mf) and g2b (H,) g_φ's last
 *         layer reading [Mf, M), then for norm 1 mean (D,) and var (D,), for norm 1 or 2 eps (1,),
 *         and when ranking by p τ (1,);
 *   out: s (B,) and k (B,) (NULL when Mf = 0), z (B, H) and the heads by decreasing z, or p
 *         (B, H), equal values in index order; when ranking by p, p itself (B, H) (NULL: not kept).
 * Ranking by p is not ranking by z: p underflows to 0, or to one subnormal float, for scores far
 * below the largest, and those heads are then equal and go in index order, as the eager path's
 * stable sort of p puts them.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* the sha256 of this file, which the build passes: a library built from another version is refused */
#ifndef BF_SOURCE
#define BF_SOURCE ""
#endif
const char *bf_source(void) { return BF_SOURCE; }

static double gelu(double v, int tanh_form) {
    if (tanh_form)
        return 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    return 0.5 * v * (1.0 + erf(v * 0.7071067811865476));
}

/* wider vectors where the CPU has them, chosen when the library loads (the same arithmetic) */
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
int bf_allocate(const float *x, int64_t B, int64_t T, int64_t D, const uint8_t *mask,
                const float *packed, const int64_t *dims, float *s_out, float *z_out, int64_t *k_out,
                int64_t *order_out, float *p_out) {
    const int64_t M = dims[0], Mf = dims[1], H = dims[2];
    const int pooling = (int)dims[3], norm = (int)dims[4], tanh_gelu = (int)dims[5], by_p = (int)dims[6];
    const float *w1t = packed, *b1 = w1t + D * M, *f2 = b1 + M, *g2 = f2 + Mf + 1, *g2b = g2 + H * (M - Mf);
    const float *mean = g2b + H, *var = mean + D;
    const double eps = norm == 1 ? var[D] : (norm == 2 ? mean[0] : 0.0);
    const float tau = by_p ? (norm == 1 ? var[D + 1] : (norm == 2 ? mean[1] : mean[0])) : 1.0f;
    double *h = malloc(sizeof(double) * (size_t)(D + M) + sizeof(float) * (size_t)H);
    if (!h) return 1;
    double *hidden = h + D;
    float *key = (float *)(hidden + M); /* what the heads are ranked by: z, or p */
    for (int64_t b = 0; b < B; b++) {
        const float *xb = x + b * T * D;
        const uint8_t *mb = mask ? mask + b * T : NULL;
        /* the summary, rounded to float as the eager path holds it */
        if (pooling == 1) { /* the first real token's state */
            int64_t t = 0;
            if (mb) { while (t < T - 1 && !mb[t]) t++; if (!mb[t]) t = 0; }
            for (int64_t d = 0; d < D; d++) h[d] = xb[t * D + d];
        } else { /* the mean over real tokens */
            int64_t n = 0;
            for (int64_t d = 0; d < D; d++) h[d] = 0.0;
            for (int64_t t = 0; t < T; t++) {
                if (mb && !mb[t]) continue;
                n++;
                for (int64_t d = 0; d < D; d++) h[d] += xb[t * D + d];
            }
            for (int64_t d = 0; d < D; d++) h[d] = (float)(h[d] / (double)(n > 0 ? n : 1));
        }
        if (norm == 1) {
            for (int64_t d = 0; d < D; d++) h[d] = (float)((h[d] - mean[d]) / sqrt((double)var[d] + eps));
        } else if (norm == 2) {
            double mu = 0.0, v = 0.0;
            for (int64_t d = 0; d < D; d++) mu += h[d];
            mu /= (double)D;
            for (int64_t d = 0; d < D; d++) v += (h[d] - mu) * (h[d] - mu);
            v /= (double)D;
            for (int64_t d = 0; d < D; d++) h[d] = (float)((h[d] - mu) / sqrt(v + eps));
        }
        /* the stacked first layer (f_θ's hidden units, then g_φ's), one accumulator per unit */
        for (int64_t m = 0; m < M; m++) hidden[m] = b1[m];
        for (int64_t d = 0; d < D; d++) {
            const float *row = w1t + d * M;
            const double hd = h[d];
            for (int64_t m = 0; m < M; m++) hidden[m] += (double)row[m] * hd;
        }
        for (int64_t m = 0; m < M; m++) hidden[m] = (float)gelu((float)hidden[m], tanh_gelu);
        if (Mf > 0) {
            double acc = f2[Mf];
            for (int64_t m = 0; m < Mf; m++) acc += (double)f2[m] * hidden[m];
            float s = (float)(1.0 / (1.0 + exp(-(double)(float)acc)));
            float kf = floorf(s * (float)H + 1e-6f);
            s_out[b] = s;
            k_out[b] = kf < 1.0f ? 1 : (kf > (float)H ? H : (int64_t)kf);
        }
        float *z = z_out + b * H;
        int64_t *order = order_out + b * H;
        for (int64_t i = 0; i < H; i++) {
            const float *row = g2 + i * (M - Mf);
            double acc = g2b[i];
            for (int64_t m = Mf; m < M; m++) acc += (double)row[m - Mf] * hidden[m];
            z[i] = (float)acc;
        }
        if (by_p) { /* p = softmax(z / τ) as PyTorch's float kernel forms it: e = exp(z / τ − max)
                       in float, then p = e · (1 / Σ e) in float */
            float top = -INFINITY;
            for (int64_t i = 0; i < H; i++) top = fmaxf(top, z[i] / tau);
            double sum = 0.0;
            for (int64_t i = 0; i < H; i++) {
                key[i] = (float)exp((double)(z[i] / tau - top));
                sum += key[i];
            }
            const float inv = (float)(1.0 / sum);
            for (int64_t i = 0; i < H; i++) key[i] *= inv;
            if (p_out)
                for (int64_t i = 0; i < H; i++) p_out[b * H + i] = key[i];
        } else {
            for (int64_t i = 0; i < H; i++) key[i] = z[i];
        }
        for (int64_t i = 0; i < H; i++) { /* a stable insertion sort, by decreasing key */
            int64_t j = i;
            while (j > 0 && key[order[j - 1]] < key[i]) { order[j] = order[j - 1]; j--; }
            order[j] = i;
        }
    }
    free(h);
    return 0;
}
