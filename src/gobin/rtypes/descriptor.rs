//! One runtime type descriptor (`internal/abi.Type`, Go 1.17 to 1.27) decoded into a
//! `GoType`: its kind, size, name (with the full package path, as DWARF writes it),
//! and what its kind adds (a pointer's or slice's element, an array's length, a
//! struct's fields with their offsets, a map's key and element, whether an interface
//! has methods). Pure: reads bytes through `Image`, no file, no state.

use crate::gobin::elf::image::Image;

/// Offsets in `abi.Type` (64-bit): Size_, TFlag, Kind_, Str; its size.
const SIZE: u64 = 0;
const TFLAG: u64 = 20;
const KIND: u64 = 23;
const STR: u64 = 40;
pub const HEADER: u64 = 48;

/// `abi.TFlag` bits.
const TFLAG_UNCOMMON: u8 = 1 << 0;
const TFLAG_EXTRA_STAR: u8 = 1 << 1;
const TFLAG_NAMED: u8 = 1 << 2;

/// `abi.Kind` values (the low five bits of Kind_).
pub mod kind {
    pub const BOOL: u8 = 1;
    pub const INT: u8 = 2;
    pub const INT64: u8 = 6;
    pub const UINT: u8 = 7;
    pub const UINTPTR: u8 = 12;
    pub const FLOAT32: u8 = 13;
    pub const FLOAT64: u8 = 14;
    pub const COMPLEX64: u8 = 15;
    pub const COMPLEX128: u8 = 16;
    pub const ARRAY: u8 = 17;
    pub const CHAN: u8 = 18;
    pub const FUNC: u8 = 19;
    pub const INTERFACE: u8 = 20;
    pub const MAP: u8 = 21;
    pub const POINTER: u8 = 22;
    pub const SLICE: u8 = 23;
    pub const STRING: u8 = 24;
    pub const STRUCT: u8 = 25;
    pub const UNSAFE_POINTER: u8 = 26;
}

/// The head every descriptor starts with.
#[derive(Clone, Copy, Debug)]
pub struct Head {
    pub size: u64,
    pub tflag: u8,
    pub kind: u8,
    /// Offset of its name from the types base.
    pub str: i32,
}

/// What reading descriptors needs: the binary's memory, the base that name offsets
/// count from (`moduledata.types`), and the Go release (struct fields changed in 1.19).
pub struct Reader<'i> {
    pub image: &'i Image<'i>,
    pub base: u64,
    pub go_minor: u32,
}

/// One struct field as the descriptor gives it.
pub struct RawField {
    pub name: String,
    pub ty: u64,
    pub offset: u64,
    pub embedded: bool,
}

impl Reader<'_> {
    pub fn head(&self, at: u64) -> Option<Head> {
        let b = self.image.bytes(at, HEADER)?;
        let size = u64::from_le_bytes(b[SIZE as usize..8].try_into().ok()?);
        let str = i32::from_le_bytes(b[STR as usize..STR as usize + 4].try_into().ok()?);
        Some(Head { size, tflag: b[TFLAG as usize], kind: b[KIND as usize] & 0x1f, str })
    }

    /// The descriptor of the pointer to this type (`PtrToThis`, an offset from the
    /// base), when the binary has one.
    pub fn ptr_to_this(&self, at: u64) -> Option<u64> {
        let off = self.image.u32(at + 44)? as i32;
        (off != 0).then(|| self.base.checked_add_signed(off as i64)).flatten()
    }

    /// The descriptor's element (pointer, slice, array, chan): the word after the head.
    pub fn elem(&self, at: u64) -> Option<u64> {
        self.image.u64(at + HEADER).filter(|a| *a != 0)
    }

    /// An array's length (after its element and slice type).
    pub fn array_len(&self, at: u64) -> Option<u64> {
        self.image.u64(at + HEADER + 16)
    }

    /// A map's key and element types (its first two words).
    pub fn map_key_elem(&self, at: u64) -> Option<(u64, u64)> {
        Some((self.image.u64(at + HEADER)?, self.image.u64(at + HEADER + 8)?))
    }

    /// Whether an interface type has methods (`Methods` after `PkgPath`).
    pub fn interface_is_empty(&self, at: u64) -> Option<bool> {
        Some(self.image.u64(at + HEADER + 16)? == 0)
    }

    /// A struct's fields (`Fields` after `PkgPath`: name, type, offset).
    pub fn fields(&self, at: u64) -> Option<Vec<RawField>> {
        let (ptr, len) = (self.image.u64(at + HEADER + 8)?, self.image.u64(at + HEADER + 16)?);
        if len > 4096 {
            return None;
        }
        let mut out = Vec::with_capacity(len as usize);
        for i in 0..len {
            let f = ptr + 24 * i;
            let (flags, name) = self.name(self.image.u64(f)?)?;
            let ty = self.image.u64(f + 8)?;
            let word = self.image.u64(f + 16)?;
            // Before Go 1.19 the offset is shifted left by one over the embedded flag.
            let (offset, embedded) =
                if self.go_minor < 19 { (word >> 1, word & 1 != 0) } else { (word, flags & (1 << 3) != 0) };
            out.push(RawField { name, ty, offset, embedded });
        }
        Some(out)
    }

    /// The Go name of the descriptor at `at`, with full package paths: `net/http.Request`,
    /// `*net/url.URL`, `[]uint8`, `map[string][]string`. `depth` bounds the recursion.
    pub fn type_name(&self, at: u64, depth: u32) -> Option<String> {
        let h = self.head(at)?;
        if h.tflag & TFLAG_NAMED != 0 {
            return self.named(at, &h);
        }
        if depth > 16 {
            return None;
        }
        let sub = |a: u64| self.type_name(a, depth + 1);
        match h.kind {
            kind::POINTER => Some(format!("*{}", sub(self.elem(at)?)?)),
            kind::SLICE => Some(format!("[]{}", sub(self.elem(at)?)?)),
            kind::ARRAY => Some(format!("[{}]{}", self.array_len(at)?, sub(self.elem(at)?)?)),
            kind::MAP => {
                let (k, v) = self.map_key_elem(at)?;
                Some(format!("map[{}]{}", sub(k)?, sub(v)?))
            }
            _ => self.str(&h),
        }
    }

    /// A named type's name: its short name (`http.Request`) with the package's full path
    /// from its uncommon part (`net/http.Request`).
    fn named(&self, at: u64, h: &Head) -> Option<String> {
        let short = self.str(h)?;
        // The short name's package is everything before the first '.'.
        let (package, local) = short.split_once('.').unwrap_or(("", short.as_str()));
        let pkg = self.pkg_path(at, h, package).unwrap_or_default();
        if pkg.is_empty() {
            return Some(short);
        }
        Some(format!("{pkg}.{local}"))
    }

    /// The package path in a named type's uncommon part, after its kind's own fields;
    /// its last element must be `package`, the short name's. A map's fields differ
    /// between the bucket maps (Go 1.17 to 1.23) and the swiss maps (1.24 on): both are
    /// tried.
    fn pkg_path(&self, at: u64, h: &Head, package: &str) -> Option<String> {
        if h.tflag & TFLAG_UNCOMMON == 0 {
            return None;
        }
        let extras: &[u64] = match h.kind {
            kind::ARRAY => &[24],
            kind::CHAN => &[16],
            kind::FUNC => &[8],
            kind::INTERFACE | kind::STRUCT => &[32],
            kind::POINTER | kind::SLICE => &[8],
            kind::MAP => &[40, 64, 88],
            _ => &[0],
        };
        extras.iter().find_map(|extra| {
            let off = self.image.u32(at + HEADER + extra)? as i32;
            if off <= 0 {
                return None;
            }
            let (_, path) = self.name(self.base.checked_add_signed(off as i64)?)?;
            let last = path.rsplit('/').next().unwrap_or(&path);
            // An empty path fits only where the place is certain (one candidate).
            (last == package || path.is_empty() && extras.len() == 1).then_some(path)
        })
    }

    /// The descriptor's own name (`Str`, short package names), without the extra star.
    pub fn own_name(&self, at: u64) -> Option<String> {
        self.str(&self.head(at)?)
    }

    /// The descriptor's own name string (`Str`), without the extra star.
    fn str(&self, h: &Head) -> Option<String> {
        let (_, name) = self.name(self.base.checked_add_signed(h.str as i64)?)?;
        match h.tflag & TFLAG_EXTRA_STAR {
            0 => Some(name),
            _ => Some(name.strip_prefix('*').unwrap_or(&name).to_string()),
        }
    }

    /// How many bytes the descriptor at `at` takes with what follows it (its uncommon
    /// part, fields, parameters, methods): how Go 1.27's runtime walks from one
    /// descriptor to the next (`abi.Type.DescriptorSize`). None for a kind it has not.
    pub fn descriptor_size(&self, at: u64) -> Option<u64> {
        let h = self.head(at)?;
        let base = match h.kind {
            kind::ARRAY => 72,
            kind::CHAN => 64,
            kind::FUNC => 56,
            kind::INTERFACE | kind::STRUCT => 80,
            kind::MAP => 136,
            kind::POINTER | kind::SLICE => 56,
            kind::BOOL..=kind::COMPLEX128 | kind::STRING | kind::UNSAFE_POINTER => HEADER,
            _ => return None,
        };
        let add = match h.kind {
            kind::FUNC => {
                let (ins, outs) = (self.image.u16(at + HEADER)?, self.image.u16(at + HEADER + 2)? & 0x7fff);
                8 * (u64::from(ins) + u64::from(outs))
            }
            kind::INTERFACE => 8 * self.image.u64(at + HEADER + 16)?,
            kind::STRUCT => 24 * self.image.u64(at + HEADER + 16)?,
            _ => 0,
        };
        let (uncommon, methods) = match h.tflag & TFLAG_UNCOMMON {
            0 => (0, 0),
            _ => (16, 16 * u64::from(self.image.u16(at + base + 4)?)),
        };
        Some(base + uncommon + add + methods)
    }

    /// Whether the descriptor at `at` is a named type's.
    pub fn is_named(&self, at: u64) -> bool {
        self.head(at).is_some_and(|h| h.tflag & TFLAG_NAMED != 0)
    }

    /// An `abi.Name` at `at`: its flags byte and its text (a varint length, the bytes).
    pub fn name(&self, at: u64) -> Option<(u8, String)> {
        let head = self.image.bytes(at, 1)?;
        let flags = head[0];
        let (mut len, mut shift, mut i) = (0u64, 0, 1u64);
        loop {
            let b = self.image.u8(at + i)?;
            len |= u64::from(b & 0x7f) << shift;
            i += 1;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 28 {
                return None;
            }
        }
        let bytes = self.image.bytes(at + i, len)?;
        Some((flags, std::str::from_utf8(bytes).ok()?.to_string()))
    }
}
