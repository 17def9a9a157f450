/// \file
/// Vector types and their operations of the CPU runtime prelude: a part of cppinductor_prelude.h,
/// not a header of its own. The prelude includes it at one place, after what
/// it builds on, and embed_prelude.cmake pastes it there for the in-memory
/// copy the kernels compile against.

// ---------------------------------------------------------------------------
// Vector types (GNU vector extensions, understood by clang and g++).
#define CPPI_DEFINE_VEC(elem, tag, lanes)                                           \
  typedef elem cppi_##tag##x##lanes __attribute__((vector_size(sizeof(elem) * lanes))); \
  template <>                                                                       \
  struct cppi_vec_traits<cppi_##tag##x##lanes> {                                    \
    typedef elem element_type;                                                      \
    static constexpr int lanes_v = lanes;                                           \
  };

template <class V>
struct cppi_vec_traits;

#define CPPI_DEFINE_VEC_WIDTHS(elem, tag, a, b, c) \
  CPPI_DEFINE_VEC(elem, tag, a) CPPI_DEFINE_VEC(elem, tag, b) CPPI_DEFINE_VEC(elem, tag, c)

CPPI_DEFINE_VEC_WIDTHS(float, f32, 4, 8, 16)
CPPI_DEFINE_VEC_WIDTHS(double, f64, 2, 4, 8)
CPPI_DEFINE_VEC_WIDTHS(int32_t, i32, 4, 8, 16)
CPPI_DEFINE_VEC_WIDTHS(uint32_t, u32, 4, 8, 16)
CPPI_DEFINE_VEC_WIDTHS(int64_t, i64, 2, 4, 8)
CPPI_DEFINE_VEC_WIDTHS(uint64_t, u64, 2, 4, 8)
CPPI_DEFINE_VEC_WIDTHS(int16_t, i16, 4, 8, 16)
CPPI_DEFINE_VEC_WIDTHS(uint16_t, u16, 4, 8, 16)
CPPI_DEFINE_VEC_WIDTHS(int8_t, i8, 4, 8, 16)
CPPI_DEFINE_VEC_WIDTHS(uint8_t, u8, 4, 8, 16)
#undef CPPI_DEFINE_VEC_WIDTHS
#undef CPPI_DEFINE_VEC

// The host vector width. The schedule picks a width; these name the natural
// one (16 floats on AVX-512, 8 on AVX/AVX2, 4 otherwise).
#if defined(__AVX512F__)
#define CPPI_VEC_BYTES 64
typedef cppi_f32x16 cppi_vf32;
typedef cppi_f64x8 cppi_vf64;
typedef cppi_i32x16 cppi_vi32;
typedef cppi_i64x8 cppi_vi64;
#elif defined(__AVX__)
#define CPPI_VEC_BYTES 32
typedef cppi_f32x8 cppi_vf32;
typedef cppi_f64x4 cppi_vf64;
typedef cppi_i32x8 cppi_vi32;
typedef cppi_i64x4 cppi_vi64;
#else
#define CPPI_VEC_BYTES 16
typedef cppi_f32x4 cppi_vf32;
typedef cppi_f64x2 cppi_vf64;
typedef cppi_i32x4 cppi_vi32;
typedef cppi_i64x2 cppi_vi64;
#endif
#define CPPI_VF32_LANES (CPPI_VEC_BYTES / 4)
#define CPPI_VF64_LANES (CPPI_VEC_BYTES / 8)

// Memory access. memcpy-based so any alignment is fine; compiles to one
// unaligned vector load/store.
template <class V>
CPPI_INLINE V cppi_vload(const void* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof(V));
  return v;
}
template <class V>
CPPI_INLINE void cppi_vstore(void* p, V v) {
  __builtin_memcpy(p, &v, sizeof(V));
}
// Loads the first n lanes (0 <= n <= lanes) and zero-fills the rest, and
// stores the first n: a masked tail's memory (TailKind::Masked), which must
// not touch an element past the loop. Lane by lane, or with AVX-512BW/VL one
// masked move of n * sizeof(lane) bytes for vectors of 16 bytes and more.
template <class V>
CPPI_INLINE V cppi_vload_lanes(const void* p, int64_t n) {
  typedef typename cppi_vec_traits<V>::element_type E;
  V v = {};
  const E* e = (const E*)p;
  for (int64_t i = 0; i < n; ++i) v[i] = e[i];
  return v;
}
template <class V>
CPPI_INLINE void cppi_vstore_lanes(void* p, V v, int64_t n) {
  typedef typename cppi_vec_traits<V>::element_type E;
  E* e = (E*)p;
  for (int64_t i = 0; i < n; ++i) e[i] = v[i];
}
// Stores lane i at element p[i * stride], for the first n lanes: a vector
// loop whose store moves by a constant other than 1 along it (a layer norm
// over the channels of an NCHW tensor, written channels-last). Lane by lane:
// AVX2 has no scatter.
template <class V>
CPPI_INLINE void cppi_vstore_strided(void* p, V v, int64_t stride, int64_t n = cppi_vec_traits<V>::lanes_v) {
  typedef typename cppi_vec_traits<V>::element_type E;
  E* e = (E*)p;
  for (int64_t i = 0; i < n; ++i) e[i * stride] = v[i];
}
#if defined(__AVX512BW__) && defined(__AVX512VL__)
typedef char cppi_bytes16 __attribute__((vector_size(16)));
typedef char cppi_bytes32 __attribute__((vector_size(32)));
typedef char cppi_bytes64 __attribute__((vector_size(64)));
// The builtins' pointer argument: a byte vector's for clang, char's for g++.
#if defined(__clang__)
#define CPPI_BYTES_AT(B, p) ((B*)(p))
#else
#define CPPI_BYTES_AT(B, p) ((char*)(p))
#endif
CPPI_INLINE unsigned long long cppi_byte_mask(int64_t bytes) {
  return bytes >= 64 ? ~0ull : (1ull << bytes) - 1;
}
template <class V>
CPPI_INLINE V cppi_vload_partial(const void* p, int64_t n) {
  const unsigned long long m = cppi_byte_mask(n * (int64_t)sizeof(typename cppi_vec_traits<V>::element_type));
  char* c = (char*)p;
  if constexpr (sizeof(V) == 64) {
    return cppi_bit_cast<V>(__builtin_ia32_loaddquqi512_mask(CPPI_BYTES_AT(cppi_bytes64, c), cppi_bytes64{}, m));
  } else if constexpr (sizeof(V) == 32) {
    return cppi_bit_cast<V>(__builtin_ia32_loaddquqi256_mask(CPPI_BYTES_AT(cppi_bytes32, c), cppi_bytes32{}, (unsigned)m));
  } else if constexpr (sizeof(V) == 16) {
    return cppi_bit_cast<V>(
        __builtin_ia32_loaddquqi128_mask(CPPI_BYTES_AT(cppi_bytes16, c), cppi_bytes16{}, (unsigned short)m));
  } else {
    return cppi_vload_lanes<V>(p, n);
  }
}
template <class V>
CPPI_INLINE void cppi_vstore_partial(void* p, V v, int64_t n) {
  const unsigned long long m = cppi_byte_mask(n * (int64_t)sizeof(typename cppi_vec_traits<V>::element_type));
  char* c = (char*)p;
  if constexpr (sizeof(V) == 64) {
    __builtin_ia32_storedquqi512_mask(CPPI_BYTES_AT(cppi_bytes64, c), cppi_bit_cast<cppi_bytes64>(v), m);
  } else if constexpr (sizeof(V) == 32) {
    __builtin_ia32_storedquqi256_mask(CPPI_BYTES_AT(cppi_bytes32, c), cppi_bit_cast<cppi_bytes32>(v), (unsigned)m);
  } else if constexpr (sizeof(V) == 16) {
    __builtin_ia32_storedquqi128_mask(CPPI_BYTES_AT(cppi_bytes16, c), cppi_bit_cast<cppi_bytes16>(v), (unsigned short)m);
  } else {
    cppi_vstore_lanes(p, v, n);
  }
}
#undef CPPI_BYTES_AT
#else
template <class V>
CPPI_INLINE V cppi_vload_partial(const void* p, int64_t n) {
  return cppi_vload_lanes<V>(p, n);
}
template <class V>
CPPI_INLINE void cppi_vstore_partial(void* p, V v, int64_t n) {
  cppi_vstore_lanes(p, v, n);
}
#endif
// ---------------------------------------------------------------------------
// Transposed tiles (CpuSchedule::transpose_tile): dst[j * W + i] =
// src[j + i * stride] for i, j < W, elements of Bytes bytes moved as
// unsigned integers. A kernel whose vectorised loop reads one input across
// its rows (x.t() + y, an NCHW -> NHWC copy) reads a W x W block of it along
// the rows instead, W vector loads, and turns it in registers: log2(W)
// rounds, round h swapping the off-diagonal h x h blocks of every 2h x 2h
// block (one shufflevector per row), so row j of the result holds column j
// of the block.
template <int... J>
struct cppi_ints {};
template <int N, int... J>
struct cppi_make_ints : cppi_make_ints<N - 1, N - 1, J...> {};
template <int... J>
struct cppi_make_ints<0, J...> {
  typedef cppi_ints<J...> type;
};
template <int Bytes> struct cppi_uint_of;
template <> struct cppi_uint_of<1> { typedef uint8_t type; };
template <> struct cppi_uint_of<2> { typedef uint16_t type; };
template <> struct cppi_uint_of<4> { typedef uint32_t type; };
template <> struct cppi_uint_of<8> { typedef uint64_t type; };

// Row i of a round-h pair (i without bit h): its own lanes where j has no
// bit h, else row i + h's lanes j - h; row i + h the mirror image.
template <int H, class V, int... J>
CPPI_INLINE V cppi_transpose_low(V a, V b, cppi_ints<J...>) {
  return __builtin_shufflevector(a, b, ((J & H) ? J - H + (int)sizeof...(J) : J)...);
}
template <int H, class V, int... J>
CPPI_INLINE V cppi_transpose_high(V a, V b, cppi_ints<J...>) {
  return __builtin_shufflevector(a, b, ((J & H) ? J + (int)sizeof...(J) : J + H)...);
}
template <int W, int H, class V>
CPPI_INLINE void cppi_transpose_rounds(V* r) {
  if constexpr (H < W) {
    for (int i = 0; i < W; ++i) {
      if (i & H) continue;
      const V a = r[i], b = r[i + H];
      r[i] = cppi_transpose_low<H>(a, b, typename cppi_make_ints<W>::type());
      r[i + H] = cppi_transpose_high<H>(a, b, typename cppi_make_ints<W>::type());
    }
    cppi_transpose_rounds<W, 2 * H>(r);
  }
}
template <int W, int Bytes>
CPPI_INLINE void cppi_transpose_tile(const void* src, int64_t stride, void* dst) {
  static_assert(W >= 2 && (W & (W - 1)) == 0, "cppi_transpose_tile: W must be a power of two");
  typedef typename cppi_uint_of<Bytes>::type E;
  typedef E V __attribute__((vector_size(W * Bytes)));
  V r[W];
  for (int i = 0; i < W; ++i) __builtin_memcpy(&r[i], (const E*)src + i * stride, sizeof(V));
  cppi_transpose_rounds<W, 1>(r);
  for (int i = 0; i < W; ++i) __builtin_memcpy((E*)dst + i * W, &r[i], sizeof(V));
}

// ---------------------------------------------------------------------------
// Strided loads: lanes p[0], p[S], ..., p[(W-1) * S] for a small constant
// S (a pooling window's columns, x[..., ::2], the even and odd halves of an
// interleaved pair) as S whole vector loads and shufflevectors. Vectors
// 0 .. S-2 start at p + k * W; the last one starts at p + (S-1) * (W-1) so
// it ends on the last lane read: no element past p[(W-1) * S] is touched
// (the next byte may be unmapped). Element e is lane e of the first S-1
// vectors laid end to end, or lane e - (S-1) * (W-1) of the last: at
// position e + S - 1 in the concatenation of all S.
template <int S, int W>
constexpr int cppi_strided_position(int lane) {
  return lane * S < (S - 1) * W ? lane * S : lane * S + S - 1;
}
template <int S, class V, class In, int... J>
CPPI_INLINE V cppi_strided_pick(In a, In b, cppi_ints<J...>) {
  return __builtin_shufflevector(a, b, cppi_strided_position<S, (int)sizeof...(J)>(J)...);
}
template <class V, int... J>
CPPI_INLINE auto cppi_vconcat(V a, V b, cppi_ints<J...>) {
  return __builtin_shufflevector(a, b, J...);
}
template <class V, int S>
CPPI_INLINE V cppi_vload_strided(const void* p) {
  static_assert(S >= 2 && S <= 4, "cppi_vload_strided: stride 2, 3 or 4");
  typedef typename cppi_vec_traits<V>::element_type E;
  constexpr int W = cppi_vec_traits<V>::lanes_v;
  const E* e = (const E*)p;
  typedef typename cppi_make_ints<W>::type Lanes;
  const V last = cppi_vload<V>(e + (S - 1) * (W - 1));
  if constexpr (S == 2) {
    return cppi_strided_pick<2, V>(cppi_vload<V>(e), last, Lanes());
  } else {
    typedef typename cppi_make_ints<2 * W>::type Pair;
    const auto low = cppi_vconcat(cppi_vload<V>(e), cppi_vload<V>(e + W), Pair());
    const auto high = cppi_vconcat(S == 3 ? last : cppi_vload<V>(e + 2 * W), last, Pair());
    // Stride 3 puts the last vector at 2W and again at 3W; position e + 2
    // of an element past 2W lanes lands in the first copy.
    return cppi_strided_pick<S, V>(low, high, Lanes());
  }
}

// ---------------------------------------------------------------------------
// Rows in lanes (CpuSchedule::row_blocks): W rows of R elements laid one
// after another (R * W elements from p) as R vectors, vector k holding
// element k of every row: lane l of out[k] is p[l * R + k]. The R vectors
// loaded whole hold element e at lane e % W of vector e / W; each result
// takes its lanes from every pair of them with one two-source shuffle, and
// the pairs' picks merge with constant blends (R = 7, 16 lanes: 28 vpermt2ps
// for 16 rows). cppi_vstore_rows is the inverse. The _partial forms move
// only the first `rows` rows (a masked last vector of rows); the other lanes
// load zeros. A pick names lane 0 for the lanes its blend does not take:
// g++ 12 mis-shuffled a -1 ("any lane") in these templates.
template <int R, int W, int K, int P>
constexpr int cppi_row_pick(int l) {
  return (l * R + K) / W / 2 == P ? l * R + K - 2 * P * W : 0;
}
template <int R, int W, int K, int P>
constexpr int cppi_row_merge(int l) {
  return (l * R + K) / W / 2 == P ? l : l + W;
}
template <int R, int K, int P, class V, int... J>
CPPI_INLINE V cppi_row_of(const V* in, cppi_ints<J...> lanes) {
  constexpr int W = sizeof...(J);
  const V picked = __builtin_shufflevector(in[2 * P], in[2 * P + 1 < R ? 2 * P + 1 : 2 * P], cppi_row_pick<R, W, K, P>(J)...);
  if constexpr (2 * P + 2 < R) {
    return __builtin_shufflevector(picked, cppi_row_of<R, K, P + 1>(in, lanes), cppi_row_merge<R, W, K, P>(J)...);
  } else {
    return picked;
  }
}
// Memory vector J's lane m holds element J * W + m: row (J * W + m) / R's
// element (J * W + m) % R, lane (J * W + m) / R of out[(J * W + m) % R].
template <int R, int W, int J, int P>
constexpr int cppi_row_unpick(int m) {
  return (J * W + m) % R / 2 == P ? (J * W + m) % R % 2 * W + (J * W + m) / R : 0;
}
template <int R, int W, int J, int P>
constexpr int cppi_row_unmerge(int m) {
  return (J * W + m) % R / 2 == P ? m : m + W;
}
template <int R, int J, int P, class V, int... M>
CPPI_INLINE V cppi_memory_of_rows(const V* rows, cppi_ints<M...> lanes) {
  constexpr int W = sizeof...(M);
  const V picked =
      __builtin_shufflevector(rows[2 * P], rows[2 * P + 1 < R ? 2 * P + 1 : 2 * P], cppi_row_unpick<R, W, J, P>(M)...);
  if constexpr (2 * P + 2 < R) {
    return __builtin_shufflevector(picked, cppi_memory_of_rows<R, J, P + 1>(rows, lanes), cppi_row_unmerge<R, W, J, P>(M)...);
  } else {
    return picked;
  }
}
template <int R, int K = 0, class V>
CPPI_INLINE void cppi_rows_from_memory(const V* in, V* out) {
  if constexpr (K < R) {
    out[K] = cppi_row_of<R, K, 0>(in, typename cppi_make_ints<cppi_vec_traits<V>::lanes_v>::type());
    cppi_rows_from_memory<R, K + 1>(in, out);
  }
}
template <int R, int J = 0, class V>
CPPI_INLINE void cppi_memory_from_rows(const V* rows, V* mem) {
  if constexpr (J < R) {
    mem[J] = cppi_memory_of_rows<R, J, 0>(rows, typename cppi_make_ints<cppi_vec_traits<V>::lanes_v>::type());
    cppi_memory_from_rows<R, J + 1>(rows, mem);
  }
}
template <class V, int R>
CPPI_INLINE void cppi_vload_rows(const void* p, V* out) {
  typedef typename cppi_vec_traits<V>::element_type E;
  V in[R];
  for (int j = 0; j < R; ++j) in[j] = cppi_vload<V>((const E*)p + j * cppi_vec_traits<V>::lanes_v);
  cppi_rows_from_memory<R>(in, out);
}
template <class V, int R>
CPPI_INLINE void cppi_vload_rows_partial(const void* p, int64_t rows, V* out) {
  typedef typename cppi_vec_traits<V>::element_type E;
  constexpr int W = cppi_vec_traits<V>::lanes_v;
  V in[R];
  for (int j = 0; j < R; ++j) {
    const int64_t n = rows * R - (int64_t)j * W;
    in[j] = n >= W ? cppi_vload<V>((const E*)p + j * W) : n > 0 ? cppi_vload_partial<V>((const E*)p + j * W, n) : V{};
  }
  cppi_rows_from_memory<R>(in, out);
}
template <class V, int R>
CPPI_INLINE void cppi_vstore_rows(void* p, const V* rows) {
  typedef typename cppi_vec_traits<V>::element_type E;
  V mem[R];
  cppi_memory_from_rows<R>(rows, mem);
  for (int j = 0; j < R; ++j) cppi_vstore((E*)p + j * cppi_vec_traits<V>::lanes_v, mem[j]);
}
template <class V, int R>
CPPI_INLINE void cppi_vstore_rows_partial(void* p, const V* rows, int64_t n_rows) {
  typedef typename cppi_vec_traits<V>::element_type E;
  constexpr int W = cppi_vec_traits<V>::lanes_v;
  V mem[R];
  cppi_memory_from_rows<R>(rows, mem);
  for (int j = 0; j < R; ++j) {
    const int64_t n = n_rows * R - (int64_t)j * W;
    if (n >= W) {
      cppi_vstore((E*)p + j * W, mem[j]);
    } else if (n > 0) {
      cppi_vstore_partial((E*)p + j * W, mem[j], n);
    }
  }
}

template <class V>
CPPI_INLINE V cppi_vsplat(typename cppi_vec_traits<V>::element_type s) {
  V v;
  for (int i = 0; i < cppi_vec_traits<V>::lanes_v; ++i) v[i] = s;
  return v;
}
// Lane i holds start + i.
template <class V>
CPPI_INLINE V cppi_viota(typename cppi_vec_traits<V>::element_type start) {
  V v;
  for (int i = 0; i < cppi_vec_traits<V>::lanes_v; ++i) v[i] = start + i;
  return v;
}
// Lanes below n on (all bits set), the rest off: the lanes of a masked tail
// (TailKind::Masked) that lie inside the loop.
template <class M>
CPPI_INLINE M cppi_vlanes_below(int64_t n) {
  return (M)(cppi_viota<M>(0) < cppi_vsplat<M>((typename cppi_vec_traits<M>::element_type)n));
}
// start, start + step, start + 2 * step, ...: an index that moves by a
// constant step along the vectorised loop (a pooling window's column).
template <class V>
CPPI_INLINE V cppi_viota_step(typename cppi_vec_traits<V>::element_type start,
                              typename cppi_vec_traits<V>::element_type step) {
  V v;
  // In int64, then narrowed: int32 lanes wrap as the int64 iota's cast would.
  using E = typename cppi_vec_traits<V>::element_type;
  for (int i = 0; i < cppi_vec_traits<V>::lanes_v; ++i) v[i] = (E)((int64_t)start + (int64_t)i * (int64_t)step);
  return v;
}
template <class To, class From>
CPPI_INLINE To cppi_vconvert(From v) {
  return __builtin_convertvector(v, To);
}

// mask ? a : b, lane-wise (mask lanes are all-ones or zero, as comparisons
// produce). Spelled as bit operations so it compiles the same in clang and
// g++ for every element type.
template <class V, class M>
CPPI_INLINE V cppi_vselect(M mask, V a, V b) {
  static_assert(sizeof(M) == sizeof(V), "cppi_vselect: mask and value widths differ");
  typedef M bits_t;
  const bits_t ab = cppi_bit_cast<bits_t>(a), bb = cppi_bit_cast<bits_t>(b);
  return cppi_bit_cast<V>((bits_t)((ab & mask) | (bb & ~mask)));
}

// cppi_float_to_int lane-wise: lanes out of range (or NaN) convert a zero
// instead, so the conversion is defined, and then take the most negative value.
template <class To, class From>
CPPI_INLINE To cppi_vfloat_to_int(From v) {
  typedef typename cppi_vec_traits<From>::element_type F;
  typedef typename cppi_vec_traits<To>::element_type I;
  const F limit = (F)((uint64_t)1 << (sizeof(I) * 8 - 1));
  const auto ok = (v >= cppi_vsplat<From>(-limit)) & (v < cppi_vsplat<From>(limit));  // lanes of sizeof(F) bytes
  const To converted = __builtin_convertvector(cppi_vselect(ok, v, cppi_vsplat<From>(0)), To);
  const To ok_wide = __builtin_convertvector(ok, To);  // -1 / 0, sign-extended to sizeof(I) bytes
  const To lowest = cppi_vsplat<To>((I)((uint64_t)1 << (sizeof(I) * 8 - 1)));
  return (converted & ok_wide) | (lowest & ~ok_wide);
}

// Fixed-order horizontal reductions, so results do not depend on the
// compiler. A sum halves the vector, lane i + lane i + N/2, until two lanes
// are left (log2 N shuffles and adds; lane by lane, 16 float lanes would be
// a chain of 15 dependent adds, slow on many short rows). Max and min halve
// the same way: lane by lane they would be 15 dependent NaN-checking
// compares (x.amax(-1) over many rows of 33 floats). Which of several NaNs
// comes out, or which of -0 and +0, may differ from a lane-by-lane order;
// eager does not fix either.
// The halves are shufflevectors, not cppi_vlow/cppi_vhigh (the vector
// math's splits): those need a named half type, and a 4-lane float's halves
// have none.
template <class V, int... J>
CPPI_INLINE auto cppi_vlow_half(V v, cppi_ints<J...>) {
  return __builtin_shufflevector(v, v, J...);
}
template <class V, int... J>
CPPI_INLINE auto cppi_vhigh_half(V v, cppi_ints<J...>) {
  return __builtin_shufflevector(v, v, (J + (int)sizeof...(J))...);
}
template <int N, class V>
CPPI_INLINE auto cppi_vsum_halves(V v) {
  if constexpr (N == 2) {
    return v[0] + v[1];
  } else {
    typedef typename cppi_make_ints<N / 2>::type Half;
    return cppi_vsum_halves<N / 2>(cppi_vlow_half(v, Half()) + cppi_vhigh_half(v, Half()));
  }
}
template <class V>
CPPI_INLINE typename cppi_vec_traits<V>::element_type cppi_vreduce_add(V v) {
  return cppi_vsum_halves<cppi_vec_traits<V>::lanes_v>(v);
}
// Lane-wise NaN-propagating max (Greater = true) or min of two vectors of
// any element type, named or not (for integers a != a is never true).
template <bool Greater, class H>
CPPI_INLINE H cppi_vpick_lanes(H a, H b) {
  const auto better = Greater ? (a > b) : (a < b);
  return cppi_vselect(a != a, a, cppi_vselect(b != b, b, cppi_vselect(better, a, b)));
}
template <bool Greater, int N, class V>
CPPI_INLINE auto cppi_vpick_halves(V v) {
  if constexpr (N == 2) {
    return Greater ? cppi_max(v[0], v[1]) : cppi_min(v[0], v[1]);
  } else {
    typedef typename cppi_make_ints<N / 2>::type Half;
    return cppi_vpick_halves<Greater, N / 2>(cppi_vpick_lanes<Greater>(cppi_vlow_half(v, Half()), cppi_vhigh_half(v, Half())));
  }
}
// The same tree without NaN checks: plain compares (one maxps or minps a
// step), for lanes known to hold no NaN.
template <bool Greater, int N, class V>
CPPI_INLINE auto cppi_vpick_halves_ordered(V v) {
  if constexpr (N == 2) {
    return Greater ? (v[0] > v[1] ? v[0] : v[1]) : (v[0] < v[1] ? v[0] : v[1]);
  } else {
    typedef typename cppi_make_ints<N / 2>::type Half;
    const auto a = cppi_vlow_half(v, Half()), b = cppi_vhigh_half(v, Half());
    return cppi_vpick_halves_ordered<Greater, N / 2>(cppi_vselect(Greater ? (a > b) : (a < b), a, b));
  }
}
// Float lanes under clang: one check for a NaN in any lane (a compare and a
// mask test), then the plain tree; the NaN-checking tree only when one is
// there, which is faster on short rows (a max over 10^6 rows of 7 floats).
template <bool Greater, class V>
CPPI_INLINE typename cppi_vec_traits<V>::element_type cppi_vreduce_pick(V v) {
  constexpr int N = cppi_vec_traits<V>::lanes_v;
#if defined(__clang__)
  typedef typename cppi_vec_traits<V>::element_type E;
  if constexpr (__is_same(E, float) || __is_same(E, double)) {
    if (__builtin_expect(__builtin_reduce_or(v != v) == 0, 1)) return cppi_vpick_halves_ordered<Greater, N>(v);
  }
#endif
  return cppi_vpick_halves<Greater, N>(v);
}
template <class V>
CPPI_INLINE typename cppi_vec_traits<V>::element_type cppi_vreduce_max(V v) {
  return cppi_vreduce_pick<true>(v);
}
template <class V>
CPPI_INLINE typename cppi_vec_traits<V>::element_type cppi_vreduce_min(V v) {
  return cppi_vreduce_pick<false>(v);
}

// fn(x) of every lane of x through the scalar fn (no vector instruction for it).
#define CPPI_VEC_LANEWISE(V, FN)                                       \
  CPPI_INLINE V FN(V x) {                                              \
    V r;                                                               \
    for (int i = 0; i < cppi_vec_traits<V>::lanes_v; ++i) r[i] = FN(x[i]); \
    return r;                                                          \
  }
// X(vector, its integer mask vector, F32 or F64) for each float vector type.
#define CPPI_FOR_EACH_FLOAT_VECTOR(X, F32, F64)                                        \
  X(cppi_f32x4, cppi_i32x4, F32) X(cppi_f32x8, cppi_i32x8, F32) X(cppi_f32x16, cppi_i32x16, F32) \
  X(cppi_f64x2, cppi_i64x2, F64) X(cppi_f64x4, cppi_i64x4, F64) X(cppi_f64x8, cppi_i64x8, F64)

// Per-width definitions of NaN-propagating max/min, abs, sqrt and rounding,
// and reduced-float conversions. M is the same-width integer mask type.
#define CPPI_VEC_FLOAT_OPS(V, M, ABS_MASK)                                                     \
  /* A lane where either is NaN gets all bits set (a NaN, as ATen's maximum    */         \
  /* gives): max or min, a compare and an or, where a select of a + b took four. */        \
  CPPI_INLINE V cppi_max(V a, V b) {                                                    \
    const M unordered = (a != a) | (b != b);                                            \
    return cppi_bit_cast<V>(cppi_bit_cast<M>(cppi_vselect(a > b, a, b)) | unordered);   \
  }                                                                                     \
  CPPI_INLINE V cppi_min(V a, V b) {                                                    \
    const M unordered = (a != a) | (b != b);                                            \
    return cppi_bit_cast<V>(cppi_bit_cast<M>(cppi_vselect(a < b, a, b)) | unordered);   \
  }                                                                                     \
  /* cppi_max / cppi_min where one operand is a bound that is never NaN (a     */         \
  /* constant: relu, clamp): only x can be NaN, and it wins; a tie keeps the    */         \
  /* second operand. One comparison and a select (maxps for the first form).    */         \
  CPPI_INLINE V cppi_max_bound_first(V bound, V x) { return cppi_vselect(bound > x, bound, x); }  \
  CPPI_INLINE V cppi_max_bound_second(V x, V bound) { return cppi_vselect(bound >= x, bound, x); } \
  CPPI_INLINE V cppi_min_bound_first(V bound, V x) { return cppi_vselect(bound < x, bound, x); }  \
  CPPI_INLINE V cppi_min_bound_second(V x, V bound) { return cppi_vselect(bound <= x, bound, x); } \
  CPPI_INLINE V cppi_abs(V x) {                                                         \
    return cppi_bit_cast<V>(cppi_bit_cast<M>(x) & cppi_vsplat<M>(ABS_MASK));           \
  }                                                                                     \
  CPPI_INLINE M cppi_isnan(V x) { return x != x; }                                      \
  CPPI_VEC_LANEWISE(V, cppi_sqrt)                                                        \
  CPPI_VEC_LANEWISE(V, cppi_floor)                                                       \
  CPPI_VEC_LANEWISE(V, cppi_ceil)                                                        \
  CPPI_VEC_LANEWISE(V, cppi_trunc)                                                       \
  CPPI_VEC_LANEWISE(V, cppi_round)

CPPI_FOR_EACH_FLOAT_VECTOR(CPPI_VEC_FLOAT_OPS, 0x7FFFFFFF, 0x7FFFFFFFFFFFFFFFLL)
#undef CPPI_VEC_FLOAT_OPS
#undef CPPI_VEC_LANEWISE

// ---------------------------------------------------------------------------
// The reductions of W rows at once (CpuSchedule::reduction_trees): rows[r] is
// row r's vector accumulator, and lane r of the result is its sum, max or
// min. Level L pairs the vectors of level L - 1: lane l of a level-L vector
// holds row l % 2^L's partial l / 2^L, the combine of two level-(L - 1)
// partials, each picked from the pair by one two-source shuffle. 16 rows of
// 16 lanes: 15 combines and 30 shuffles, where a horizontal reduction per
// row is a chain of 4 shuffles and 4 combines, 64 of each. The sums add
// neighbouring lanes first, then neighbouring pairs (a pairwise sum).
template <int L, int W, bool Second>
constexpr int cppi_tree_lane(int l) {
  return l % (1 << L) < (1 << L) / 2
             ? (1 << L) * (l >> L) + l % (1 << L) + (Second ? (1 << L) / 2 : 0)
             : W + (1 << L) * (l >> L) + l % (1 << L) - (1 << L) / 2 + (Second ? (1 << L) / 2 : 0);
}
template <int L, class Op, class V, int... J>
CPPI_INLINE V cppi_tree_pair(V a, V b, cppi_ints<J...>) {
  constexpr int W = sizeof...(J);
  return Op()(__builtin_shufflevector(a, b, cppi_tree_lane<L, W, false>(J)...),
              __builtin_shufflevector(a, b, cppi_tree_lane<L, W, true>(J)...));
}
template <int L, class Op, class V>
CPPI_INLINE V cppi_tree_levels(V* v) {
  constexpr int W = cppi_vec_traits<V>::lanes_v;
  if constexpr ((1 << L) > W) {
    return v[0];
  } else {
    for (int i = 0; i < (W >> L); ++i) {
      v[i] = cppi_tree_pair<L, Op>(v[2 * i], v[2 * i + 1], typename cppi_make_ints<W>::type());
    }
    return cppi_tree_levels<L + 1, Op>(v);
  }
}
struct cppi_tree_add {
  template <class V> __attribute__((always_inline)) V operator()(V a, V b) const { return a + b; }
};
struct cppi_tree_max {
  template <class V> __attribute__((always_inline)) V operator()(V a, V b) const { return cppi_max(a, b); }
};
struct cppi_tree_min {
  template <class V> __attribute__((always_inline)) V operator()(V a, V b) const { return cppi_min(a, b); }
};
template <class Op, class V>
CPPI_INLINE V cppi_vtree(const V* rows) {
  V v[cppi_vec_traits<V>::lanes_v];
  for (int i = 0; i < cppi_vec_traits<V>::lanes_v; ++i) v[i] = rows[i];
  return cppi_tree_levels<1, Op>(v);
}
template <class V> CPPI_INLINE V cppi_vtree_add(const V* rows) { return cppi_vtree<cppi_tree_add>(rows); }
template <class V> CPPI_INLINE V cppi_vtree_max(const V* rows) { return cppi_vtree<cppi_tree_max>(rows); }
template <class V> CPPI_INLINE V cppi_vtree_min(const V* rows) { return cppi_vtree<cppi_tree_min>(rows); }

// Reduced floats, N lanes at a time: uint16 vectors of bits <-> float vectors.
#define CPPI_VEC_REDUCED_FLOAT_OPS(N)                                                     \
  CPPI_INLINE cppi_f32x##N cppi_bf16_to_float(cppi_u16x##N v) {                          \
    return cppi_bit_cast<cppi_f32x##N>(cppi_vconvert<cppi_u32x##N>(v) << 16);             \
  }                                                                                       \
  CPPI_INLINE cppi_u16x##N cppi_float_to_bf16(cppi_f32x##N f) {                          \
    const cppi_u32x##N u = cppi_bit_cast<cppi_u32x##N>(f);                                \
    const cppi_u32x##N rounded = (u + (((u >> 16) & 1u) + 0x7FFFu)) >> 16;                \
    const cppi_u32x##N r =                                                                \
        cppi_vselect((cppi_u32x##N)(f != f), cppi_vsplat<cppi_u32x##N>(0x7FC0u), rounded); \
    return cppi_vconvert<cppi_u16x##N>(r);                                                \
  }                                                                                       \
  CPPI_INLINE cppi_f32x##N cppi_half_to_float(cppi_u16x##N h) {                          \
    const cppi_u32x##N w = cppi_vconvert<cppi_u32x##N>(h) << 16;                          \
    const cppi_u32x##N sign = w & 0x80000000u;                                            \
    const cppi_u32x##N two_w = w + w;                                                     \
    const cppi_f32x##N normalized =                                                       \
        cppi_bit_cast<cppi_f32x##N>((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;          \
    const cppi_f32x##N denormalized =                                                     \
        cppi_bit_cast<cppi_f32x##N>((two_w >> 17) | (126u << 23)) - 0.5f;                 \
    const cppi_u32x##N is_denormal = (cppi_u32x##N)(two_w < (1u << 27));                  \
    return cppi_bit_cast<cppi_f32x##N>(                                                   \
        sign | cppi_vselect(is_denormal, cppi_bit_cast<cppi_u32x##N>(denormalized),      \
                            cppi_bit_cast<cppi_u32x##N>(normalized)));                    \
  }                                                                                       \
  CPPI_INLINE cppi_u16x##N cppi_float_to_half(cppi_f32x##N f) {                          \
    const cppi_u32x##N w = cppi_bit_cast<cppi_u32x##N>(f);                                \
    const cppi_f32x##N abs_f = cppi_bit_cast<cppi_f32x##N>(w & 0x7FFFFFFFu);              \
    cppi_f32x##N base = (abs_f * 0x1.0p+112f) * 0x1.0p-110f;                              \
    const cppi_u32x##N shl1_w = w + w;                                                    \
    const cppi_u32x##N sign = w & 0x80000000u;                                            \
    cppi_u32x##N bias = shl1_w & 0xFF000000u;                                             \
    bias = cppi_vselect((cppi_u32x##N)(bias < 0x71000000u),                               \
                        cppi_vsplat<cppi_u32x##N>(0x71000000u), bias);                    \
    base = cppi_bit_cast<cppi_f32x##N>((bias >> 1) + 0x07800000u) + base;                 \
    const cppi_u32x##N bits = cppi_bit_cast<cppi_u32x##N>(base);                          \
    const cppi_u32x##N nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);     \
    const cppi_u32x##N r =                                                                \
        (sign >> 16) | cppi_vselect((cppi_u32x##N)(shl1_w > 0xFF000000u),                 \
                                    cppi_vsplat<cppi_u32x##N>(0x7E00u), nonsign);         \
    return cppi_vconvert<cppi_u16x##N>(r);                                                \
  }

CPPI_VEC_REDUCED_FLOAT_OPS(4)
CPPI_VEC_REDUCED_FLOAT_OPS(8)
CPPI_VEC_REDUCED_FLOAT_OPS(16)
#undef CPPI_VEC_REDUCED_FLOAT_OPS
