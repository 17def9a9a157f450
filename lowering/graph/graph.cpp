#include "lowering/graph/graph.h"

#include <algorithm>
#include <map>

namespace cppi {

const char* to_string(Node::Op op) {
  switch (op) {
    case Node::Op::Placeholder: return "placeholder";
    case Node::Op::GetAttr: return "get_attr";
    case Node::Op::CallFunction: return "call_function";
    case Node::Op::Output: return "output";
  }
  return "?";
}

// ---------------------------------------------------------------- SizeExpr

namespace {

struct SizeOpName {
  SizeExpr::Kind kind;
  const char* name;
};
constexpr SizeOpName kSizeOps[] = {
    {SizeExpr::Kind::Add, "add"},       {SizeExpr::Kind::Mul, "mul"}, {SizeExpr::Kind::FloorDiv, "floordiv"},
    {SizeExpr::Kind::Mod, "mod"},       {SizeExpr::Kind::Min, "min"}, {SizeExpr::Kind::Max, "max"},
};

const char* size_op_name(SizeExpr::Kind k) {
  for (const auto& op : kSizeOps)
    if (op.kind == k) return op.name;
  return "?";
}

int64_t floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

Expected<int64_t> SizeExpr::evaluate(const std::vector<std::string>& names,
                                     const std::vector<int64_t>& values) const {
  switch (kind) {
    case Kind::Const: return value;
    case Kind::Symbol: {
      auto it = std::find(names.begin(), names.end(), symbol);
      if (it == names.end() || static_cast<size_t>(it - names.begin()) >= values.size())
        return Error::invalid_input(cat("size symbol ", symbol, " has no value"));
      return values[it - names.begin()];
    }
    default: break;
  }
  std::vector<int64_t> vals;
  for (const auto& op : operands) {
    auto v = op.evaluate(names, values);
    if (!v) return v.error();
    vals.push_back(*v);
  }
  if (vals.empty()) return Error::internal("size expression without operands");
  int64_t acc = vals[0];
  for (size_t i = 1; i < vals.size(); ++i) {
    int64_t v = vals[i];
    switch (kind) {
      case Kind::Add: acc += v; break;
      case Kind::Mul: acc *= v; break;
      case Kind::FloorDiv:
        if (v == 0) return Error::invalid_input("size expression divides by zero");
        acc = floordiv(acc, v);
        break;
      case Kind::Mod:
        if (v == 0) return Error::invalid_input("size expression takes a modulus by zero");
        acc = acc - floordiv(acc, v) * v;
        break;
      case Kind::Min: acc = std::min(acc, v); break;
      case Kind::Max: acc = std::max(acc, v); break;
      default: return Error::internal("bad size expression kind");
    }
  }
  return acc;
}

std::string SizeExpr::to_string() const {
  switch (kind) {
    case Kind::Const: return std::to_string(value);
    case Kind::Symbol: return symbol;
    default: break;
  }
  std::string out = size_op_name(kind);
  out += '(';
  for (size_t i = 0; i < operands.size(); ++i) {
    if (i) out += ", ";
    out += operands[i].to_string();
  }
  return out + ')';
}

// ---------------------------------------------------------------- import

namespace {

/// Import state: node names seen so far, for resolving references.
class Importer {
 public:
  Expected<Graph> run(const Desc& desc);

 private:
  Status fail(Error::Kind kind, const std::string& what) {
    std::string where = current_ ? cat("node '", current_->name, "' (", current_->target, "): ") : "";
    return Error{kind, where + what};
  }
  Expected<SizeExpr> size_expr(const Desc& d);
  Expected<FloatExpr> float_expr(const Desc& d);
  Expected<ValueInfo> value(const Desc& d);
  Expected<Arg> arg(const Desc& d);

  std::map<std::string, int> index_of_;
  const Node* current_ = nullptr;
};

#define CPPI_TRY_ASSIGN(var, expr)       \
  auto var##_or = (expr);                \
  if (!var##_or) return var##_or.error(); \
  auto& var = *var##_or

Expected<SizeExpr> Importer::size_expr(const Desc& d) {
  if (d.is_int()) return SizeExpr::constant(d.as_int());
  if (d.is_bool()) return SizeExpr::constant(d.as_bool() ? 1 : 0);
  const std::string& tag = d.tag();
  if (tag == "sym") {
    if (!d.tagged_value().is_string()) return fail(Error::Kind::InvalidInput, "symbol name is not a string").error();
    return SizeExpr::sym(d.tagged_value().as_string());
  }
  if (tag == "unsupported")
    return fail(Error::Kind::Unsupported, cat("symbolic size expression not supported: ",
                                              d.tagged_value().is_string() ? d.tagged_value().as_string() : "?"))
        .error();
  for (const auto& op : kSizeOps) {
    if (tag != op.name) continue;
    if (!d.tagged_value().is_list() || d.tagged_value().as_list().empty())
      return fail(Error::Kind::InvalidInput, cat("'", tag, "' needs a list of operands")).error();
    SizeExpr e;
    e.kind = op.kind;
    for (const auto& operand : d.tagged_value().as_list()) {
      CPPI_TRY_ASSIGN(sub, size_expr(operand));
      e.operands.push_back(sub);
    }
    return e;
  }
  return fail(Error::Kind::InvalidInput, cat("bad size expression: ", d.to_json())).error();
}

Expected<FloatExpr> Importer::float_expr(const Desc& d) {
  const std::string& tag = d.tag();
  FloatExpr e;
  if (tag == "f") {
    const Desc& x = d.tagged_value();
    if (!x.is_float() && !x.is_int()) return fail(Error::Kind::InvalidInput, "'f' needs a number").error();
    e.value = x.is_float() ? x.as_float() : static_cast<double>(x.as_int());
    return e;
  }
  if (tag == "to_float") {
    e.op = FloatExpr::Op::ToFloat;
    CPPI_TRY_ASSIGN(size, size_expr(d.tagged_value()));
    e.size = size;
    return e;
  }
  if (tag == "fadd" || tag == "fmul" || tag == "fdiv") {
    e.op = tag == "fadd" ? FloatExpr::Op::Add : tag == "fmul" ? FloatExpr::Op::Mul : FloatExpr::Op::Div;
    const Desc& ops = d.tagged_value();
    if (!ops.is_list() || ops.as_list().empty() || (e.op == FloatExpr::Op::Div && ops.as_list().size() != 2))
      return fail(Error::Kind::InvalidInput, cat("'", tag, "' needs ", tag == "fdiv" ? "two operands" : "operands"))
          .error();
    for (const auto& operand : ops.as_list()) {
      CPPI_TRY_ASSIGN(sub, float_expr(operand));
      e.args.push_back(sub);
    }
    return e;
  }
  return fail(Error::Kind::InvalidInput, cat("bad float expression: ", d.to_json())).error();
}

Expected<ValueInfo> Importer::value(const Desc& d) {
  ValueInfo v;
  if (d.is_none()) return v;
  const std::string& tag = d.tag();
  const Desc* body = tag.empty() ? nullptr : &d.tagged_value();
  if (tag == "tensor") {
    v.kind = ValueInfo::Kind::Tensor;
    const Desc* dtype = body->find("dtype");
    const Desc* sizes = body->find("sizes");
    const Desc* strides = body->find("strides");
    const Desc* offset = body->find("offset");
    const Desc* device = body->find("device");
    const Desc* layout = body->find("layout");
    if (!dtype || !dtype->is_string() || !sizes || !sizes->is_list() || !strides || !strides->is_list() ||
        !device || !device->is_string())
      return fail(Error::Kind::InvalidInput, "tensor value needs dtype, sizes, strides and device").error();
    if (layout && layout->is_string() && layout->as_string() != "strided")
      return fail(Error::Kind::Unsupported, cat("tensor layout ", layout->as_string(), " is not supported")).error();
    auto dt = parse_dtype(dtype->as_string());
    if (!dt) return fail(Error::Kind::Unsupported, cat("dtype ", dtype->as_string(), " is not supported")).error();
    v.tensor.dtype = *dt;
    if (sizes->as_list().size() != strides->as_list().size())
      return fail(Error::Kind::InvalidInput, "sizes and strides differ in rank").error();
    for (const auto& s : sizes->as_list()) {
      CPPI_TRY_ASSIGN(e, size_expr(s));
      v.tensor.sizes.push_back(e);
    }
    for (const auto& s : strides->as_list()) {
      CPPI_TRY_ASSIGN(e, size_expr(s));
      v.tensor.strides.push_back(e);
    }
    if (offset) {
      CPPI_TRY_ASSIGN(e, size_expr(*offset));
      v.tensor.storage_offset = e;
    }
    const std::string& dev = device->as_string();
    if (dev == "cpu") {
      v.tensor.device = Device::CPU;
    } else if (dev.rfind("cuda", 0) == 0) {
      v.tensor.device = Device::CUDA;
      v.tensor.device_index = dev.size() > 5 ? std::atoi(dev.c_str() + 5) : 0;
    } else {
      return fail(Error::Kind::Unsupported, cat("device ", dev, " is not supported")).error();
    }
    return v;
  }
  if (tag == "symint" || tag == "int") {
    v.kind = tag == "int" ? ValueInfo::Kind::Int : ValueInfo::Kind::SymInt;
    CPPI_TRY_ASSIGN(e, size_expr(*body));
    v.sym = e;
    return v;
  }
  if (tag == "symfloat" || tag == "float") {
    v.kind = tag == "float" ? ValueInfo::Kind::Float : ValueInfo::Kind::SymFloat;
    const Desc* number = body;
    if (tag == "symfloat" && body->is_dict()) {  // {"hint": x, "expr": float-expr}
      number = body->find("hint");
      const Desc* expr = body->find("expr");
      if (!number || !expr) return fail(Error::Kind::InvalidInput, "symfloat needs a hint and an expr").error();
      CPPI_TRY_ASSIGN(e, float_expr(*expr));
      v.fexpr = e;
    }
    v.number = number->is_float() ? number->as_float() : number->is_int() ? double(number->as_int()) : 0.0;
    return v;
  }
  if (tag == "symbool" || tag == "bool") {
    v.kind = tag == "bool" ? ValueInfo::Kind::Bool : ValueInfo::Kind::SymBool;
    v.number = body->is_bool() && body->as_bool() ? 1 : 0;
    return v;
  }
  if (tag == "tuple") {
    v.kind = ValueInfo::Kind::Tuple;
    if (!body->is_list()) return fail(Error::Kind::InvalidInput, "tuple value needs a list").error();
    for (const auto& item : body->as_list()) {
      CPPI_TRY_ASSIGN(sub, value(item));
      v.items.push_back(sub);
    }
    return v;
  }
  if (tag == "unsupported")
    return fail(Error::Kind::Unsupported,
                body->is_string() ? body->as_string() : std::string("unsupported value"))
        .error();
  return fail(Error::Kind::InvalidInput, cat("bad value description: ", d.to_json())).error();
}

struct ArgTag {
  Arg::Kind kind;
  const char* name;
};
constexpr ArgTag kStringArgTags[] = {
    {Arg::Kind::Device, "device"},
    {Arg::Kind::Layout, "layout"},
    {Arg::Kind::MemoryFormat, "memory_format"},
};

Expected<Arg> Importer::arg(const Desc& d) {
  Arg a;
  if (d.is_none()) return a;
  if (d.is_bool()) {
    a.kind = Arg::Kind::Bool;
    a.b = d.as_bool();
    return a;
  }
  if (d.is_int()) {
    a.kind = Arg::Kind::Int;
    a.i = d.as_int();
    return a;
  }
  if (d.is_float()) {
    a.kind = Arg::Kind::Float;
    a.f = d.as_float();
    return a;
  }
  if (d.is_string()) {
    a.kind = Arg::Kind::String;
    a.s = d.as_string();
    return a;
  }
  if (d.is_list()) {
    a.kind = Arg::Kind::List;
    for (const auto& e : d.as_list()) {
      CPPI_TRY_ASSIGN(sub, arg(e));
      a.list.push_back(sub);
    }
    return a;
  }
  const std::string& tag = d.tag();
  const Desc* body = tag.empty() ? nullptr : &d.tagged_value();
  if (tag == "node") {
    if (!body->is_string()) return fail(Error::Kind::InvalidInput, "node reference must be a name").error();
    auto it = index_of_.find(body->as_string());
    if (it == index_of_.end())
      return fail(Error::Kind::InvalidInput, cat("refers to node '", body->as_string(), "' before its definition"))
          .error();
    a.kind = Arg::Kind::Node;
    a.i = it->second;
    return a;
  }
  if (tag == "dtype") {
    auto dt = body->is_string() ? parse_dtype(body->as_string()) : std::nullopt;
    if (!dt)
      return fail(Error::Kind::Unsupported, cat("dtype argument ", body->to_json(), " is not supported")).error();
    a.kind = Arg::Kind::DType;
    a.dtype = *dt;
    return a;
  }
  if (tag == "symexpr") {
    CPPI_TRY_ASSIGN(e, size_expr(*body));
    a.kind = Arg::Kind::SymExpr;
    a.sym = e;
    return a;
  }
  for (const auto& t : kStringArgTags) {
    if (tag == t.name && body->is_string()) {
      a.kind = t.kind;
      a.s = body->as_string();
      return a;
    }
  }
  if (tag == "unsupported")
    return fail(Error::Kind::Unsupported,
                cat("argument not supported: ", body->is_string() ? body->as_string() : body->to_json()))
        .error();
  return fail(Error::Kind::InvalidInput, cat("bad argument description: ", d.to_json())).error();
}

struct OpName {
  Node::Op op;
  const char* name;
};
constexpr OpName kNodeOps[] = {
    {Node::Op::Placeholder, "placeholder"},
    {Node::Op::GetAttr, "get_attr"},
    {Node::Op::CallFunction, "call_function"},
    {Node::Op::Output, "output"},
};

Expected<Graph> Importer::run(const Desc& desc) {
  Graph g;
  const Desc* nodes = desc.find("nodes");
  if (!nodes || !nodes->is_list()) return Error::invalid_input("graph description needs a 'nodes' list");
  if (const Desc* symbols = desc.find("symbols")) {
    if (!symbols->is_list()) return Error::invalid_input("'symbols' must be a list of names");
    for (const auto& s : symbols->as_list()) {
      if (!s.is_string()) return Error::invalid_input("'symbols' must be a list of names");
      g.symbols.push_back(s.as_string());
    }
  }
  for (const auto& nd : nodes->as_list()) {
    Node n;
    const Desc* name = nd.find("name");
    const Desc* op = nd.find("op");
    if (!name || !name->is_string() || !op || !op->is_string())
      return Error::invalid_input(cat("graph node needs a name and an op: ", nd.to_json()));
    n.name = name->as_string();
    if (index_of_.count(n.name)) return Error::invalid_input(cat("duplicate node name '", n.name, "'"));
    const OpName* kind = nullptr;
    for (const auto& k : kNodeOps)
      if (op->as_string() == k.name) kind = &k;
    if (!kind) return Error::unsupported(cat("node '", n.name, "': FX op '", op->as_string(), "' is not supported"));
    n.op = kind->op;
    if (const Desc* target = nd.find("target"); target && target->is_string()) n.target = target->as_string();
    if (const Desc* trace = nd.find("stack_trace"); trace && trace->is_string()) n.stack_trace = trace->as_string();
    current_ = &n;
    if (const Desc* args = nd.find("args")) {
      if (!args->is_list()) return fail(Error::Kind::InvalidInput, "'args' must be a list").error();
      for (const auto& a : args->as_list()) {
        CPPI_TRY_ASSIGN(parsed, arg(a));
        n.args.push_back(parsed);
      }
    }
    if (const Desc* kwargs = nd.find("kwargs")) {
      if (!kwargs->is_dict()) return fail(Error::Kind::InvalidInput, "'kwargs' must be a dict").error();
      for (const auto& [k, a] : kwargs->as_dict()) {
        CPPI_TRY_ASSIGN(parsed, arg(a));
        n.kwargs.emplace_back(k, parsed);
      }
    }
    if (const Desc* val = nd.find("val")) {
      CPPI_TRY_ASSIGN(v, value(*val));
      n.value = v;
    }
    current_ = nullptr;
    index_of_[n.name] = static_cast<int>(g.nodes.size());
    g.nodes.push_back(std::move(n));
  }
  if (g.nodes.empty() || g.nodes.back().op != Node::Op::Output)
    return Error::invalid_input("graph must end with its output node");
  for (size_t i = 0; i + 1 < g.nodes.size(); ++i)
    if (g.nodes[i].op == Node::Op::Output) return Error::invalid_input("graph has more than one output node");

  // Bind each size symbol to a placeholder size (or a SymInt placeholder) so
  // the runtime can read its value from the call's arguments.
  std::vector<int> placeholders = g.placeholders();
  for (const auto& s : g.symbols) {
    SymbolBinding b;
    b.symbol = s;
    for (size_t p = 0; p < placeholders.size() && b.placeholder < 0; ++p) {
      const ValueInfo& v = g.nodes[placeholders[p]].value;
      if (v.kind == ValueInfo::Kind::SymInt && v.sym.kind == SizeExpr::Kind::Symbol && v.sym.symbol == s) {
        b.placeholder = static_cast<int>(p);
      } else if (v.kind == ValueInfo::Kind::Tensor) {
        for (int d = 0; d < v.tensor.rank(); ++d) {
          const SizeExpr& e = v.tensor.sizes[d];
          if (e.kind == SizeExpr::Kind::Symbol && e.symbol == s) {
            b.placeholder = static_cast<int>(p);
            b.dim = d;
            break;
          }
        }
      }
    }
    if (b.placeholder < 0)
      return Error::unsupported(cat("size symbol ", s, " is not the size of any graph input"));
    g.bindings.push_back(b);
  }
  return g;
}

#undef CPPI_TRY_ASSIGN

// ---------------------------------------------------------------- export

Desc tagged(const std::string& tag, Desc value) { return Desc(Desc::Dict{{tag, std::move(value)}}); }

Desc export_size(const SizeExpr& e) {
  switch (e.kind) {
    case SizeExpr::Kind::Const: return Desc(e.value);
    case SizeExpr::Kind::Symbol: return tagged("sym", e.symbol);
    default: break;
  }
  Desc::List ops;
  for (const auto& o : e.operands) ops.push_back(export_size(o));
  return tagged(size_op_name(e.kind), ops);
}

Desc export_float(const FloatExpr& e) {
  switch (e.op) {
    case FloatExpr::Op::Const: return tagged("f", e.value);
    case FloatExpr::Op::ToFloat: return tagged("to_float", export_size(e.size));
    default: break;
  }
  Desc::List ops;
  for (const auto& a : e.args) ops.push_back(export_float(a));
  return tagged(e.op == FloatExpr::Op::Add ? "fadd" : e.op == FloatExpr::Op::Mul ? "fmul" : "fdiv", ops);
}

Desc export_value(const ValueInfo& v) {
  switch (v.kind) {
    case ValueInfo::Kind::None: return Desc();
    case ValueInfo::Kind::Tensor: {
      Desc::List sizes, strides;
      for (const auto& s : v.tensor.sizes) sizes.push_back(export_size(s));
      for (const auto& s : v.tensor.strides) strides.push_back(export_size(s));
      std::string device = v.tensor.device == Device::CPU ? "cpu" : cat("cuda:", v.tensor.device_index);
      return tagged("tensor", Desc::Dict{{"dtype", std::string(dtype_name(v.tensor.dtype))},
                                         {"sizes", sizes},
                                         {"strides", strides},
                                         {"offset", export_size(v.tensor.storage_offset)},
                                         {"device", device}});
    }
    case ValueInfo::Kind::SymInt: return tagged("symint", export_size(v.sym));
    case ValueInfo::Kind::Int: return tagged("int", export_size(v.sym));
    case ValueInfo::Kind::SymFloat:
      if (!v.fexpr) return tagged("symfloat", v.number);
      return tagged("symfloat", Desc::Dict{{"hint", v.number}, {"expr", export_float(*v.fexpr)}});
    case ValueInfo::Kind::Float: return tagged("float", v.number);
    case ValueInfo::Kind::SymBool: return tagged("symbool", v.number != 0);
    case ValueInfo::Kind::Bool: return tagged("bool", v.number != 0);
    case ValueInfo::Kind::Tuple: {
      Desc::List items;
      for (const auto& i : v.items) items.push_back(export_value(i));
      return tagged("tuple", items);
    }
  }
  return Desc();
}

Desc export_arg(const Arg& a, const Graph& g) {
  switch (a.kind) {
    case Arg::Kind::None: return Desc();
    case Arg::Kind::Bool: return Desc(a.b);
    case Arg::Kind::Int: return Desc(a.i);
    case Arg::Kind::Float: return Desc(a.f);
    case Arg::Kind::String: return Desc(a.s);
    case Arg::Kind::DType: return tagged("dtype", std::string(dtype_name(a.dtype)));
    case Arg::Kind::Node: return tagged("node", g.nodes[a.i].name);
    case Arg::Kind::SymExpr: return tagged("symexpr", export_size(a.sym));
    case Arg::Kind::List: {
      Desc::List items;
      for (const auto& e : a.list) items.push_back(export_arg(e, g));
      return items;
    }
    default:
      for (const auto& t : kStringArgTags)
        if (t.kind == a.kind) return tagged(t.name, a.s);
  }
  return Desc();
}

}  // namespace

std::vector<int> Graph::placeholders() const {
  std::vector<int> out;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].op == Node::Op::Placeholder) out.push_back(static_cast<int>(i));
  return out;
}

Expected<Graph> import_graph(const Desc& desc) { return Importer().run(desc); }

Desc export_graph(const Graph& g) {
  Desc::List nodes;
  for (const auto& n : g.nodes) {
    Desc::List args;
    for (const auto& a : n.args) args.push_back(export_arg(a, g));
    Desc::Dict kwargs;
    for (const auto& [k, a] : n.kwargs) kwargs.emplace_back(k, export_arg(a, g));
    Desc::Dict node{{"name", n.name}, {"op", to_string(n.op)}, {"target", n.target},
                    {"args", args},   {"kwargs", kwargs},     {"val", export_value(n.value)}};
    if (!n.stack_trace.empty()) node.emplace_back("stack_trace", n.stack_trace);
    nodes.push_back(Desc(node));
  }
  Desc::List symbols;
  for (const auto& s : g.symbols) symbols.push_back(s);
  return Desc(Desc::Dict{{"symbols", symbols}, {"nodes", nodes}});
}

}  // namespace cppi
