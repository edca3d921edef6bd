//! Where the Go runtime of this binary keeps the keys it hashes map keys with, for
//! `m[k]` (src/lower/maplookup.rs): `useAeshash` (whether the CPU's AES instructions
//! hash) and `aeskeysched` (128 random bytes per process), in package runtime up to Go
//! 1.26 and in internal/runtime/maps since 1.27. Both are read from the code of the
//! 8-byte key hash (`runtime.memhash64`; since 1.27 `internal/runtime/maps.MemHash64`,
//! which tests the flag, and `memHash64AES`, which runs the rounds), so a
//! stripped binary, whose pclntab still has the function, gives them too; the symbol
//! table, when there is one, must agree (tests/gomaps.rs). None where the code is not of
//! the known shape: `m[k]` then scans the map.

pub use crate::arch::AesGlobals;
use crate::gobin::Target;
use object::{Object, ObjectSymbol, SymbolKind};

impl Target {
    /// The link-time addresses of the runtime's aeshash keys (a PIE adds its load bias).
    pub fn aes_globals(&self) -> Option<AesGlobals> {
        let code = |name: &str| {
            let f = self.find(name).into_iter().next()?;
            Some((self.code(f)?, f.addr))
        };
        let minor = self.go_version().and_then(crate::gobin::go_minor);
        let old = || code("runtime.memhash64").and_then(|c| self.arch().aes_globals(c, c, minor));
        let new = || {
            let (check, rounds) =
                (code("internal/runtime/maps.MemHash64")?, code("internal/runtime/maps.memHash64AES")?);
            self.arch().aes_globals(check, rounds, minor)
        };
        let fallback = code("runtime.memhash64Fallback").or_else(|| code("internal/runtime/maps.MemHash64"));
        let hashkey = fallback.and_then(|(c, at)| self.arch().hashkey(c, at));
        old().or_else(new).map(|g| AesGlobals { hashkey, ..g })
    }

    /// Whether the fallback hash is the one of Go 1.17 to 1.22 (wyhash's constants m1 to
    /// m4 where later releases read `hashkey[1..4]`).
    pub fn memhash_has_constants(&self) -> bool {
        self.go_version().and_then(crate::gobin::go_minor).is_some_and(|m| m <= 22)
    }

    /// The same from the symbol table (None without one): what `aes_globals` is checked
    /// against.
    pub fn aes_globals_from_symbols(&self) -> Option<AesGlobals> {
        let file = object::File::parse(&*self.data).ok()?;
        let addr = |name: &str| {
            file.symbols().find(|s| s.kind() == SymbolKind::Data && s.name() == Ok(name)).map(|s| s.address())
        };
        let minor = self.go_version().and_then(crate::gobin::go_minor);
        let pair = |pkg: &str, flag: &str| {
            Some(AesGlobals {
                use_aeshash: addr(&format!("{pkg}.{flag}"))?,
                aeskeysched: addr(&format!("{pkg}.aeskeysched"))?,
                hashkey: addr(&format!("{pkg}.hashkey")),
                rounds: self.arch().aes_rounds(minor),
            })
        };
        pair("runtime", "useAeshash").or_else(|| pair("internal/runtime/maps", "UseAeshash"))
    }
}
