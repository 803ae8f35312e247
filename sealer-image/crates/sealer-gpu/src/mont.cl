// Montgomery arithmetic for the Poseidon kernels, written as carry chains. On NVIDIA they are
// PTX: a row of four multiply-add pairs (mad.lo.cc.u32 + madc.hi.cc.u32) is one asm statement
// (mm_row), and the short add and subtract chains are one instruction per limb. Everywhere else
// (pocl in CI, or any device with SEALER_PORTABLE defined) the same rows and chains run with
// the carry in a variable. Both run the same algorithms, so the tests on a CPU OpenCL device
// check the code the GPU runs, bar the primitives themselves (which each program's self-check
// checks on the device). FIELD (8 x 32-bit limbs), FIELD_P and FIELD_INV come from
// ec-gpu-gen's field source.
//
// Besides the single product (mm_mul), a sum of products is reduced once (mm_dot_*): Poseidon's
// matrix rows are sums of WIDTH products, and a Montgomery reduction costs about as much as a
// product, so a row costs WIDTH products and one reduction instead of WIDTH of each.

#if defined(OPENCL_NVIDIA) && !defined(SEALER_PORTABLE)
#define MM_PTX
#endif

#if FIELD_LIMBS != 8
#error "mont.cl's rows are written for 8 limbs of 32 bits"
#endif
#define N FIELD_LIMBS
#define N2 (2 * FIELD_LIMBS)

#ifdef MM_PTX
#define MM_OP2(name, ins) \
  DEVICE inline uint name(uint a, uint b, uint *cf) { \
    uint r; asm volatile(ins " %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
MM_OP2(mm_add_cc, "add.cc.u32")
MM_OP2(mm_addc_cc, "addc.cc.u32")
MM_OP2(mm_addc, "addc.u32")
MM_OP2(mm_sub_cc, "sub.cc.u32")
MM_OP2(mm_subc_cc, "subc.cc.u32")
MM_OP2(mm_subc, "subc.u32")
// t[0..8) += (x0 + x1 2^64 + x2 2^128 + x3 2^192) * b: four multiply-add pairs in one carry
// chain; returns the carry out of t[7]. One asm statement, so the carry flag never crosses
// statements and the compiler may schedule rows as it likes.
DEVICE inline uint mm_row(uint x0, uint x1, uint x2, uint x3, uint b, uint *t) {
  uint c;
  asm("mad.lo.cc.u32 %0, %9, %13, %0;\n\t"
      "madc.hi.cc.u32 %1, %9, %13, %1;\n\t"
      "madc.lo.cc.u32 %2, %10, %13, %2;\n\t"
      "madc.hi.cc.u32 %3, %10, %13, %3;\n\t"
      "madc.lo.cc.u32 %4, %11, %13, %4;\n\t"
      "madc.hi.cc.u32 %5, %11, %13, %5;\n\t"
      "madc.lo.cc.u32 %6, %12, %13, %6;\n\t"
      "madc.hi.cc.u32 %7, %12, %13, %7;\n\t"
      "addc.u32 %8, 0, 0;"
      : "+r"(t[0]), "+r"(t[1]), "+r"(t[2]), "+r"(t[3]), "+r"(t[4]), "+r"(t[5]), "+r"(t[6]), "+r"(t[7]), "=r"(c)
      : "r"(x0), "r"(x1), "r"(x2), "r"(x3), "r"(b));
  return c;
}
#else
// The carry (or borrow) flag is *cf, 0 or 1.
DEVICE inline uint mm_add_cc(uint a, uint b, uint *cf) { uint r = a + b; *cf = r < a; return r; }
DEVICE inline uint mm_addc_cc(uint a, uint b, uint *cf) {
  ulong s = (ulong)a + b + *cf; *cf = (uint)(s >> 32); return (uint)s; }
DEVICE inline uint mm_addc(uint a, uint b, uint *cf) { return a + b + *cf; }
DEVICE inline uint mm_sub_cc(uint a, uint b, uint *cf) { *cf = a < b; return a - b; }
DEVICE inline uint mm_subc_cc(uint a, uint b, uint *cf) {
  ulong d = (ulong)a - b - *cf; *cf = (uint)(d >> 32) & 1; return (uint)d; }
DEVICE inline uint mm_subc(uint a, uint b, uint *cf) { return a - b - *cf; }
// (t[1]:t[0]) += x * b + *cf, the carry out in *cf.
DEVICE inline void mm_pair(uint x, uint b, uint *t, uint *cf) {
  ulong p = (ulong)x * b;
  ulong lo = (ulong)t[0] + (uint)p + *cf;
  ulong hi = (ulong)t[1] + (p >> 32) + (lo >> 32);
  t[0] = (uint)lo;
  t[1] = (uint)hi;
  *cf = (uint)(hi >> 32);
}
DEVICE inline uint mm_row(uint x0, uint x1, uint x2, uint x3, uint b, uint *t) {
  uint cf = 0;
  mm_pair(x0, b, t, &cf);
  mm_pair(x1, b, t + 2, &cf);
  mm_pair(x2, b, t + 4, &cf);
  mm_pair(x3, b, t + 6, &cf);
  return cf;
}
#endif

// Products and reductions run as chains of multiply-add pairs: the low and the high half of
// one limb product land on neighbouring limbs, so each pair can become one wide multiply-add
// on NVIDIA. A row of limb products is two chains (the even limbs of `a`, then the odd ones)
// and each chain's last carry is kept in cy[] (cy[k] belongs to limb N + k) instead of being
// carried up the number: every such carry lands at limb N or above, and the reduction's
// quotient digits only read limbs below N, so one pass at the end (mm_settle) adds them in.

// t += a * b.
DEVICE inline void mm_mac(uint *t, const uint *a, const uint *b, uint *cy) {
#pragma unroll
  for (int i = 0; i < N; i++) {
    cy[i] += mm_row(a[0], a[2], a[4], a[6], b[i], &t[i]);
    cy[i + 1] += mm_row(a[1], a[3], a[5], a[7], b[i], &t[i + 1]);
  }
}

// The Montgomery reduction's rows: t += q_i * p * 2^(32 i) for the quotient digit q_i of each
// limb i < N, which makes limbs 0..N zero (t's carries still in cy).
DEVICE inline void mm_redc_rows(uint *t, uint *cy) {
#pragma unroll
  for (int i = 0; i < N; i++) {
    uint q = t[i] * (uint)FIELD_INV;
    cy[i] += mm_row(FIELD_P.val[0], FIELD_P.val[2], FIELD_P.val[4], FIELD_P.val[6], q, &t[i]);
    cy[i + 1] += mm_row(FIELD_P.val[1], FIELD_P.val[3], FIELD_P.val[5], FIELD_P.val[7], q, &t[i + 1]);
  }
}

// t[N..len) += cy (len = 2N, where the number fits and cy[N] is 0, or 2N + 1).
DEVICE inline void mm_settle(uint *t, const uint *cy, const int len) {
  uint cf = 0;
  t[N] = mm_add_cc(t[N], cy[0], &cf);
#pragma unroll
  for (int k = N + 1; k < len - 1; k++) t[k] = mm_addc_cc(t[k], cy[k - N], &cf);
  t[len - 1] = mm_addc(t[len - 1], cy[len - 1 - N], &cf);
}

// x[0..n) -= (p << shift) when that does not go below zero (n = N or N + 1, shift < 32).
DEVICE inline void mm_sub_p_if(uint *x, const int n, const uint shift) {
  uint d[N + 1];
  uint cf = 0;
#pragma unroll
  for (int i = 0; i < n; i++) {
    uint lo = i < N ? FIELD_P.val[i] << shift : 0;
    uint hi = (i > 0 && shift > 0) ? FIELD_P.val[i - 1] >> (32 - shift) : 0;
    uint pi = lo | hi;
    d[i] = i == 0 ? mm_sub_cc(x[i], pi, &cf) : mm_subc_cc(x[i], pi, &cf);
  }
  uint borrow = mm_subc(0, 0, &cf); // 0, or all ones when x < p << shift
#pragma unroll
  for (int i = 0; i < n; i++) x[i] = borrow ? x[i] : d[i];
}

// a * b / 2^256 mod p, both below p, the result below p.
DEVICE inline FIELD mm_mul(FIELD a, FIELD b) {
  uint t[N2], cy[N + 1];
#pragma unroll
  for (int i = 0; i < N2; i++) t[i] = 0;
#pragma unroll
  for (int i = 0; i <= N; i++) cy[i] = 0;
  mm_mac(t, a.val, b.val, cy);
  mm_redc_rows(t, cy);
  mm_settle(t, cy, N2); // below a * b / 2^256 + p < 2p
  FIELD r;
#pragma unroll
  for (int i = 0; i < N; i++) r.val[i] = t[N + i];
  mm_sub_p_if(r.val, N, 0);
  return r;
}

// A sum of products reduced once: mm_dot_add for each term, then mm_dot_reduce.
typedef struct { uint t[N2 + 1]; uint cy[N + 1]; } mm_dot_t;

DEVICE inline void mm_dot_init(mm_dot_t *d) {
#pragma unroll
  for (int i = 0; i <= N2; i++) d->t[i] = 0;
#pragma unroll
  for (int i = 0; i <= N; i++) d->cy[i] = 0;
}

DEVICE inline void mm_dot_add(mm_dot_t *d, FIELD a, FIELD b) {
  mm_mac(d->t, a.val, b.val, d->cy);
}

// The reduced value of a sum of at most 12 products of elements below p: below
// 12 p^2 / 2^256 + p < 8p after the reduction, then 4p, 2p and p taken off where they fit.
DEVICE inline FIELD mm_dot_reduce(mm_dot_t *d) {
  mm_redc_rows(d->t, d->cy);
  mm_settle(d->t, d->cy, N2 + 1);
  uint x[N + 1];
#pragma unroll
  for (int i = 0; i <= N; i++) x[i] = d->t[N + i];
  mm_sub_p_if(x, N + 1, 2);
  mm_sub_p_if(x, N + 1, 1);
  mm_sub_p_if(x, N + 1, 0);
  FIELD r;
#pragma unroll
  for (int i = 0; i < N; i++) r.val[i] = x[i];
  return r;
}

#undef N
#undef N2
