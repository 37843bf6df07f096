//! Temporary files left by conversions that died (a crashed or killed worker, a machine that
//! went down): a file of ours is named `.<output>.XXXXXX.tet-convert.tmp` and its writer holds an
//! exclusive `flock` on it while it lives. A file whose lock can be taken has no live writer and
//! is removed (while the lock is held, so the writer's own check sees it). Works across hosts on
//! file systems whose `flock` is shared (local, NFS with locking). A finished output a batch
//! worker hands to its supervisor for the group commit ([`super::supervise`]) is held with a
//! shared lock by both before the worker lets go, so it is never taken for a dead writer's.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use tet::format::TEMP_SUFFIX;

/// Whether `name` is one of our temporary file names; with `target`, one for that output name.
fn ours(name: &OsStr, target: Option<&OsStr>) -> bool {
    let n = name.as_bytes();
    if !(n.starts_with(b".") && n.ends_with(TEMP_SUFFIX.as_bytes())) {
        return false;
    }
    match target {
        None => true,
        Some(t) => {
            let t = t.as_bytes();
            n.len() > t.len() + 1 && &n[1..1 + t.len()] == t && n[1 + t.len()] == b'.'
        }
    }
}

/// Removes our temporary files in `dir` (only those for output name `target` when given) that
/// no live process holds. Returns how many were removed; errors reading the folder count as none.
pub fn clean(dir: &Path, target: Option<&OsStr>) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        if !ours(&e.file_name(), target) {
            continue;
        }
        let path = e.path();
        let Ok(f) = std::fs::File::open(&path) else {
            continue;
        };
        if f.try_lock().is_ok() && std::fs::remove_file(&path).is_ok() {
            log::info!("removed {} (its writer is gone)", path.display());
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let t = Some(OsStr::new("ocean.tet"));
        assert!(ours(OsStr::new(".ocean.tet.Ab12Cd.tet-convert.tmp"), t));
        assert!(!ours(OsStr::new(".ocean.tet2.Ab12Cd.tet-convert.tmp"), t));
        assert!(!ours(OsStr::new(".ocean.tet.Ab12Cd.tmp"), t));
        assert!(ours(OsStr::new(".x.tet.Ab12Cd.tet-convert.tmp"), None));
        assert!(!ours(OsStr::new("x.tet.Ab12Cd.tet-convert.tmp"), None));
    }

    #[test]
    fn only_unlocked_files_are_removed() {
        let d = tempfile::tempdir().unwrap();
        let live = d.path().join(".a.tet.111111.tet-convert.tmp");
        let dead = d.path().join(".a.tet.222222.tet-convert.tmp");
        let other = d.path().join(".a.tet.333333.tmp");
        let held = std::fs::File::create(&live).unwrap();
        held.lock().unwrap();
        std::fs::write(&dead, b"x").unwrap();
        std::fs::write(&other, b"x").unwrap();
        // The lock is per open file description: a lock taken through another one conflicts.
        assert_eq!(clean(d.path(), None), 1);
        assert!(live.exists() && !dead.exists() && other.exists());
        drop(held);
        assert_eq!(clean(d.path(), Some(OsStr::new("a.tet"))), 1);
        assert!(!live.exists());
    }
}
