#include "lowering/ir/buffer.h"

#include "support/status.h"

namespace cppi::ir {

const char* to_string(Device d) {
  switch (d) {
    case Device::CPU: return "cpu";
    case Device::CUDA: return "cuda";
  }
  return "?";
}

bool is_host_scalar(const Buffer& b, Device device) {
  const auto numel = b.layout.numel().constant();
  const auto offset = b.layout.offset.constant();
  return device == Device::CUDA && b.device == Device::CPU && numel && *numel == 1 && offset && *offset == 0;
}

const char* to_string(BufferKind k) {
  switch (k) {
    case BufferKind::GraphInput: return "input";
    case BufferKind::GraphOutput: return "output";
    case BufferKind::Intermediate: return "intermediate";
    case BufferKind::KernelLocal: return "kernel_local";
  }
  return "?";
}

Layout Layout::contiguous(std::vector<IndexExpr> sizes) {
  Layout l;
  l.strides.resize(sizes.size());
  IndexExpr stride = index_const(1);
  for (size_t i = sizes.size(); i-- > 0;) {
    l.strides[i] = stride;
    stride = stride * sizes[i];
  }
  l.sizes = std::move(sizes);
  return l;
}

Layout Layout::with_order(std::vector<IndexExpr> sizes, const std::vector<int>& order) {
  if (order.size() != sizes.size()) {
    throw CompilerError(Error::internal(cat("Layout::with_order: order has ", order.size(),
                                            " entries for rank ", sizes.size())));
  }
  Layout l;
  l.strides.resize(sizes.size());
  std::vector<bool> seen(sizes.size(), false);
  IndexExpr stride = index_const(1);
  for (int dim : order) {
    if (dim < 0 || static_cast<size_t>(dim) >= sizes.size() || seen[dim]) {
      throw CompilerError(Error::internal("Layout::with_order: order is not a permutation"));
    }
    seen[dim] = true;
    l.strides[dim] = stride;
    stride = stride * sizes[dim];
  }
  l.sizes = std::move(sizes);
  return l;
}

IndexExpr Layout::index(const std::vector<IndexExpr>& coords) const {
  if (coords.size() != sizes.size()) {
    throw CompilerError(Error::internal(cat("Layout::index: ", coords.size(), " coordinates for rank ",
                                            sizes.size())));
  }
  std::vector<IndexExpr> terms{offset};
  for (size_t i = 0; i < coords.size(); ++i) terms.push_back(coords[i] * strides[i]);
  return sum(terms);
}

IndexExpr Layout::numel() const { return product(sizes); }

IndexExpr Buffer::bytes() const { return layout.numel() * dtype_size(dtype); }

IndexExpr Layout::storage_size() const {
  std::vector<IndexExpr> terms{offset, index_const(1)};
  for (size_t i = 0; i < sizes.size(); ++i) terms.push_back((sizes[i] - 1) * strides[i]);
  return sum(terms);
}

bool Layout::is_contiguous() const {
  // As torch defines it: strides of size-1 dimensions do not matter.
  Layout c = contiguous(sizes);
  if (offset != c.offset) return false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (!sizes[i].is_constant(1) && strides[i] != c.strides[i]) return false;
  }
  return true;
}

bool operator==(const Layout& a, const Layout& b) {
  return a.sizes == b.sizes && a.strides == b.strides && a.offset == b.offset;
}

BufferPtr Buffer::make(std::string name, DType dtype, Device device, BufferKind kind, Layout layout,
                       bool layout_fixed) {
  if (name.empty()) throw CompilerError(Error::internal("buffer with an empty name"));
  if (layout.sizes.size() != layout.strides.size()) {
    throw CompilerError(Error::internal(cat("buffer ", name, ": ", layout.sizes.size(), " sizes but ",
                                            layout.strides.size(), " strides")));
  }
  auto check = [&](const IndexExpr& e, const char* what) {
    if (!e.defined()) throw CompilerError(Error::internal(cat("buffer ", name, ": null ", what)));
    if (!free_vars(e).empty()) {
      throw CompilerError(Error::internal(cat("buffer ", name, ": ", what, " ", e, " uses a loop variable")));
    }
  };
  for (const auto& s : layout.sizes) check(s, "size");
  for (const auto& s : layout.strides) check(s, "stride");
  check(layout.offset, "offset");
  return BufferPtr(new Buffer(std::move(name), dtype, device, kind, std::move(layout), layout_fixed));
}

BufferPtr Buffer::make_contiguous(std::string name, DType dtype, Device device, BufferKind kind,
                                  std::vector<IndexExpr> sizes) {
  bool fixed = kind == BufferKind::GraphInput || kind == BufferKind::GraphOutput;
  return make(std::move(name), dtype, device, kind, Layout::contiguous(std::move(sizes)), fixed);
}

BufferPtr Buffer::with_layout(Layout l) const {
  if (layout_fixed) throw CompilerError(Error::internal(cat("buffer ", name, " has a fixed layout")));
  return make(name, dtype, device, kind, std::move(l), false);
}

}  // namespace cppi::ir
