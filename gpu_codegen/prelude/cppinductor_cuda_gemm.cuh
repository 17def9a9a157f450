// cppinductor: the GEMM template for tensor cores (sm_80 and newer), compiled
// by NVRTC with the kernel that instantiates it.
//
// C[m, n] = sum_k A[m, k] * B[k, n] over 16-bit floats (bfloat16 or half),
// accumulated in float32, and each C element handed to an epilogue functor
// (`epi(m, n, value)`, or a SplitEpilogue: the values of all of a thread's
// elements, then their stores): the pointwise code fusion puts after the
// matmul (bias, activation, residual, cast) and the store. No C is ever
// written by the template itself.
//
// Layout. A is row-major with row stride lda (K contiguous). B is either
// K-contiguous (stored N x K with row stride ldb: a Linear's weight, x @ w.t())
// or N-contiguous (stored K x N with row stride ldb; then N is a multiple of
// 8 too). K, lda and ldb are multiples of 8 and A and B are 16-byte aligned: every global read is one
// 16-byte cp.async (the caller checks this; the kernel does not).
//
// Structure, per thread block of WARPS_M x WARPS_N warps:
// - the block computes a BM x BN tile of C; each warp a (BM / WARPS_M) x
//   (BN / WARPS_N) piece of it as m16n8k16 MMAs (mma.sync);
// - K advances BK at a time through STAGES shared-memory buffers filled by
//   cp.async, so loads of later slices overlap the MMAs of this one;
//   rows and columns past M, N and K are filled with zeros (cp.async's
//   source size 0), so no tile needs a separate tail path;
// - shared rows are padded by 8 elements (16 bytes): the eight 16-byte rows
//   one ldmatrix reads fall in distinct banks;
// - with SPLIT_K > 1, blockIdx.y takes one of SPLIT_K contiguous runs of K; each
//   split writes its partial tile to `workspace`, and the last split of a
//   tile to arrive (an atomic counter per tile) adds the partials in split
//   order and runs the epilogue: one kernel, and the same sums in the same
//   order on every run. The counter goes back to zero, so counters zeroed
//   once serve every later launch (CUDA graphs included).
#pragma once

#include "cppinductor_cuda_prelude.cuh"

namespace cppi_gemm {

template <bool HALF>
struct Mma;  // one m16n8k16 MMA: d = a * b + d, float32 accumulators

#define CPPI_GEMM_MMA(HALF_, TYPE)                                                                         \
  template <>                                                                                                 \
  struct Mma<HALF_> {                                                                                         \
    static __device__ __forceinline__ void run(float* d, const unsigned* a, const unsigned* b) {             \
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." TYPE "." TYPE                                    \
                   ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"                            \
                   : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                           \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));                       \
    }                                                                                                         \
  };
CPPI_GEMM_MMA(false, "bf16")
CPPI_GEMM_MMA(true, "f16")
#undef CPPI_GEMM_MMA

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

/// 16 bytes from global to shared, or 16 zero bytes when !valid.
__device__ __forceinline__ void copy16(void* shared, const void* global, bool valid) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(shared_address(shared)), "l"(global),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");  // plain reads of the stage come after
}

__device__ __forceinline__ void ldmatrix_x4(unsigned* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}

template <int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int STAGES_, int SPLIT_K_, bool B_K_CONTIGUOUS_,
          bool HALF_>
struct Config {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;
  static constexpr int STAGES = STAGES_, SPLIT_K = SPLIT_K_;
  static constexpr bool B_K_CONTIGUOUS = B_K_CONTIGUOUS_, HALF = HALF_;
  static constexpr int THREADS = WARPS_M * WARPS_N * 32;
  static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;  // one warp's piece of the tile
  static constexpr int MI = WM / 16, NI = WN / 8;              // its MMAs along M and N
  static constexpr int PAD = 8;
  static constexpr int A_ROW = BK + PAD;                             // shared A: BM rows of A_ROW
  static constexpr int B_ROW = B_K_CONTIGUOUS ? BK + PAD : BN + PAD;  // shared B: BN (or BK) rows
  static constexpr int A_STAGE = BM * A_ROW;
  static constexpr int B_STAGE = (B_K_CONTIGUOUS ? BN : BK) * B_ROW;
  static constexpr int SHARED_BYTES = STAGES * (A_STAGE + B_STAGE) * 2;
  static_assert(BK % 16 == 0 && WM % 16 == 0 && WN % 16 == 0, "MMA tiles are 16 x 16 x 16 (B read two at a time)");
  static_assert(STAGES >= 2, "at least double buffering");
  static_assert((BM * BK / 8) % THREADS == 0 && (BN * BK / 8) % THREADS == 0, "16-byte chunks split evenly");
};

/// Fills shared stages with K slices of A and B: each thread's 16-byte
/// chunks, their global addresses computed once and advanced by a slice
/// per fill.
template <class C>
struct TileLoader {
  static constexpr int CHUNKS_PER_K_ROW = C::BK / 8;
  static constexpr int A_CHUNKS = C::BM * C::BK / 8 / C::THREADS;
  static constexpr int B_CHUNKS = C::BN * C::BK / 8 / C::THREADS;
  const uint16_t* a_at[A_CHUNKS];
  const uint16_t* b_at[B_CHUNKS];
  int a_k[A_CHUNKS], b_k[B_CHUNKS];  // the chunk's K offset in the slice (its row, for N-contiguous B)
  bool a_in[A_CHUNKS], b_in[B_CHUNKS];  // inside M (N) whatever the slice
  int64_t k0, K, b_step;

  __device__ __forceinline__ TileLoader(const uint16_t* a, const uint16_t* b, int64_t m0, int64_t n0,
                                        int64_t first_tile, int64_t M, int64_t N, int64_t K_, int64_t lda, int64_t ldb)
      : k0(first_tile * C::BK), K(K_), b_step(C::B_K_CONTIGUOUS ? C::BK : C::BK * ldb) {
#pragma unroll
    for (int i = 0; i < A_CHUNKS; ++i) {
      const int c = threadIdx.x + i * C::THREADS;
      const int row = c / CHUNKS_PER_K_ROW;
      a_k[i] = (c % CHUNKS_PER_K_ROW) * 8;
      a_in[i] = m0 + row < M;
      a_at[i] = a + (a_in[i] ? (m0 + row) * lda + k0 + a_k[i] : 0);
    }
#pragma unroll
    for (int i = 0; i < B_CHUNKS; ++i) {
      const int c = threadIdx.x + i * C::THREADS;
      if (C::B_K_CONTIGUOUS) {
        const int row = c / CHUNKS_PER_K_ROW;
        b_k[i] = (c % CHUNKS_PER_K_ROW) * 8;
        b_in[i] = n0 + row < N;
        b_at[i] = b + (b_in[i] ? (n0 + row) * ldb + k0 + b_k[i] : 0);
      } else {
        const int row = c / (C::BN / 8), col = (c % (C::BN / 8)) * 8;
        b_k[i] = row;
        b_in[i] = n0 + col < N;  // N % 8 == 0 here: a chunk is wholly inside or outside
        b_at[i] = b + (b_in[i] ? (k0 + row) * ldb + n0 + col : 0);
      }
    }
  }

  /// The next slice into stage buffers `sa`, `sb`; then advances.
  __device__ __forceinline__ void fill(uint16_t* sa, uint16_t* sb) {
#pragma unroll
    for (int i = 0; i < A_CHUNKS; ++i) {
      const int c = threadIdx.x + i * C::THREADS;
      const bool valid = a_in[i] && k0 + a_k[i] < K;
      copy16(sa + (c / CHUNKS_PER_K_ROW) * C::A_ROW + a_k[i], a_at[i], valid);
      if (a_in[i]) a_at[i] += C::BK;
    }
#pragma unroll
    for (int i = 0; i < B_CHUNKS; ++i) {
      const int c = threadIdx.x + i * C::THREADS;
      if (C::B_K_CONTIGUOUS) {
        const bool valid = b_in[i] && k0 + b_k[i] < K;
        copy16(sb + (c / CHUNKS_PER_K_ROW) * C::B_ROW + b_k[i], b_at[i], valid);
      } else {
        const bool valid = b_in[i] && k0 + b_k[i] < K;
        copy16(sb + b_k[i] * C::B_ROW + (c % (C::BN / 8)) * 8, b_at[i], valid);
      }
      if (b_in[i]) b_at[i] += b_step;
    }
    k0 += C::BK;
  }
};

/// The MMAs of one shared stage: every 16-deep step of BK.
template <class C>
__device__ __forceinline__ void mma_stage(float (&acc)[C::MI][C::NI][4], const uint16_t* sa, const uint16_t* sb,
                                          int warp_m, int warp_n, int lane) {
#pragma unroll
  for (int kk = 0; kk < C::BK; kk += 16) {
    unsigned af[C::MI][4];
#pragma unroll
    for (int mi = 0; mi < C::MI; ++mi) {
      const int row = warp_m * C::WM + mi * 16 + (lane % 16);
      const int col = kk + (lane / 16) * 8;
      ldmatrix_x4(af[mi], sa + row * C::A_ROW + col);
    }
    unsigned bf[C::NI][2];
#pragma unroll
    for (int ni = 0; ni < C::NI; ni += 2) {
      unsigned r[4];
      if (C::B_K_CONTIGUOUS) {
        const int n = warp_n * C::WN + ni * 8 + (lane % 8) + (lane / 16) * 8;
        const int k = kk + ((lane / 8) % 2) * 8;
        ldmatrix_x4(r, sb + n * C::B_ROW + k);
      } else {
        const int k = kk + (lane % 8) + ((lane / 8) % 2) * 8;
        const int n = warp_n * C::WN + ni * 8 + (lane / 16) * 8;
        ldmatrix_x4_trans(r, sb + k * C::B_ROW + n);
      }
      bf[ni][0] = r[0];
      bf[ni][1] = r[1];
      bf[ni + 1][0] = r[2];
      bf[ni + 1][1] = r[3];
    }
#pragma unroll
    for (int mi = 0; mi < C::MI; ++mi) {
#pragma unroll
      for (int ni = 0; ni < C::NI; ++ni) Mma<C::HALF>::run(acc[mi][ni], af[mi], bf[ni]);
    }
  }
}

/// Calls f(i, m, n, value) for each accumulator element i of this thread
/// inside M x N: element r of MMA (mi, ni) sits at row lane / 4 (+ 8 for
/// r >= 2), column 2 * (lane % 4) (+ 1 for odd r) of its 16 x 8 piece.
template <class C, class F>
__device__ __forceinline__ void for_each_accumulator(float (&acc)[C::MI][C::NI][4], int64_t m0, int64_t n0,
                                                     int64_t M, int64_t N, int warp_m, int warp_n, int lane,
                                                     const F& f) {
#pragma unroll
  for (int mi = 0; mi < C::MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < C::NI; ++ni)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int64_t m = m0 + warp_m * C::WM + mi * 16 + lane / 4 + (r / 2) * 8;
        const int64_t n = n0 + warp_n * C::WN + ni * 8 + (lane % 4) * 2 + (r % 2);
        if (m < M && n < N) f((mi * C::NI + ni) * 4 + r, m, n, acc[mi][ni][r]);
      }
}

/// The epilogue as the compiler prints it: `value(m, n, sum)` computes what
/// the element's stores write (its loads and arithmetic; it stores nothing)
/// and `store(m, n, values)` writes it. A kernel computes the values of all
/// of a thread's elements before it stores any: with one functor doing both,
/// each element's stores would stand between its loads and the next
/// element's, and the compiler keeps a load after a store to a buffer that
/// may be the same one, so the loads' latencies would follow one another.
template <class Value, class Store>
struct SplitEpilogue {
  Value value;
  Store store;
};

/// One element through `epi`: its value, then its store.
template <class Epilogue>
__device__ __forceinline__ void epilogue_element(const Epilogue& epi, int64_t m, int64_t n, float v) {
  epi(m, n, v);
}
template <class Value, class Store>
__device__ __forceinline__ void epilogue_element(const SplitEpilogue<Value, Store>& epi, int64_t m, int64_t n,
                                                 float v) {
  epi.store(m, n, epi.value(m, n, v));
}

/// Runs `epi` on the elements each(f) visits as f(i, m, n, sum), i the
/// element's place among the thread's COUNT (a constant once unrolled): a
/// SplitEpilogue's values of every element first, then its stores; any other
/// functor, epi(m, n, sum), element by element.
template <int COUNT, class Epilogue, class Each>
__device__ __forceinline__ void run_epilogue(const Epilogue& epi, const Each& each) {
  each([&](int, int64_t m, int64_t n, float v) { epi(m, n, v); });
}
template <int COUNT, class Value, class Store, class Each>
__device__ __forceinline__ void run_epilogue(const SplitEpilogue<Value, Store>& epi, const Each& each) {
  decltype(epi.value(int64_t(0), int64_t(0), 0.0f)) values[COUNT];
  each([&](int i, int64_t m, int64_t n, float v) { values[i] = epi.value(m, n, v); });
  each([&](int i, int64_t m, int64_t n, float) { epi.store(m, n, values[i]); });
}

/// Split-K's fix-up, shared by both kernels: every split stores its partial
/// sums (`each(f)` calls f(i, m, n, float& v) on each of the thread's values) to
/// `workspace` (SPLIT_K * M * N floats); the last split of the tile to
/// arrive, counted in `*counter`, replaces its values by the sums over
/// splits in split order (the same order on every run) and returns true.
/// The counter goes back to zero for the next launch.
template <int SPLIT_K, class ForEach>
__device__ __forceinline__ bool combine_splits(const ForEach& each, int64_t split, int64_t M, int64_t N,
                                               float* workspace, int* counter) {
  float* mine = workspace + split * M * N;
  each([&](int, int64_t m, int64_t n, float& v) { mine[m * N + n] = v; });
  __threadfence();
  __syncthreads();
  __shared__ int arrived;
  if (threadIdx.x == 0) arrived = atomicAdd(counter, 1);
  __syncthreads();
  if (arrived != SPLIT_K - 1) return false;
  __threadfence();
  each([&](int, int64_t m, int64_t n, float& v) {
    float sum = 0.0f;
    for (int p = 0; p < SPLIT_K; ++p) sum += __ldcg(workspace + (p * M + m) * N + n);
    v = sum;
  });
  if (threadIdx.x == 0) *counter = 0;
  return true;
}

/// The whole kernel body: blockIdx.x picks the C tile (row-major over tiles),
/// blockIdx.y the K split. `workspace` (SPLIT_K * M * N floats) and
/// `counters` (one int per tile, zero before the first launch) only with
/// SPLIT_K > 1.
template <class C, class Epilogue>
__device__ __forceinline__ void gemm(const uint16_t* a, const uint16_t* b, int64_t M, int64_t N, int64_t K,
                                     int64_t lda, int64_t ldb, const Epilogue& epi, float* workspace,
                                     int* counters) {
  extern __shared__ __align__(16) uint16_t cppi_gemm_shared[];
  uint16_t* sa = cppi_gemm_shared;
  uint16_t* sb = cppi_gemm_shared + C::STAGES * C::A_STAGE;
  const int64_t tiles_n = (N + C::BN - 1) / C::BN;
  const int64_t tile = blockIdx.x;
  const int64_t m0 = (tile / tiles_n) * C::BM, n0 = (tile % tiles_n) * C::BN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_m = warp / C::WARPS_N, warp_n = warp % C::WARPS_N;

  // This split's K tiles: a contiguous run of them (each row of A and B is
  // read in long runs, not interleaved with the other splits').
  const int64_t k_tiles = (K + C::BK - 1) / C::BK;
  const int64_t split = C::SPLIT_K > 1 ? blockIdx.y : 0;
  const int64_t per_split = (k_tiles + C::SPLIT_K - 1) / C::SPLIT_K;
  const int64_t first_tile = split * per_split;
  const int64_t my_tiles = k_tiles > first_tile ? min(per_split, k_tiles - first_tile) : 0;

  float acc[C::MI][C::NI][4];
#pragma unroll
  for (int mi = 0; mi < C::MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < C::NI; ++ni)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[mi][ni][r] = 0.0f;

  TileLoader<C> loader(a, b, m0, n0, first_tile, M, N, K, lda, ldb);
#pragma unroll
  for (int s = 0; s < C::STAGES - 1; ++s) {
    if (s < my_tiles) loader.fill(sa + s * C::A_STAGE, sb + s * C::B_STAGE);
    commit();
  }
  for (int64_t t = 0; t < my_tiles; ++t) {
    wait<C::STAGES - 2>();
    __syncthreads();  // tile t is in; every warp is done with the stage refilled below
    if (t + C::STAGES - 1 < my_tiles) {
      const int s = (t + C::STAGES - 1) % C::STAGES;
      loader.fill(sa + s * C::A_STAGE, sb + s * C::B_STAGE);
    }
    commit();
    const int s = t % C::STAGES;
    mma_stage<C>(acc, sa + s * C::A_STAGE, sb + s * C::B_STAGE, warp_m, warp_n, lane);
  }
  wait<0>();

  if (C::SPLIT_K > 1 && !combine_splits<C::SPLIT_K>(
                           [&](const auto& f) { for_each_accumulator<C>(acc, m0, n0, M, N, warp_m, warp_n, lane, f); },
                           split, M, N, workspace, counters + tile))
    return;
  for_each_accumulator<C>(acc, m0, n0, M, N, warp_m, warp_n, lane,
                          [&](int, int64_t m, int64_t n, float v) { epilogue_element(epi, m, n, v); });
}

// ---------------------------------------------------------------------------
// Small M (decode and small batches): B streamed straight into registers.
//
// With M <= 16 a GEMM reads B once and does little else; the tile kernel
// above, which stages B in shared memory (a cp.async and an ldmatrix per 16
// bytes), streams it at 2.8 TB/s where cuBLAS reaches 3.5 (H200, stop 48;
// docs/gemm-templates.md). Here each lane loads
// 16 bytes of B (8 consecutive k of one column n) straight into the MMA's B
// registers: a warp's load covers 8 columns x 32 k, two m16n8k16 MMAs. The
// sum over k does not care in which order its terms come, so logical k of
// the MMA is mapped to physical k so that one lane's 16 bytes are exactly
// the pairs it holds: in MMA step j (of two per 32 k), the pair of logical
// k 2q + e sits at physical 8q + 4j + e and that of 2q + 8 + e at
// 8q + 4j + 2 + e (q = lane % 4). A's fragment is loaded with the same map.
//
// Per block: 8 * NW columns (each warp's NW column groups share its A
// registers), WARPS warps splitting the block's K range in 32-k steps
// (warp w takes steps w, w + WARPS, ...: together they read long runs of
// each row of B), UNROLL steps loaded before their MMAs (bytes in flight),
// summed across warps in shared memory in warp order, and SPLIT_K blocks
// along K (blockIdx.y) combined as in the tile kernel. B is K-contiguous
// (a Linear's weight); K, lda and ldb are multiples of 8; A and B 16-byte
// aligned.
// ---------------------------------------------------------------------------

template <int MT_, int NW_, int WARPS_, int UNROLL_, int SPLIT_K_, bool HALF_, bool PREFETCH_ = false>
struct SkinnyConfig {
  static constexpr int MT = MT_, NW = NW_, WARPS = WARPS_, UNROLL = UNROLL_, SPLIT_K = SPLIT_K_;
  static constexpr bool HALF = HALF_;
  /// B's loads ask the L2 for the 256 bytes around them (the warps after
  /// this one read the rest of each run).
  static constexpr bool PREFETCH = PREFETCH_;
  static constexpr int THREADS = WARPS * 32;
  static constexpr int BN = 8 * NW;                  // columns per block
  static constexpr int VALUES = MT * NW * 4;         // accumulators per lane
  static constexpr int PER_THREAD = VALUES / WARPS;  // sums each thread finishes
  static constexpr int SHARED_BYTES = WARPS * VALUES * 32 * 4;
  static_assert(VALUES % WARPS == 0, "the cross-warp sums split evenly over the block's threads");
};

/// 16 bytes of a row, or zeros outside the matrix; read through the
/// non-coherent path (the operands are not written during the kernel).
template <bool PREFETCH = false>
__device__ __forceinline__ uint4 load16(const uint16_t* p, bool valid) {
  if (!valid) return make_uint4(0, 0, 0, 0);
  if (!PREFETCH) return __ldg(reinterpret_cast<const uint4*>(p));
  uint4 v;
  asm volatile("ld.global.nc.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

/// The block's warps' VALUES accumulators per lane (`acc`), added in warp
/// order (the same order on every run) through shared memory: this thread's
/// PER_THREAD sums, each with the accumulator's index and the lane that held
/// it. Dynamic shared memory: WARPS * VALUES * 32 floats.
template <int VALUES, int WARPS>
__device__ __forceinline__ void sum_over_warps(const float* acc, float (&sum)[VALUES / WARPS],
                                               int (&value)[VALUES / WARPS], int (&from)[VALUES / WARPS]) {
  static_assert(VALUES % WARPS == 0, "the sums split evenly over the block's threads");
  extern __shared__ __align__(16) float cppi_gemm_partials[];  // [warp][value][lane]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int v = 0; v < VALUES; ++v) cppi_gemm_partials[(warp * VALUES + v) * 32 + lane] = acc[v];
  __syncthreads();
#pragma unroll
  for (int p = 0; p < VALUES / WARPS; ++p) {
    const int e = threadIdx.x + p * WARPS * 32;  // (value, lane) of a warp's accumulators
    value[p] = e / 32, from[p] = e % 32;
    sum[p] = 0.0f;
    for (int w = 0; w < WARPS; ++w) sum[p] += cppi_gemm_partials[(w * VALUES + value[p]) * 32 + from[p]];
  }
}

template <class C, class Epilogue>
__device__ __forceinline__ void gemm_skinny(const uint16_t* a, const uint16_t* b, int64_t M, int64_t N, int64_t K,
                                            int64_t lda, int64_t ldb, const Epilogue& epi, float* workspace,
                                            int* counters) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, q = lane % 4;
  const int64_t n0 = blockIdx.x * int64_t(C::BN);
  const int64_t steps = (K + 31) / 32;
  const int64_t split = C::SPLIT_K > 1 ? blockIdx.y : 0;
  const int64_t per_split = (steps + C::SPLIT_K - 1) / C::SPLIT_K;
  const int64_t first = split * per_split;
  const int64_t last = min(steps, first + per_split);

  const uint16_t* a_row[C::MT][2];
  bool a_in[C::MT][2];
#pragma unroll
  for (int t = 0; t < C::MT; ++t)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t m = 16 * t + 8 * h + g;
      a_in[t][h] = m < M;
      a_row[t][h] = a + (a_in[t][h] ? m * lda : 0) + 8 * q;
    }
  const uint16_t* b_row[C::NW];
  bool b_in[C::NW];
#pragma unroll
  for (int i = 0; i < C::NW; ++i) {
    const int64_t n = n0 + 8 * i + g;
    b_in[i] = n < N;
    b_row[i] = b + (b_in[i] ? n * ldb : 0) + 8 * q;
  }

  float acc[C::MT][C::NW][4];
#pragma unroll
  for (int t = 0; t < C::MT; ++t)
#pragma unroll
    for (int i = 0; i < C::NW; ++i)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[t][i][r] = 0.0f;

  for (int64_t s0 = first + warp; s0 < last; s0 += C::UNROLL * C::WARPS) {
    uint4 av[C::UNROLL][C::MT][2], bv[C::UNROLL][C::NW];
#pragma unroll
    for (int u = 0; u < C::UNROLL; ++u) {
      const int64_t s = s0 + u * C::WARPS;
      const int64_t k = s * 32 + 8 * q;
      const bool valid = s < last && k < K;  // K % 8 == 0: a 16-byte run is wholly in or out
#pragma unroll
      for (int i = 0; i < C::NW; ++i) bv[u][i] = load16<C::PREFETCH>(b_row[i] + s * 32, valid && b_in[i]);
#pragma unroll
      for (int t = 0; t < C::MT; ++t)
#pragma unroll
        for (int h = 0; h < 2; ++h) av[u][t][h] = load16(a_row[t][h] + s * 32, valid && a_in[t][h]);
    }
#pragma unroll
    for (int u = 0; u < C::UNROLL; ++u)
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int t = 0; t < C::MT; ++t) {
          const unsigned* lo = reinterpret_cast<const unsigned*>(&av[u][t][0]);
          const unsigned* hi = reinterpret_cast<const unsigned*>(&av[u][t][1]);
          const unsigned af[4] = {lo[2 * j], hi[2 * j], lo[2 * j + 1], hi[2 * j + 1]};
#pragma unroll
          for (int i = 0; i < C::NW; ++i) {
            const unsigned* bw = reinterpret_cast<const unsigned*>(&bv[u][i]);
            const unsigned bf[2] = {bw[2 * j], bw[2 * j + 1]};
            Mma<C::HALF>::run(acc[t][i], af, bf);
          }
        }
  }

  float sum[C::PER_THREAD];
  int value[C::PER_THREAD], from[C::PER_THREAD];
  sum_over_warps<C::VALUES, C::WARPS>(&acc[0][0][0], sum, value, from);
  int64_t at_m[C::PER_THREAD], at_n[C::PER_THREAD];
#pragma unroll
  for (int p = 0; p < C::PER_THREAD; ++p) {
    const int t = value[p] / (4 * C::NW), i = (value[p] / 4) % C::NW, r = value[p] % 4;
    at_m[p] = 16 * t + (from[p] / 4) + (r / 2) * 8;
    at_n[p] = n0 + 8 * i + (from[p] % 4) * 2 + (r % 2);
  }
  const auto each = [&](const auto& f) {
#pragma unroll
    for (int p = 0; p < C::PER_THREAD; ++p)
      if (at_m[p] < M && at_n[p] < N) f(p, at_m[p], at_n[p], sum[p]);
  };
  if (C::SPLIT_K > 1 && !combine_splits<C::SPLIT_K>(each, split, M, N, workspace, counters + blockIdx.x)) return;
  run_epilogue<C::PER_THREAD>(epi, each);
}

// ---------------------------------------------------------------------------
// Small M with B N-contiguous (stored K x N, row stride ldb: x @ w with w as
// GPT-2's Conv1D keeps it). A lane loads VEC consecutive columns of four
// consecutive rows of B and pairs each column's values across two rows with
// a byte permute: VEC MMA B fragments, one per 8-column MMA block. Logical
// column g (lane / 4) of MMA block i is physical column n0 + VEC * g + i, and
// logical k 2q + e of a 16-deep step is physical k0 + 4q + e, 2q + 8 + e is
// k0 + 4q + 2 + e (q = lane % 4), so A's fragment is one 8-byte load per row.
// A warp covers 8 * VEC columns and 16 k a step; the block's warps split K
// (interleaved steps, UNROLL at a time) and add their sums as gemm_skinny's
// do. One 16-row MMA tile (M <= 16); K, lda and ldb multiples of 8; N a
// multiple of VEC; A and B 16-byte aligned.
// ---------------------------------------------------------------------------

template <int VEC_, int WARPS_, int UNROLL_, bool HALF_>
struct SkinnyNConfig {
  static constexpr int VEC = VEC_, WARPS = WARPS_, UNROLL = UNROLL_;
  static constexpr bool HALF = HALF_;
  static constexpr int THREADS = WARPS * 32;
  static constexpr int BN = 8 * VEC;      // columns per block
  static constexpr int VALUES = VEC * 4;  // accumulators per lane
  static constexpr int SHARED_BYTES = WARPS * VALUES * 32 * 4;
  static_assert(VEC == 4 || VEC == 8, "8- or 16-byte loads of B");
};

/// VEC consecutive 16-bit values from `p` (VEC / 2 words), or zeros.
template <int VEC>
__device__ __forceinline__ void load_columns(unsigned (&w)[VEC / 2], const uint16_t* p, bool valid) {
  if (VEC == 8) {
    const uint4 v = valid ? __ldg(reinterpret_cast<const uint4*>(p)) : make_uint4(0, 0, 0, 0);
    w[0] = v.x, w[1] = v.y, w[VEC / 2 - 2] = v.z, w[VEC / 2 - 1] = v.w;
  } else {
    const uint2 v = valid ? __ldg(reinterpret_cast<const uint2*>(p)) : make_uint2(0, 0);
    w[0] = v.x, w[VEC / 2 - 1] = v.y;
  }
}

template <class C, class Epilogue>
__device__ __forceinline__ void gemm_skinny_n(const uint16_t* a, const uint16_t* b, int64_t M, int64_t N, int64_t K,
                                              int64_t lda, int64_t ldb, const Epilogue& epi) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, q = lane % 4;
  const int64_t n0 = blockIdx.x * int64_t(C::BN);
  const int64_t col = n0 + C::VEC * g;  // this lane's first column
  const bool col_in = col < N;          // N % VEC == 0: the lane's columns are wholly in or out
  const int64_t steps = (K + 15) / 16;
  const uint16_t* a_lo = a + (g < M ? g * lda : 0) + 4 * q;
  const uint16_t* a_hi = a + (g + 8 < M ? (g + 8) * lda : 0) + 4 * q;
  const uint16_t* b_at = b + (col_in ? col : 0) + 4 * q * ldb;

  float acc[C::VEC][4];
#pragma unroll
  for (int i = 0; i < C::VEC; ++i)
#pragma unroll
    for (int r = 0; r < 4; ++r) acc[i][r] = 0.0f;

  for (int64_t s0 = warp; s0 < steps; s0 += C::UNROLL * C::WARPS) {
    unsigned rows[C::UNROLL][4][C::VEC / 2];
    uint2 alo[C::UNROLL], ahi[C::UNROLL];
#pragma unroll
    for (int u = 0; u < C::UNROLL; ++u) {
      const int64_t s = s0 + u * C::WARPS;
      const int64_t k = s * 16 + 4 * q;
      const bool valid = s < steps && k < K;  // K % 8 == 0 and k % 4 == 0: four rows wholly in or out
      const uint2 zero = make_uint2(0, 0);
      alo[u] = valid && g < M ? __ldg(reinterpret_cast<const uint2*>(a_lo + s * 16)) : zero;
      ahi[u] = valid && g + 8 < M ? __ldg(reinterpret_cast<const uint2*>(a_hi + s * 16)) : zero;
#pragma unroll
      for (int r = 0; r < 4; ++r) load_columns<C::VEC>(rows[u][r], b_at + (s * 16 + r) * ldb, valid && col_in);
    }
#pragma unroll
    for (int u = 0; u < C::UNROLL; ++u) {
      const unsigned af[4] = {alo[u].x, ahi[u].x, alo[u].y, ahi[u].y};
#pragma unroll
      for (int i = 0; i < C::VEC; ++i) {
        // Column i's values of rows 0 and 1, then of rows 2 and 3, as (low, high) pairs.
        const unsigned select = i % 2 ? 0x7632 : 0x5410;
        const unsigned bf[2] = {__byte_perm(rows[u][0][i / 2], rows[u][1][i / 2], select),
                                __byte_perm(rows[u][2][i / 2], rows[u][3][i / 2], select)};
        Mma<C::HALF>::run(acc[i], af, bf);
      }
    }
  }

  float sum[C::VALUES / C::WARPS];
  int value[C::VALUES / C::WARPS], from[C::VALUES / C::WARPS];
  sum_over_warps<C::VALUES, C::WARPS>(&acc[0][0], sum, value, from);
  run_epilogue<C::VALUES / C::WARPS>(epi, [&](const auto& f) {
#pragma unroll
    for (int p = 0; p < C::VALUES / C::WARPS; ++p) {
      const int i = value[p] / 4, r = value[p] % 4;
      const int64_t m = from[p] / 4 + (r / 2) * 8;
      const int64_t n = n0 + C::VEC * ((from[p] % 4) * 2 + (r % 2)) + i;
      if (m < M && n < N) f(p, m, n, sum[p]);
    }
  });
}

// ---------------------------------------------------------------------------
// Hopper (sm_90): the weight streamed by the copy engine (TMA), multiplied by
// wgmma, with the operands swapped for small M.
//
// wgmma multiplies 64 rows of its first operand by 8 to 256 columns of its
// second, both read from shared memory. With M small the weight takes the
// 64-row side: each consumer warpgroup owns 64 rows of B (64 output columns
// n) and multiplies them by A's M rows padded to MN (wgmma's n: 8, 16, 32 or
// 64), so C's transpose comes out of the MMA, MN / 2 accumulators a thread.
// One thread of the producer warpgroup copies each stage (BOXES boxes of
// 128 bytes of k a row, the 128-byte swizzle) of the block's B rows and of A
// into one of STAGES shared buffers with 2D tensor-map copies on that stage's
// "full" mbarrier; the consumers wait on it, run four wgmmas a box per
// warpgroup, and arrive on the stage's "empty" barrier, which the producer
// waits on before refilling it. Bytes in flight are the stages' (no registers
// hold them). Rows and k past the matrices are the copy engine's zeros. The
// blocks along y split the stages: CLUSTER blocks of a cluster add their
// sums through shared memory, SPLIT_K clusters through global memory as the
// tile kernel does. The tensor maps (cuTensorMapEncodeTiled, 128-byte
// swizzle, boxes 128 bytes wide) are built on the host: A's box MN rows of
// k, B's 64 * CONSUMERS rows of k (K-contiguous B) or 64 k rows of 64
// columns.
// ---------------------------------------------------------------------------

/// The 128 opaque bytes of a CUtensorMap, filled by cuTensorMapEncodeTiled
/// on the host and passed by value as a __grid_constant__ parameter.
struct alignas(64) TensorMap {
  unsigned long long raw[16];
};

__device__ __forceinline__ void barrier_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(bar)), "r"(count));
}
/// The producer's arrival, announcing the bytes the copies will complete.
__device__ __forceinline__ void barrier_expect_bytes(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(bar)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void barrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(bar)) : "memory");
}
__device__ __forceinline__ void barrier_wait(uint64_t* bar, unsigned phase) {
  unsigned done = 0;
  while (!done)
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(shared_address(bar)), "r"(phase)
                 : "memory");
}
/// One 2D box of the tensor map at (x = k, y = row) into shared memory; its
/// bytes complete on `bar`.
__device__ __forceinline__ void copy_box(void* shared, const TensorMap& map, uint64_t* bar, int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::
          "r"(shared_address(shared)),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(x), "r"(y), "r"(shared_address(bar))
      : "memory");
}

/// wgmma's descriptor of an operand in 128-byte-swizzled rows, 8 rows (1024
/// bytes) per swizzle atom, `tile` 1024-byte aligned but for the k16 step's
/// offset. K-major (rows along M or N, 64 k a row): the step moves 32 bytes
/// along the row; the next 8 rows are 1024 bytes on. MN-major (rows along K,
/// 64 columns of M a row; one row's width is all of wgmma's 64): the step
/// moves 16 rows (2048 bytes) and the next 8 k are 1024 bytes on, which both
/// offset fields give (the other one has no second 64 columns to reach).
/// Wider MN-major operands (B of up to 256 columns) keep each 64 columns'
/// rows in a box of their own, `columns_apart` bytes from the next.
template <bool MN_MAJOR = false>
__device__ __forceinline__ uint64_t swizzled_operand(const void* tile, uint64_t columns_apart = 1024) {
  const uint64_t address = shared_address(tile);
  const uint64_t leading = MN_MAJOR ? columns_apart : 16, stride = 1024;
  return ((address & 0x3FFFF) >> 4) | ((leading >> 4) << 16) | ((stride >> 4) << 32) | (uint64_t(1) << 62);
}

template <int N, bool HALF, bool A_MN_MAJOR = false, bool B_MN_MAJOR = false>
struct Wgmma;  // d (64 x N, float) = a (64 x 16) * b (16 x N) (+ d unless scale_d is 0), both from shared memory

// A_MN_MAJOR: a's 64 rows are contiguous in shared memory (wgmma's transposed
// A; 16-bit types only), else its 16 k are; B_MN_MAJOR likewise for b's N
// columns.
#define CPPI_GEMM_WGMMA_TYPE(N_, HALF_, TYPE, LIST, A, B, SCALE, TRANS_A, TRANS_B, ...)                                \
  template <bool A_MN_MAJOR, bool B_MN_MAJOR>                                                                          \
  struct Wgmma<N_, HALF_, A_MN_MAJOR, B_MN_MAJOR> {                                                                    \
    static __device__ __forceinline__ void run(float* d, uint64_t a, uint64_t b, int scale_d = 1) {                    \
      asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, " SCALE ", 0;\n wgmma.mma_async.sync.aligned.m64n" #N_       \
                   "k16.f32." TYPE "." TYPE " " LIST ", " A ", " B ", p, 1, 1, " TRANS_A ", " TRANS_B ";\n}\n"     \
                   : __VA_ARGS__                                                                                       \
                   : "l"(a), "l"(b), "r"(scale_d), "n"(A_MN_MAJOR ? 1 : 0), "n"(B_MN_MAJOR ? 1 : 0));               \
    }                                                                                                                  \
  };
#define CPPI_GEMM_WGMMA(N_, LIST, A, B, SCALE, TRANS_A, TRANS_B, ...)                           \
  CPPI_GEMM_WGMMA_TYPE(N_, false, "bf16", LIST, A, B, SCALE, TRANS_A, TRANS_B, __VA_ARGS__) \
  CPPI_GEMM_WGMMA_TYPE(N_, true, "f16", LIST, A, B, SCALE, TRANS_A, TRANS_B, __VA_ARGS__)
CPPI_GEMM_WGMMA(8, "{%0, %1, %2, %3}", "%4", "%5", "%6", "%7", "%8", "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]))
CPPI_GEMM_WGMMA(16, "{%0, %1, %2, %3, %4, %5, %6, %7}", "%8", "%9", "%10", "%11", "%12", "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]))
CPPI_GEMM_WGMMA(32, "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}", "%16", "%17", "%18", "%19", "%20", "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]))
CPPI_GEMM_WGMMA(64, "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}", "%32", "%33", "%34", "%35", "%36", "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]))
CPPI_GEMM_WGMMA(128, "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}", "%64", "%65", "%66", "%67", "%68", "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]))
CPPI_GEMM_WGMMA(256, "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}", "%128", "%129", "%130", "%131", "%132", "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127]))
#undef CPPI_GEMM_WGMMA
#undef CPPI_GEMM_WGMMA_TYPE

template <int N, bool A_E5M2 = false, bool B_E5M2 = false>
struct WgmmaFp8;  // d (64 x N, float) = a (64 x 32) * b (32 x N) (+ d unless scale_d is 0), float8_e4m3fn or (A_E5M2, B_E5M2) float8_e5m2, both K-major in shared memory

#define CPPI_GEMM_WGMMA_FP8_TYPES(N_, A_E5M2_, B_E5M2_, TYPES, LIST, A, B, SCALE, ...)                 \
  template <>                                                                                         \
  struct WgmmaFp8<N_, A_E5M2_, B_E5M2_> {                                                             \
    static __device__ __forceinline__ void run(float* d, uint64_t a, uint64_t b, int scale_d = 1) {   \
      asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, " SCALE                                         \
                   ", 0;\n wgmma.mma_async.sync.aligned.m64n" #N_ "k32.f32." TYPES " " LIST ", " A ", " B \
                   ", p, 1, 1;\n}\n"                                                                  \
                   : __VA_ARGS__                                                                      \
                   : "l"(a), "l"(b), "r"(scale_d));                                                   \
    }                                                                                                 \
  };
#define CPPI_GEMM_WGMMA_FP8(N_, LIST, A, B, SCALE, ...)                                          \
  CPPI_GEMM_WGMMA_FP8_TYPES(N_, false, false, "e4m3.e4m3", LIST, A, B, SCALE, __VA_ARGS__)      \
  CPPI_GEMM_WGMMA_FP8_TYPES(N_, false, true, "e4m3.e5m2", LIST, A, B, SCALE, __VA_ARGS__)       \
  CPPI_GEMM_WGMMA_FP8_TYPES(N_, true, false, "e5m2.e4m3", LIST, A, B, SCALE, __VA_ARGS__)       \
  CPPI_GEMM_WGMMA_FP8_TYPES(N_, true, true, "e5m2.e5m2", LIST, A, B, SCALE, __VA_ARGS__)
CPPI_GEMM_WGMMA_FP8(8, "{%0, %1, %2, %3}", "%4", "%5", "%6", "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]))
CPPI_GEMM_WGMMA_FP8(16, "{%0, %1, %2, %3, %4, %5, %6, %7}", "%8", "%9", "%10", "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]))
CPPI_GEMM_WGMMA_FP8(32, "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}", "%16", "%17", "%18", "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]))
CPPI_GEMM_WGMMA_FP8(64, "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}", "%32", "%33", "%34", "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]))
CPPI_GEMM_WGMMA_FP8(128, "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}", "%64", "%65", "%66", "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]))
CPPI_GEMM_WGMMA_FP8(256, "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}", "%128", "%129", "%130", "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127]))
#undef CPPI_GEMM_WGMMA_FP8
#undef CPPI_GEMM_WGMMA_FP8_TYPES

/// Keeps the compiler from moving reads or writes of the accumulators across
/// the asynchronous MMAs (they are registers wgmma writes behind its back).
template <int VALUES>
__device__ __forceinline__ void pin(float (&acc)[VALUES]) {
#pragma unroll
  for (int i = 0; i < VALUES; ++i) asm volatile("" : "+f"(acc[i])::"memory");
}

/// The thread block cluster's shared memory (sm_90): rank, barrier, and a
/// store into another block's shared memory at the place of `local`.
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
__device__ __forceinline__ void store_to_block(float* local, unsigned rank, float v) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(shared_address(local)), "r"(rank));
  asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(remote), "f"(v) : "memory");
}

template <int MN_, int CONSUMERS_, int STAGES_, int SPLIT_K_, int BOXES_, int CLUSTER_, bool HALF_,
          bool B_K_CONTIGUOUS_ = true, bool FP8_ = false, bool A_E5M2_ = false, bool B_E5M2_ = false>
struct SwappedConfig {
  static constexpr int MN = MN_, CONSUMERS = CONSUMERS_, STAGES = STAGES_, SPLIT_K = SPLIT_K_, BOXES = BOXES_;
  /// Blocks of a cluster (along y; the kernel is declared
  /// __cluster_dims__(1, CLUSTER, 1)) split K further and add their sums
  /// through shared memory into rank 0, in rank order; SPLIT_K clusters are
  /// combined through global memory.
  static constexpr int CLUSTER = CLUSTER_;
  static constexpr bool HALF = HALF_;
  /// B stored N x K (a Linear's weight), else K x N (GPT-2's Conv1D): its
  /// boxes are then 64 k rows of 64 columns, one per warpgroup, and wgmma
  /// reads them as its MN-major (transposed) first operand.
  static constexpr bool B_K_CONTIGUOUS = B_K_CONTIGUOUS_;
  /// A and B of float8_e4m3fn (torch._scaled_mm's; HALF unused): a box's
  /// 128 bytes are 128 k, multiplied 32 k at a time. Each stage's products
  /// are summed in their own accumulators and added to the kernel's in
  /// float32 (wgmma's FP8 sums keep fewer bits over long K).
  static constexpr bool FP8 = FP8_;
  /// FP8: A's or B's elements float8_e5m2 instead (torch._scaled_mm takes
  /// one of each kind, or two e4m3).
  static constexpr bool A_E5M2 = A_E5M2_, B_E5M2 = B_E5M2_;
  static_assert(!FP8 || B_K_CONTIGUOUS, "FP8 wgmma reads K-major operands only");
  static constexpr int BOX_K = FP8 ? 128 : 64;  // k per 128-byte box row
  static_assert(MN == 8 || MN == 16 || MN == 32 || MN == 64, "wgmma n of a Wgmma specialisation");
  static constexpr int THREADS = 128 * (CONSUMERS + 1);  // the last warpgroup produces
  static constexpr int BN = 64 * CONSUMERS;              // columns of C (rows of B) per block
  static constexpr int BK = BOX_K * BOXES;               // k per stage: BOXES 128-byte swizzled boxes
  static constexpr int B_BOX = BN * 128, A_BOX = MN * 128;  // multiples of 1024: swizzle atoms stay aligned
  static constexpr int STAGE_BYTES = BOXES * (B_BOX + A_BOX);     // [box][B rows], then [box][A rows]
  static constexpr int SHARED_BYTES = STAGES * STAGE_BYTES + 2 * STAGES * 8 + 1024;  // + barriers, alignment
  static_assert((CLUSTER - 1) * (MN / 2) * 128 * CONSUMERS * 4 <= STAGES * STAGE_BYTES,
                "the other ranks' sums fit in rank 0's stages");
};

template <class C, class Epilogue>
__device__ __forceinline__ void gemm_tma_swapped(const TensorMap& a_map, const TensorMap& b_map, int64_t M, int64_t N,
                                                 int64_t K, const Epilogue& epi, float* workspace, int* counters) {
  extern __shared__ __align__(1024) unsigned char cppi_gemm_stages[];
  unsigned char* stages = cppi_gemm_stages + ((1024 - (shared_address(cppi_gemm_stages) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(stages + C::STAGES * C::STAGE_BYTES);
  uint64_t* empty = full + C::STAGES;
  const int group = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int64_t n0 = blockIdx.x * int64_t(C::BN);
  const int64_t slices = (K + C::BK - 1) / C::BK;
  const int64_t parts = C::SPLIT_K * C::CLUSTER, part = blockIdx.y;  // a cluster's blocks: consecutive parts
  const int64_t per_part = (slices + parts - 1) / parts;
  const int64_t first = part * per_part;
  const int64_t count = max(int64_t(0), min(slices, first + per_part) - first);

  if (threadIdx.x == 0) {
    for (int s = 0; s < C::STAGES; ++s) {
      barrier_init(&full[s], 1);
      barrier_init(&empty[s], 128 * C::CONSUMERS);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  float acc[C::MN / 2];
#pragma unroll
  for (int i = 0; i < C::MN / 2; ++i) acc[i] = 0.0f;
  if (group == C::CONSUMERS) {
    if (threadIdx.x % 128 == 0)
      for (int64_t i = 0; i < count; ++i) {
        const int s = i % C::STAGES;
        if (i >= C::STAGES) barrier_wait(&empty[s], (i / C::STAGES - 1) & 1);
        unsigned char* stage = stages + s * C::STAGE_BYTES;
        barrier_expect_bytes(&full[s], C::STAGE_BYTES);
#pragma unroll
        for (int x = 0; x < C::BOXES; ++x) {
          const int k = int((first + i) * C::BK + C::BOX_K * x);
          if (C::B_K_CONTIGUOUS)
            copy_box(stage + x * C::B_BOX, b_map, &full[s], k, int(n0));
          else
#pragma unroll
            for (int c = 0; c < C::CONSUMERS; ++c) copy_box(stage + x * C::B_BOX + c * 64 * 128, b_map, &full[s],
                                                            int(n0) + 64 * c, k);
          copy_box(stage + C::BOXES * C::B_BOX + x * C::A_BOX, a_map, &full[s], k, 0);
        }
      }
  } else {
    for (int64_t i = 0; i < count; ++i) {
      const int s = i % C::STAGES;
      barrier_wait(&full[s], (i / C::STAGES) & 1);
      const unsigned char* stage = stages + s * C::STAGE_BYTES;
      float part[C::FP8 ? C::MN / 2 : 1];  // FP8: this stage's sums
#pragma unroll
      for (int v = 0; v < (C::FP8 ? C::MN / 2 : 1); ++v) part[v] = 0.0f;
      pin(acc);
      pin(part);
      asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
      for (int x = 0; x < C::BOXES; ++x) {
        const unsigned char* b_tile = stage + x * C::B_BOX + group * 64 * 128;
        const unsigned char* a_tile = stage + C::BOXES * C::B_BOX + x * C::A_BOX;
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {  // 32 bytes of k a step
          if constexpr (C::FP8)
            WgmmaFp8<C::MN, C::B_E5M2, C::A_E5M2>::run(part, swizzled_operand(b_tile + 32 * kk),
                                                       swizzled_operand(a_tile + 32 * kk));
          else
            Wgmma<C::MN, C::HALF, !C::B_K_CONTIGUOUS>::run(
                acc, swizzled_operand<!C::B_K_CONTIGUOUS>(b_tile + (C::B_K_CONTIGUOUS ? 32 : 2048) * kk),
                swizzled_operand(a_tile + 32 * kk));
        }
      }
      asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
      asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
      pin(acc);
      pin(part);
      if constexpr (C::FP8)
#pragma unroll
        for (int v = 0; v < C::MN / 2; ++v) acc[v] += part[v];
      barrier_arrive(&empty[s]);
    }
  }

  // Accumulator i of a thread: row 16 * warp + lane / 4 (+ 8) of the
  // warpgroup's 64 rows of B (n), column 8 * (i / 4) + 2 * (lane % 4) (+ 1)
  // of A's rows (m).
  const auto each = [&](const auto& f) {
    if (group == C::CONSUMERS) return;
#pragma unroll
    for (int i = 0; i < C::MN / 2; ++i) {
      const int64_t n = n0 + 64 * group + 16 * warp + lane / 4 + 8 * ((i % 4) / 2);
      const int64_t m = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
      if (m < M && n < N) f(i, m, n, acc[i]);
    }
  };
  if (C::CLUSTER > 1) {
    // Rank r > 0 puts its sums in rank 0's stages (all consumed: the first
    // barrier), rank 0 adds them in rank order after the second.
    float* sums = reinterpret_cast<float*>(stages);  // [rank - 1][value][consumer thread]
    const unsigned rank = cluster_rank();
    constexpr int VALUES = C::MN / 2, CONSUMER_THREADS = 128 * C::CONSUMERS;
    cluster_sync();
    if (rank != 0 && group < C::CONSUMERS)
#pragma unroll
      for (int i = 0; i < VALUES; ++i)
        store_to_block(sums + ((rank - 1) * VALUES + i) * CONSUMER_THREADS + threadIdx.x, 0, acc[i]);
    cluster_sync();
    if (rank != 0) return;
    if (group < C::CONSUMERS)
      for (int r = 1; r < C::CLUSTER; ++r)
#pragma unroll
        for (int i = 0; i < VALUES; ++i) acc[i] += sums[((r - 1) * VALUES + i) * CONSUMER_THREADS + threadIdx.x];
  }
  if (C::SPLIT_K > 1 &&
      !combine_splits<C::SPLIT_K>(each, blockIdx.y / C::CLUSTER, M, N, workspace, counters + blockIdx.x))
    return;
  run_epilogue<C::MN / 2>(epi, each);
}

// ---------------------------------------------------------------------------
// The Hopper kernel for any M (sm_90): A and B both by the copy engine, wgmma
// with A's rows on its 64-row side, persistent blocks.
//
// A block computes tiles of BM = 64 x CONSUMERS rows and BN columns of C, one
// after another: gridDim.x blocks (clusters: one per SM) walk the tiles,
// numbered in groups of GROUP_M rows of tiles so that the blocks running
// together share their A rows and B columns in the L2. One producer thread
// fills STAGES shared buffers, each with 128 bytes of k (64 16-bit or 128 FP8
// elements) of A's BM rows and of B's BN columns, and runs on into the next
// tile while the consumers run this one's epilogue. Consumer warpgroup g
// multiplies rows 64 g .. 64 g + 63 by all BN columns (m64nBN), keeps one
// stage's wgmmas in flight and releases the stage before.
//
// CLUSTER = 2: the two blocks of a cluster (along y; the kernel is declared
// __cluster_dims__(1, 2, 1)) take vertically adjacent tiles, which read the
// same B columns: each block loads half of B's box rows and the copy engine
// writes them into both blocks' shared memory (multicast), so each SM reads a
// third less from the L2. A stage is refilled once the consumers of both
// blocks have released it.
//
// Measured against cuBLAS in docs/gemm-templates.md; not yet among
// max-autotune's candidates (gemm_epilogue.h's GemmTile has no kind for it).
//
// FP8 (e4m3): each stage's sums go to registers of their own and are added
// to the tile's in float32, as the small-M kernel's, so the wgmmas of a stage
// finish before the next's start.
// ---------------------------------------------------------------------------

template <int BN_, int CONSUMERS_, int STAGES_, int CLUSTER_, bool HALF_, bool B_K_CONTIGUOUS_ = true,
          bool FP8_ = false, int GROUP_M_ = 8, bool STAGED_ = true, bool A_E5M2_ = false, bool B_E5M2_ = false>
struct TmaConfig {
  static constexpr int BN = BN_, CONSUMERS = CONSUMERS_, STAGES = STAGES_, CLUSTER = CLUSTER_, GROUP_M = GROUP_M_;
  /// The epilogue reads the tile through shared memory, 32 columns at a
  /// time: a warp's lanes take 32 consecutive columns of a row, so its
  /// loads and stores of C's row-major buffers are whole sectors.
  static constexpr bool STAGED = STAGED_;
  static constexpr int STAGED_ROW = 33;  // floats: a row of 32 and a pad (the transposed writes miss one bank)
  static constexpr bool HALF = HALF_;
  /// B stored N x K (K-contiguous: one box of BN / CLUSTER rows per block
  /// and stage), else K x N: boxes of 64 k rows of 64 columns, wgmma's
  /// MN-major B, BN / 64 / CLUSTER of them per block and stage.
  static constexpr bool B_K_CONTIGUOUS = B_K_CONTIGUOUS_;
  static constexpr bool FP8 = FP8_, A_E5M2 = A_E5M2_, B_E5M2 = B_E5M2_;  // FP8: as SwappedConfig's
  static_assert(BN == 64 || BN == 128 || BN == 256, "B's columns: whole boxes of 64, a Wgmma specialisation");
  static_assert(CLUSTER == 1 || (CLUSTER == 2 && BN >= 128), "a cluster of two shares B's boxes half and half");
  static_assert(!FP8 || (B_K_CONTIGUOUS && BN <= 128), "FP8: K-major operands, and a stage's sums beside the tile's");
  static constexpr int BM = 64 * CONSUMERS;
  static constexpr int BOX_K = FP8 ? 128 : 64;  // k per 128-byte box row
  static constexpr int THREADS = 128 * (CONSUMERS + 1);  // the last warpgroup produces
  static constexpr int A_BYTES = BM * 128, B_BYTES = BN * 128;  // multiples of 1024: swizzle atoms stay aligned
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
  static constexpr int STAGED_BYTES = STAGED ? 4 * CONSUMERS * 16 * STAGED_ROW * 4 : 0;  // 16 rows per warp
  static constexpr int SHARED_BYTES = STAGES * STAGE_BYTES + STAGED_BYTES + 2 * STAGES * 8 + 1024;  // + barriers, alignment
};

/// copy_box into the same place of the shared memory of each block of the
/// cluster in `blocks` (a bit per rank), completing on each one's `bar`.
__device__ __forceinline__ void copy_box_to_cluster(void* shared, const TensorMap& map, uint64_t* bar, int x, int y,
                                                    uint16_t blocks) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(shared_address(shared)),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(x), "r"(y), "r"(shared_address(bar)), "h"(blocks)
      : "memory");
}
/// An arrival on the barrier at `bar`'s place in block `rank` of the cluster.
/// Its default semantics (release at the block's scope) order this warp's
/// reads of the stage, which is all the other block's copies wait for;
/// .release.cluster made every stage wait about a microsecond on the H200.
__device__ __forceinline__ void barrier_arrive_in_block(uint64_t* bar, unsigned rank) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(shared_address(bar)), "r"(rank));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}

template <class C, class Epilogue>
__device__ __forceinline__ void gemm_tma(const TensorMap& a_map, const TensorMap& b_map, int64_t M, int64_t N,
                                         int64_t K, const Epilogue& epi) {
  extern __shared__ __align__(1024) unsigned char cppi_gemm_stages[];
  unsigned char* stages = cppi_gemm_stages + ((1024 - (shared_address(cppi_gemm_stages) & 1023)) & 1023);
  float* staged = reinterpret_cast<float*>(stages + C::STAGES * C::STAGE_BYTES);
  uint64_t* full = reinterpret_cast<uint64_t*>(stages + C::STAGES * C::STAGE_BYTES + C::STAGED_BYTES);
  uint64_t* empty = full + C::STAGES;
  const int group = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const unsigned rank = C::CLUSTER > 1 ? cluster_rank() : 0;
  // Tiles of the cluster: CLUSTER x BM rows, BN columns.
  const int64_t tiles_m = (M + C::CLUSTER * C::BM - 1) / (C::CLUSTER * C::BM), tiles_n = (N + C::BN - 1) / C::BN;
  const int64_t tiles = tiles_m * tiles_n, k_blocks = (K + C::BOX_K - 1) / C::BOX_K;
  // Tile t's first row (this block's) and column: down GROUP_M rows of tiles, then across.
  const auto origin = [&](int64_t t, int64_t* m0, int64_t* n0) {
    const int64_t per_group = C::GROUP_M * tiles_n, first = t / per_group * C::GROUP_M;
    const int64_t rows = min(tiles_m - first, int64_t(C::GROUP_M));
    *m0 = ((first + t % per_group % rows) * C::CLUSTER + rank) * C::BM;
    *n0 = t % per_group / rows * C::BN;
  };

  if (threadIdx.x == 0) {
    for (int s = 0; s < C::STAGES; ++s) {
      barrier_init(&full[s], 1);
      barrier_init(&empty[s], 4 * C::CONSUMERS * C::CLUSTER);  // each consumer warp of the cluster, once
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  if (C::CLUSTER > 1)
    cluster_sync();  // the other block's barriers are ready for this one's copies and arrivals
  else
    __syncthreads();

  if (group == C::CONSUMERS) {
    // Lane 0 of the first warp produces; its other lanes wait for it here,
    // not at the cluster barrier below (a warp's lanes waiting there would
    // hold back the one still producing).
    if (warp == 0 && lane == 0) {
      int64_t it = 0;  // stages filled, over all tiles
      for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
        int64_t m0, n0;
        origin(t, &m0, &n0);
        for (int64_t kb = 0; kb < k_blocks; ++kb, ++it) {
          const int s = it % C::STAGES;
          if (it >= C::STAGES) barrier_wait(&empty[s], (it / C::STAGES - 1) & 1);
          unsigned char* stage = stages + s * C::STAGE_BYTES;
          barrier_expect_bytes(&full[s], C::STAGE_BYTES);  // A's box, and B's from every block of the cluster
          const int k = int(kb * C::BOX_K);
          copy_box(stage, a_map, &full[s], k, int(m0));
          unsigned char* b_tile = stage + C::A_BYTES;
          constexpr uint16_t everyone = (1 << C::CLUSTER) - 1;
          if (C::B_K_CONTIGUOUS && C::CLUSTER == 1)
            copy_box(b_tile, b_map, &full[s], k, int(n0));
          else if (C::B_K_CONTIGUOUS)
            copy_box_to_cluster(b_tile + rank * (C::B_BYTES / C::CLUSTER), b_map, &full[s], k,
                                int(n0) + rank * (C::BN / C::CLUSTER), everyone);
          else
#pragma unroll
            for (int c = 0; c < C::BN / 64; ++c) {
              if (C::CLUSTER == 1)
                copy_box(b_tile + c * 64 * 128, b_map, &full[s], int(n0) + 64 * c, k);
              else if (c % C::CLUSTER == int(rank))
                copy_box_to_cluster(b_tile + c * 64 * 128, b_map, &full[s], int(n0) + 64 * c, k, everyone);
            }
        }
      }
    }
    __syncwarp();
  } else {
    float acc[C::BN / 2];
    float part[C::FP8 ? C::BN / 2 : 1];  // FP8: this stage's sums
    // A consumer warp's lane 0 releases a stage in every block of the cluster.
    const auto release = [&](int s) {
      if (lane != 0) return;
      if (C::CLUSTER == 1)
        barrier_arrive(&empty[s]);
      else
        for (int r = 0; r < C::CLUSTER; ++r) barrier_arrive_in_block(&empty[s], r);
    };
    int64_t it = 0;  // stages consumed, over all tiles
    for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
      int64_t m0, n0;
      origin(t, &m0, &n0);
      for (int64_t kb = 0; kb < k_blocks; ++kb, ++it) {
        const int s = it % C::STAGES;
        barrier_wait(&full[s], (it / C::STAGES) & 1);
        const unsigned char* a_tile = stages + s * C::STAGE_BYTES + group * 64 * 128;
        const unsigned char* b_tile = stages + s * C::STAGE_BYTES + C::A_BYTES;
        pin(acc);
        pin(part);
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {  // 32 bytes of k a step; the tile's first step starts the sums
          if constexpr (C::FP8)
            WgmmaFp8<C::BN, C::A_E5M2, C::B_E5M2>::run(part, swizzled_operand(a_tile + 32 * kk),
                                                       swizzled_operand(b_tile + 32 * kk), kk > 0);
          else if constexpr (C::B_K_CONTIGUOUS)
            Wgmma<C::BN, C::HALF>::run(acc, swizzled_operand(a_tile + 32 * kk), swizzled_operand(b_tile + 32 * kk),
                                       kb > 0 || kk > 0);
          else
            Wgmma<C::BN, C::HALF, false, true>::run(acc, swizzled_operand(a_tile + 32 * kk),
                                                    swizzled_operand<true>(b_tile + 2048 * kk, 64 * 128),
                                                    kb > 0 || kk > 0);
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        if constexpr (C::FP8) {
          asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
          pin(part);
#pragma unroll
          for (int v = 0; v < C::BN / 2; ++v) acc[v] = kb > 0 ? acc[v] + part[v] : part[v];
          release(s);
        } else {
          asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");  // the stage before is read
          pin(acc);
          if (kb > 0) release((it - 1) % C::STAGES);
        }
      }
      if constexpr (!C::FP8) {
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        pin(acc);
        release((it - 1) % C::STAGES);
      }
      // Accumulator i of a thread: row 16 * warp + lane / 4 (+ 8) of the
      // warpgroup's 64, column 8 * (i / 4) + 2 * (lane % 4) (+ 1).
      const int64_t row = m0 + 64 * group + 16 * warp;
      if constexpr (C::STAGED) {
        float* mine = staged + (4 * group + warp) * 16 * C::STAGED_ROW;  // this warp's 16 rows
#pragma unroll
        for (int c = 0; c < C::BN / 32; ++c) {
#pragma unroll
          for (int i = 16 * c; i < 16 * (c + 1); ++i)
            mine[(lane / 4 + 8 * ((i % 4) / 2)) * C::STAGED_ROW + 8 * (i / 4 - 4 * c) + 2 * (lane % 4) + i % 2] = acc[i];
          __syncwarp();
          const int64_t n = n0 + 32 * c + lane;
          // Element by element: the values of several beside the tile's 128
          // sums a thread spilled registers.
#pragma unroll 4
          for (int r = 0; r < 16; ++r)
            if (row + r < M && n < N) epilogue_element(epi, row + r, n, mine[r * C::STAGED_ROW + lane]);
          __syncwarp();
        }
      } else {
#pragma unroll
        for (int i = 0; i < C::BN / 2; ++i) {
          const int64_t m = row + lane / 4 + 8 * ((i % 4) / 2), n = n0 + 8 * (i / 4) + 2 * (lane % 4) + i % 2;
          if (m < M && n < N) epilogue_element(epi, m, n, acc[i]);
        }
      }
    }
  }
  // Neither block leaves while the other may still arrive on its barriers.
  if (C::CLUSTER > 1) cluster_sync();
}

}  // namespace cppi_gemm
