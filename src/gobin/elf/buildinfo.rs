//! The Go build info (`.go.buildinfo`, as `go version -m` reads it): the Go version that
//! built the binary and its main module's path. Go 1.18+ writes the two strings inline
//! after a 32-byte header (flag bit 2); older linkers wrote two pointers to Go string
//! headers instead.

const MAGIC: &[u8] = b"\xff Go buildinf:";
const HEADER_LEN: usize = 32;
const FLAG_INLINE: u8 = 0x2;
const FLAG_BIG_ENDIAN: u8 = 0x1;

/// The Go version (`go1.22.3`) from the contents of `.go.buildinfo`. `read_at(vaddr, len)`
/// reads memory of the binary, for the old pointer format.
pub(crate) fn go_version(section: &[u8], read_at: impl Fn(u64, usize) -> Option<Vec<u8>>) -> Option<String> {
    let version = String::from_utf8(string(section, 0, &read_at)?).ok()?;
    version.starts_with("go").then_some(version)
}

/// The main module's path (`example.com/app`), from the `mod` line of the module info
/// (the `path` line, the main package, when it was built outside a module).
pub(crate) fn module_path(section: &[u8], read_at: impl Fn(u64, usize) -> Option<Vec<u8>>) -> Option<String> {
    let info = String::from_utf8_lossy(&string(section, 1, &read_at)?).into_owned();
    let field = |key: &str| {
        info.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix('\t')?.split('\t').next().map(str::to_string))
    };
    field("mod").or_else(|| field("path")).filter(|p| !p.is_empty())
}

/// String `which` (0: the version, 1: the module info) of the build info.
fn string(section: &[u8], which: usize, read_at: &impl Fn(u64, usize) -> Option<Vec<u8>>) -> Option<Vec<u8>> {
    if !section.starts_with(MAGIC) || section.len() < HEADER_LEN {
        return None;
    }
    let ptr_size = section[14] as usize;
    let flags = section[15];
    if flags & FLAG_INLINE != 0 {
        let mut start = HEADER_LEN;
        for i in 0..=which {
            let (len, used) = uvarint(section.get(start..)?)?;
            let from = start + used;
            let to = from.checked_add(usize::try_from(len).ok()?)?;
            if i == which {
                return Some(section.get(from..to)?.to_vec());
            }
            start = to;
        }
        None
    } else {
        // Pointer format: the word at 16 points to a string header {ptr, len}.
        let word = |b: &[u8]| -> Option<u64> {
            let b = b.get(..ptr_size)?;
            let mut v = 0u64;
            for (i, byte) in b.iter().enumerate() {
                let shift = if flags & FLAG_BIG_ENDIAN != 0 { 8 * (ptr_size - 1 - i) } else { 8 * i };
                v |= u64::from(*byte) << shift;
            }
            Some(v)
        };
        let header_addr = word(section.get(16 + which * ptr_size..)?)?;
        let header = read_at(header_addr, 2 * ptr_size)?;
        let data = word(&header)?;
        let len = word(&header[ptr_size..])?;
        read_at(data, usize::try_from(len).ok().filter(|l| *l < 1 << 20)?)
    }
}

/// Go's unsigned varint (encoding/binary.Uvarint): the value and the bytes it took.
fn uvarint(b: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, byte) in b.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inline(version: &str) -> Vec<u8> {
        let mut s = MAGIC.to_vec();
        s.extend_from_slice(&[8, FLAG_INLINE]);
        s.resize(HEADER_LEN, 0);
        s.push(version.len() as u8);
        s.extend_from_slice(version.as_bytes());
        s.push(0);
        s
    }

    #[test]
    fn inline_format() {
        assert_eq!(go_version(&inline("go1.26.8"), |_, _| None).as_deref(), Some("go1.26.8"));
    }

    #[test]
    fn pointer_format() {
        let mut s = MAGIC.to_vec();
        s.extend_from_slice(&[8, 0]);
        s.extend_from_slice(&0x5000u64.to_le_bytes());
        s.extend_from_slice(&0u64.to_le_bytes());
        let memory = |addr: u64, len: usize| -> Option<Vec<u8>> {
            match addr {
                0x5000 => Some([0x6000u64.to_le_bytes(), 8u64.to_le_bytes()].concat()[..len].to_vec()),
                0x6000 => Some(b"go1.17.1"[..len].to_vec()),
                _ => None,
            }
        };
        assert_eq!(go_version(&s, memory).as_deref(), Some("go1.17.1"));
    }

    #[test]
    fn module_path_from_the_mod_line() {
        let info = "0w\u{af}\u{c}\u{92}t\u{8}\u{2}A\u{e1}\u{c1}\u{7}\u{e6}\u{d6}\u{18}\u{e6}path\texample.com/app/cmd/x\nmod\texample.com/app\t(devel)\t\nbuild\t-compiler=gc\n";
        let mut s = inline("go1.26.8");
        s.pop();
        s.push(info.len() as u8);
        s.extend_from_slice(info.as_bytes());
        assert_eq!(module_path(&s, |_, _| None).as_deref(), Some("example.com/app"));
        let no_mod = inline("go1.26.8");
        assert_eq!(module_path(&no_mod, |_, _| None), None);
    }

    #[test]
    fn garbage_is_none() {
        assert_eq!(go_version(b"not build info at all, not at all", |_, _| None), None);
        let mut bad = inline("go1.2");
        bad[HEADER_LEN] = 200;
        assert_eq!(go_version(&bad, |_, _| None), None);
    }

    #[test]
    fn varints() {
        assert_eq!(uvarint(&[0x08]), Some((8, 1)));
        assert_eq!(uvarint(&[0xb5, 0x05]), Some((0x2b5, 2)));
        assert_eq!(uvarint(&[0x80]), None);
    }
}
