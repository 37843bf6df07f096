//! Checked wrappers over the netCDF-C calls this crate makes (through `netcdf-sys`): the
//! importer's queries and reads, and the exporter's definitions and writes. This is the crate's
//! one FFI layer: no other module calls netCDF-C.
//!
//! Every call runs under `netcdf_sys::libnetcdf_lock`, the process-wide reentrant lock that the
//! `netcdf` and `hdf5-metno` crates also take (it *is* `hdf5_sys::LOCK`), so netCDF and HDF5 are
//! never entered from two threads at once, whichever crate calls them ([`locked`]). Every return
//! code is checked: a code other than `NC_NOERR` is an [`NcError`], which the importer's calls
//! turn into a [`SourceError`] naming the call ([`check`]) and the exporter into its own error.
//! Names are decoded as UTF-8 (a name that is not is a corrupt file); sizes reported by the
//! library are checked before anything is allocated for them, and every buffer handed to the
//! library is checked against what the call will read or write. An open file is closed when its
//! [`Handle`] is dropped. Nothing here panics.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::path::Path;

use netcdf_sys as nc;
use tet_source::{Lib, Part, PathIssue, Request, Result, SourceError};

/// Longest name netCDF allows, plus its NUL.
const NAME_BUF: usize = nc::NC_MAX_NAME as usize + 1;

thread_local! {
    /// Whether HDF5's automatic error printing is off on this thread.
    static SILENCED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` holding the shared netCDF/HDF5 lock.
///
/// The system HDF5 is built thread-safe, which makes its error-printing switch per thread:
/// netCDF-C turns printing off only on the thread that first initialises it, so any other
/// thread would print HDF5 error stacks to stderr (even for the attribute probes every open
/// makes). Each thread turns it off here once, as `hdf5-metno` does on its threads; errors are
/// still reported through netCDF's return codes.
pub fn locked<T>(f: impl FnOnce() -> T) -> T {
    let _guard = nc::libnetcdf_lock.lock();
    SILENCED.with(|silenced| {
        if !silenced.get() {
            // SAFETY: sets this thread's default error stack's print function to none.
            unsafe {
                hdf5_sys::h5e::H5Eset_auto2(hdf5_sys::h5e::H5E_DEFAULT, None, std::ptr::null_mut())
            };
            silenced.set(true);
        }
    });
    f()
}

/// The library's text for an error code.
fn strerror(code: c_int) -> String {
    // SAFETY: nc_strerror returns a pointer to a static NUL-terminated string for any code.
    let p = unsafe { nc::nc_strerror(code) };
    if p.is_null() {
        return format!("error {code}");
    }
    // SAFETY: non-null, static, NUL-terminated (see above).
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// A netCDF-C call that returned a code other than `NC_NOERR`: the code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NcError(pub c_int);

impl NcError {
    /// The library's text for the code.
    pub(crate) fn text(self) -> String {
        locked(|| strerror(self.0))
    }

    /// The error with its text, as a [`SourceError::Library`] cause.
    pub(crate) fn reported(self) -> NcReported {
        NcReported {
            code: self.0,
            text: self.text(),
        }
    }
}

/// A netCDF-C error code with the library's text for it (taken when the error happened, under
/// the lock): the `source` of a [`SourceError::Library`] from netCDF-C.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NcReported {
    /// netCDF-C's status code (`NC_E…`).
    pub code: c_int,
    /// `nc_strerror` of it.
    pub text: String,
}

impl std::fmt::Display for NcReported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (error {})", self.text, self.code)
    }
}

impl std::error::Error for NcReported {}

/// `Ok` for `NC_NOERR`, else the code as an [`NcError`].
fn status(code: c_int) -> Result<(), NcError> {
    if code == nc::NC_NOERR {
        Ok(())
    } else {
        Err(NcError(code))
    }
}

/// Runs one library call under the lock; a code other than `NC_NOERR` is an [`NcError`].
fn call(f: impl FnOnce() -> c_int) -> Result<(), NcError> {
    status(locked(f))
}

/// `Ok` for `NC_NOERR`, else a library error naming the (importer's) call.
fn check(code: c_int, call: &str) -> Result<()> {
    status(code)
        .map_err(|e| SourceError::library(Lib::NetCdf, format!("netCDF {call}"), e.reported()))
}

/// A name buffer's text up to the first NUL, as UTF-8.
fn name_from(buf: &[u8], what: &str) -> Result<String> {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8(buf[..end].to_vec()).map_err(|_| {
        Part::Metadata.malformed(format!(
            "{what} name is not valid UTF-8: {:?}",
            String::from_utf8_lossy(&buf[..end])
        ))
    })
}

fn count(n: c_int, what: &str) -> Result<usize> {
    usize::try_from(n)
        .map_err(|_| Part::Metadata.malformed(format!("negative {what} count {n} reported")))
}

/// An open netCDF dataset (file or memory image). Closing it (on drop, or with
/// [`Handle::close`]) releases every netCDF and HDF5 handle on the file.
pub(crate) struct Handle {
    ncid: c_int,
    /// Whether `ncid` is still open (false once [`Handle::close`] has closed it).
    open: bool,
    /// The image of an in-memory open; netCDF reads it until `nc_close`, so it is dropped after.
    _memory: Option<Box<[u8]>>,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "netCDF ncid {}", self.ncid)
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        if self.open {
            let ncid = self.ncid;
            // SAFETY: ncid came from a successful open or create and is still open (`open`):
            // it is closed exactly once, here or in `Handle::close`.
            let _ = locked(|| unsafe { nc::nc_close(ncid) });
        }
    }
}

/// The netCDF files this process has open: one handle per file (see `tet_hdf5::OpenFiles` for
/// the libhdf5 crash two handles of one file can cause).
static OPEN_FILES: tet_hdf5::OpenFiles<Handle> = tet_hdf5::OpenFiles::new();

/// A process-unique name for each in-memory open, so libhdf5 never takes two images for one file.
static MEMORY_OPENS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Handle {
    /// Opens a file read-only, or shares the handle this process already has on it.
    pub(crate) fn open_path(path: &Path) -> Result<std::sync::Arc<Handle>> {
        locked(|| {
            OPEN_FILES.get_or_open(path, || {
                let c = path_cstring(path)?;
                let mut ncid: c_int = -1;
                // SAFETY: c is NUL-terminated; ncid is a valid out-pointer.
                let code = unsafe { nc::nc_open(c.as_ptr(), nc::NC_NOWRITE, &mut ncid) };
                check(code, "open")?;
                Ok(Handle {
                    ncid,
                    open: true,
                    _memory: None,
                })
            })
        })
    }

    /// Opens an image held in memory, read-only. The handle keeps the bytes alive.
    pub(crate) fn open_memory(bytes: Vec<u8>) -> Result<Handle> {
        let mut memory = bytes.into_boxed_slice();
        let mut ncid: c_int = -1;
        let n = MEMORY_OPENS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let image = format!("tet-memory-{n}.nc");
        let name = std::ffi::CString::new(image.as_str()).map_err(|_| Request::Path {
            path: image.clone().into(),
            issue: PathIssue::Nul,
        })?;
        let len = memory.len();
        let ptr = memory.as_mut_ptr().cast::<c_void>();
        // SAFETY: ptr/len describe `memory`, which this handle owns and frees only after
        // nc_close (field drop order: Drop::drop runs first). NC_NOWRITE: netCDF only reads it.
        let code = locked(|| unsafe {
            nc::nc_open_mem(name.as_ptr(), nc::NC_NOWRITE, len, ptr, &mut ncid)
        });
        check(code, "open (in memory)")?;
        Ok(Handle {
            ncid,
            open: true,
            _memory: Some(memory),
        })
    }

    /// Creates a netCDF-4 file at `path` (replacing one that is there) in define mode.
    pub(crate) fn create(path: &CStr) -> Result<Handle, NcError> {
        let mut ncid: c_int = -1;
        // SAFETY: path is NUL-terminated; ncid is a valid out-pointer.
        call(|| unsafe {
            nc::nc_create(path.as_ptr(), nc::NC_NETCDF4 | nc::NC_CLOBBER, &mut ncid)
        })?;
        Ok(Handle {
            ncid,
            open: true,
            _memory: None,
        })
    }

    /// Closes the file, reporting the library's answer (a written file is flushed here).
    pub(crate) fn close(mut self) -> Result<(), NcError> {
        self.open = false;
        let ncid = self.ncid;
        // SAFETY: ncid is open (only `close` and `drop` close it, and `open` was true); it is
        // marked closed first, so `drop` does not close it again whatever the answer.
        call(|| unsafe { nc::nc_close(ncid) })
    }

    /// The root group id.
    pub(crate) fn ncid(&self) -> c_int {
        self.ncid
    }
}

#[cfg(unix)]
fn path_cstring(path: &Path) -> Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        Request::Path {
            path: path.to_path_buf(),
            issue: PathIssue::Nul,
        }
        .into()
    })
}

#[cfg(not(unix))]
fn path_cstring(path: &Path) -> Result<std::ffi::CString> {
    let bad = |issue| Request::Path {
        path: path.to_path_buf(),
        issue,
    };
    let s = path.to_str().ok_or_else(|| bad(PathIssue::NotUnicode))?;
    std::ffi::CString::new(s).map_err(|_| bad(PathIssue::Nul).into())
}

/// The on-disk format (`NC_FORMAT_*`).
pub(crate) fn format(ncid: c_int) -> Result<c_int> {
    let mut f: c_int = 0;
    // SAFETY: valid out-pointer.
    let code = locked(|| unsafe { nc::nc_inq_format(ncid, &mut f) });
    check(code, "inq_format")?;
    Ok(f)
}

/// Child groups of a group, in the library's order.
pub(crate) fn groups(ncid: c_int) -> Result<Vec<c_int>> {
    locked(|| {
        let mut n: c_int = 0;
        // SAFETY: null ids pointer asks for the count only.
        let code = unsafe { nc::nc_inq_grps(ncid, &mut n, std::ptr::null_mut()) };
        check(code, "inq_grps")?;
        let mut ids = vec![0; count(n, "group")?];
        if !ids.is_empty() {
            // SAFETY: ids holds n entries, the count just reported under the same lock.
            let code = unsafe { nc::nc_inq_grps(ncid, std::ptr::null_mut(), ids.as_mut_ptr()) };
            check(code, "inq_grps")?;
        }
        Ok(ids)
    })
}

/// A group's own (short) name.
pub(crate) fn group_name(ncid: c_int) -> Result<String> {
    let mut buf = [0u8; NAME_BUF];
    // SAFETY: buf holds NC_MAX_NAME + 1 bytes, the documented maximum.
    let code = locked(|| unsafe { nc::nc_inq_grpname(ncid, buf.as_mut_ptr().cast()) });
    check(code, "inq_grpname")?;
    name_from(&buf, "group")
}

/// The variable ids of a group.
pub(crate) fn varids(ncid: c_int) -> Result<Vec<c_int>> {
    locked(|| {
        let mut n: c_int = 0;
        // SAFETY: null ids pointer asks for the count only.
        let code = unsafe { nc::nc_inq_varids(ncid, &mut n, std::ptr::null_mut()) };
        check(code, "inq_varids")?;
        let mut ids = vec![0; count(n, "variable")?];
        if !ids.is_empty() {
            // SAFETY: ids holds n entries.
            let code = unsafe { nc::nc_inq_varids(ncid, std::ptr::null_mut(), ids.as_mut_ptr()) };
            check(code, "inq_varids")?;
        }
        Ok(ids)
    })
}

/// The dimension ids defined in a group itself (not its ancestors).
pub(crate) fn own_dimids(ncid: c_int) -> Result<Vec<c_int>> {
    locked(|| {
        let mut n: c_int = 0;
        // SAFETY: null ids pointer asks for the count only.
        let code = unsafe { nc::nc_inq_dimids(ncid, &mut n, std::ptr::null_mut(), 0) };
        check(code, "inq_dimids")?;
        let mut ids = vec![0; count(n, "dimension")?];
        if !ids.is_empty() {
            // SAFETY: ids holds n entries.
            let code =
                unsafe { nc::nc_inq_dimids(ncid, std::ptr::null_mut(), ids.as_mut_ptr(), 0) };
            check(code, "inq_dimids")?;
        }
        Ok(ids)
    })
}

/// The unlimited dimension ids of a group (netCDF-4: those it defines; classic: the record
/// dimension).
pub(crate) fn unlimdims(ncid: c_int) -> Result<Vec<c_int>> {
    locked(|| {
        let mut n: c_int = 0;
        // SAFETY: null ids pointer asks for the count only.
        let code = unsafe { nc::nc_inq_unlimdims(ncid, &mut n, std::ptr::null_mut()) };
        check(code, "inq_unlimdims")?;
        let mut ids = vec![0; count(n, "unlimited dimension")?];
        if !ids.is_empty() {
            // SAFETY: ids holds n entries.
            let code =
                unsafe { nc::nc_inq_unlimdims(ncid, std::ptr::null_mut(), ids.as_mut_ptr()) };
            check(code, "inq_unlimdims")?;
        }
        Ok(ids)
    })
}

/// Number of attributes of `varid` (`NC_GLOBAL`: of the group).
pub(crate) fn natts(ncid: c_int, varid: c_int) -> Result<usize> {
    let mut n: c_int = 0;
    // SAFETY: valid out-pointer.
    let code = locked(|| unsafe { nc::nc_inq_varnatts(ncid, varid, &mut n) });
    check(code, "inq_varnatts")?;
    count(n, "attribute")
}

/// What `nc_inq_var` says of a variable.
pub(crate) struct VarInfo {
    pub name: String,
    pub xtype: c_int,
    pub dimids: Vec<c_int>,
}

pub(crate) fn var_info(ncid: c_int, varid: c_int) -> Result<VarInfo> {
    locked(|| {
        let mut ndims: c_int = 0;
        // SAFETY: valid out-pointer.
        let code = unsafe { nc::nc_inq_varndims(ncid, varid, &mut ndims) };
        check(code, "inq_varndims")?;
        let ndims = count(ndims, "dimension")?;
        if ndims > nc::NC_MAX_VAR_DIMS as usize {
            return Err(Part::Metadata.malformed(format!(
                "a variable claims {ndims} dimensions (netCDF allows {})",
                nc::NC_MAX_VAR_DIMS
            )));
        }
        let mut name = [0u8; NAME_BUF];
        let mut xtype: c_int = 0;
        let mut nd: c_int = 0;
        let mut natts: c_int = 0;
        // One spare slot so a zero-dimensional variable still passes a valid pointer.
        let mut dimids = vec![0 as c_int; ndims + 1];
        // SAFETY: name holds NC_MAX_NAME + 1 bytes; dimids holds ndims (+1) entries.
        let code = unsafe {
            nc::nc_inq_var(
                ncid,
                varid,
                name.as_mut_ptr().cast(),
                &mut xtype,
                &mut nd,
                dimids.as_mut_ptr(),
                &mut natts,
            )
        };
        check(code, "inq_var")?;
        if count(nd, "dimension")? != ndims {
            return Err(Part::Metadata
                .malformed("a variable's dimension count changed between two queries"));
        }
        dimids.truncate(ndims);
        Ok(VarInfo {
            name: name_from(&name, "variable")?,
            xtype,
            dimids,
        })
    })
}

/// A dimension's name and current length (unlimited: the current number of records).
pub(crate) fn dim(ncid: c_int, dimid: c_int) -> Result<(String, u64)> {
    let mut name = [0u8; NAME_BUF];
    let mut len: usize = 0;
    // SAFETY: name holds NC_MAX_NAME + 1 bytes; valid out-pointer.
    let code =
        locked(|| unsafe { nc::nc_inq_dim(ncid, dimid, name.as_mut_ptr().cast(), &mut len) });
    check(code, "inq_dim")?;
    Ok((name_from(&name, "dimension")?, len as u64))
}

/// The name of attribute number `i` of `varid` (`NC_GLOBAL` for group attributes).
pub(crate) fn att_name(ncid: c_int, varid: c_int, i: usize) -> Result<(String, Vec<u8>)> {
    let idx = c_int::try_from(i)
        .map_err(|_| Part::Attribute.malformed("attribute index out of range"))?;
    let mut buf = [0u8; NAME_BUF];
    // SAFETY: buf holds NC_MAX_NAME + 1 bytes.
    let code = locked(|| unsafe { nc::nc_inq_attname(ncid, varid, idx, buf.as_mut_ptr().cast()) });
    check(code, "inq_attname")?;
    let name = name_from(&buf, "attribute")?;
    let mut c = name.as_bytes().to_vec();
    c.push(0);
    Ok((name, c))
}

/// An attribute's type and number of values. `cname` is NUL-terminated.
pub(crate) fn att_info(ncid: c_int, varid: c_int, cname: &[u8]) -> Result<(c_int, usize)> {
    let mut xtype: c_int = 0;
    let mut len: usize = 0;
    // SAFETY: cname is NUL-terminated (built by att_name); valid out-pointers.
    let code = locked(|| unsafe {
        nc::nc_inq_att(ncid, varid, cname.as_ptr().cast(), &mut xtype, &mut len)
    });
    check(code, "inq_att")?;
    Ok((xtype, len))
}

/// Reads an attribute's values in its own type into `out` (which must hold them all: the
/// caller sizes it as `len * type size`).
pub(crate) fn get_att_raw(ncid: c_int, varid: c_int, cname: &[u8], out: &mut [u8]) -> Result<()> {
    let ptr = out.as_mut_ptr().cast::<c_void>();
    // SAFETY: out holds len * size bytes of the attribute's type (caller contract); cname is
    // NUL-terminated.
    let code = locked(|| unsafe { nc::nc_get_att(ncid, varid, cname.as_ptr().cast(), ptr) });
    check(code, "get_att")
}

/// Reads an `NC_STRING` attribute of `len` values (`None` for a null string).
pub(crate) fn get_att_strings(
    ncid: c_int,
    varid: c_int,
    cname: &[u8],
    len: usize,
) -> Result<Vec<Option<Vec<u8>>>> {
    let mut ptrs: Vec<*mut c_char> = vec![std::ptr::null_mut(); len.max(1)];
    locked(|| {
        // SAFETY: ptrs holds len entries; netCDF allocates each string, freed just below.
        let code =
            unsafe { nc::nc_get_att_string(ncid, varid, cname.as_ptr().cast(), ptrs.as_mut_ptr()) };
        check(code, "get_att_string")?;
        let out = copy_strings(&ptrs[..len]);
        // SAFETY: frees exactly the len strings netCDF allocated above.
        unsafe { nc::nc_free_string(len, ptrs.as_mut_ptr()) };
        Ok(out)
    })
}

/// Copies C strings (null pointers → `None`).
fn copy_strings(ptrs: &[*mut c_char]) -> Vec<Option<Vec<u8>>> {
    ptrs.iter()
        .map(|&p| {
            if p.is_null() {
                None
            } else {
                // SAFETY: netCDF returned a NUL-terminated string it allocated.
                Some(unsafe { CStr::from_ptr(p) }.to_bytes().to_vec())
            }
        })
        .collect()
}

/// What `nc_inq_user_type` says: (name, size, base type, number of fields, class).
pub(crate) struct UserType {
    pub name: String,
    pub size: usize,
    pub base: c_int,
    /// Number of fields of a compound type (0 for the other classes).
    pub nfields: usize,
    pub class: c_int,
}

pub(crate) fn user_type(ncid: c_int, xtype: c_int) -> Result<UserType> {
    let mut name = [0u8; NAME_BUF];
    let mut size: usize = 0;
    let mut base: c_int = 0;
    let mut nfields: usize = 0;
    let mut class: c_int = 0;
    // SAFETY: name holds NC_MAX_NAME + 1 bytes; valid out-pointers.
    let code = locked(|| unsafe {
        nc::nc_inq_user_type(
            ncid,
            xtype,
            name.as_mut_ptr().cast(),
            &mut size,
            &mut base,
            &mut nfields,
            &mut class,
        )
    });
    check(code, "inq_user_type")?;
    Ok(UserType {
        name: name_from(&name, "type")?,
        size,
        base,
        nfields,
        class,
    })
}

/// What `nc_inq_compound_field` says of one field of a compound type.
pub(crate) struct CompoundField {
    pub name: String,
    /// Byte offset of the field in the (in-memory) record.
    pub offset: usize,
    pub xtype: c_int,
    /// The extents of an array field (empty for a single value).
    pub dims: Vec<u64>,
}

/// Field `i` of the compound type `xtype`.
pub(crate) fn compound_field(ncid: c_int, xtype: c_int, i: usize) -> Result<CompoundField> {
    let idx = c_int::try_from(i)
        .map_err(|_| Part::Type.malformed("compound field index out of range"))?;
    locked(|| {
        let mut ndims: c_int = 0;
        // SAFETY: null pointers for the outputs not wanted; valid out-pointer for ndims.
        let code = unsafe { nc::nc_inq_compound_fieldndims(ncid, xtype, idx, &mut ndims) };
        check(code, "inq_compound_fieldndims")?;
        let ndims = count(ndims, "compound field dimension")?;
        if ndims > nc::NC_MAX_VAR_DIMS as usize {
            return Err(Part::Type.malformed(format!("a compound field claims {ndims} dimensions")));
        }
        let mut name = [0u8; NAME_BUF];
        let mut offset: usize = 0;
        let mut ftype: c_int = 0;
        let mut nd: c_int = 0;
        // One spare slot so a field without dimensions still passes a valid pointer.
        let mut sizes = vec![0 as c_int; ndims + 1];
        // SAFETY: name holds NC_MAX_NAME + 1 bytes; sizes holds ndims (+1) entries, the count
        // just reported under the same lock; valid out-pointers.
        let code = unsafe {
            nc::nc_inq_compound_field(
                ncid,
                xtype,
                idx,
                name.as_mut_ptr().cast(),
                &mut offset,
                &mut ftype,
                &mut nd,
                sizes.as_mut_ptr(),
            )
        };
        check(code, "inq_compound_field")?;
        if count(nd, "compound field dimension")? != ndims {
            return Err(Part::Type
                .malformed("a compound field's dimension count changed between two queries"));
        }
        let dims = sizes[..ndims]
            .iter()
            .map(|&d| {
                u64::try_from(d).map_err(|_| {
                    Part::Type.malformed(format!("a compound field claims an extent of {d}"))
                })
            })
            .collect::<Result<Vec<u64>>>()?;
        Ok(CompoundField {
            name: name_from(&name, "compound field")?,
            offset,
            xtype: ftype,
            dims,
        })
    })
}

/// The name and base type of the vlen type `xtype`.
pub(crate) fn vlen(ncid: c_int, xtype: c_int) -> Result<(String, c_int)> {
    let mut name = [0u8; NAME_BUF];
    let mut size: usize = 0;
    let mut base: c_int = 0;
    // SAFETY: name holds NC_MAX_NAME + 1 bytes; valid out-pointers.
    let code = locked(|| unsafe {
        nc::nc_inq_vlen(ncid, xtype, name.as_mut_ptr().cast(), &mut size, &mut base)
    });
    check(code, "inq_vlen")?;
    Ok((name_from(&name, "vlen type")?, base))
}

/// The name and size (bytes per value) of the opaque type `xtype`.
pub(crate) fn opaque(ncid: c_int, xtype: c_int) -> Result<(String, usize)> {
    let mut name = [0u8; NAME_BUF];
    let mut size: usize = 0;
    // SAFETY: name holds NC_MAX_NAME + 1 bytes; valid out-pointer.
    let code =
        locked(|| unsafe { nc::nc_inq_opaque(ncid, xtype, name.as_mut_ptr().cast(), &mut size) });
    check(code, "inq_opaque")?;
    Ok((name_from(&name, "opaque type")?, size))
}

/// Frees one `char *` that netCDF allocated while reading a `string` value (in an attribute or
/// a compound record).
///
/// # Safety
/// `p` is null or a string netCDF allocated and nobody has freed yet; it is not used after.
pub(crate) unsafe fn free_string(mut p: *mut c_char) {
    if !p.is_null() {
        // SAFETY: one live netCDF-allocated string (the caller's contract).
        let _ = locked(|| unsafe { nc::nc_free_string(1, &mut p) });
    }
}

/// Frees the values of one vlen element that netCDF allocated while reading (not what they
/// point to in turn: the caller frees nested vlens and strings first).
///
/// # Safety
/// `vl` was filled by a netCDF read and its `p` is null or a live allocation of netCDF's, not
/// used after.
pub(crate) unsafe fn free_vlen(mut vl: nc::nc_vlen_t) {
    if !vl.p.is_null() {
        // SAFETY: one live netCDF-allocated vlen (the caller's contract).
        let _ = locked(|| unsafe { nc::nc_free_vlen(&mut vl) });
    }
}

/// Number of members of an enum type.
pub(crate) fn enum_len(ncid: c_int, xtype: c_int) -> Result<usize> {
    let mut base: c_int = 0;
    let mut base_size: usize = 0;
    let mut n: usize = 0;
    // SAFETY: a null name pointer is allowed; valid out-pointers.
    let code = locked(|| unsafe {
        nc::nc_inq_enum(
            ncid,
            xtype,
            std::ptr::null_mut(),
            &mut base,
            &mut base_size,
            &mut n,
        )
    });
    check(code, "inq_enum")?;
    Ok(n)
}

/// Member `i` of an enum type: its name and value bytes (native order, base-type size, in the
/// first bytes of the 8 returned).
pub(crate) fn enum_member(ncid: c_int, xtype: c_int, i: usize) -> Result<(String, [u8; 8])> {
    let idx =
        c_int::try_from(i).map_err(|_| Part::Type.malformed("enum member index out of range"))?;
    let mut name = [0u8; NAME_BUF];
    let mut value = 0u64; // 8 bytes, aligned for any integer base type
                          // SAFETY: name holds NC_MAX_NAME + 1 bytes; value holds the largest base type.
    let code = locked(|| unsafe {
        nc::nc_inq_enum_member(
            ncid,
            xtype,
            idx,
            name.as_mut_ptr().cast(),
            (&mut value as *mut u64).cast(),
        )
    });
    check(code, "inq_enum_member")?;
    Ok((name_from(&name, "enum member")?, value.to_ne_bytes()))
}

/// Chunk shape of a chunked netCDF-4 variable with `ndims >= 1` dimensions (`None` when it is
/// stored contiguously or compactly).
pub(crate) fn var_chunking(ncid: c_int, varid: c_int, ndims: usize) -> Result<Option<Vec<u64>>> {
    let mut storage: c_int = 0;
    let mut sizes = vec![0usize; ndims.max(1)];
    // SAFETY: sizes holds ndims entries.
    let code = locked(|| unsafe {
        nc::nc_inq_var_chunking(ncid, varid, &mut storage, sizes.as_mut_ptr())
    });
    check(code, "inq_var_chunking")?;
    if storage == nc::NC_CHUNKED && ndims > 0 {
        Ok(Some(sizes[..ndims].iter().map(|&s| s as u64).collect()))
    } else {
        Ok(None)
    }
}

/// The filter facts of a netCDF-4 variable.
pub(crate) struct Filters {
    pub shuffle: bool,
    pub fletcher32: bool,
    /// HDF5 filter ids in pipeline order (deflate = 1, szip = 4, …) with their parameters and
    /// whether this libnetcdf/libhdf5 can decode them.
    pub filters: Vec<(u32, Vec<u32>, bool)>,
}

pub(crate) fn var_filters(ncid: c_int, varid: c_int) -> Result<Filters> {
    locked(|| {
        let (mut shuffle, mut deflate, mut level) = (0 as c_int, 0 as c_int, 0 as c_int);
        // SAFETY: valid out-pointers.
        let code =
            unsafe { nc::nc_inq_var_deflate(ncid, varid, &mut shuffle, &mut deflate, &mut level) };
        check(code, "inq_var_deflate")?;
        let mut fletcher: c_int = 0;
        // SAFETY: valid out-pointer.
        let code = unsafe { nc::nc_inq_var_fletcher32(ncid, varid, &mut fletcher) };
        check(code, "inq_var_fletcher32")?;
        let mut n: usize = 0;
        // SAFETY: a null ids pointer asks for the count only.
        let code = unsafe { nc::nc_inq_var_filter_ids(ncid, varid, &mut n, std::ptr::null_mut()) };
        check(code, "inq_var_filter_ids")?;
        if n > 64 {
            return Err(Part::Metadata.malformed(format!("a variable claims {n} filters")));
        }
        let mut ids = vec![0 as c_uint; n.max(1)];
        if n > 0 {
            // SAFETY: ids holds n entries.
            let code = unsafe { nc::nc_inq_var_filter_ids(ncid, varid, &mut n, ids.as_mut_ptr()) };
            check(code, "inq_var_filter_ids")?;
        }
        ids.truncate(n.min(ids.len()));
        let mut filters = Vec::with_capacity(ids.len());
        for id in ids {
            let mut np: usize = 0;
            // SAFETY: a null params pointer asks for the count only.
            let code = unsafe {
                nc::nc_inq_var_filter_info(ncid, varid, id, &mut np, std::ptr::null_mut())
            };
            check(code, "inq_var_filter_info")?;
            if np > 256 {
                return Err(Part::Metadata.malformed(format!("filter {id} claims {np} parameters")));
            }
            let mut params = vec![0 as c_uint; np.max(1)];
            if np > 0 {
                // SAFETY: params holds np entries.
                let code = unsafe {
                    nc::nc_inq_var_filter_info(ncid, varid, id, &mut np, params.as_mut_ptr())
                };
                check(code, "inq_var_filter_info")?;
            }
            params.truncate(np.min(params.len()));
            // SAFETY: pure query.
            let available = unsafe { nc::nc_inq_filter_avail(ncid, id) } == nc::NC_NOERR;
            filters.push((id, params, available));
        }
        Ok(Filters {
            shuffle: shuffle != 0,
            fletcher32: fletcher != 0,
            filters,
        })
    })
}

/// Whether the variable's fill mode is on (`nc_inq_var_fill`'s `no_fill == 0`).
pub(crate) fn var_fill_on(ncid: c_int, varid: c_int) -> Result<bool> {
    let mut no_fill: c_int = 0;
    // SAFETY: a null fill-value pointer is allowed; valid out-pointer.
    let code =
        locked(|| unsafe { nc::nc_inq_var_fill(ncid, varid, &mut no_fill, std::ptr::null_mut()) });
    check(code, "inq_var_fill")?;
    Ok(no_fill == 0)
}

/// Reads the hyperslab `start`/`count` of a variable in its own type (no conversion) into
/// `out`, which must be exactly `product(count) * type size` bytes. For a 0-d variable pass
/// empty `start`/`count`.
///
/// # Safety contract (checked by the callers)
/// `out.len()` equals the region's size in the variable's in-memory type, and the type is a
/// fixed-size one (no strings, vlens).
pub(crate) fn get_vara(
    ncid: c_int,
    varid: c_int,
    start: &[usize],
    count: &[usize],
    out: &mut [u8],
) -> Result<()> {
    let zero = [0usize; 1];
    let one = [1usize; 1];
    let (s, c) = if start.is_empty() {
        (zero.as_ptr(), one.as_ptr())
    } else {
        (start.as_ptr(), count.as_ptr())
    };
    let ptr = out.as_mut_ptr().cast::<c_void>();
    // SAFETY: start/count have one entry per dimension; out holds the whole region (caller).
    let code = locked(|| unsafe { nc::nc_get_vara(ncid, varid, s, c, ptr) });
    check(code, "get_vara")
}

/// Reads a whole `NC_STRING` variable of `n` values (C order; `None` for a null string).
pub(crate) fn get_var_strings(
    ncid: c_int,
    varid: c_int,
    shape: &[usize],
    n: usize,
) -> Result<Vec<Option<Vec<u8>>>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let start = vec![0usize; shape.len().max(1)];
    let count: Vec<usize> = if shape.is_empty() {
        vec![1]
    } else {
        shape.to_vec()
    };
    let mut ptrs: Vec<*mut c_char> = vec![std::ptr::null_mut(); n];
    locked(|| {
        // SAFETY: ptrs holds n = product(shape) entries; netCDF allocates the strings, which
        // are freed just below.
        let code = unsafe {
            nc::nc_get_vara_string(
                ncid,
                varid,
                start.as_ptr(),
                count.as_ptr(),
                ptrs.as_mut_ptr(),
            )
        };
        check(code, "get_vara_string")?;
        let out = copy_strings(&ptrs);
        // SAFETY: frees exactly the n strings allocated above.
        unsafe { nc::nc_free_string(n, ptrs.as_mut_ptr()) };
        Ok(out)
    })
}

// ---------------------------------------------------------------------------------------------
// Writing (the exporter): definitions, then data. Every buffer is checked against the
// variable's own rank and type size before the library sees it.

/// Whether this library can use HDF5 filter `id` (a plugin such as zstd may be missing).
pub(crate) fn filter_avail(ncid: c_int, id: u32) -> bool {
    // SAFETY: a pure query on an open file.
    call(|| unsafe { nc::nc_inq_filter_avail(ncid, id) }).is_ok()
}

/// Defines the child group `name` of `parent`; returns its id.
pub(crate) fn def_grp(parent: c_int, name: &CStr) -> Result<c_int, NcError> {
    let mut id: c_int = 0;
    // SAFETY: name is NUL-terminated; id is a valid out-pointer.
    call(|| unsafe { nc::nc_def_grp(parent, name.as_ptr(), &mut id) })?;
    Ok(id)
}

/// Defines the dimension `name` of length `len` in group `ncid` (`len` 0: unlimited); returns
/// its id.
pub(crate) fn def_dim(ncid: c_int, name: &CStr, len: usize) -> Result<c_int, NcError> {
    let mut id: c_int = 0;
    // SAFETY: name is NUL-terminated; id is a valid out-pointer.
    call(|| unsafe { nc::nc_def_dim(ncid, name.as_ptr(), len, &mut id) })?;
    Ok(id)
}

/// Defines the variable `name` of type `xtype` over `dimids` in group `ncid`; returns its id.
pub(crate) fn def_var(
    ncid: c_int,
    name: &CStr,
    xtype: nc::nc_type,
    dimids: &[c_int],
) -> Result<c_int, NcError> {
    let ndims = c_int::try_from(dimids.len()).map_err(|_| NcError(nc::NC_EMAXDIMS))?;
    let mut id: c_int = 0;
    // SAFETY: dimids holds ndims ids; name is NUL-terminated; id is a valid out-pointer.
    call(|| unsafe {
        nc::nc_def_var(ncid, name.as_ptr(), xtype, ndims, dimids.as_ptr(), &mut id)
    })?;
    Ok(id)
}

/// A variable's rank and the in-memory size of one of its elements (for `NC_STRING`, one
/// string pointer).
fn var_rank_and_size(ncid: c_int, varid: c_int) -> Result<(usize, usize), NcError> {
    locked(|| {
        let mut ndims: c_int = 0;
        // SAFETY: valid out-pointer.
        status(unsafe { nc::nc_inq_varndims(ncid, varid, &mut ndims) })?;
        let mut xtype: nc::nc_type = 0;
        // SAFETY: valid out-pointer.
        status(unsafe { nc::nc_inq_vartype(ncid, varid, &mut xtype) })?;
        let mut size: usize = 0;
        // SAFETY: a null name pointer is allowed; valid out-pointer.
        status(unsafe { nc::nc_inq_type(ncid, xtype, std::ptr::null_mut(), &mut size) })?;
        Ok((
            usize::try_from(ndims).map_err(|_| NcError(nc::NC_EINVAL))?,
            size,
        ))
    })
}

/// The size of one value of the atomic type `xtype`.
fn type_size(ncid: c_int, xtype: nc::nc_type) -> Result<usize, NcError> {
    let mut size: usize = 0;
    // SAFETY: a null name pointer is allowed; valid out-pointer.
    call(|| unsafe { nc::nc_inq_type(ncid, xtype, std::ptr::null_mut(), &mut size) })?;
    Ok(size)
}

/// The size of one value of type `xtype` (in memory; a `string` is one pointer).
pub(crate) fn type_size_of(ncid: c_int, xtype: nc::nc_type) -> Result<usize> {
    type_size(ncid, xtype)
        .map_err(|e| SourceError::library(Lib::NetCdf, "netCDF inq_type", e.reported()))
}

/// Chunks a variable with one chunk extent per dimension.
pub(crate) fn def_var_chunking(ncid: c_int, varid: c_int, chunks: &[usize]) -> Result<(), NcError> {
    if var_rank_and_size(ncid, varid)?.0 != chunks.len() {
        return Err(NcError(nc::NC_EINVAL));
    }
    // SAFETY: chunks holds one extent per dimension of the variable (checked above).
    call(|| unsafe { nc::nc_def_var_chunking(ncid, varid, nc::NC_CHUNKED, chunks.as_ptr()) })
}

/// Turns on the deflate filter at `level`, with the shuffle filter before it when `shuffle`.
pub(crate) fn def_var_deflate(
    ncid: c_int,
    varid: c_int,
    shuffle: bool,
    level: c_int,
) -> Result<(), NcError> {
    let shuffle = c_int::from(shuffle);
    // SAFETY: plain values only.
    call(|| unsafe { nc::nc_def_var_deflate(ncid, varid, shuffle, 1, level) })
}

/// Adds HDF5 filter `id` with `params` to the variable's pipeline.
pub(crate) fn def_var_filter(
    ncid: c_int,
    varid: c_int,
    id: u32,
    params: &[u32],
) -> Result<(), NcError> {
    // SAFETY: params holds params.len() values, the count passed.
    call(|| unsafe { nc::nc_def_var_filter(ncid, varid, id, params.len(), params.as_ptr()) })
}

/// Turns the variable's fill mode off (every element will be written).
pub(crate) fn def_var_fill_off(ncid: c_int, varid: c_int) -> Result<(), NcError> {
    // SAFETY: no_fill = 1 with a null fill value: the library reads no fill value.
    call(|| unsafe { nc::nc_def_var_fill(ncid, varid, 1, std::ptr::null()) })
}

/// Writes a `char` attribute of `varid` (`NC_GLOBAL`: of the group).
pub(crate) fn put_att_text(
    ncid: c_int,
    varid: c_int,
    name: &CStr,
    text: &[u8],
) -> Result<(), NcError> {
    // SAFETY: text is valid for text.len() bytes; name is NUL-terminated.
    call(|| unsafe {
        nc::nc_put_att_text(ncid, varid, name.as_ptr(), text.len(), text.as_ptr().cast())
    })
}

/// Writes a `string` attribute of `varid` (`NC_GLOBAL`: of the group).
pub(crate) fn put_att_strings(
    ncid: c_int,
    varid: c_int,
    name: &CStr,
    values: &[CString],
) -> Result<(), NcError> {
    let mut ptrs: Vec<*const c_char> = values.iter().map(|c| c.as_ptr()).collect();
    // SAFETY: ptrs holds ptrs.len() NUL-terminated strings, alive in `values`; netCDF copies
    // them and writes nothing through the pointers.
    call(|| unsafe {
        nc::nc_put_att_string(ncid, varid, name.as_ptr(), ptrs.len(), ptrs.as_mut_ptr())
    })
}

/// Writes a numeric attribute of `varid` (`NC_GLOBAL`: of the group): `bytes` holds `len`
/// native-endian values of the atomic type `xtype`.
pub(crate) fn put_att(
    ncid: c_int,
    varid: c_int,
    name: &CStr,
    xtype: nc::nc_type,
    len: usize,
    bytes: &[u8],
) -> Result<(), NcError> {
    if len.checked_mul(type_size(ncid, xtype)?) != Some(bytes.len()) {
        return Err(NcError(nc::NC_EINVAL));
    }
    // SAFETY: bytes holds len values of xtype (checked above); name is NUL-terminated.
    call(|| unsafe {
        nc::nc_put_att(
            ncid,
            varid,
            name.as_ptr(),
            xtype,
            len,
            bytes.as_ptr().cast::<c_void>(),
        )
    })
}

/// Defines the enum type `name` over the integer type `base` in group `ncid`; returns its id.
pub(crate) fn def_enum(
    ncid: c_int,
    base: nc::nc_type,
    name: &CStr,
) -> Result<nc::nc_type, NcError> {
    let mut id: nc::nc_type = 0;
    // SAFETY: name is NUL-terminated; id is a valid out-pointer.
    call(|| unsafe { nc::nc_def_enum(ncid, base, name.as_ptr(), &mut id) })?;
    Ok(id)
}

/// Defines the vlen type `name` of `base` values in group `ncid`; returns its id.
pub(crate) fn def_vlen(
    ncid: c_int,
    base: nc::nc_type,
    name: &CStr,
) -> Result<nc::nc_type, NcError> {
    let mut id: nc::nc_type = 0;
    // SAFETY: name is NUL-terminated; id is a valid out-pointer.
    call(|| unsafe { nc::nc_def_vlen(ncid, name.as_ptr(), base, &mut id) })?;
    Ok(id)
}

/// Defines the opaque type `name` of `size` bytes in group `ncid`; returns its id.
pub(crate) fn def_opaque(ncid: c_int, size: usize, name: &CStr) -> Result<nc::nc_type, NcError> {
    let mut id: nc::nc_type = 0;
    // SAFETY: name is NUL-terminated; id is a valid out-pointer.
    call(|| unsafe { nc::nc_def_opaque(ncid, size, name.as_ptr(), &mut id) })?;
    Ok(id)
}

/// Defines the compound type `name` of `size` bytes per record in group `ncid`; returns its id.
pub(crate) fn def_compound(ncid: c_int, size: usize, name: &CStr) -> Result<nc::nc_type, NcError> {
    let mut id: nc::nc_type = 0;
    // SAFETY: name is NUL-terminated; id is a valid out-pointer.
    call(|| unsafe { nc::nc_def_compound(ncid, size, name.as_ptr(), &mut id) })?;
    Ok(id)
}

/// Adds the field `name` of type `field` at byte `offset` to the compound type `xtype` of
/// group `ncid`: an array field of extents `dims` when there are any.
pub(crate) fn insert_compound(
    ncid: c_int,
    xtype: nc::nc_type,
    name: &CStr,
    offset: usize,
    field: nc::nc_type,
    dims: &[c_int],
) -> Result<(), NcError> {
    if dims.is_empty() {
        // SAFETY: name is NUL-terminated.
        return call(|| unsafe {
            nc::nc_insert_compound(ncid, xtype, name.as_ptr(), offset, field)
        });
    }
    let ndims = c_int::try_from(dims.len()).map_err(|_| NcError(nc::NC_EINVAL))?;
    // SAFETY: name is NUL-terminated; dims holds ndims extents.
    call(|| unsafe {
        nc::nc_insert_array_compound(
            ncid,
            xtype,
            name.as_ptr(),
            offset,
            field,
            ndims,
            dims.as_ptr(),
        )
    })
}

/// Adds the member `name` to the enum type `xtype` of group `ncid`: `value` is its value as
/// one native-endian value of the enum's base type.
pub(crate) fn insert_enum(
    ncid: c_int,
    xtype: nc::nc_type,
    name: &CStr,
    value: &[u8],
) -> Result<(), NcError> {
    let mut base: nc::nc_type = 0;
    // SAFETY: null name/size/count pointers are allowed; base is a valid out-pointer.
    call(|| unsafe {
        nc::nc_inq_enum(
            ncid,
            xtype,
            std::ptr::null_mut(),
            &mut base,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    })?;
    if type_size(ncid, base)? != value.len() {
        return Err(NcError(nc::NC_EINVAL));
    }
    // SAFETY: value holds one value of the base type (checked above); name is NUL-terminated.
    call(|| unsafe {
        nc::nc_insert_enum(ncid, xtype, name.as_ptr(), value.as_ptr().cast::<c_void>())
    })
}

/// Leaves define mode.
pub(crate) fn enddef(ncid: c_int) -> Result<(), NcError> {
    // SAFETY: plain value only.
    call(|| unsafe { nc::nc_enddef(ncid) })
}

/// The element count of the region `start`/`count` of a variable of rank `rank`, when both
/// have one entry per dimension.
fn region_len(rank: usize, start: &[usize], count: &[usize]) -> Result<usize, NcError> {
    if start.len() != rank || count.len() != rank {
        return Err(NcError(nc::NC_EINVAL));
    }
    count
        .iter()
        .try_fold(1usize, |n, &c| n.checked_mul(c))
        .ok_or(NcError(nc::NC_EEDGE))
}

/// Writes the region `start`/`count` of a fixed-size-type variable from `bytes`: the region's
/// values in C order, native-endian, in the variable's own type (empty `start`/`count` for a
/// 0-d variable).
pub(crate) fn put_vara(
    ncid: c_int,
    varid: c_int,
    start: &[usize],
    count: &[usize],
    bytes: &[u8],
) -> Result<(), NcError> {
    let (rank, size) = var_rank_and_size(ncid, varid)?;
    if region_len(rank, start, count)?.checked_mul(size) != Some(bytes.len()) {
        return Err(NcError(nc::NC_EINVAL));
    }
    // SAFETY: start/count hold one entry per dimension and bytes the region's values in the
    // variable's type (both checked above); netCDF only reads them.
    call(|| unsafe {
        nc::nc_put_vara(
            ncid,
            varid,
            start.as_ptr(),
            count.as_ptr(),
            bytes.as_ptr().cast::<c_void>(),
        )
    })
}

/// Writes the region `start`/`count` of a `char` variable from `text` (one byte per element).
pub(crate) fn put_vara_text(
    ncid: c_int,
    varid: c_int,
    start: &[usize],
    count: &[usize],
    text: &[u8],
) -> Result<(), NcError> {
    let (rank, _) = var_rank_and_size(ncid, varid)?;
    if region_len(rank, start, count)? != text.len() {
        return Err(NcError(nc::NC_EINVAL));
    }
    // SAFETY: start/count hold one entry per dimension and text one byte per element of the
    // region (checked above); netCDF only reads them.
    call(|| unsafe {
        nc::nc_put_vara_text(
            ncid,
            varid,
            start.as_ptr(),
            count.as_ptr(),
            text.as_ptr().cast(),
        )
    })
}

/// Writes the region `start`/`count` of a `string` variable from `values` (one per element).
pub(crate) fn put_vara_strings(
    ncid: c_int,
    varid: c_int,
    start: &[usize],
    count: &[usize],
    values: &[CString],
) -> Result<(), NcError> {
    let (rank, _) = var_rank_and_size(ncid, varid)?;
    if region_len(rank, start, count)? != values.len() {
        return Err(NcError(nc::NC_EINVAL));
    }
    let mut ptrs: Vec<*const c_char> = values.iter().map(|c| c.as_ptr()).collect();
    // SAFETY: start/count hold one entry per dimension and ptrs one NUL-terminated string
    // (alive in `values`) per element of the region (checked above); netCDF copies them.
    call(|| unsafe {
        nc::nc_put_vara_string(
            ncid,
            varid,
            start.as_ptr(),
            count.as_ptr(),
            ptrs.as_mut_ptr(),
        )
    })
}
