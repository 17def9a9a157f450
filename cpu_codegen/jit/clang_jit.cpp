/// \file
/// The in-process compiler: clang (libclang-cpp 16) parses the source from an
/// in-memory file system into an LLVM module, LLVM's O3 pipeline (new pass
/// manager) optimises it for the host CPU, the target machine emits an object
/// file, and ORC LLJIT (JITLink) links it into a JITDylib of its own. The
/// JITDylib is removed, and its memory returned, when the module dies.
///
/// Stages are run by hand rather than through clang's EmitObjAction so each
/// can be timed and the object file can be cached on disk.
#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticOptions.h>
#include <clang/CodeGen/CodeGenAction.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Frontend/FrontendActions.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ObjectFileInterface.h>
#include <llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h>
#include <llvm/ExecutionEngine/Orc/Shared/WrapperFunctionUtils.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/SmallVectorMemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/VirtualFileSystem.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <atomic>
#include <mutex>
#include <unordered_map>

#include "cpu_codegen/jit/backends.h"
#include "support/disk_cache.h"
#include "cpu_codegen/jit/runtime.h"

namespace cppi::cpu {
namespace {

namespace orc = llvm::orc;

constexpr const char* k_include_dir = "/cppi/include";
constexpr const char* k_prelude_path = "/cppi/include/cppinductor_prelude.h";
constexpr const char* k_pch_path = "/cppi/include/cppinductor_prelude.h.pch";
constexpr const char* k_source_path = "/cppi/kernel.cpp";

std::string to_string(llvm::Error err) { return llvm::toString(std::move(err)); }

/// What code is generated for: triple, CPU, features ("+avx2,-avx512fp16,...").
struct TargetConfig {
  std::string triple;
  std::string cpu;
  std::vector<std::string> features;
};

/// The host as LLVM sees it. LLVM 16 names some hosts (Zen 5) "generic", so
/// the features always come from getHostCPUFeatures, explicitly.
const TargetConfig& host_target() {
  static const TargetConfig host = [] {
    TargetConfig t;
    t.triple = llvm::sys::getProcessTriple();
    t.cpu = llvm::sys::getHostCPUName().str();
    llvm::StringMap<bool> features;
    if (llvm::sys::getHostCPUFeatures(features))
      for (const auto& f : features) t.features.push_back((f.second ? "+" : "-") + f.first().str());
    std::sort(t.features.begin(), t.features.end());
    return t;
  }();
  return host;
}

/// The host with every AVX-512 feature (and what builds on it) off.
const TargetConfig& host_target_without_avx512() {
  static const TargetConfig t = [] {
    TargetConfig out = host_target();
    for (std::string& f : out.features) {
      const std::string name = f.substr(1);
      if (name.rfind("avx512", 0) == 0 || name.rfind("avx10", 0) == 0 || name == "evex512") f = "-" + name;
    }
    return out;
  }();
  return t;
}

TargetConfig target_for(const CompileOptions& o) {
  if (!o.target_cpu.empty()) return TargetConfig{host_target().triple, o.target_cpu, {}};  // the CPU's own features
  return o.avx512_off ? host_target_without_avx512() : host_target();
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

/// Errors ORC reports outside the call that caused them (e.g. "Symbols not
/// found" while materialising) go to the compile running on this thread.
thread_local std::string* t_session_errors = nullptr;

/// LLVM 16's InProcessMemoryManager unmaps a graph's code and data on
/// deallocation only if the graph has a dealloc action (fixed upstream in
/// llvm-project#81943, LLVM 19); without one every removed module kept its
/// pages. This plugin gives every graph a no-op dealloc action.
llvm::orc::shared::CWrapperFunctionResult noop_dealloc_action(const char* data, size_t size) {
  using namespace llvm::orc::shared;
  return WrapperFunction<SPSError()>::handle(data, size, []() { return llvm::Error::success(); })
      .release();
}

class ReleaseMemoryOnRemovePlugin final : public orc::ObjectLinkingLayer::Plugin {
 public:
  void modifyPassConfig(orc::MaterializationResponsibility&, llvm::jitlink::LinkGraph&,
                        llvm::jitlink::PassConfiguration& config) override {
    config.PostFixupPasses.push_back([](llvm::jitlink::LinkGraph& graph) -> llvm::Error {
      auto call = orc::shared::WrapperFunctionCall::Create<orc::shared::SPSArgList<>>(
          orc::ExecutorAddr::fromPtr(&noop_dealloc_action));
      if (!call) return call.takeError();
      graph.allocActions().push_back({orc::shared::WrapperFunctionCall(), std::move(*call)});
      return llvm::Error::success();
    });
  }
  llvm::Error notifyFailed(orc::MaterializationResponsibility&) override {
    return llvm::Error::success();
  }
  llvm::Error notifyRemovingResources(orc::JITDylib&, orc::ResourceKey) override {
    return llvm::Error::success();
  }
  void notifyTransferringResources(orc::JITDylib&, orc::ResourceKey, orc::ResourceKey) override {}
};

/// Process-wide JIT state, created on first use (thread-safe static init) and
/// never destroyed: modules may outlive static destructors at exit.
struct JitProcess {
  std::unique_ptr<orc::LLJIT> jit;
  orc::JITDylib* runtime = nullptr;  // cppi_runtime, SLEEF, libm, the process
  std::string error;                 // why creation failed, if it did
  std::atomic<uint64_t> next_id{0};
  std::atomic<uint64_t> removed{0};
};

JitProcess& jit_process() {
  static JitProcess* process = [] {
    auto* p = new JitProcess;
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
    const TargetConfig& host = host_target();
    orc::JITTargetMachineBuilder jtmb{llvm::Triple(host.triple)};
    jtmb.setCPU(host.cpu);
    jtmb.addFeatures(host.features);
    jtmb.setRelocationModel(llvm::Reloc::PIC_);
    jtmb.setCodeModel(llvm::CodeModel::Small);
    jtmb.setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);
    auto jit = orc::LLJITBuilder()
                   .setJITTargetMachineBuilder(std::move(jtmb))
                   .setObjectLinkingLayerCreator(
                       [](orc::ExecutionSession& es, const llvm::Triple&)
                           -> llvm::Expected<std::unique_ptr<orc::ObjectLayer>> {
                         auto layer = std::make_unique<orc::ObjectLinkingLayer>(es);
                         layer->addPlugin(std::make_unique<ReleaseMemoryOnRemovePlugin>());
                         return layer;
                       })
                   .create();
    if (!jit) {
      p->error = "cannot create LLJIT: " + to_string(jit.takeError());
      return p;
    }
    p->jit = std::move(*jit);
    orc::ExecutionSession& es = p->jit->getExecutionSession();
    es.setErrorReporter([](llvm::Error err) {
      std::string text = to_string(std::move(err));
      if (t_session_errors) *t_session_errors += text + "\n";
    });
    orc::JITDylib& rt = es.createBareJITDylib("cppi_runtime");
    orc::SymbolMap table;
    table[es.intern("cppi_runtime")] = llvm::JITEvaluatedSymbol(
        llvm::pointerToJITTargetAddress(cppi_runtime_table()), llvm::JITSymbolFlags::Exported);
    if (auto err = rt.define(orc::absoluteSymbols(std::move(table)))) {
      p->error = to_string(std::move(err));
      return p;
    }
    // SLEEF and libm first and by name, so kernels resolve them even when the
    // process loaded them RTLD_LOCAL (torch, Python extensions); then anything
    // else the process exports (memcpy, memset, ...).
    std::vector<std::string> libraries = {"libm.so.6"};
    if (!sleef_library_path().empty()) libraries.insert(libraries.begin(), sleef_library_path());
    for (const auto& lib : libraries) {
      auto gen = orc::DynamicLibrarySearchGenerator::Load(lib.c_str(), '\0');
      if (gen) rt.addGenerator(std::move(*gen));
      else llvm::consumeError(gen.takeError());
    }
    auto process_gen = orc::DynamicLibrarySearchGenerator::GetForCurrentProcess('\0');
    if (!process_gen) {
      p->error = to_string(process_gen.takeError());
      return p;
    }
    rt.addGenerator(std::move(*process_gen));
    p->runtime = &rt;
    return p;
  }();
  return *process;
}

/// A module: its JITDylib and the addresses of everything it defines
/// (resolved eagerly, so link errors surface from compile_cpp).
class JitModule final : public CompiledModule {
 public:
  JitModule(orc::JITDylib& jd, std::unordered_map<std::string, void*> symbols)
      : jd_(&jd), symbols_(std::move(symbols)) {}
  ~JitModule() override { remove_jitdylib(*jd_); }

  void* lookup(const std::string& name) const override {
    auto it = symbols_.find(name);
    return it == symbols_.end() ? nullptr : it->second;
  }

  static void remove_jitdylib(orc::JITDylib& jd) {
    JitProcess& p = jit_process();
    orc::ExecutionSession& es = p.jit->getExecutionSession();
    if (auto err = es.removeJITDylib(jd)) llvm::consumeError(std::move(err));
    // Symbol names stay in the session's pool until swept; sweep now and then
    // so unique kernel names do not accumulate.
    if (p.removed.fetch_add(1) % 64 == 63) es.getSymbolStringPool()->clearDeadEntries();
  }

 private:
  orc::JITDylib* jd_;
  std::unordered_map<std::string, void*> symbols_;
};

/// cc1 flags shared by the prelude PCH and the kernels compiled against it
/// (everything but the input and the action).
std::vector<std::string> frontend_args(const CompileOptions& o, const TargetConfig& t) {
  std::vector<std::string> args = {
      "-triple", t.triple, "-target-cpu", t.cpu, "-std=c++17", cat("-O", o.opt_level),
      // We run the LLVM pipeline ourselves (timed, and with our TargetMachine).
      "-disable-llvm-passes",
      // Kernels link into a JITDylib anywhere in the address space.
      "-mrelocation-model", "pic", "-pic-level", "2",
      // IEEE semantics: no contraction (matches eager and the g++ path), no
      // errno (so math builtins stay pure), no finite-math assumptions.
      "-ffp-contract=off", "-fno-rtti", "-fgnuc-version=4.2.1",
      // Nothing but the in-memory prelude may be included.
      "-nostdsysteminc", "-nobuiltininc", "-I", k_include_dir,
      "-Werror=return-type", "-ferror-limit", "20",
      o.debug_symbols ? "-mframe-pointer=all" : "-mframe-pointer=none"};
  for (const auto& f : t.features) args.insert(args.end(), {"-target-feature", f});
  if (o.debug_symbols) args.insert(args.end(), {"-debug-info-kind=constructor", "-dwarf-version=5"});
  if (sleef_library_path().empty()) args.push_back("-DCPPI_NO_SLEEF");
  for (const auto& d : o.defines) args.push_back("-D" + d);
  return args;
}

/// Where a header named `name` lives in the in-memory file system.
std::string include_path(const std::string& name) { return cat(k_include_dir, "/", name); }

/// A file system holding only the prelude and `first_header` (and, for
/// kernels, the source and the precompiled header). Buffers point at strings
/// that outlive it.
llvm::IntrusiveRefCntPtr<llvm::vfs::InMemoryFileSystem> prelude_file_system(
    const std::optional<SourceHeader>& first_header) {
  auto vfs = llvm::makeIntrusiveRefCnt<llvm::vfs::InMemoryFileSystem>();
  vfs->addFile(k_prelude_path, 0,
               llvm::MemoryBuffer::getMemBuffer(prelude_source(), k_prelude_path));
  if (first_header) {
    const std::string path = include_path(first_header->name);
    vfs->addFile(path, 0, llvm::MemoryBuffer::getMemBuffer(first_header->text, path));
  }
  return vfs;
}

/// Runs one clang action over `args` on `vfs`. Diagnostics are captured in
/// `diagnostics`, never printed.
bool run_clang(const std::vector<std::string>& args,
               llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem> vfs, clang::FrontendAction& action,
               std::string& diagnostics) {
  llvm::raw_string_ostream diag_os(diagnostics);
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  auto invocation = std::make_shared<clang::CompilerInvocation>();
  {
    auto diag_opts = llvm::makeIntrusiveRefCnt<clang::DiagnosticOptions>();
    clang::DiagnosticsEngine diags(llvm::makeIntrusiveRefCnt<clang::DiagnosticIDs>(), diag_opts,
                                   new clang::TextDiagnosticPrinter(diag_os, diag_opts.get()),
                                   /*ShouldOwnClient=*/true);
    if (!clang::CompilerInvocation::CreateFromArgs(*invocation, argv, diags)) return false;
  }
  // Without this every compile leaks its AST and module (the driver's
  // -disable-free default).
  invocation->getFrontendOpts().DisableFree = false;
  invocation->getCodeGenOpts().DisableFree = false;

  clang::CompilerInstance ci;
  ci.setInvocation(std::move(invocation));
  ci.createDiagnostics(new clang::TextDiagnosticPrinter(diag_os, &ci.getDiagnosticOpts()),
                       /*ShouldOwnClient=*/true);
  ci.setVerboseOutputStream(diag_os);  // "N errors generated." goes here, not stderr
  ci.createFileManager(std::move(vfs));
  const bool ok = ci.ExecuteAction(action);
  diag_os.flush();
  return ok;
}

/// The prelude, precompiled once per frontend configuration (target, -O,
/// defines: PCHs must match the flags of their users). Parsing the prelude
/// costs tens of ms per kernel; loading the PCH, which deserialises lazily,
/// costs a few.
struct PreludePch {
  std::string bytes;  // empty if building it failed (kernels then parse the header)
  std::string error;
};

std::shared_ptr<const PreludePch> prelude_pch(const std::vector<std::string>& common_args,
                                              const std::optional<SourceHeader>& first_header) {
  static std::mutex mutex;
  static std::unordered_map<std::string, std::shared_ptr<const PreludePch>> cache;
  std::string key;
  for (const auto& a : common_args) key += a + '\0';
  if (first_header) key += first_header->name + '\0' + first_header->text;
  std::lock_guard<std::mutex> lock(mutex);  // builds are rare; one at a time is fine
  if (auto it = cache.find(key); it != cache.end()) return it->second;

  auto pch = std::make_shared<PreludePch>();
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/cppi-pch-XXXXXX";
  if (!mkdtemp(dir.data())) {
    pch->error = "cannot create a temporary directory for the prelude PCH";
  } else {
    const std::string out = dir + "/prelude.pch";
    std::vector<std::string> args = common_args;
    const std::string header = first_header ? include_path(first_header->name) : std::string(k_prelude_path);
    args.insert(args.end(), {"-emit-pch", "-x", "c++-header", "-o", out, header});
    clang::GeneratePCHAction action;
    std::string diagnostics;
    if (run_clang(args, prelude_file_system(first_header), action, diagnostics)) {
      if (auto bytes = read_file(out)) pch->bytes = std::move(*bytes);
    } else {
      pch->error = diagnostics;
    }
    unlink(out.c_str());
    rmdir(dir.c_str());
  }
  cache.emplace(key, pch);
  return pch;
}

/// Parse + IR generation against the precompiled prelude.
Expected<std::unique_ptr<llvm::Module>> run_frontend(const std::string& source,
                                                     const CompileOptions& o,
                                                     const TargetConfig& t,
                                                     llvm::LLVMContext& context) {
  std::vector<std::string> args = frontend_args(o, t);
  std::shared_ptr<const PreludePch> pch = prelude_pch(args, o.first_header);
  auto vfs = prelude_file_system(o.first_header);
  if (!pch->bytes.empty()) {
    vfs->addFile(k_pch_path, 0, llvm::MemoryBuffer::getMemBuffer(pch->bytes, k_pch_path, false));
    args.insert(args.end(), {"-include-pch", k_pch_path});
  }
  vfs->addFile(k_source_path, 0, llvm::MemoryBuffer::getMemBuffer(source, k_source_path));
  args.insert(args.end(), {"-x", "c++", k_source_path});

  clang::EmitLLVMOnlyAction action(&context);
  std::string diagnostics;
  if (!run_clang(args, vfs, action, diagnostics))
    return Error::compile_failed(diagnostics.empty() ? "clang failed" : diagnostics);
  std::unique_ptr<llvm::Module> module = action.takeModule();
  if (!module) return Error::compile_failed("clang produced no module:\n" + diagnostics);
  return module;
}

Expected<std::unique_ptr<llvm::TargetMachine>> make_target_machine(const TargetConfig& t,
                                                                   int opt_level) {
  std::string err;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(t.triple, err);
  if (!target) return Error::internal("no LLVM target for " + t.triple + ": " + err);
  llvm::TargetOptions options;
  options.AllowFPOpFusion = llvm::FPOpFusion::Strict;  // -ffp-contract=off
  const llvm::CodeGenOpt::Level levels[] = {llvm::CodeGenOpt::None, llvm::CodeGenOpt::Less,
                                            llvm::CodeGenOpt::Default,
                                            llvm::CodeGenOpt::Aggressive};
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      t.triple, t.cpu, join(t.features, ","), options, llvm::Reloc::PIC_, llvm::CodeModel::Small,
      levels[opt_level], /*JIT=*/true));
  if (!tm) return Error::internal("cannot create a TargetMachine for " + t.cpu);
  return tm;
}

/// LLVM 16's loop vectoriser miscompiles loops whose address wraps through a
/// power-of-two remainder of a strided induction: `out[i] = in[(3 * i) % 64]`
/// becomes one stride-3 interleaved load group (lanes past the wrap read
/// in[66], in[69], ... instead of in[2], in[5]). Gathers with indices
/// computed from arange (`x[torch.arange(n) * 3 % 64]`) lower to such loops.
/// No interleave groups, then: the loops LLVM vectorises on its own are the
/// ones our printer left scalar, and those keep their strided accesses as
/// gathers or scalar code. (Refusing SCEV-predicated vectorisation alone
/// fixed one such loop, not all.) LLVM options are process-wide; nothing
/// else in the process runs LLVM.
void avoid_interleaved_access_groups() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* argv[] = {"cppinductor", "-enable-interleaved-mem-accesses=0"};
    llvm::cl::ParseCommandLineOptions(2, argv, "", &llvm::nulls());
  });
}

void optimize(llvm::Module& module, llvm::TargetMachine& tm, int opt_level, bool unroll_loops) {
  avoid_interleaved_access_groups();
  llvm::PipelineTuningOptions tuning;
  tuning.LoopUnrolling = unroll_loops;  // off: loops unroll only where a pragma forces it
  tuning.LoopVectorization = opt_level >= 2;
  tuning.SLPVectorization = opt_level >= 2;
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&tm, tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  const llvm::OptimizationLevel levels[] = {llvm::OptimizationLevel::O0, llvm::OptimizationLevel::O1,
                                            llvm::OptimizationLevel::O2,
                                            llvm::OptimizationLevel::O3};
  llvm::ModulePassManager mpm = opt_level == 0
                                    ? pb.buildO0DefaultPipeline(llvm::OptimizationLevel::O0)
                                    : pb.buildPerModuleDefaultPipeline(levels[opt_level]);
  mpm.run(module, mam);
}

Expected<std::string> emit_object(llvm::Module& module, llvm::TargetMachine& tm) {
  module.setDataLayout(tm.createDataLayout());
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_ObjectFile))
    return Error::internal("the target cannot emit object files");
  pm.run(module);
  return std::string(buffer.data(), buffer.size());
}

/// With CPPINDUCTOR_PERF_MAP=1, appends the address, size and name of every
/// function of a linked module to /tmp/perf-<pid>.map, which `perf report`
/// reads to name JIT'd code: the kernels, and the functions local to them
/// (the bodies of their parallel loops, where most of a kernel's time goes),
/// placed by their offset from a kernel in the same section (JITLink keeps
/// a section's code in one block). Entries of freed modules stay in the
/// file (perf has no way to retire them).
void write_perf_map(const std::string& object, const std::unordered_map<std::string, void*>& symbols) {
  const char* env = std::getenv("CPPINDUCTOR_PERF_MAP");
  if (!env || !*env || std::string(env) == "0") return;
  auto file = llvm::object::ObjectFile::createObjectFile(
      llvm::MemoryBufferRef(object, "cppi-kernel.o"));
  if (!file) return llvm::consumeError(file.takeError());
  if (!llvm::isa<llvm::object::ELFObjectFileBase>(file->get())) return;
  struct Function {
    std::string name;
    uint64_t section, offset, size;
  };
  std::vector<Function> functions;
  std::unordered_map<uint64_t, uintptr_t> section_base;  // section index -> its address in memory
  for (const llvm::object::SymbolRef& sym : (*file)->symbols()) {
    auto name = sym.getName();
    auto type = sym.getType();
    auto section = sym.getSection();
    auto offset = sym.getValue();
    if (!name || !type || !section || !offset) {
      if (!name) llvm::consumeError(name.takeError());
      if (!type) llvm::consumeError(type.takeError());
      if (!section) llvm::consumeError(section.takeError());
      if (!offset) llvm::consumeError(offset.takeError());
      continue;
    }
    if (*type != llvm::object::SymbolRef::ST_Function || *section == (*file)->section_end()) continue;
    const uint64_t index = (*section)->getIndex();
    functions.push_back({name->str(), index, *offset, llvm::object::ELFSymbolRef(sym).getSize()});
    auto it = symbols.find(name->str());
    if (it != symbols.end()) section_base[index] = reinterpret_cast<uintptr_t>(it->second) - *offset;
  }
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  FILE* out = std::fopen(cat("/tmp/perf-", getpid(), ".map").c_str(), "a");
  if (!out) return;
  for (const Function& f : functions) {
    auto base = section_base.find(f.section);
    if (base == section_base.end() || f.size == 0) continue;
    std::fprintf(out, "%llx %llx %s\n", (unsigned long long)(base->second + f.offset), (unsigned long long)f.size,
                 f.name.c_str());
  }
  std::fclose(out);
}

/// Links an object into a fresh JITDylib and resolves all its symbols.
Expected<std::shared_ptr<CompiledModule>> link_object(const std::string& object) {
  JitProcess& p = jit_process();
  orc::ExecutionSession& es = p.jit->getExecutionSession();
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(object, "cppi-kernel.o");
  auto interface = orc::getObjectFileInterface(es, buffer->getMemBufferRef());
  if (!interface) return Error::internal("bad object file: " + to_string(interface.takeError()));

  orc::JITDylib& jd = es.createBareJITDylib(cat("cppi_module_", p.next_id.fetch_add(1)));
  jd.addToLinkOrder(*p.runtime);
  std::string session_errors;
  t_session_errors = &session_errors;
  struct Reset {
    ~Reset() { t_session_errors = nullptr; }
  } reset;
  auto fail = [&](const std::string& what, llvm::Error err) -> Error {
    std::string text = session_errors + to_string(std::move(err));
    JitModule::remove_jitdylib(jd);
    return Error::compile_failed(what + text);
  };
  if (auto err = p.jit->addObjectFile(jd, std::move(buffer))) return fail("cannot add object: ", std::move(err));

  orc::SymbolLookupSet names;
  for (const auto& [name, flags] : interface->SymbolFlags) names.add(name);
  auto resolved = es.lookup(orc::makeJITDylibSearchOrder(&jd, orc::JITDylibLookupFlags::MatchAllSymbols),
                            std::move(names));
  if (!resolved) return fail("JIT link failed: ", resolved.takeError());
  std::unordered_map<std::string, void*> symbols;
  for (const auto& [name, symbol] : *resolved)
    symbols.emplace((*name).str(), llvm::jitTargetAddressToPointer<void*>(symbol.getAddress()));
  write_perf_map(object, symbols);
  return std::shared_ptr<CompiledModule>(new JitModule(jd, std::move(symbols)));
}

}  // namespace

std::string clang_jit_target_id(const CompileOptions& options) {
  // Everything that shapes the object: LLVM, target, and the exact frontend
  // flags (so changing them here invalidates cached objects).
  const TargetConfig t = target_for(options);
  return cat("llvm-" LLVM_VERSION_STRING " jit-v3 ", t.triple, " ", t.cpu, " ",
             join(frontend_args(options, t), " "));
}

Expected<BackendResult> compile_with_clang_jit(const BackendRequest& request) {
  JitProcess& p = jit_process();
  if (!p.jit || !p.runtime) return Error::internal("the CPU JIT is unavailable: " + p.error);
  const CompileOptions& o = request.options;
  BackendResult result;

  const std::string cache_path =
      request.cache_dir.empty() ? "" : request.cache_dir + "/" + request.key + ".o";
  if (!cache_path.empty()) {
    if (auto object = read_cache_entry(cache_path, &result.disk_corrupt)) {
      const double t0 = now_ms();
      auto module = link_object(*object);
      if (module) {
        result.module = std::move(*module);
        result.timings.link_ms = now_ms() - t0;
        result.disk_hit = true;
        return result;
      }
      result.disk_corrupt = true;
    }
  }

  const TargetConfig target = target_for(o);
  std::string object;
  {
    llvm::LLVMContext context;
    double t0 = now_ms();
    auto module = run_frontend(request.source, o, target, context);
    if (!module) return module.error();
    double t1 = now_ms();
    result.timings.frontend_ms = t1 - t0;

    auto tm = make_target_machine(target, o.opt_level);
    if (!tm) return tm.error();
    optimize(**module, **tm, o.opt_level, o.unroll_loops);
    double t2 = now_ms();
    result.timings.optimize_ms = t2 - t1;

    auto obj = emit_object(**module, **tm);
    if (!obj) return obj.error();
    object = std::move(*obj);
    result.timings.codegen_ms = now_ms() - t2;
  }

  const double t3 = now_ms();
  auto module = link_object(object);
  if (!module) return module.error();
  result.timings.link_ms = now_ms() - t3;
  result.module = std::move(*module);
  if (!cache_path.empty()) (void)write_cache_entry(cache_path, object);  // best effort
  return result;
}

}  // namespace cppi::cpu
