//! Package-level variables by their Go names (`main.config`, `net/http.DefaultClient`):
//! address and type from DWARF (the binary's own, or a debug file kept aside). Without
//! DWARF, the symbol table still says whether the variable exists (but not its type),
//! and a stripped binary has neither (but `runtime.waitReasonStrings` is found in it
//! all the same: `waitreasons`). Also the ELF entry point, where a PIE's load bias is
//! learned at run time.

use crate::gobin::{RuntimeType, Target, TargetError};
use crate::gotypes::{GoType, TypeId, TypeKind};
use object::{Object, ObjectSymbol, SymbolKind};

/// A package-level variable: where it is (link-time: a PIE adds its load bias) and its
/// Go type.
#[derive(Clone, Debug, PartialEq)]
pub struct Variable {
    pub name: String,
    pub addr: u64,
    pub ty: TypeId,
}

/// Why a package-level variable cannot be read by name.
#[derive(Clone, Debug, PartialEq)]
pub enum NoVariable {
    /// No DWARF: the symbol table has it (`in_symtab`) but not its type, or there is no
    /// symbol table either (a stripped binary).
    NoDwarf { in_symtab: bool },
    /// DWARF has no such variable: these of its package are (for suggestions).
    Unknown { same_package: Vec<String> },
}

impl Target {
    /// The package-level variable `name`, or why it cannot be read.
    pub fn variable(&self, name: &str) -> Result<Result<Variable, NoVariable>, TargetError> {
        let mut state = self.dwarf.borrow_mut();
        let (path, data) = self.dwarf_source();
        let Some(dwarf) = Self::dwarf_mut(&mut state, path, data)? else {
            if name == "runtime.waitReasonStrings" {
                if let Some(v) = self.wait_reason_strings() {
                    return Ok(Ok(v));
                }
            }
            return Ok(Err(NoVariable::NoDwarf { in_symtab: self.data_symbol(name).is_some() }));
        };
        if let Some(v) = dwarf.variable(name, &mut self.types.borrow_mut())? {
            return Ok(Ok(Variable { name: name.to_string(), addr: v.addr, ty: v.ty }));
        }
        let same_package = dwarf.variables_of(crate::gobin::package_of(name))?;
        Ok(Err(NoVariable::Unknown { same_package }))
    }

    /// `runtime.waitReasonStrings`, a `[N]string`, found without DWARF (`waitreasons`).
    fn wait_reason_strings(&self) -> Option<Variable> {
        let file = object::File::parse(&*self.data).ok()?;
        let image =
            crate::gobin::elf::image::Image { data: &self.data, segments: &self.segments, relative: &self.relative };
        let (addr, len) = crate::gobin::elf::waitreasons::find(&file, &image)?;
        let mut types = self.types.borrow_mut();
        let string = types.add(GoType { name: "string".into(), size: 16, kind: TypeKind::String });
        let ty = types.add(GoType {
            name: format!("[{len}]string"),
            size: 16 * len,
            kind: TypeKind::Array { elem: string, len },
        });
        Some(Variable { name: "runtime.waitReasonStrings".into(), addr, ty })
    }

    /// The Go type DWARF names `name` (`main.Point`), parsed into the arena (`types`).
    pub fn type_by_name(&self, name: &str) -> Option<TypeId> {
        let mut state = self.dwarf.borrow_mut();
        let (path, data) = self.dwarf_source();
        let dwarf = Self::dwarf_mut(&mut state, path, data).ok()??;
        dwarf.type_named(name, &mut self.types.borrow_mut()).ok()?
    }

    /// The link-time address of the runtime type descriptor of the type DWARF names
    /// `name` (`*context.valueCtx`), from its `DW_AT_go_runtime_type`.
    pub fn runtime_type_address(&self, name: &str) -> Option<u64> {
        let found = {
            let mut state = self.dwarf.borrow_mut();
            let (path, data) = self.dwarf_source();
            let dwarf = Self::dwarf_mut(&mut state, path, data).ok()??;
            dwarf.runtime_type_named(name).ok()??
        };
        // Go's attribute is an address in older releases and an offset from
        // `runtime.types` in newer ones, whatever its form says: descriptors lie above
        // `runtime.types`, so a key below it is an offset.
        let (key, _) = found;
        match self.types_base() {
            Some(base) if key < base => Some(base + key),
            _ => Some(key),
        }
    }

    /// The Go type of the runtime type descriptor at link-time address `addr`, from
    /// DWARF's `DW_AT_go_runtime_type`.
    pub fn type_of_runtime_type(&self, addr: u64) -> Option<TypeId> {
        let mut keys = vec![addr];
        keys.extend(self.types_base().and_then(|base| addr.checked_sub(base)));
        let mut state = self.dwarf.borrow_mut();
        let (path, data) = self.dwarf_source();
        let dwarf = Self::dwarf_mut(&mut state, path, data).ok()??;
        dwarf.type_of_runtime_type(&keys, &mut self.types.borrow_mut()).ok()?
    }

    /// Every type with a runtime descriptor, by the descriptor's link-time address:
    /// its Go name and, where `wants` says the name needs one, its layout (for a pointer
    /// type, the layout of what it points at). Empty without DWARF.
    pub fn runtime_types(&self, wants: fn(&str) -> bool) -> Vec<RuntimeType> {
        let found = {
            let mut state = self.dwarf.borrow_mut();
            let (path, data) = self.dwarf_source();
            let Ok(Some(dwarf)) = Self::dwarf_mut(&mut state, path, data) else { return Vec::new() };
            dwarf.runtime_types(wants, &mut self.types.borrow_mut()).unwrap_or_default()
        };
        let base = self.types_base();
        let types = self.types.borrow();
        let mut out: Vec<RuntimeType> = (found.into_iter())
            .filter_map(|(key, _, name, layout)| {
                // As in `runtime_type_address`: a key below `runtime.types` is an offset.
                let addr = match base {
                    Some(base) if key < base => base.checked_add(key)?,
                    _ => key,
                };
                let layout = layout.map(|id| match types.get(id).kind {
                    TypeKind::Pointer { elem } => elem,
                    _ => id,
                });
                Some(RuntimeType { addr, name, layout })
            })
            .collect();
        out.sort_by_key(|t| t.addr);
        out.dedup_by_key(|t| t.addr);
        out
    }

    /// Whether the binary has a package `package`: one of its functions (from the
    /// symbol table or, stripped, Go's function table) or variables is in it. What
    /// makes `pkg.X` a package-qualified name.
    pub fn is_package(&self, package: &str) -> bool {
        let prefix = format!("{package}.");
        if self.functions.any_starting_with(&prefix) {
            return true;
        }
        let mut state = self.dwarf.borrow_mut();
        let (path, data) = self.dwarf_source();
        match Self::dwarf_mut(&mut state, path, data) {
            Ok(Some(dwarf)) => dwarf.variables_of(package).is_ok_and(|v| !v.is_empty()),
            _ => object::File::parse(&*self.data).is_ok_and(|f| {
                f.symbols().any(|s| s.kind() == SymbolKind::Data && s.name().is_ok_and(|n| n.starts_with(&prefix)))
            }),
        }
    }

    /// The address of the data symbol `name` in the symbol table.
    /// The link-time address of the data symbol `name` in the symbol table.
    pub fn data_symbol(&self, name: &str) -> Option<u64> {
        let file = object::File::parse(&*self.data).ok()?;
        let sym = file.symbols().find(|s| s.kind() == SymbolKind::Data && s.name() == Ok(name))?;
        Some(sym.address())
    }

    /// The link-time address of the ELF entry point (`_rt0_amd64_linux`): the first
    /// instruction every process of the binary runs.
    pub fn entry_point(&self) -> Option<u64> {
        object::File::parse(&*self.data).ok().map(|f| f.entry())
    }
}
