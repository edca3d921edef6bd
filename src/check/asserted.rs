//! The Go types a probe body names in type assertions (`arg2.(*net/http.Request)`),
//! resolved against the binary before the body is typed (looking one up may decode
//! DWARF or the runtime's type data, which typing only reads): from DWARF where the
//! binary has it, else from the runtime's type data, so a stripped binary's values are
//! read by field name too.

use crate::gobin::{GoBinary, NoRuntimeType};
use crate::gotypes::TypeId;
use crate::syntax::ast::*;
use std::collections::HashMap;

/// Why an asserted type cannot be used: the message, and a hint.
#[derive(Clone, Debug, PartialEq)]
pub struct AssertError {
    pub message: String,
    pub hint: Option<String>,
}

/// An asserted pointer type, and its runtime type descriptor when the binary has one
/// (what an interface holding one has as its dynamic type).
#[derive(Clone, Debug, PartialEq)]
pub struct AssertedType {
    pub ty: TypeId,
    pub descriptor: Option<u64>,
}

/// The pointer type of every assertion in the body, by the name written.
pub type Asserted = HashMap<String, Result<AssertedType, AssertError>>;

/// Resolves every type the body asserts.
pub fn resolve(body: &Block, target: &dyn GoBinary) -> Asserted {
    let mut names = Vec::new();
    body.walk_exprs(&mut |e| {
        if let ExprKind::Assert { ty, .. } = &e.kind {
            names.push(ty.name.clone());
        }
    });
    let mut asserted = Asserted::new();
    for name in names {
        if !asserted.contains_key(&name) {
            let found = lookup(target, &name);
            asserted.insert(name, found);
        }
    }
    asserted
}

fn lookup(target: &dyn GoBinary, name: &str) -> Result<AssertedType, AssertError> {
    let err = |message: String, hint: Option<String>| Err(AssertError { message, hint });
    if !name.starts_with('*') {
        return err(
            format!("`{name}` is not a pointer type: an assertion reads a word as a pointer"),
            Some(format!("assert the pointer, `x.(*{name})`, and read its fields")),
        );
    }
    match target.type_named(name) {
        Ok(ty) => Ok(AssertedType { ty, descriptor: target.pointer_descriptor(name) }),
        Err(NoRuntimeType::NoTypeData) => err(
            format!("`{name}` cannot be found: this binary has neither DWARF nor the runtime's type table"),
            None,
        ),
        Err(NoRuntimeType::Unknown { closest }) => err(
            format!("no type `{}` in this binary", name.trim_start_matches('*')),
            match (closest.first(), target.has_dwarf()) {
                (Some(c), _) => Some(format!("did you mean `{c}`?")),
                (None, true) => None,
                (None, false) => Some(
                    "without DWARF a type is known only if the program may use it at run time (held in an interface, through reflect); --debug-file, or a plan from the unstripped build, knows them all".into(),
                ),
            },
        ),
        Err(NoRuntimeType::Ambiguous { candidates }) => err(
            format!("`{}` names several types", name.trim_start_matches('*')),
            Some(format!("write the package's full path: {}", candidates.join(", "))),
        ),
    }
}
