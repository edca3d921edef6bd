//! aya's loader made without its parse of the kernel's BTF. aya 0.14's `EbpfLoader::new`
//! (its only way to make one) reads and parses /sys/kernel/btf/vmlinux, for relocating
//! an object's BTF (CO-RE) against it: 20-25 ms of CPU and 11 MB on a 6.x kernel at every
//! trace's start, on a machine of 2 CPUs a fifth of what `gtrace http` spends before
//! `Attached`. gtrace's objects have no BTF, and the loader is told to use none
//! (`loader.btf(None)`): the parse is never read.
//!
//! So the loader is made on a thread whose filesystem root is its own (`unshare` of
//! `CLONE_FS`: the process's other threads keep theirs) and moved, for that call only,
//! to a directory in which aya finds no such file, so that its parse fails at once
//! (`Btf::from_sys_fs().ok()`: no BTF, as `btf(None)` says). The directory is
//! `/proc/self/fdinfo`, which the kernel fills (numbered entries only): nothing anyone
//! could put a file of their own into. Without the privilege to change a root
//! (CAP_SYS_CHROOT), or where either call fails, the loader is made as before, with the
//! parse. What the loader then does is the same either way.

use aya::EbpfLoader;

/// Where aya's loader is made: `/sys/kernel/btf/vmlinux` is not in it.
const EMPTY_ROOT: &std::ffi::CStr = c"/proc/self/fdinfo";

/// A new loader, made without aya's parse of the kernel's BTF where this thread's root
/// can be moved (see the module's comment); the thread is left with a root of its own:
/// call it only on a thread that ends after it (`loader::prewarm`'s).
pub(super) fn loader_on_this_thread() -> EbpfLoader<'static> {
    // SAFETY: unshare(CLONE_FS) changes only this thread's filesystem attributes (its
    // root, working directory and umask become its own copies); chroot takes a valid
    // NUL-terminated path. Neither touches memory of this process.
    unsafe {
        if libc::unshare(libc::CLONE_FS) == 0 {
            libc::chroot(EMPTY_ROOT.as_ptr());
        }
    }
    let mut loader = EbpfLoader::new();
    // What `new` parsed where the root could not be moved: not used, not held (11 MB)
    // through the compile and the load.
    loader.btf(None);
    loader
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thread that makes the loader sees no kernel BTF where its root could be
    /// moved (as root); the other threads' root is the process's still.
    #[test]
    fn the_loader_is_made_in_a_root_of_its_thread_s_own() {
        let vmlinux = std::path::Path::new("/sys/kernel/btf/vmlinux");
        let here = vmlinux.exists();
        let seen = std::thread::spawn(move || {
            let _loader = loader_on_this_thread();
            vmlinux.exists()
        });
        let seen = seen.join().expect("the loader's thread");
        assert_eq!(vmlinux.exists(), here, "this thread's root moved");
        let may_chroot = crate::runtime::capabilities::effective_uid() == 0;
        if here && may_chroot {
            assert!(!seen, "the loader's thread saw the kernel's BTF");
        }
    }
}
