//! Attributes whose own names hold a `/`, which netCDF-C cannot write: of groups and of
//! variables.
//!
//! HDF5 allows any attribute name (h5py writes `f.attrs["a/b"]`, `f["d"].attrs["a/b"]`), and
//! netCDF-C reads such names from a netCDF-4 file, but `nc_put_att` refuses them
//! (`NC_EBADNAME`). The exporter collects them while it defines the file ([`plan`]) and, once
//! netCDF-C has closed the file, writes them here with libhdf5 ([`write`]) on the group's
//! object, or on the variable's dataset, in the form netCDF-C gives attributes of those types,
//! so that netCDF-C reads them back as it reads its own. A variable's dataset is the one
//! netCDF-C reads as that variable: `_nc4_non_coord_<name>` when netCDF-C stored it under that
//! name (a variable named like a dimension of its group but not that dimension's coordinate
//! variable: the dataset `<name>` is then the dimension's), else `<name>` (its name as
//! netCDF-C gave it, asked before the file was closed). Values:
//!
//! - `char` text: a scalar fixed-length string of the text's bytes, NUL-terminated padding,
//!   ASCII character set (UTF-8 when the bytes are UTF-8 beyond ASCII); empty text a null
//!   dataspace of a one-byte string (netCDF-C's empty `char` attribute);
//! - `string` values (a text list, or one text the importer recorded as a `string`): a 1-D
//!   array of variable-length UTF-8 strings;
//! - numbers: a 1-D array of the native HDF5 type of the netCDF type (netCDF-C's own file
//!   types), values as the `.tet` holds them; a multi-dimensional attribute
//!   ([`tet_source::Fact::AttrShape`]) stays flattened, as every attribute of this export:
//!   netCDF-C refuses to open an attribute of more than one dimension (`NC_EATTMETA`), and so
//!   every attribute of the file;
//! - attributes of enum or compound types: left out, with a warning (their netCDF types are
//!   defined through netCDF-C, which is closed by then); so is a variable's attribute when no
//!   dataset of the variable's name is found (never expected of a file netCDF-C wrote).
//!
//! Every libhdf5 call runs under the process-wide netCDF/HDF5 lock ([`ffi::locked`]); every
//! identifier opened here is closed on every path, so closing the file leaves nothing of it
//! open.

use std::ffi::{c_char, c_void, CString};
use std::fmt;
use std::path::Path;

use tet_hdf5::hdf5;
use tet_hdf5::hdf5_sys;
use tet_source::export::{ExportError, Result};
use tet_source::{AttrValue, Lib};

use hdf5_sys::h5::herr_t;
use hdf5_sys::h5i::hid_t;

use super::hints::AttrHints;
use crate::ffi;

/// How an attribute is written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum H5Value {
    /// `char` text: its bytes.
    Chars(Vec<u8>),
    /// `string` values.
    Strings(Vec<CString>),
    /// Numbers (never `Text` or `TextList`).
    Numbers(AttrValue),
}

/// The owner of an attribute: a group, or a variable of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Place {
    /// The group's path (`""` for the root).
    pub group: String,
    /// The variable's name in that group, as netCDF-C gave it (`None`: the group's own).
    pub var: Option<String>,
}

impl Place {
    /// The group `group` itself.
    pub(crate) fn group(group: &str) -> Place {
        Place {
            group: group.to_string(),
            var: None,
        }
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.var, self.group.is_empty()) {
            (None, true) => f.write_str("the file"),
            (None, false) => write!(f, "group `/{}`", self.group),
            (Some(v), true) => write!(f, "variable `{v}`"),
            (Some(v), false) => write!(f, "variable `{}/{v}`", self.group),
        }
    }
}

/// An attribute to write with libhdf5 once the file is closed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SlashedAttr {
    /// Its owner.
    pub place: Place,
    /// The attribute's own name (holding a `/`).
    pub name: String,
    /// Its value.
    pub value: H5Value,
}

impl SlashedAttr {
    /// Whether this is the attribute `name` of `place`.
    pub(crate) fn is(&self, place: &Place, name: &str) -> bool {
        &self.place == place && self.name == name
    }
}

/// The attribute `name` of `place`, recorded under `key` with value `v`, as libhdf5 will write
/// it; `None` (with a warning) when it cannot be written faithfully.
pub(crate) fn plan(
    (place, name, key): (&Place, &str, &str),
    v: &AttrValue,
    hints: &AttrHints,
    warnings: &mut Vec<String>,
) -> Result<Option<SlashedAttr>> {
    let what = || format!("attribute `{name}` of {place}");
    let left_out = |why: &str| {
        format!(
            "{}: {why}; left out (its name holds a `/`, which netCDF-C cannot write: such \
             attributes are written with libhdf5)",
            what()
        )
    };
    if hints.enum_type(key).is_some() || hints.record(key).is_some() {
        warnings.push(left_out("it is of an enum or compound type"));
        return Ok(None);
    }
    let strings = |texts: &[&String], warnings: &mut Vec<String>| -> Result<Option<H5Value>> {
        let mut out = Vec::with_capacity(texts.len());
        for s in texts {
            match CString::new(hints.bytes(key, s, &what)?) {
                Ok(c) => out.push(c),
                Err(_) => {
                    warnings.push(left_out("a `string` value holds a NUL byte"));
                    return Ok(None);
                }
            }
        }
        Ok(Some(H5Value::Strings(out)))
    };
    let value = match v {
        AttrValue::Text(s) if hints.is_string(key) => strings(&[s], warnings)?,
        AttrValue::Text(s) => Some(H5Value::Chars(hints.bytes(key, s, &what)?)),
        AttrValue::TextList(l) => strings(&l.iter().collect::<Vec<_>>(), warnings)?,
        n => Some(H5Value::Numbers(n.clone())),
    };
    Ok(value.map(|value| SlashedAttr {
        place: place.clone(),
        name: name.to_string(),
        value,
    }))
}

/// A libhdf5 failure while doing `what`, with libhdf5's error stack as its cause.
fn h5_error(what: String) -> ExportError {
    ExportError::Library {
        lib: Lib::Hdf5,
        context: format!("libhdf5: {what}"),
        source: Box::new(hdf5::Error::query().unwrap_or_else(|e| e)),
    }
}

/// An identifier this module opened, closed when dropped.
struct Id {
    id: hid_t,
    close: unsafe extern "C" fn(hid_t) -> herr_t,
}

impl Id {
    /// `id` as returned by an opening call; a negative id is the call's failure.
    fn new(
        id: hid_t,
        close: unsafe extern "C" fn(hid_t) -> herr_t,
        what: impl FnOnce() -> String,
    ) -> Result<Id> {
        if id < 0 {
            Err(h5_error(what()))
        } else {
            Ok(Id { id, close })
        }
    }

    /// Closes the identifier now, reporting a failure (closing a file flushes it).
    fn close(self, what: impl FnOnce() -> String) -> Result<()> {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `id` was opened by the call `close` belongs to and is closed exactly once:
        // here, where `Drop` is bypassed, or in `Drop`.
        check(unsafe { (this.close)(this.id) }, what)
    }
}

impl Drop for Id {
    fn drop(&mut self) {
        // SAFETY: as in `Id::close`; every `Id` lives inside `ffi::locked`, under the lock.
        let _ = unsafe { (self.close)(self.id) };
    }
}

/// A status of libhdf5: negative is a failure of `what`.
fn check(status: herr_t, what: impl FnOnce() -> String) -> Result<()> {
    if status < 0 {
        Err(h5_error(what()))
    } else {
        Ok(())
    }
}

/// Writes `attrs` into the closed netCDF-4 file at `path` (`cpath`, NUL-terminated); an
/// attribute of a variable whose dataset is not found is left out with a warning.
pub(crate) fn write(
    path: &Path,
    cpath: &CString,
    attrs: &[SlashedAttr],
    warnings: &mut Vec<String>,
) -> Result<()> {
    if attrs.is_empty() {
        return Ok(());
    }
    let shown = path.display();
    ffi::locked(|| {
        use hdf5_sys::{h5d, h5f, h5g, h5p::H5P_DEFAULT};
        // SAFETY: initialises libhdf5 (already done by netCDF-C; idempotent), so its
        // predefined type ids used below are set.
        check(unsafe { hdf5_sys::h5::H5open() }, || "initialise".into())?;
        // SAFETY: `cpath` is NUL-terminated; the file was closed by netCDF-C.
        let fid = unsafe { h5f::H5Fopen(cpath.as_ptr(), h5f::H5F_ACC_RDWR, H5P_DEFAULT) };
        let file = Id::new(fid, h5f::H5Fclose, || format!("open {shown} to write"))?;
        for a in attrs {
            let g = &a.place.group;
            let gpath = cname(&format!("/{g}"))?;
            // SAFETY: `file` is open; `gpath` is NUL-terminated.
            let gid = unsafe { h5g::H5Gopen2(file.id, gpath.as_ptr(), H5P_DEFAULT) };
            let group = Id::new(gid, h5g::H5Gclose, || format!("open group `/{g}`"))?;
            match &a.place.var {
                None => put(group.id, a)?,
                Some(var) => {
                    let Some(dname) = dataset_of(group.id, var, &a.place)? else {
                        warnings.push(format!(
                            "attribute `{}` of {}: no dataset `{var}` in group `/{g}` to \
                             write it to (its name holds a `/`, which netCDF-C cannot write: \
                             such attributes are written with libhdf5); left out",
                            a.name, a.place
                        ));
                        continue;
                    };
                    // SAFETY: `group` is open; `dname` is NUL-terminated.
                    let did = unsafe { h5d::H5Dopen2(group.id, dname.as_ptr(), H5P_DEFAULT) };
                    let what = || format!("open the dataset of {}", a.place);
                    let dataset = Id::new(did, h5d::H5Dclose, what)?;
                    put(dataset.id, a)?;
                    dataset.close(|| format!("close the dataset of {}", a.place))?;
                }
            }
            group.close(|| format!("close group `/{g}`"))?;
        }
        file.close(|| format!("close {shown}"))
    })
}

/// netCDF-C's prefix of the dataset name of a variable named like a dimension of its group
/// that is not that dimension's coordinate variable (its `NON_COORD_PREPEND`).
const NON_COORD: &str = "_nc4_non_coord_";

/// The name of variable `var`'s dataset in the open group `gid`: `_nc4_non_coord_<var>` when
/// there is one (netCDF-C reads it as `var`; `var` is then the dimension's dataset), else
/// `var`; `None` when neither is there.
fn dataset_of(gid: hid_t, var: &str, place: &Place) -> Result<Option<CString>> {
    for name in [format!("{NON_COORD}{var}"), var.to_string()] {
        let c = cname(&name)?;
        // SAFETY: `gid` is an open group; `c` is NUL-terminated and a single link name (a
        // netCDF name holds no `/`), so no intermediate link is looked up.
        let found =
            unsafe { hdf5_sys::h5l::H5Lexists(gid, c.as_ptr(), hdf5_sys::h5p::H5P_DEFAULT) };
        check(found, || format!("look for the dataset of {place}"))?;
        if found > 0 {
            return Ok(Some(c));
        }
    }
    Ok(None)
}

fn cname(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| ExportError::Invalid(format!("name {s:?} holds a NUL byte")))
}

/// The native HDF5 type, element count and native-endian bytes of numbers (netCDF-C's file
/// type for the netCDF type of the same width and sign).
fn numbers(v: &AttrValue) -> Option<(hid_t, usize, Vec<u8>)> {
    use hdf5_sys::h5t as t;
    macro_rules! ne {
        ($t:expr, $xs:expr) => {
            Some((
                *$t,
                $xs.len(),
                $xs.iter().flat_map(|x| x.to_ne_bytes()).collect(),
            ))
        };
    }
    match v {
        AttrValue::I8(x) => ne!(t::H5T_NATIVE_SCHAR, x),
        AttrValue::U8(x) => ne!(t::H5T_NATIVE_UCHAR, x),
        AttrValue::I16(x) => ne!(t::H5T_NATIVE_SHORT, x),
        AttrValue::U16(x) => ne!(t::H5T_NATIVE_USHORT, x),
        AttrValue::I32(x) => ne!(t::H5T_NATIVE_INT, x),
        AttrValue::U32(x) => ne!(t::H5T_NATIVE_UINT, x),
        AttrValue::I64(x) => ne!(t::H5T_NATIVE_LLONG, x),
        AttrValue::U64(x) => ne!(t::H5T_NATIVE_ULLONG, x),
        AttrValue::F32(x) => ne!(t::H5T_NATIVE_FLOAT, x),
        AttrValue::F64(x) => ne!(t::H5T_NATIVE_DOUBLE, x),
        AttrValue::Text(_) | AttrValue::TextList(_) => None,
    }
}

/// A string type: fixed `size` bytes, or variable-length (`None`); NUL-terminated.
fn string_type(size: Option<usize>, utf8: bool) -> Result<Id> {
    use hdf5_sys::h5t as t;
    let what = || "define a string type".to_string();
    // SAFETY: copies a predefined type (libhdf5 initialised by `write`).
    let ty = Id::new(unsafe { t::H5Tcopy(*t::H5T_C_S1) }, t::H5Tclose, what)?;
    let cset = if utf8 {
        t::H5T_CSET_UTF8
    } else {
        t::H5T_CSET_ASCII
    };
    // SAFETY: `ty` is a string type this module owns.
    unsafe {
        check(t::H5Tset_size(ty.id, size.unwrap_or(t::H5T_VARIABLE)), what)?;
        check(t::H5Tset_strpad(ty.id, t::H5T_STR_NULLTERM), what)?;
        check(t::H5Tset_cset(ty.id, cset), what)?;
    }
    Ok(ty)
}

/// A dataspace: null for no values, scalar for one `char` text, else 1-D of `n`.
fn space(n: usize, scalar: bool) -> Result<Id> {
    use hdf5_sys::h5s;
    let what = || "define a dataspace".to_string();
    let id = if n == 0 {
        // SAFETY: plain constructor.
        unsafe { h5s::H5Screate(h5s::H5S_class_t::H5S_NULL) }
    } else if scalar {
        // SAFETY: plain constructor.
        unsafe { h5s::H5Screate(h5s::H5S_class_t::H5S_SCALAR) }
    } else {
        let dims = [n as hdf5_sys::h5::hsize_t];
        // SAFETY: `dims` holds the one extent of rank 1; no maximum extents.
        unsafe { h5s::H5Screate_simple(1, dims.as_ptr(), std::ptr::null()) }
    };
    Id::new(id, h5s::H5Sclose, what)
}

/// Creates and writes attribute `a` on the open group or dataset `gid`.
fn put(gid: hid_t, a: &SlashedAttr) -> Result<()> {
    let what = || format!("write attribute `{}` of {}", a.name, a.place);
    let name = cname(&a.name)?;
    match &a.value {
        H5Value::Chars(b) => {
            let utf8 = !b.is_ascii() && std::str::from_utf8(b).is_ok();
            let ty = string_type(Some(b.len().max(1)), utf8)?;
            let n = usize::from(!b.is_empty());
            create(gid, &name, &ty, (n, true), b.as_ptr().cast(), &what)
        }
        H5Value::Strings(l) => {
            let pointers: Vec<*const c_char> = l.iter().map(|c| c.as_ptr()).collect();
            let ty = string_type(None, true)?;
            create(
                gid,
                &name,
                &ty,
                (l.len(), false),
                pointers.as_ptr().cast(),
                &what,
            )
        }
        H5Value::Numbers(v) => {
            use hdf5_sys::h5t;
            let (native, n, bytes) = numbers(v).ok_or_else(|| {
                ExportError::Invalid(format!("{}: not a number attribute", what()))
            })?;
            // SAFETY: copies a predefined type (libhdf5 initialised by `write`).
            let ty = Id::new(unsafe { h5t::H5Tcopy(native) }, h5t::H5Tclose, what)?;
            // SAFETY: `ty` is open.
            let size = unsafe { h5t::H5Tget_size(ty.id) };
            if n.checked_mul(size) != Some(bytes.len()) {
                return Err(ExportError::Invalid(format!(
                    "{}: {} bytes for {n} values of {size} bytes",
                    what(),
                    bytes.len()
                )));
            }
            create(gid, &name, &ty, (n, false), bytes.as_ptr().cast(), &what)
        }
    }
}

/// Creates attribute `name` of type `ty` on object `gid` (a group or a dataset) with `n` values (a scalar when
/// `scalar` and `n` is 1) and writes them from `buf`: `n` values of `ty` in memory (for a
/// variable-length string type, `n` pointers to NUL-terminated strings).
fn create(
    gid: hid_t,
    name: &CString,
    ty: &Id,
    (n, scalar): (usize, bool),
    buf: *const c_void,
    what: &dyn Fn() -> String,
) -> Result<()> {
    use hdf5_sys::{h5a, h5p::H5P_DEFAULT};
    let space = space(n, scalar)?;
    // SAFETY: `gid`, `ty` and `space` are open; `name` is NUL-terminated.
    let aid = unsafe {
        h5a::H5Acreate2(
            gid,
            name.as_ptr(),
            ty.id,
            space.id,
            H5P_DEFAULT,
            H5P_DEFAULT,
        )
    };
    let attr = Id::new(aid, h5a::H5Aclose, what)?;
    if n > 0 {
        // SAFETY: `buf` holds the `n` values of `ty` the dataspace has (the caller's contract),
        // in the memory form of `ty`, which is also the attribute's type.
        check(unsafe { h5a::H5Awrite(attr.id, ty.id, buf) }, what)?;
    }
    attr.close(what)
}
