/// \file
/// Buffers: named, typed, strided memory that kernels load from and store to.
///
/// A buffer's layout gives its sizes and strides (in elements) as index
/// expressions, so dynamic shapes are symbolic from the start. The element at
/// coordinates (c0, ..., cn-1) is at element offset
///   layout.offset + c0*stride0 + ... + cn-1*striden-1
/// from the buffer's base pointer, which is what Load/Store indices address
/// (Layout::index builds it). For a graph input the base pointer is the
/// tensor's data_ptr(), so its offset is 0; a nonzero offset is for buffers
/// that are carved out of a larger allocation.
///
/// Layouts of graph inputs (and outputs the graph must return with given
/// strides) are fixed. An intermediate's layout is *flexible*: the compiler
/// picked it (contiguous by default) and a pass may pick another (e.g.
/// channels-last) before codegen by building a new Buffer with with_layout()
/// and rewriting the loads/stores that use it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lowering/ir/index_expr.h"
#include "support/dtype.h"

namespace cppi::ir {

enum class Device : uint8_t { CPU, CUDA };
const char* to_string(Device d);

enum class BufferKind : uint8_t {
  GraphInput,    // a tensor the graph receives; never written unless the graph mutates it
  GraphOutput,   // a tensor the graph returns
  Intermediate,  // produced and consumed inside the graph; fusion may remove it
  KernelLocal,   // scratch that lives inside one kernel (per-thread partials etc.)
};
const char* to_string(BufferKind k);

struct Layout {
  std::vector<IndexExpr> sizes;
  std::vector<IndexExpr> strides;  // in elements, same rank as sizes
  IndexExpr offset = index_const(0);

  /// Row-major strides for `sizes`: stride[n-1] = 1, stride[i] = stride[i+1]*size[i+1].
  static Layout contiguous(std::vector<IndexExpr> sizes);
  /// Strides that order the dimensions by `order` (order[0] = innermost dim),
  /// e.g. {1, 3, 2, 0} for NCHW channels-last.
  static Layout with_order(std::vector<IndexExpr> sizes, const std::vector<int>& order);

  size_t rank() const { return sizes.size(); }
  /// offset + sum(coords[i] * strides[i]); coords.size() must equal rank().
  IndexExpr index(const std::vector<IndexExpr>& coords) const;
  /// Product of sizes.
  IndexExpr numel() const;
  /// Elements the allocation must hold, offset + 1 + sum((size_i - 1) * stride_i),
  /// for nonnegative strides and a nonempty tensor (an empty one needs none).
  IndexExpr storage_size() const;
  /// Row-major with offset 0, ignoring strides of size-1 dims (torch's rule).
  bool is_contiguous() const;
};
bool operator==(const Layout& a, const Layout& b);
inline bool operator!=(const Layout& a, const Layout& b) { return !(a == b); }

class Buffer;
using BufferPtr = std::shared_ptr<const Buffer>;

/// Immutable. Identity inside one graph is the name: loads and stores compare
/// buffers by name.
class Buffer {
 public:
  /// Checks: non-empty name, sizes/strides of equal rank, defined exprs, no
  /// loop variables in the layout. Throws CompilerError(internal) otherwise.
  static BufferPtr make(std::string name, DType dtype, Device device, BufferKind kind, Layout layout,
                        bool layout_fixed);
  /// Convenience: a contiguous buffer. Layout is fixed for graph inputs and
  /// outputs, flexible for intermediates and kernel-locals.
  static BufferPtr make_contiguous(std::string name, DType dtype, Device device, BufferKind kind,
                                   std::vector<IndexExpr> sizes);
  /// The same buffer with another layout (for passes that choose strides of
  /// flexible layouts). Throws if this layout is fixed.
  BufferPtr with_layout(Layout layout) const;
  /// The bytes of its elements: numel() times the dtype's size.
  IndexExpr bytes() const;

  const std::string name;
  const DType dtype;
  const Device device;
  const BufferKind kind;
  const Layout layout;
  const bool layout_fixed;

 private:
  Buffer(std::string n, DType t, Device d, BufferKind k, Layout l, bool fixed)
      : name(std::move(n)), dtype(t), device(d), kind(k), layout(std::move(l)), layout_fixed(fixed) {}
};

/// A CPU buffer of one element that a kernel on `device` reads. A CUDA
/// kernel takes such a buffer's value as an argument, which the driver
/// copies from host memory at launch, instead of a pointer: a lifted Python
/// scalar (a 0-d CPU tensor) in a CUDA op, as eager reads it.
bool is_host_scalar(const Buffer& b, Device device);

}  // namespace cppi::ir
