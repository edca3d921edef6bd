//! What the checker asks of a Go binary, and nothing more: its functions, the sites in
//! them, their parameters and the values in scope at a site, the Go types reached, and
//! the runtime's layouts. Two implementations: `Target`, the reader of a real
//! executable, and, in tests, `fake::Fake`, a binary described in a few lines (no Go
//! toolchain, no file), against which scripts are checked and lowered in milliseconds.
//!
//! The checker puts every fact lowering needs into `check::Checked` (its `binary`), so
//! nothing after it holds a `GoBinary`.

use super::{
    AesGlobals, BuildIds, Dictionary, Function, GLayout, InlinedSite, LineError, LineSite, Local, MapLayout,
    NoRuntimeType, NoVariable, OtelContext, PanicLayout, Param, ProbeSites, Target, TargetError, ValueLocation,
    Variable,
};
use crate::arch::abi::Conv;
use crate::arch::{Arch, Refusal};
use crate::gotypes::{TypeId, Types};
use std::cell::Ref;
use std::path::Path;

/// A Go executable as the checker sees it (see the module's comment).
pub trait GoBinary {
    // What it is.
    fn path(&self) -> &Path;
    fn arch(&self) -> Arch;
    fn build_ids(&self) -> &BuildIds;
    /// `go1.22.3`, from the build info.
    fn go_version(&self) -> Option<&str>;
    /// No symbol table: the functions come from `.gopclntab`.
    fn is_stripped(&self) -> bool;
    fn has_dwarf(&self) -> bool;
    fn is_pie(&self) -> bool;

    // Functions.
    /// Functions by a script's name or pattern (see `symbols`), sorted by name.
    fn find(&self, pattern: &str) -> Vec<&Function>;
    /// Up to `n` names closest to `name`, for "did you mean".
    fn closest(&self, name: &str, n: usize) -> Vec<&str>;
    /// The function whose first instruction is at `addr`.
    fn function_at(&self, addr: u64) -> Option<&Function>;
    /// The generic dictionaries of the symbol table.
    fn dictionaries(&self) -> Vec<Dictionary>;
    /// The dictionaries `shape` may be called with, and the instantiation each makes.
    fn instantiations_of(&self, shape: &str, all: &[Dictionary]) -> Vec<(Dictionary, String)>;

    // Sites.
    /// The entry after the stack check and every RET of `f`.
    fn probe_sites(&self, f: &Function) -> Result<ProbeSites, TargetError>;
    /// Why a uprobe must not go at `addr`; None when it may.
    fn uprobe_refusal(&self, addr: u64) -> Option<Refusal>;
    /// Every place a function `pattern` names was inlined.
    fn find_inlined(&self, pattern: &str) -> Vec<InlinedSite>;
    /// Where a source line starts.
    fn line_sites(&self, file: &str, line: u32) -> Result<Vec<LineSite>, LineError>;
    /// The file offset of the byte at `addr`: what a uprobe attaches to.
    fn file_offset(&self, addr: u64) -> Option<u64>;
    /// The ELF entry point (where a PIE's load bias is learned).
    fn entry_point(&self) -> Option<u64>;

    // Parameters and values.
    /// Parameters and results of `function` from DWARF (None without).
    fn params(&self, function: &str) -> Result<Option<Vec<Param>>, TargetError>;
    /// Where an inlined call's parameters are at its site.
    fn inlined_params(&self, site: &InlinedSite) -> Result<Option<Vec<(Param, ValueLocation)>>, TargetError>;
    /// The variables in scope where a line starts.
    fn locals_at(&self, site: &LineSite) -> Result<Vec<Local>, TargetError>;
    /// A package-level variable, or why there is none.
    fn variable(&self, name: &str) -> Result<Result<Variable, NoVariable>, TargetError>;
    /// Whether `package` is a package of the binary.
    fn is_package(&self, package: &str) -> bool;

    // Types.
    /// Every Go type parsed so far (`TypeId`s index it). Not held while asking for more.
    fn types(&self) -> Ref<'_, Types>;
    /// A signed machine word: positional `argN`'s type without DWARF.
    fn word_type(&self) -> TypeId;
    /// The Go type named `name` (`*net/http.Request`; a short package name if only one
    /// package has it): from DWARF, else from the runtime's type data.
    fn type_named(&self, name: &str) -> Result<TypeId, NoRuntimeType>;
    /// The link-time address of the runtime type descriptor of the pointer type `name`
    /// (`*main.T`): what an interface holding one has as its dynamic type.
    fn pointer_descriptor(&self, name: &str) -> Option<u64>;
    /// The main module's path from the build info.
    fn module_path(&self) -> Option<&str> {
        None
    }
    /// How the kernel runs the instruction at `addr` under a uprobe.
    fn trap_kind_at(&self, _addr: u64) -> crate::arch::trap::TrapKind {
        crate::arch::trap::TrapKind::Step
    }
    /// The link-time address of the file's first byte (a PIE's load bias is where the
    /// traced process mapped it, minus this).
    fn link_base(&self) -> Option<u64> {
        None
    }
    /// The types an interface may hold, by their runtime descriptor's link-time address,
    /// with the layouts printing needs (`needs_layout`). Empty without DWARF.
    fn runtime_types(&self) -> Vec<super::RuntimeType> {
        Vec::new()
    }

    // The runtime's layouts.
    fn g_layout(&self) -> Option<GLayout>;
    fn map_layout(&self) -> Option<MapLayout>;
    fn panic_layout(&self) -> Option<PanicLayout>;
    fn aes_globals(&self) -> Option<AesGlobals>;
    /// Where the OpenTelemetry SDK keeps a context's span (None without the SDK).
    fn otel_context(&self) -> Option<OtelContext>;
    /// Whether the fallback map hash uses wyhash's constants (Go 1.17 to 1.22).
    fn memhash_has_constants(&self) -> bool;

    /// How this binary's Go functions take their arguments.
    fn go_conv(&self) -> Conv {
        Conv::for_go(self.arch(), self.go_version().and_then(super::go_minor))
    }

    /// How `f` takes its arguments: on the stack if it is assembly, else as Go does.
    fn conv_of(&self, f: &Function) -> Conv {
        match f.abi {
            super::Abi::Abi0 => Conv::stack(self.arch()),
            super::Abi::Internal | super::Abi::Unknown => self.go_conv(),
        }
    }
}

impl GoBinary for Target {
    fn path(&self) -> &Path {
        Target::path(self)
    }
    fn arch(&self) -> Arch {
        Target::arch(self)
    }
    fn build_ids(&self) -> &BuildIds {
        Target::build_ids(self)
    }
    fn go_version(&self) -> Option<&str> {
        Target::go_version(self)
    }
    fn is_stripped(&self) -> bool {
        Target::is_stripped(self)
    }
    fn has_dwarf(&self) -> bool {
        Target::has_dwarf(self)
    }
    fn is_pie(&self) -> bool {
        Target::is_pie(self)
    }
    fn find(&self, pattern: &str) -> Vec<&Function> {
        Target::find(self, pattern)
    }
    fn closest(&self, name: &str, n: usize) -> Vec<&str> {
        Target::closest(self, name, n)
    }
    fn function_at(&self, addr: u64) -> Option<&Function> {
        Target::function_at(self, addr)
    }
    fn dictionaries(&self) -> Vec<Dictionary> {
        Target::dictionaries(self)
    }
    fn instantiations_of(&self, shape: &str, all: &[Dictionary]) -> Vec<(Dictionary, String)> {
        Target::instantiations_of(self, shape, all)
    }
    fn probe_sites(&self, f: &Function) -> Result<ProbeSites, TargetError> {
        Target::probe_sites(self, f)
    }
    fn uprobe_refusal(&self, addr: u64) -> Option<Refusal> {
        Target::uprobe_refusal(self, addr)
    }
    fn find_inlined(&self, pattern: &str) -> Vec<InlinedSite> {
        Target::find_inlined(self, pattern)
    }
    fn line_sites(&self, file: &str, line: u32) -> Result<Vec<LineSite>, LineError> {
        Target::line_sites(self, file, line)
    }
    fn file_offset(&self, addr: u64) -> Option<u64> {
        Target::file_offset(self, addr)
    }
    fn entry_point(&self) -> Option<u64> {
        Target::entry_point(self)
    }
    fn params(&self, function: &str) -> Result<Option<Vec<Param>>, TargetError> {
        Target::params(self, function)
    }
    fn inlined_params(&self, site: &InlinedSite) -> Result<Option<Vec<(Param, ValueLocation)>>, TargetError> {
        Target::inlined_params(self, site)
    }
    fn locals_at(&self, site: &LineSite) -> Result<Vec<Local>, TargetError> {
        Target::locals_at(self, site)
    }
    fn variable(&self, name: &str) -> Result<Result<Variable, NoVariable>, TargetError> {
        Target::variable(self, name)
    }
    fn is_package(&self, package: &str) -> bool {
        Target::is_package(self, package)
    }
    fn types(&self) -> Ref<'_, Types> {
        Target::types(self)
    }
    fn word_type(&self) -> TypeId {
        Target::word_type(self)
    }
    fn type_named(&self, name: &str) -> Result<TypeId, NoRuntimeType> {
        Target::type_named(self, name)
    }
    fn pointer_descriptor(&self, name: &str) -> Option<u64> {
        Target::pointer_descriptor(self, name)
    }
    fn runtime_types(&self) -> Vec<super::RuntimeType> {
        Target::runtime_types(self, super::needs_layout)
    }
    fn module_path(&self) -> Option<&str> {
        Target::module_path(self)
    }
    fn trap_kind_at(&self, addr: u64) -> crate::arch::trap::TrapKind {
        Target::trap_kind_at(self, addr)
    }
    fn link_base(&self) -> Option<u64> {
        Target::vaddr_of_file_offset(self, 0)
    }
    fn g_layout(&self) -> Option<GLayout> {
        Target::g_layout(self)
    }
    fn map_layout(&self) -> Option<MapLayout> {
        Target::map_layout(self)
    }
    fn panic_layout(&self) -> Option<PanicLayout> {
        Target::panic_layout(self)
    }
    fn aes_globals(&self) -> Option<AesGlobals> {
        Target::aes_globals(self)
    }
    fn otel_context(&self) -> Option<OtelContext> {
        Target::otel_context(self)
    }
    fn memhash_has_constants(&self) -> bool {
        Target::memhash_has_constants(self)
    }
}
