//! A program that only hashes one key as `m[k]` hashes it (maplookup.rs `hash_key`,
//! the runtime's AES hash in the shape `AesGlobals::rounds` says), for tests that run it
//! in bpf::interp against the hashes a Go program computes with its own runtime
//! (tests/aeshash.rs). Nothing gtrace attaches is made here.

use super::aeshash::{aes_tables_map, t_tables, AES_TABLES, MAX_HASHED_STRING};
use super::codegen::Gen;
use super::mapwalk::Key;
use super::mapwalk::Slots;
use super::LowerError;
use crate::bpf::builder::Program;
use crate::bpf::insn::*;
use crate::gobin::AesGlobals;
use crate::syntax::ast::Span;

/// A key as the runtime hashes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HashKey {
    /// An integer of 1, 2, 4 or 8 bytes (its low bytes).
    Int { size: u64, value: u64 },
    /// A string of at most `MAX_HASHED_STRING` bytes.
    Bytes(Vec<u8>),
}

/// The program: R0 = the runtime's hash of `key` with `seed`, reading `aeskeysched` from
/// the target at `aes.aeskeysched`; the `aes_tables` map (`hash_maps`) must hold its one
/// value.
pub fn hash_program(aes: AesGlobals, key: &HashKey, seed: u64) -> Result<Program, LowerError> {
    let (facts, types, maps) = Default::default();
    let (self_vars, sources, mut events) = Default::default();
    let binary = Default::default();
    let mut g = Gen::new(&binary, &facts, &types, &maps, &self_vars, &sources, &mut events);
    let span = Span::default();
    let (seed_slot, out) = (g.slot(8, span)?, g.slot(8, span)?);
    let key_slot = g.slot(8 + MAX_HASHED_STRING, span)?;
    for i in 0..(8 + MAX_HASHED_STRING as i16) / 8 {
        g.b.emit(store_imm(Size::DW, R10, key_slot + 8 * i, 0));
    }
    g.b.emit2(ld_imm64(R1, seed));
    g.b.emit(store_reg(Size::DW, R10, seed_slot, R1));
    let (string, size) = match key {
        HashKey::Int { size, value } => {
            g.b.emit2(ld_imm64(R1, *value));
            g.b.emit(store_reg(Size::DW, R10, key_slot, R1));
            (false, *size)
        }
        HashKey::Bytes(bytes) => {
            g.b.emit(store_imm(Size::DW, R10, key_slot, bytes.len() as i32));
            for (i, b) in bytes.iter().take(MAX_HASHED_STRING as usize).enumerate() {
                g.b.emit(store_imm(Size::B, R10, key_slot + 8 + i as i16, i32::from(*b)));
            }
            (true, 16)
        }
    };
    let slots = Slots { key: 0, key_stride: 0, elem: 0, elem_stride: 0, elem_indirect: false, size: 0, overflow: 0 };
    g.hash_key(&Key { key: key_slot, string, size, slots }, aes, seed_slot, out, span)?;
    g.b.emit(load(Size::DW, R0, R10, out));
    g.b.emit(exit());
    g.b.bind(g.done);
    g.b.emit(mov64_imm(R0, 0));
    g.b.emit(exit());
    g.b.finish().map(|f| f.program).map_err(|source| LowerError::Build { span, program: "hash".into(), source })
}

/// The maps the program reads, by name, with their one value: the AES tables.
pub fn hash_maps() -> Vec<(String, Vec<u8>)> {
    debug_assert_eq!(aes_tables_map().object_name, AES_TABLES);
    vec![(AES_TABLES.to_string(), t_tables())]
}
