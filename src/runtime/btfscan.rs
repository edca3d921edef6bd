//! The BTF ids of a few functions (`BTF_KIND_FUNC`) in a kernel's vmlinux BTF, found by
//! walking its type records without building them: what linking kfunc calls needs
//! (kfuncs.rs). aya-obj's parser builds every one of the kernel's ~100,000 types (tens
//! of milliseconds at each start); this walk reads each record's header and skips its
//! trailer (include/uapi/linux/btf.h). A kind it does not know, or anything that does
//! not read, answers None and the caller asks aya-obj's parser instead.

/// `BTF_MAGIC`, as the kernel's (little-endian) BTF starts.
const MAGIC: u16 = 0xeb9f;
const KIND_FUNC: u32 = 12;

/// The bytes after a type's 12-byte header, by kind and `vlen`; None for a kind this
/// walk does not know.
fn trailer(kind: u32, vlen: u32) -> Option<u32> {
    Some(match kind {
        // INT: one u32 of encoding.
        1 => 4,
        // PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT, TYPE_TAG.
        2 | 7 | 8 | 9 | 10 | 11 | 12 | 16 | 18 => 0,
        // ARRAY: btf_array.
        3 => 12,
        // STRUCT, UNION: btf_member each; DATASEC: btf_var_secinfo each; ENUM64: btf_enum64 each.
        4 | 5 | 15 | 19 => 12 * vlen,
        // ENUM: btf_enum each; FUNC_PROTO: btf_param each.
        6 | 13 => 8 * vlen,
        // VAR: btf_var; DECL_TAG: btf_decl_tag.
        14 | 17 => 4,
        _ => return None,
    })
}

/// The id of the first FUNC named each of `names` in the BTF `data` (ids count from 1,
/// after `void`), None for a name no FUNC has; None altogether when `data` is not BTF
/// this walk reads to its end.
pub fn func_ids(data: &[u8], names: &[&str]) -> Option<Vec<Option<u32>>> {
    let u32_at = |at: usize| Some(u32::from_le_bytes(data.get(at..at.checked_add(4)?)?.try_into().ok()?));
    if u16::from_le_bytes(data.get(0..2)?.try_into().ok()?) != MAGIC {
        return None;
    }
    let hdr_len = u32_at(4)? as usize;
    let (type_off, type_len) = (u32_at(8)? as usize, u32_at(12)? as usize);
    let (str_off, str_len) = (u32_at(16)? as usize, u32_at(20)? as usize);
    let types = data.get(hdr_len.checked_add(type_off)?..hdr_len.checked_add(type_off)?.checked_add(type_len)?)?;
    let strings = data.get(hdr_len.checked_add(str_off)?..hdr_len.checked_add(str_off)?.checked_add(str_len)?)?;
    let name_at = |off: u32| {
        let tail = strings.get(off as usize..)?;
        Some(&tail[..tail.iter().position(|b| *b == 0)?])
    };
    let mut found: Vec<Option<u32>> = vec![None; names.len()];
    let (mut at, mut id) = (0usize, 1u32);
    while at < types.len() {
        let field = |i: usize| Some(u32::from_le_bytes(types.get(at + 4 * i..at + 4 * i + 4)?.try_into().ok()?));
        let (name_off, info) = (field(0)?, field(1)?);
        let (kind, vlen) = ((info >> 24) & 0x1f, info & 0xffff);
        if kind == KIND_FUNC {
            let name = name_at(name_off)?;
            for (slot, wanted) in found.iter_mut().zip(names) {
                if slot.is_none() && name == wanted.as_bytes() {
                    *slot = Some(id);
                }
            }
        }
        at = at.checked_add(12 + trailer(kind, vlen)? as usize)?;
        id += 1;
    }
    (at == types.len()).then_some(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aya_obj::btf::{Btf, BtfKind};

    /// A little BTF of `types` (each: name, info, size or type, trailer words) and its
    /// string table.
    fn btf(types: &[(u32, u32, u32, Vec<u32>)], strings: &[u8]) -> Vec<u8> {
        let mut body = Vec::new();
        for (name, info, size, trailer) in types {
            for word in [*name, *info, *size].iter().chain(trailer) {
                body.extend_from_slice(&word.to_le_bytes());
            }
        }
        let mut out = vec![0x9f, 0xeb, 1, 0];
        for word in [24, 0, body.len() as u32, body.len() as u32, strings.len() as u32] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.extend(body);
        out.extend_from_slice(strings);
        out
    }

    #[test]
    fn funcs_are_found_past_every_kind_of_trailer() {
        // Strings: "" at 0, "a" at 1, "f" at 3, "g" at 5.
        let strings = b"\0a\0f\0g\0";
        let kind = |k: u32, vlen: u32| (k << 24) | vlen;
        let data = btf(
            &[
                (1, kind(1, 0), 4, vec![32]),                // 1: INT
                (1, kind(4, 2), 8, vec![1, 1, 0, 1, 1, 32]), // 2: STRUCT of 2 members
                (0, kind(13, 1), 1, vec![0, 1]),             // 3: FUNC_PROTO of 1 param
                (5, kind(12, 0), 3, vec![]),                 // 4: FUNC g
                (1, kind(6, 1), 4, vec![1, 7]),              // 5: ENUM of 1
                (3, kind(12, 0), 3, vec![]),                 // 6: FUNC f
                (3, kind(12, 0), 3, vec![]),                 // 7: FUNC f again: the first counts
            ],
            strings,
        );
        assert_eq!(func_ids(&data, &["f", "g", "h"]), Some(vec![Some(6), Some(4), None]));
        // A kind this walk does not know, or a record cut short: no answer at all.
        let unknown = btf(&[(3, kind(31, 0), 0, vec![])], strings);
        assert_eq!(func_ids(&unknown, &["f"]), None);
        let cut = &data[..data.len() - strings.len() - 4];
        assert_eq!(func_ids(cut, &["f"]), None);
        assert_eq!(func_ids(b"not btf at all, not at all", &["f"]), None);
    }

    /// On the running kernel's BTF, the ids are aya-obj's, for gtrace's kfuncs and for
    /// a spread of other functions.
    #[test]
    fn the_running_kernels_ids_are_aya_objs() {
        let Ok(data) = std::fs::read("/sys/kernel/btf/vmlinux") else {
            assert!(std::env::var_os("CI").is_none(), "CI: this kernel has no /sys/kernel/btf/vmlinux");
            return;
        };
        let btf = Btf::from_sys_fs().unwrap();
        let mut names: Vec<&str> = crate::bpf::kfuncs::Kfunc::ALL.iter().map(|k| k.name()).collect();
        names.extend(["bpf_map_lookup_elem", "schedule", "do_sys_open", "no_such_function_here"]);
        let ours = func_ids(&data, &names).expect("the kernel's BTF walks to its end");
        for (name, id) in names.iter().zip(ours) {
            assert_eq!(id, btf.id_by_type_name_kind(name, BtfKind::Func).ok(), "{name}");
        }
        assert!(names.iter().zip(func_ids(&data, &names).unwrap()).filter(|(_, id)| id.is_some()).count() >= 2);
    }
}
