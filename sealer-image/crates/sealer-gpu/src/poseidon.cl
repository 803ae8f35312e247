// Poseidon over BLS12-381's scalar field, in neptune's optimised form (compressed round
// constants, one dense pre-sparse matrix, sparse matrices in the partial rounds), which is
// bit-identical to its reference permutation. The field type and additions (`FIELD_*`,
// Montgomery form) come from ec-gpu-gen, the multiplications from mont.cl; `FIELD` is replaced
// by its name before compilation. The host defines ARITY, WIDTH (= ARITY + 1), HALF (half the
// full rounds) and PARTIAL.
//
// Constants buffer (Montgomery form, written by constants.rs):
//   [0]                       domain tag
//   [1, 1 + NRC)              compressed round constants
//   then WIDTH*WIDTH          MDS matrix m, row-major
//   then WIDTH*WIDTH          pre-sparse matrix, row-major
//   then PARTIAL*(2*WIDTH-1)  sparse matrices: w_hat (WIDTH), then v_rest (WIDTH-1)
//
// Buffers of nodes hold canonical little-endian field elements (the bytes of the sector's
// files); kernels convert to and from Montgomery form themselves.

#define NRC (2 * HALF * WIDTH + PARTIAL)

// SEALER_BASELINE: ec-gpu-gen's multiplication for everything (each matrix product reduced on
// its own), kept to measure the default against; otherwise mont.cl's.
#ifdef SEALER_BASELINE
#define MUL FIELD_mul
#else
#define MUL mm_mul
#endif

DEVICE FIELD to_mont(FIELD x) {
  return MUL(x, FIELD_R2);
}

DEVICE FIELD from_mont(FIELD x) {
  FIELD one = FIELD_ZERO;
  one.val[0] = 1;
  return MUL(x, one);
}

DEVICE FIELD sbox(FIELD x) {
  FIELD x2 = MUL(x, x);
  FIELD x4 = MUL(x2, x2);
  return MUL(x4, x);
}

// sum_i m[i * step] * s[i] for i < WIDTH: a column of a matrix (step WIDTH) or a row (step 1).
DEVICE FIELD dot(const FIELD *s, GLOBAL const FIELD *m, uint step) {
#ifdef SEALER_BASELINE
  FIELD acc = FIELD_ZERO;
  for (uint i = 0; i < WIDTH; i++) acc = FIELD_add(acc, FIELD_mul(m[i * step], s[i]));
  return acc;
#else
  mm_dot_t d;
  mm_dot_init(&d);
  for (uint i = 0; i < WIDTH; i++) mm_dot_add(&d, m[i * step], s[i]);
  return mm_dot_reduce(&d);
#endif
}

// s = s * m (vector-matrix; neptune's matrices are symmetric, the order is its own).
DEVICE void mds_dense(FIELD *s, GLOBAL const FIELD *m) {
  FIELD r[WIDTH];
  for (uint j = 0; j < WIDTH; j++) r[j] = dot(s, m + j, WIDTH);
  for (uint j = 0; j < WIDTH; j++) s[j] = r[j];
}

// The sparse M'': a dense first column (w_hat), a dense first row (v_rest), 1 on the diagonal.
DEVICE void mds_sparse(FIELD *s, GLOBAL const FIELD *sp) {
  FIELD s0 = s[0];
  FIELD r0 = dot(s, sp, 1);
  for (uint j = 1; j < WIDTH; j++) s[j] = FIELD_add(s[j], MUL(sp[WIDTH + j - 1], s0));
  s[0] = r0;
}

DEVICE void full_round(FIELD *s, GLOBAL const FIELD *keys, GLOBAL const FIELD *m) {
  for (uint i = 0; i < WIDTH; i++) s[i] = FIELD_add(sbox(s[i]), keys[i]);
  mds_dense(s, m);
}

// s[1..=ARITY] hold the preimage (Montgomery); returns the digest (Montgomery): element 1 of
// the state after the last round, so that round's matrix computes that element alone.
DEVICE FIELD permute(FIELD *s, GLOBAL const FIELD *c) {
  GLOBAL const FIELD *rc = c + 1;
  GLOBAL const FIELD *m = rc + NRC;
  GLOBAL const FIELD *pre = m + WIDTH * WIDTH;
  GLOBAL const FIELD *sparse = pre + WIDTH * WIDTH;
  s[0] = c[0];
  for (uint i = 0; i < WIDTH; i++) s[i] = FIELD_add(s[i], rc[i]);
  rc += WIDTH;
  for (uint r = 0; r < HALF; r++) {
    full_round(s, rc, r == HALF - 1 ? pre : m);
    rc += WIDTH;
  }
  for (uint p = 0; p < PARTIAL; p++) {
    s[0] = FIELD_add(sbox(s[0]), rc[0]);
    rc += 1;
    mds_sparse(s, sparse + p * (2 * WIDTH - 1));
  }
  for (uint r = 1; r < HALF; r++) {
    full_round(s, rc, m);
    rc += WIDTH;
  }
  for (uint i = 0; i < WIDTH; i++) s[i] = sbox(s[i]);
  return dot(s, m + 1, WIDTH);
}

// out[g] = H(in[ARITY*g .. ARITY*g + ARITY]) for g < n: a batch of hashes, and one level of a
// tree whose nodes of a level are contiguous (several sectors' levels back to back, each a
// multiple of ARITY long, are one batch).
KERNEL void hash_groups(GLOBAL const FIELD *in, GLOBAL FIELD *out, uint n, GLOBAL const FIELD *c) {
  uint g = GET_GLOBAL_ID();
  if (g >= n) return;
  FIELD s[WIDTH];
  for (uint k = 0; k < ARITY; k++) s[1 + k] = to_mont(in[(ulong)g * ARITY + k]);
  out[g] = from_mont(permute(s, c));
}

// One range of PC2 for every sector of a batch, rows [i0, i0 + cc) of its cnt (the range is
// hashed in chunks, each as soon as its rows are on the device). `layers` holds the chunk's
// rows of every layer, interleaved: node i0 + j of sector s in layer l is at
// layers[l*layer_stride + (first_row+j)*row + s] (in nodes). For output index o = s*cnt + i:
// out[o] = H(column) (tree-c's leaf), and out[cnt*sectors + o] = key + data[o] where the key
// is the last layer's label (tree-r-last's leaf; data is 0 for CC, or absent: with_data 0).
// Both trees' leaves in one buffer let one launch hash a level of both.
KERNEL void columns(GLOBAL const FIELD *layers, ulong layer_stride, uint row, uint first_row, uint cnt,
                    uint i0, uint cc, uint sectors, GLOBAL const FIELD *data, uint with_data,
                    GLOBAL FIELD *out, GLOBAL const FIELD *c) {
  uint g = GET_GLOBAL_ID();
  if (g >= cc * sectors) return;
  uint s = g / cc;
  uint j = g - s * cc;
  uint o = s * cnt + i0 + j;
  ulong off = (ulong)(first_row + j) * row + s;
  FIELD st[WIDTH];
  for (uint l = 0; l < ARITY; l++) st[1 + l] = to_mont(layers[l * layer_stride + off]);
  out[o] = from_mont(permute(st, c));
  FIELD key = layers[(ARITY - 1) * layer_stride + off];
  out[(ulong)cnt * sectors + o] = with_data ? FIELD_add(key, data[o]) : key;
}
