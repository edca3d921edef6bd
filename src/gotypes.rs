//! Go types as DWARF describes them, in an arena (`TypeId` indexes `Types`): filled by the
//! target's DWARF reader, read by the ABI assignment, the checker and lowering.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TypeId(pub u32);

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GoType {
    /// The Go name: `int`, `*main.T`, `[]uint8`, `net/url.URL`.
    pub name: String,
    pub size: u64,
    pub kind: TypeKind,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum TypeKind {
    Int {
        signed: bool,
    },
    Bool,
    Float,
    Complex,
    String,
    Pointer {
        elem: TypeId,
    },
    UnsafePointer,
    Slice {
        elem: TypeId,
    },
    Array {
        elem: TypeId,
        len: u64,
    },
    Struct {
        fields: Vec<StructField>,
    },
    /// `empty` for `any`/`interface{}` (eface), else an iface with an itab.
    Interface {
        empty: bool,
    },
    /// Key and element from DW_AT_go_key / DW_AT_go_elem (None when DWARF omits them).
    Map {
        key: Option<TypeId>,
        elem: Option<TypeId>,
    },
    Chan,
    Func,
    /// Anything DWARF describes that gtrace does not model.
    Other,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StructField {
    pub name: String,
    pub ty: TypeId,
    pub offset: u64,
    /// An embedded field (`struct { sync.Mutex }`): its fields and methods are promoted.
    #[serde(default)]
    pub embedded: bool,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Types {
    pub items: Vec<GoType>,
}

impl Types {
    pub fn get(&self, id: TypeId) -> &GoType {
        &self.items[id.0 as usize]
    }
    pub fn add(&mut self, t: GoType) -> TypeId {
        self.items.push(t);
        TypeId(self.items.len() as u32 - 1)
    }
}
