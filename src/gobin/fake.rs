//! A Go binary described in a few lines, for tests that check and lower scripts with no
//! Go toolchain, no file and no privileges: functions with their parameters and results
//! (Go type names: `int`, `string`, `map[string]int`, `[]uint8`, `*main.T`...), package
//! variables, and the runtime functions gtrace's own programs attach to. Its answers are
//! what `Target` would give for such a binary built by Go 1.26 for amd64 (or arm64):
//! the register ABI, the runtime's layouts from the tables by version, every function's
//! entry 16 bytes after its start and one RET, file offsets 0x400000 below addresses.

use super::{
    AesGlobals, BuildIds, Dictionary, Function, GLayout, GoBinary, InlinedSite, LineError, LineSite, Local, MapLayout,
    NoVariable, OtelContext, PanicLayout, Param, ProbeSites, Target, TargetError, ValueLocation, Variable,
};
use crate::arch::{Arch, Refusal};
use crate::gotypes::{GoType, TypeId, TypeKind, Types};
use std::cell::{Ref, RefCell};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The Go release the fake says built it.
const GO_VERSION: &str = "go1.26.0";
/// Where the first function starts; each next one 0x100 further.
const TEXT: u64 = 0x401000;
/// What a file offset is below its address.
const LOAD: u64 = 0x400000;

/// A fake Go executable (see the module's comment).
pub struct Fake {
    path: PathBuf,
    arch: Arch,
    build_ids: BuildIds,
    /// Sorted by name.
    functions: Vec<Function>,
    params: HashMap<String, Vec<Param>>,
    variables: HashMap<String, Variable>,
    types: RefCell<Types>,
    /// Whether it has DWARF: without, parameters are known only by position.
    dwarf: bool,
    /// Runtime type descriptors of pointer types, by name (`*main.T`).
    descriptors: HashMap<String, u64>,
}

impl Fake {
    /// An amd64 binary with only the runtime functions.
    pub fn new() -> Fake {
        Fake::for_arch(Arch::X86_64)
    }

    pub fn for_arch(arch: Arch) -> Fake {
        let mut fake = Fake {
            path: PathBuf::from("/fake/prog"),
            arch,
            build_ids: BuildIds::default(),
            functions: Vec::new(),
            params: HashMap::new(),
            variables: HashMap::new(),
            types: RefCell::new(Types::default()),
            dwarf: true,
            descriptors: HashMap::new(),
        };
        // The runtime functions gtrace's own programs attach to.
        let runtime = crate::check::binary::TIMING_FUNCTIONS.into_iter().chain([crate::check::binary::GOEXIT0]);
        for name in runtime {
            fake = fake.function(name, &[("gp", "*runtime.g")], &[]);
        }
        fake
    }

    /// Adds a function with its parameters and results, each a name and a Go type name.
    pub fn function(mut self, name: &str, params: &[(&str, &str)], results: &[(&str, &str)]) -> Fake {
        let addr = TEXT + 0x100 * self.functions.len() as u64;
        let f = Function { name: name.into(), addr, size: 0x80, abi: super::Abi::Internal };
        let mut list = Vec::new();
        for (i, (n, ty)) in params.iter().chain(results).enumerate() {
            let ty = self.type_id(ty);
            list.push(Param { name: n.to_string(), ty, is_result: i >= params.len() });
        }
        self.params.insert(name.to_string(), list);
        let at = self.functions.partition_point(|g| g.name < f.name);
        self.functions.insert(at, f);
        self
    }

    /// The same binary without DWARF (`-ldflags=-w`): no parameters, types or variables.
    pub fn without_dwarf(mut self) -> Fake {
        self.dwarf = false;
        self.params.clear();
        self.variables.clear();
        self
    }

    /// Adds a package-level variable at `addr`.
    pub fn variable(mut self, name: &str, ty: &str, addr: u64) -> Fake {
        let ty = self.type_id(ty);
        self.variables.insert(name.to_string(), Variable { name: name.to_string(), addr, ty });
        self
    }

    /// Adds a struct type with its fields (name, Go type name, offset) and the runtime
    /// type descriptor of a pointer to it at `descriptor`.
    pub fn structure(mut self, name: &str, fields: &[(&str, &str, u64)], descriptor: u64) -> Fake {
        let mut list = Vec::new();
        for (field, ty, offset) in fields {
            let ty = self.type_id(ty);
            list.push(crate::gotypes::StructField { name: field.to_string(), ty, offset: *offset, embedded: false });
        }
        let size = fields.iter().map(|(_, ty, offset)| offset + self.types.borrow().get(self.type_id(ty)).size).max();
        let kind = TypeKind::Struct { fields: list };
        self.types.borrow_mut().add(GoType { name: name.to_string(), size: size.unwrap_or(0), kind });
        self.descriptors.insert(format!("*{name}"), descriptor);
        self
    }

    /// The type named `name`, added to the arena on first use.
    pub fn type_id(&self, name: &str) -> TypeId {
        if let Some(i) = self.types.borrow().items.iter().position(|t| t.name == name) {
            return TypeId(i as u32);
        }
        let (size, kind) = self.describe(name);
        self.types.borrow_mut().add(GoType { name: name.to_string(), size, kind })
    }

    /// The size and kind of a Go type by its name (the kinds the fake knows).
    fn describe(&self, name: &str) -> (u64, TypeKind) {
        let int = |size, signed| (size, TypeKind::Int { signed });
        match name {
            "int" | "int64" => int(8, true),
            "int32" => int(4, true),
            "int16" => int(2, true),
            "int8" => int(1, true),
            "uint" | "uint64" | "uintptr" => int(8, false),
            "uint32" => int(4, false),
            "uint16" => int(2, false),
            "uint8" => int(1, false),
            "bool" => (1, TypeKind::Bool),
            "float64" => (8, TypeKind::Float),
            "string" => (16, TypeKind::String),
            "error" | "context.Context" => (16, TypeKind::Interface { empty: false }),
            "interface {}" => (16, TypeKind::Interface { empty: true }),
            _ => {
                if let Some(elem) = name.strip_prefix("[]") {
                    (24, TypeKind::Slice { elem: self.type_id(elem) })
                } else if let Some(elem) = name.strip_prefix('*') {
                    (8, TypeKind::Pointer { elem: self.type_id(elem) })
                } else if let Some(rest) = name.strip_prefix("map[") {
                    let end = rest.find(']').expect("map[K]V");
                    let (key, elem) = (self.type_id(&rest[..end]), self.type_id(&rest[end + 1..]));
                    (8, TypeKind::Map { key: Some(key), elem: Some(elem) })
                } else {
                    (0, TypeKind::Other)
                }
            }
        }
    }

    fn sites_of(f: &Function) -> ProbeSites {
        ProbeSites { entry: f.addr + 0x10, returns: vec![f.addr + f.size - 1] }
    }
}

impl Default for Fake {
    fn default() -> Fake {
        Fake::new()
    }
}

impl GoBinary for Fake {
    fn path(&self) -> &Path {
        &self.path
    }
    fn arch(&self) -> Arch {
        self.arch
    }
    fn build_ids(&self) -> &BuildIds {
        &self.build_ids
    }
    fn go_version(&self) -> Option<&str> {
        Some(GO_VERSION)
    }
    fn is_stripped(&self) -> bool {
        false
    }
    fn has_dwarf(&self) -> bool {
        self.dwarf
    }
    fn is_pie(&self) -> bool {
        false
    }
    fn find(&self, pattern: &str) -> Vec<&Function> {
        super::symbols::find(&self.functions, pattern)
    }
    fn closest(&self, name: &str, n: usize) -> Vec<&str> {
        super::symbols::closest(&self.functions.iter().collect::<Vec<_>>(), name, n)
    }
    fn function_at(&self, addr: u64) -> Option<&Function> {
        self.functions.iter().find(|f| f.addr == addr)
    }
    fn dictionaries(&self) -> Vec<Dictionary> {
        Vec::new()
    }
    fn instantiations_of(&self, _shape: &str, _all: &[Dictionary]) -> Vec<(Dictionary, String)> {
        Vec::new()
    }
    fn probe_sites(&self, f: &Function) -> Result<ProbeSites, TargetError> {
        Ok(Fake::sites_of(f))
    }
    fn uprobe_refusal(&self, _addr: u64) -> Option<Refusal> {
        None
    }
    fn find_inlined(&self, _pattern: &str) -> Vec<InlinedSite> {
        Vec::new()
    }
    fn line_sites(&self, _file: &str, _line: u32) -> Result<Vec<LineSite>, LineError> {
        Err(LineError::NoDwarf)
    }
    fn file_offset(&self, addr: u64) -> Option<u64> {
        addr.checked_sub(LOAD)
    }
    fn entry_point(&self) -> Option<u64> {
        Some(TEXT)
    }
    fn params(&self, function: &str) -> Result<Option<Vec<Param>>, TargetError> {
        Ok(self.params.get(function).cloned())
    }
    fn inlined_params(&self, _site: &InlinedSite) -> Result<Option<Vec<(Param, ValueLocation)>>, TargetError> {
        Ok(None)
    }
    fn locals_at(&self, _site: &LineSite) -> Result<Vec<Local>, TargetError> {
        Ok(Vec::new())
    }
    fn variable(&self, name: &str) -> Result<Result<Variable, NoVariable>, TargetError> {
        if !self.dwarf {
            return Ok(Err(NoVariable::NoDwarf { in_symtab: false }));
        }
        Ok(self.variables.get(name).cloned().ok_or(NoVariable::Unknown { same_package: Vec::new() }))
    }
    fn is_package(&self, package: &str) -> bool {
        let prefix = format!("{package}.");
        self.functions.iter().any(|f| f.name.starts_with(&prefix))
            || self.variables.keys().any(|v| v.starts_with(&prefix))
    }
    fn types(&self) -> Ref<'_, Types> {
        self.types.borrow()
    }
    fn word_type(&self) -> TypeId {
        self.type_id("int")
    }
    fn pointer_descriptor(&self, name: &str) -> Option<u64> {
        self.descriptors.get(name).copied()
    }
    fn type_named(&self, name: &str) -> Result<TypeId, super::NoRuntimeType> {
        let bare = name.trim_start_matches('*');
        match self.types.borrow().items.iter().any(|t| t.name == bare) {
            true => Ok(()),
            false => Err(super::NoRuntimeType::Unknown { closest: Vec::new() }),
        }?;
        Ok(self.type_id(name))
    }
    fn g_layout(&self) -> Option<GLayout> {
        Target::g_layout_for_version(GO_VERSION)
    }
    fn map_layout(&self) -> Option<MapLayout> {
        Target::map_layout_for_version(GO_VERSION)
    }
    fn panic_layout(&self) -> Option<PanicLayout> {
        Target::panic_layout_for_version(GO_VERSION)
    }
    fn aes_globals(&self) -> Option<AesGlobals> {
        // Where a Go 1.26 build might keep them.
        Some(AesGlobals {
            use_aeshash: 0x5a0000,
            aeskeysched: 0x5a0100,
            hashkey: Some(0x5a0200),
            rounds: self.arch.aes_rounds(Some(26)),
        })
    }
    fn memhash_has_constants(&self) -> bool {
        false
    }
    fn otel_context(&self) -> Option<OtelContext> {
        None
    }
}
