/* Multi-head self-attention over chosen heads, at inference, in one call: the k heads' Q/K/V
 * projections, softmax(QKᵀ/√Dh)·V, the head weights and the output projection, reading the
 * layer's weights where they lie (no copy of the chosen heads' rows and columns).
 *
 * The matrix products go to the BLAS sgemm_ of the PyTorch library already loaded (set once by
 * bf_set_sgemm), so the arithmetic is PyTorch's; what this call saves is the dozen tensor
 * operations, with the Python between them, that the eager path spends per layer. Heads with
 * consecutive indices run as one product (all H heads: one per Q, K, V and one for the output).
 * Everything is row-major and contiguous:
 *   x (B, T, D) the layer input; mask (B, T) bytes (1 for a real token), or NULL when every
 *   token is real; heads (k,) shared by the batch (per_input 0) or (B, k) one set per input,
 *   indices in [0, H); w (B, k) each input's weights of those heads, or NULL for weight 1;
 *   w_qkv (3·H·Dh, D) and b_qkv (3·H·Dh,) the fused projection (Q rows, then K, then V; head h's
 *   rows [h·Dh, (h+1)·Dh) of each block), w_out (D, H·Dh) and b_out (D,); out (B, T, D).
 * A query whose keys are all padding gets zeros, as PyTorch's fused kernel gives it.
 * Returns 0; 1 when memory ran out, 2 for a head index outside [0, H) (nothing computed).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef void (*sgemm_t)(const char *, const char *, const int *, const int *, const int *, const float *,
                        const float *, const int *, const float *, const int *, const float *, float *, const int *);
static sgemm_t sgemm;

void bf_set_sgemm(void *fn) { sgemm = (sgemm_t)fn; }

/* row-major C (M, N) = alpha · A (M, K) · op(B) + beta · C, with op(B) = Bᵀ for B (N, K) when bt,
   else B (K, N); sgemm_ is column-major, so it computes Cᵀ = op(B)ᵀ · Aᵀ */
static void matmul(int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb, int bt,
                   float beta, float *C, int ldc) {
    sgemm(bt ? "T" : "N", "N", &N, &M, &K, &alpha, B, &ldb, A, &lda, &beta, C, &ldc);
}

/* e^x for x <= 0 (Cephes' expf: x = n·ln 2 + r, e^r by a polynomial, 2^n in the exponent bits), 0
   below -87 where float underflows: plain arithmetic, so the loop calling it is vectorised */
static inline float exp_neg(float x) {
    x = x < -87.0f ? -87.0f : x;
    const float shift = 12582912.0f; /* 1.5 · 2^23: adding and subtracting it rounds to an integer */
    float n = (x * 1.44269504088896341f + shift) - shift;
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float two_n;
    memcpy(&two_n, &bits, sizeof two_n);
    return x <= -87.0f ? 0.0f : p * two_n;
}

/* each row of S (T, T) (a query's scores over the keys) to its softmax over the real keys */
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void softmax_rows(float *S, int64_t T, const uint8_t *mask) {
    for (int64_t i = 0; i < T; i++) {
        float *row = S + i * T, top = -INFINITY, sum = 0.0f;
        if (mask)
            for (int64_t j = 0; j < T; j++) row[j] = mask[j] ? row[j] : -INFINITY;
#pragma omp simd reduction(max : top)
        for (int64_t j = 0; j < T; j++) top = row[j] > top ? row[j] : top;
        if (top == -INFINITY) { /* no real key */
            memset(row, 0, sizeof(float) * (size_t)T);
            continue;
        }
#pragma omp simd
        for (int64_t j = 0; j < T; j++) row[j] = exp_neg(row[j] - top);
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < T; j++) sum += row[j];
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < T; j++) row[j] *= inv;
    }
}

/* the heads of one set in increasing index order (sorted), and where each was in heads (from) */
static void sort_heads(const int64_t *heads, int64_t k, int64_t *sorted, int64_t *from) {
    for (int64_t i = 0; i < k; i++) {
        int64_t j = i;
        while (j > 0 && sorted[j - 1] > heads[i]) {
            sorted[j] = sorted[j - 1];
            from[j] = from[j - 1];
            j--;
        }
        sorted[j] = heads[i];
        from[j] = i;
    }
}

/* one input's head weights (k,) in sorted order: its row of w (B, k), or 1 without w */
static void head_weights(const float *w_row, const int64_t *from, int64_t k, float *weights) {
    for (int64_t j = 0; j < k; j++) weights[j] = w_row ? w_row[from[j]] : 1.0f;
}

/* the length of the run of consecutive indices starting at sorted[i] */
static int64_t run_length(const int64_t *sorted, int64_t k, int64_t i) {
    int64_t r = 1;
    while (i + r < k && sorted[i + r] == sorted[i] + r) r++;
    return r;
}

/* qkv (rows, 3·k·Dh) = the chosen heads' Q, K, V of x (rows, D), biases added */
static void project(const float *x, int64_t rows, int64_t D, int64_t H, int64_t Dh, const int64_t *sorted, int64_t k,
                    const float *w_qkv, const float *b_qkv, float *qkv) {
    const int64_t n = k * Dh;
    for (int c = 0; c < 3; c++) /* the first row: the biases; then each row a copy of it */
        for (int64_t j = 0; j < k; j++)
            memcpy(qkv + c * n + j * Dh, b_qkv + (c * H + sorted[j]) * Dh, sizeof(float) * (size_t)Dh);
    for (int64_t t = 1; t < rows; t++) memcpy(qkv + t * 3 * n, qkv, sizeof(float) * (size_t)(3 * n));
    for (int c = 0; c < 3; c++)
        for (int64_t j = 0, r; j < k; j += r) {
            r = run_length(sorted, k, j);
            matmul((int)rows, (int)(r * Dh), (int)D, 1.0f, x, (int)D, w_qkv + (c * H + sorted[j]) * Dh * D, (int)D, 1,
                   1.0f, qkv + c * n + j * Dh, (int)(3 * n));
        }
}

/* out (rows, D) = ctx (rows, k·Dh) · the chosen heads' columns of w_out, plus b_out */
static void output(const float *ctx, int64_t rows, int64_t D, int64_t H, int64_t Dh, const int64_t *sorted, int64_t k,
                   const float *w_out, const float *b_out, float *out) {
    const int64_t n = k * Dh;
    for (int64_t t = 0; t < rows; t++) memcpy(out + t * D, b_out, sizeof(float) * (size_t)D);
    for (int64_t j = 0, r; j < k; j += r) {
        r = run_length(sorted, k, j);
        matmul((int)rows, (int)D, (int)(r * Dh), 1.0f, ctx + j * Dh, (int)n, w_out + sorted[j] * Dh, (int)(H * Dh), 1,
               1.0f, out, (int)D);
    }
}

/* ctx (T, k·Dh) = each head's w · softmax(q kᵀ/√Dh) v, for one input's qkv (T, 3·k·Dh) */
static void attend(const float *qkv, int64_t T, int64_t Dh, int64_t k, const float *weights, const uint8_t *mask,
                   float *scores, float *ctx) {
    const int64_t n = k * Dh;
    const float scale = (float)(1.0 / sqrt((double)Dh));
    for (int64_t j = 0; j < k; j++) {
        matmul((int)T, (int)T, (int)Dh, scale, qkv + j * Dh, (int)(3 * n), qkv + n + j * Dh, (int)(3 * n), 1, 0.0f,
               scores, (int)T);
        softmax_rows(scores, T, mask);
        matmul((int)T, (int)Dh, (int)T, weights[j], scores, (int)T, qkv + 2 * n + j * Dh, (int)(3 * n), 0, 0.0f,
               ctx + j * Dh, (int)n);
    }
}

/* the attention of each input's chosen heads: heads + b·hs are input b's k_b = (ks ? ks[b] : k) head
   indices (hs = 0: one set for the whole batch), w + b·ws their weights (NULL: 1). Inputs that all
   run one set, in any order, go through each projection together; otherwise input by input */
static int run_heads(const float *x, int64_t B, int64_t T, int64_t D, int64_t H, int64_t Dh, const int64_t *heads,
                     int64_t hs, const int64_t *ks, int64_t k, const float *w, int64_t ws, const uint8_t *mask,
                     const float *w_qkv, const float *b_qkv, const float *w_out, const float *b_out, float *out) {
    int64_t kmax = 0;
    for (int64_t b = 0; b < B; b++) {
        const int64_t kb = ks ? ks[b] : k;
        if (kb < 1 || kb > H) return 2;
        for (int64_t j = 0; j < kb; j++)
            if (heads[b * hs + j] < 0 || heads[b * hs + j] >= H) return 2;
        kmax = kb > kmax ? kb : kmax;
    }
    int64_t *sorted = malloc(sizeof(int64_t) * (size_t)(4 * kmax));
    if (!sorted) return 1;
    int64_t *from = sorted + kmax, *sorted_b = from + kmax, *from_b = sorted_b + kmax;
    const int64_t k0 = ks ? ks[0] : k;
    sort_heads(heads, k0, sorted, from);
    int one = k0 == kmax; /* every input the same number of heads, and the same set */
    for (int64_t b = 1; b < B && one && hs; b++) {
        one = (ks ? ks[b] : k) == kmax;
        if (one) {
            sort_heads(heads + b * hs, kmax, sorted_b, from_b);
            one = memcmp(sorted, sorted_b, sizeof(int64_t) * (size_t)kmax) == 0;
        }
    }
    const int64_t n = kmax * Dh, rows = one ? B * T : T; /* rows projected in one product */
    float *qkv = malloc(sizeof(float) * (size_t)(rows * 4 * n + T * T + kmax));
    if (!qkv) {
        free(sorted);
        return 1;
    }
    float *ctx = qkv + rows * 3 * n, *scores = ctx + rows * n, *weights = scores + T * T;
    if (one) { /* one set: the whole batch through each projection */
        project(x, rows, D, H, Dh, sorted, kmax, w_qkv, b_qkv, qkv);
        for (int64_t b = 0; b < B; b++) {
            sort_heads(heads + b * hs, kmax, sorted_b, from_b); /* this input's order of the set */
            head_weights(w ? w + b * ws : NULL, from_b, kmax, weights);
            attend(qkv + b * T * 3 * n, T, Dh, kmax, weights, mask ? mask + b * T : NULL, scores, ctx + b * T * n);
        }
        output(ctx, rows, D, H, Dh, sorted, kmax, w_out, b_out, out);
    } else { /* a set per input: input by input */
        for (int64_t b = 0; b < B; b++) {
            const int64_t kb = ks ? ks[b] : k;
            sort_heads(heads + b * hs, kb, sorted, from);
            head_weights(w ? w + b * ws : NULL, from, kb, weights);
            project(x + b * T * D, T, D, H, Dh, sorted, kb, w_qkv, b_qkv, qkv);
            attend(qkv, T, Dh, kb, weights, mask ? mask + b * T : NULL, scores, ctx);
            output(ctx, T, D, H, Dh, sorted, kb, w_out, b_out, out + b * T * D);
        }
    }
    free(qkv);
    free(sorted);
    return 0;
}

int bf_attend(const float *x, int64_t B, int64_t T, int64_t D, int64_t H, int64_t Dh, const int64_t *heads,
              int64_t k, int64_t per_input, const float *w, const uint8_t *mask, const float *w_qkv,
              const float *b_qkv, const float *w_out, const float *b_out, float *out) {
    return run_heads(x, B, T, D, H, Dh, heads, per_input ? k : 0, NULL, k, w, k, mask, w_qkv, b_qkv, w_out, b_out,
                     out);
}

int bf_allocate(const float *x, int64_t B, int64_t T, int64_t D, const uint8_t *mask, const float *packed,
                const int64_t *dims, float *s_out, float *z_out, int64_t *k_out, int64_t *order_out, float *p_out);

/* A layer's allocation and its attention in one call: bf_allocate on xa (the layer input, or bba's
 * embedding output), then run_heads on x (B, T, D) of each input's first heads of its ranking, k of
 * them (k > 0) or each input's k from f_θ (k = 0). Head weights: with scaled, s·H·p, s each
 * input's (f_θ) or the budget given, p as ranked by (softmax(z / τ)); otherwise 1. The outputs of
 * both calls; returns 0, 1 when memory ran out, 2 for a k outside [1, H] (nothing computed). */
int bf_allocate_attend(const float *xa, const float *x, int64_t B, int64_t T, int64_t D, const uint8_t *mask,
                       const float *packed, const int64_t *dims, int64_t k, int64_t scaled, float budget,
                       int64_t Dh, const float *w_qkv, const float *b_qkv, const float *w_out, const float *b_out,
                       float *s_out, float *z_out, int64_t *k_out, int64_t *order_out, float *out) {
    const int64_t H = dims[2];
    if ((k == 0 && dims[1] == 0) || k < 0 || k > H || (scaled && !dims[6])) return 2;
    float *w = scaled ? malloc(sizeof(float) * (size_t)(2 * B * H)) : NULL;
    if (scaled && !w) return 1;
    int failed = bf_allocate(xa, B, T, D, mask, packed, dims, s_out, z_out, k_out, order_out, scaled ? w + B * H : NULL);
    if (!failed && scaled) /* w (B, H) in ranking order: s·H·p of each input's heads */
        for (int64_t b = 0; b < B; b++) {
            const float sH = (s_out && k == 0 ? s_out[b] : budget) * (float)H;
            for (int64_t j = 0; j < H; j++) w[b * H + j] = w[B * H + b * H + order_out[b * H + j]] * sH;
        }
    if (!failed)
        failed = run_heads(x, B, T, D, H, Dh, order_out, H, k ? NULL : k_out, k, w, H, mask, w_qkv, b_qkv, w_out,
                           b_out, out);
    free(w);
    return failed;
}
