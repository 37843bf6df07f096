//! HDF5 datatypes: analysis with raw `H5T` calls, flattening into numeric and text leaves, and
//! decoding of values read in the file's own type (no library conversion).
//!
//! # Safety of the library calls
//!
//! The `H5T*` calls here take a datatype id by value and return a plain value, a new id (owned
//! by an [`OwnedType`], which closes it), a string libhdf5 allocated for the caller (freed with
//! `H5free_memory`), or write into a buffer of ours sized as the call requires. libhdf5 checks
//! every id it is given and returns an error value for one that is not an open datatype, so no
//! id can make such a call unsound. libhdf5 is not thread-safe: every call runs under
//! hdf5-metno's library lock (`hdf5::sync::sync`, reentrant), which the entry points
//! ([`analyze`], [`memory_type`]) take for the whole analysis.

use std::ffi::CStr;
use std::os::raw::c_char;

use hdf5_sys::h5i::hid_t;
use hdf5_sys::h5t::{
    H5T_class_t, H5T_cset_t, H5T_norm_t, H5T_order_t, H5T_sign_t, H5T_str_t, H5Tclose,
    H5Tget_array_dims2, H5Tget_array_ndims, H5Tget_class, H5Tget_cset, H5Tget_ebias, H5Tget_fields,
    H5Tget_member_name, H5Tget_member_offset, H5Tget_member_type, H5Tget_member_value,
    H5Tget_nmembers, H5Tget_norm, H5Tget_offset, H5Tget_order, H5Tget_precision, H5Tget_sign,
    H5Tget_size, H5Tget_strpad, H5Tget_super, H5Tget_tag, H5Tis_variable_str,
};
use tet_source::record::{self, Element, Fix, Parts, Place};
use tet_source::{json_text, AttrValue, ElementType};

/// How a fixed-length string is padded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Padding {
    /// Stops at the first NUL.
    NullTerm,
    /// Trailing NULs are padding.
    NullPad,
    /// Trailing spaces are padding (Fortran).
    SpacePad,
}

/// An analysed datatype.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TypeInfo {
    /// Bytes per element in memory (for vlen parts: the pointer/descriptor size).
    pub size: usize,
    pub kind: Kind,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    Int {
        signed: bool,
        be: bool,
        bitfield: bool,
        /// Padding bits: (precision, bit offset) of the value in its container. Such values
        /// are read through libhdf5's conversion to the full-width little-endian type (see
        /// [`memory_type`]), so `be` is then `false`.
        nbit: Option<(usize, usize)>,
        /// An HDF5 time (`H5T_TIME`): 32 bits delivered as stored (seconds), 64 bits decoded
        /// into microseconds ([`crate::time`]).
        time: bool,
    },
    Float {
        dtype: ElementType,
        be: bool,
    },
    Enum {
        signed: bool,
        be: bool,
        members: Vec<(String, i128)>,
        is_bool: bool,
    },
    FixedStr {
        pad: Padding,
        utf8: bool,
    },
    VarStr {
        utf8: bool,
    },
    Compound {
        fields: Vec<Field>,
    },
    Array {
        dims: Vec<u64>,
        base: Box<TypeInfo>,
    },
    /// No `.tet` form; the text says what it is.
    Other(String),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Field {
    pub name: String,
    pub offset: usize,
    pub ty: TypeInfo,
}

/// Analyses a datatype id (takes the library lock).
pub(crate) fn analyze(tid: hid_t) -> TypeInfo {
    hdf5::sync::sync(|| analyze_at(tid, 0))
}

fn other(size: usize, what: impl Into<String>) -> TypeInfo {
    TypeInfo {
        size,
        kind: Kind::Other(what.into()),
    }
}

/// A datatype id this code opened (`H5Tget_super`, `H5Tget_member_type`, `H5Tcopy`, …), closed
/// when dropped unless [`OwnedType::take`]n. An error value (negative) is never closed.
pub(crate) struct OwnedType(pub(crate) hid_t);

impl Drop for OwnedType {
    fn drop(&mut self) {
        if self.0 >= 0 {
            // SAFETY: the id was opened by this code and is closed exactly once (here, or never
            // after `take`); the library lock is taken (reentrant) for the call.
            hdf5::sync::sync(|| unsafe { H5Tclose(self.0) });
        }
    }
}

impl OwnedType {
    /// Gives up ownership: the caller closes the id.
    fn take(mut self) -> hid_t {
        std::mem::replace(&mut self.0, -1)
    }
}

/// The base type of `tid` when it is a variable-length sequence (`H5T_VLEN`, not a string);
/// `None` for any other type. Takes the library lock.
pub(crate) fn vlen_base(tid: hid_t) -> Option<TypeInfo> {
    hdf5::sync::sync(|| {
        // SAFETY: a by-value query of `tid` under the library lock (module safety notes).
        if unsafe { H5Tget_class(tid) } != H5T_class_t::H5T_VLEN {
            return None;
        }
        super_info(tid, 0)
    })
}

/// The tag of `tid` when it is an opaque type (empty when it has none); `None` for any other
/// type. Takes the library lock.
pub(crate) fn opaque_tag(tid: hid_t) -> Option<String> {
    hdf5::sync::sync(|| {
        // SAFETY: by-value queries of `tid` under the library lock (module safety notes).
        if unsafe { H5Tget_class(tid) } != H5T_class_t::H5T_OPAQUE {
            return None;
        }
        // SAFETY: as above; libhdf5 returns a string it allocated for the caller, or null.
        let p = unsafe { H5Tget_tag(tid) };
        if p.is_null() {
            return Some(String::new());
        }
        // SAFETY: `p` is non-null and NUL-terminated, valid until freed below.
        let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
        // SAFETY: allocated by libhdf5 for the caller, freed once with its allocator.
        unsafe { hdf5_sys::h5::H5free_memory(p.cast()) };
        Some(s)
    })
}

/// The name of member `i` of a compound or enum type (`None` when libhdf5 has none to give).
fn member_name(tid: hid_t, i: u32) -> Option<String> {
    // SAFETY: a by-value query of `tid` under the library lock (see the module's safety notes);
    // it returns a string libhdf5 allocated for the caller, or null.
    let p = unsafe { H5Tget_member_name(tid, i) };
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` is non-null and NUL-terminated (libhdf5 returns a C string) and stays valid
    // until it is freed below.
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    // SAFETY: `p` was allocated by libhdf5 for the caller, who frees it once with the library's
    // own allocator; it is not used afterwards.
    unsafe { hdf5_sys::h5::H5free_memory(p.cast()) };
    Some(s)
}

/// The byte order of an integer type: `Some(true)` for big-endian, `None` for an unusual order.
fn int_order(tid: hid_t, size: usize) -> Option<bool> {
    // SAFETY: a by-value query of `tid` under the library lock (module safety notes).
    match unsafe { H5Tget_order(tid) } {
        H5T_order_t::H5T_ORDER_LE => Some(false),
        H5T_order_t::H5T_ORDER_BE => Some(true),
        H5T_order_t::H5T_ORDER_NONE if size == 1 => Some(false),
        _ if size == 1 => Some(false),
        _ => None,
    }
}

/// Analyses `tid` at nesting depth `depth` (the library lock is held: see [`analyze`]).
fn analyze_at(tid: hid_t, depth: u32) -> TypeInfo {
    // SAFETY: a by-value query of `tid` under the library lock (module safety notes).
    let size = unsafe { H5Tget_size(tid) };
    if depth > 16 {
        return other(size, "datatype nested too deeply");
    }
    if size == 0 {
        return other(0, "datatype of size 0");
    }
    // SAFETY: as above.
    let class = unsafe { H5Tget_class(tid) };
    match class {
        H5T_class_t::H5T_INTEGER => int_info(tid, size, false),
        H5T_class_t::H5T_BITFIELD => int_info(tid, size, true),
        H5T_class_t::H5T_TIME => time_info(tid, size),
        H5T_class_t::H5T_FLOAT => float_info(tid, size),
        H5T_class_t::H5T_ENUM => enum_info(tid, size, depth),
        H5T_class_t::H5T_STRING => string_info(tid, size),
        H5T_class_t::H5T_COMPOUND => compound_info(tid, size, depth),
        H5T_class_t::H5T_ARRAY => array_info(tid, size, depth),
        H5T_class_t::H5T_VLEN => other(size, "variable-length sequence"),
        H5T_class_t::H5T_REFERENCE => other(size, "object/region reference"),
        // Opaque blobs: their bytes, `u8` along a trailing axis (see [`opaque_tag`]).
        H5T_class_t::H5T_OPAQUE => TypeInfo {
            size,
            kind: Kind::Array {
                dims: vec![size as u64],
                base: Box::new(TypeInfo {
                    size: 1,
                    kind: Kind::Int {
                        signed: false,
                        be: false,
                        bitfield: false,
                        nbit: None,
                        time: false,
                    },
                }),
            },
        },
        c => other(size, format!("datatype class {c:?}")),
    }
}

/// An integer or bitfield type of `size` bytes.
fn int_info(tid: hid_t, size: usize, bitfield: bool) -> TypeInfo {
    let what = if bitfield { "bitfield" } else { "integer" };
    if !matches!(size, 1 | 2 | 4 | 8) {
        return other(size, format!("{size}-byte {what}"));
    }
    // SAFETY: by-value queries of `tid` under the library lock (module safety notes).
    let (prec, offset) = unsafe { (H5Tget_precision(tid), H5Tget_offset(tid)) };
    let Ok(off) = usize::try_from(offset) else {
        return other(size, format!("{what} with an unreadable bit offset"));
    };
    let nbit = (prec != size * 8 || off != 0).then_some((prec, off));
    if prec == 0 || off.checked_add(prec).is_none_or(|end| end > size * 8) {
        return other(
            size,
            format!("{what} with {prec}-bit precision at bit offset {off}"),
        );
    }
    let Some(be) = int_order(tid, size) else {
        return other(size, format!("{what} with an unusual byte order"));
    };
    // SAFETY: as above.
    let signed = !bitfield && unsafe { H5Tget_sign(tid) } == H5T_sign_t::H5T_SGN_2;
    TypeInfo {
        size,
        kind: Kind::Int {
            signed,
            // N-bit values are converted by libhdf5 to little-endian on read.
            be: be && nbit.is_none(),
            bitfield,
            nbit,
            time: false,
        },
    }
}

/// An HDF5 time type: libhdf5 defines H5T_UNIX_D32/D64 (LE and BE) with no conversion path;
/// read as the signed integer stored, which [`crate::time`] maps (PyTables' layouts).
fn time_info(tid: hid_t, size: usize) -> TypeInfo {
    if !matches!(size, 4 | 8) {
        return other(size, format!("{}-bit HDF5 time type", size * 8));
    }
    let Some(be) = int_order(tid, size) else {
        return other(size, "HDF5 time type with an unusual byte order");
    };
    TypeInfo {
        size,
        kind: Kind::Int {
            signed: true,
            be,
            bitfield: false,
            nbit: None,
            time: true,
        },
    }
}

/// The analysed base type of an enum or array type (`None` when libhdf5 gives none).
fn super_info(tid: hid_t, depth: u32) -> Option<TypeInfo> {
    // SAFETY: a by-value query of `tid` under the library lock (module safety notes); the new
    // id it returns is owned (closed) by the `OwnedType`.
    let sup = OwnedType(unsafe { H5Tget_super(tid) });
    (sup.0 >= 0).then(|| analyze_at(sup.0, depth + 1))
}

/// An enum type: its integer base and its members.
fn enum_info(tid: hid_t, size: usize, depth: u32) -> TypeInfo {
    let Some(base) = super_info(tid, depth) else {
        return other(size, "enum without a base type");
    };
    let (signed, be) = match base.kind {
        Kind::Int {
            signed,
            be,
            nbit: None,
            time: false,
            ..
        } if base.size == size => (signed, be),
        _ => return other(size, "enum over a non-integer base type"),
    };
    // SAFETY: a by-value query of `tid` under the library lock (module safety notes).
    let n = unsafe { H5Tget_nmembers(tid) };
    if n < 0 {
        return other(size, "enum with unreadable members");
    }
    let mut members = Vec::with_capacity(n as usize);
    for i in 0..n as u32 {
        let name = member_name(tid, i).unwrap_or_default();
        let mut buf = [0u8; 8];
        // SAFETY: libhdf5 writes one value of the enum's type, `size` bytes, into `buf`: the
        // base is an integer of that size (checked above), 1, 2, 4 or 8 bytes, so it fits.
        if unsafe { H5Tget_member_value(tid, i, buf.as_mut_ptr().cast()) } < 0 {
            return other(size, "enum with unreadable member values");
        }
        members.push((name, int_value(&buf[..size], signed, be)));
    }
    let is_bool = size == 1
        && members.len() == 2
        && members.iter().any(|(n, v)| n == "FALSE" && *v == 0)
        && members.iter().any(|(n, v)| n == "TRUE" && *v == 1);
    TypeInfo {
        size,
        kind: Kind::Enum {
            signed,
            be,
            members,
            is_bool,
        },
    }
}

/// A fixed- or variable-length string type.
fn string_info(tid: hid_t, size: usize) -> TypeInfo {
    // SAFETY: by-value queries of `tid` under the library lock (module safety notes).
    let (cset, variable) = unsafe { (H5Tget_cset(tid), H5Tis_variable_str(tid)) };
    let utf8 = cset == H5T_cset_t::H5T_CSET_UTF8;
    if variable > 0 {
        return TypeInfo {
            size,
            kind: Kind::VarStr { utf8 },
        };
    }
    // SAFETY: as above.
    let pad = match unsafe { H5Tget_strpad(tid) } {
        H5T_str_t::H5T_STR_NULLTERM => Padding::NullTerm,
        H5T_str_t::H5T_STR_SPACEPAD => Padding::SpacePad,
        _ => Padding::NullPad,
    };
    TypeInfo {
        size,
        kind: Kind::FixedStr { pad, utf8 },
    }
}

/// A compound type: its members, each inside the record.
fn compound_info(tid: hid_t, size: usize, depth: u32) -> TypeInfo {
    // SAFETY: a by-value query of `tid` under the library lock (module safety notes).
    let n = unsafe { H5Tget_nmembers(tid) };
    if n < 0 {
        return other(size, "compound with unreadable members");
    }
    let mut fields = Vec::with_capacity(n as usize);
    for i in 0..n as u32 {
        let name = member_name(tid, i).unwrap_or_default();
        // SAFETY: by-value queries of `tid` under the library lock; the member type id is a new
        // id owned (closed) by the `OwnedType`.
        let (offset, mt) = unsafe {
            (
                H5Tget_member_offset(tid, i),
                OwnedType(H5Tget_member_type(tid, i)),
            )
        };
        if mt.0 < 0 {
            return other(size, format!("compound member '{name}' unreadable"));
        }
        let ty = analyze_at(mt.0, depth + 1);
        drop(mt);
        if offset.checked_add(ty.size).is_none_or(|end| end > size) {
            return other(size, format!("compound member '{name}' outside the record"));
        }
        fields.push(Field { name, offset, ty });
    }
    TypeInfo {
        size,
        kind: Kind::Compound { fields },
    }
}

/// An array type (`H5T_ARRAY`): its extents and its base type.
fn array_info(tid: hid_t, size: usize, depth: u32) -> TypeInfo {
    // SAFETY: a by-value query of `tid` under the library lock (module safety notes).
    let nd = unsafe { H5Tget_array_ndims(tid) };
    if !(1..=32).contains(&nd) {
        return other(size, "array type with an invalid rank");
    }
    let mut dims = vec![0u64; nd as usize];
    // SAFETY: libhdf5 writes the type's `nd` extents (its rank, read just above) into `dims`,
    // which holds exactly `nd` of them.
    if unsafe { H5Tget_array_dims2(tid, dims.as_mut_ptr()) } < 0 {
        return other(size, "array type with unreadable dimensions");
    }
    let Some(base) = super_info(tid, depth) else {
        return other(size, "array type without a base type");
    };
    let total = dims
        .iter()
        .try_fold(base.size as u64, |a, &d| a.checked_mul(d));
    if total != Some(size as u64) {
        return other(size, "array type whose size does not match its dimensions");
    }
    TypeInfo {
        size,
        kind: Kind::Array {
            dims,
            base: Box::new(base),
        },
    }
}

/// A float type: IEEE half, bfloat16, single or double (checked bit layouts), else `Other`.
fn float_info(tid: hid_t, size: usize) -> TypeInfo {
    // SAFETY: a by-value query of `tid` under the library lock (module safety notes).
    let be = match unsafe { H5Tget_order(tid) } {
        H5T_order_t::H5T_ORDER_LE => false,
        H5T_order_t::H5T_ORDER_BE => true,
        _ => return other(size, "float with an unusual byte order (VAX or mixed)"),
    };
    let (mut spos, mut epos, mut esize, mut mpos, mut msize) =
        (0usize, 0usize, 0usize, 0usize, 0usize);
    // SAFETY: as above; libhdf5 writes one `size_t` through each of the five pointers, all to
    // locals of that type.
    if unsafe { H5Tget_fields(tid, &mut spos, &mut epos, &mut esize, &mut mpos, &mut msize) } < 0 {
        return other(size, "float with unreadable bit fields");
    }
    // SAFETY: by-value queries of `tid` under the library lock (module safety notes).
    let (ebias, prec, off, norm) = unsafe {
        (
            H5Tget_ebias(tid),
            H5Tget_precision(tid),
            H5Tget_offset(tid),
            H5Tget_norm(tid),
        )
    };
    let layout = (size, spos, epos, esize, mpos, msize, ebias);
    let dtype = match layout {
        (2, 15, 10, 5, 0, 10, 15) => ElementType::F16,
        (2, 15, 7, 8, 0, 7, 127) => ElementType::BF16,
        (4, 31, 23, 8, 0, 23, 127) => ElementType::F32,
        (8, 63, 52, 11, 0, 52, 1023) => ElementType::F64,
        _ => {
            return other(
                size,
                format!(
                    "{}-bit float with a non-IEEE layout (sign {spos}, exponent {epos}/{esize}, mantissa {mpos}/{msize}, bias {ebias})",
                    size * 8
                ),
            )
        }
    };
    if prec != size * 8 || off != 0 || norm != H5T_norm_t::H5T_NORM_IMPLIED {
        return other(size, format!("{}-bit float with padding bits", size * 8));
    }
    TypeInfo {
        size,
        kind: Kind::Float { dtype, be },
    }
}

/// Whether a type has integers with padding bits anywhere (compound fields, array bases).
pub(crate) fn has_nbit(t: &TypeInfo) -> bool {
    match &t.kind {
        Kind::Int { nbit, .. } => nbit.is_some(),
        Kind::Compound { fields } => fields.iter().any(|f| has_nbit(&f.ty)),
        Kind::Array { base, .. } => has_nbit(base),
        _ => false,
    }
}

/// The memory type to read a type with N-bit integers in: the same layout (sizes and compound
/// offsets unchanged) with every N-bit integer replaced by the full-width little-endian integer
/// of its container, so that libhdf5's conversion shifts the value down and sign-extends it.
/// `None` when the type has no N-bit integer or the library refuses a step. The caller owns
/// (closes) the returned id. Takes the library lock.
pub(crate) fn memory_type(tid: hid_t) -> Option<hid_t> {
    hdf5::sync::sync(|| full_width_type(tid, 0).map(OwnedType::take))
}

/// [`memory_type`] of `tid` at nesting depth `depth` (the library lock is held).
fn full_width_type(tid: hid_t, depth: u32) -> Option<OwnedType> {
    use hdf5_sys::h5t::H5Tcopy;
    if depth > 16 {
        return None;
    }
    // SAFETY: a by-value query of `tid` under the library lock (module safety notes).
    let class = unsafe { H5Tget_class(tid) };
    match class {
        H5T_class_t::H5T_INTEGER | H5T_class_t::H5T_BITFIELD => full_width_int(tid),
        H5T_class_t::H5T_COMPOUND => full_width_compound(tid, depth),
        H5T_class_t::H5T_ARRAY => full_width_array(tid, depth),
        // SAFETY: as above; the copy is a new id owned (closed) by the `OwnedType`.
        _ => Some(OwnedType(unsafe { H5Tcopy(tid) })).filter(|t| t.0 >= 0),
    }
}

/// A copy of the integer type `tid` with its padding bits removed: full precision, offset 0,
/// little-endian.
fn full_width_int(tid: hid_t) -> Option<OwnedType> {
    use hdf5_sys::h5t::{H5Tcopy, H5Tset_offset, H5Tset_order, H5Tset_precision};
    // SAFETY: a by-value call on `tid` under the library lock (module safety notes); the copy
    // is a new id owned (closed) by the `OwnedType`.
    let t = OwnedType(unsafe { H5Tcopy(tid) });
    if t.0 < 0 {
        return None;
    }
    // SAFETY: as above.
    let bits = unsafe { H5Tget_size(tid) }.checked_mul(8)?;
    // SAFETY: by-value calls on the copy this function owns (not yet shared), under the lock.
    let ok = unsafe {
        H5Tset_offset(t.0, 0) >= 0
            && H5Tset_precision(t.0, bits) >= 0
            && H5Tset_order(t.0, H5T_order_t::H5T_ORDER_LE) >= 0
    };
    ok.then_some(t)
}

/// A compound of the same size, member names and offsets as `tid`, each member's type
/// replaced by its [`full_width_type`] (or kept when it has none).
fn full_width_compound(tid: hid_t, depth: u32) -> Option<OwnedType> {
    use hdf5_sys::h5t::{H5Tcreate, H5Tinsert};
    // SAFETY: by-value queries of `tid` under the library lock (module safety notes).
    let (size, n) = unsafe { (H5Tget_size(tid), H5Tget_nmembers(tid)) };
    let n = u32::try_from(n).ok()?;
    // SAFETY: a by-value call under the lock; the new type is owned by the `OwnedType`.
    let t = OwnedType(unsafe { H5Tcreate(H5T_class_t::H5T_COMPOUND, size) });
    if t.0 < 0 {
        return None;
    }
    for i in 0..n {
        // SAFETY: by-value queries of `tid` under the lock; the member type is a new id owned
        // by the `OwnedType`, the name a string libhdf5 allocated for us (freed below).
        let (m, offset, name) = unsafe {
            (
                OwnedType(H5Tget_member_type(tid, i)),
                H5Tget_member_offset(tid, i),
                H5Tget_member_name(tid, i),
            )
        };
        if m.0 < 0 || name.is_null() {
            if !name.is_null() {
                // SAFETY: `name` was allocated by libhdf5 for us and is freed once.
                unsafe { hdf5_sys::h5::H5free_memory(name.cast()) };
            }
            return None;
        }
        let converted = full_width_type(m.0, depth + 1);
        let mt = converted.as_ref().map_or(m.0, |c| c.0);
        // SAFETY: `t` and `mt` are open type ids (owned here), `name` is a live NUL-terminated
        // string (libhdf5 copies it); under the lock. Then `name` is freed once, with the
        // library's allocator that made it, and not used again.
        let rc = unsafe {
            let rc = H5Tinsert(t.0, name, offset, mt);
            hdf5_sys::h5::H5free_memory(name.cast());
            rc
        };
        if rc < 0 {
            return None;
        }
    }
    Some(t)
}

/// An array type of the same extents as `tid` over the [`full_width_type`] of its base.
fn full_width_array(tid: hid_t, depth: u32) -> Option<OwnedType> {
    use hdf5_sys::h5t::H5Tarray_create2;
    // SAFETY: a by-value query of `tid` under the library lock (module safety notes).
    let nd = unsafe { H5Tget_array_ndims(tid) };
    let ndu = usize::try_from(nd).ok().filter(|n| (1..=32).contains(n))?;
    let mut dims = vec![0u64; ndu];
    // SAFETY: libhdf5 writes the type's `nd` extents into `dims`, which holds `nd` of them.
    if unsafe { H5Tget_array_dims2(tid, dims.as_mut_ptr()) } < 0 {
        return None;
    }
    // SAFETY: a by-value query under the lock; the base type is a new id owned by the
    // `OwnedType`.
    let sup = OwnedType(unsafe { H5Tget_super(tid) });
    if sup.0 < 0 {
        return None;
    }
    let base = full_width_type(sup.0, depth + 1)?;
    // SAFETY: `base` is an open type id, `dims` holds the `nd` extents libhdf5 reads; under the
    // lock. The new type is owned by the `OwnedType`.
    let t = OwnedType(unsafe { H5Tarray_create2(base.0, nd as u32, dims.as_ptr()) });
    (t.0 >= 0).then_some(t)
}

/// An integer of 1..8 bytes as i128.
pub(crate) fn int_value(b: &[u8], signed: bool, be: bool) -> i128 {
    let mut v = [0u8; 8];
    let n = b.len().min(8);
    if be {
        for i in 0..n {
            v[i] = b[n - 1 - i];
        }
    } else {
        v[..n].copy_from_slice(&b[..n]);
    }
    let u = u64::from_le_bytes(v);
    if signed && n > 0 && n < 8 && v[n - 1] & 0x80 != 0 {
        let shift = 64 - 8 * n as u32;
        (((u << shift) as i64) >> shift) as i128
    } else if signed {
        u as i64 as i128
    } else {
        u as i128
    }
}

/// The element type of a numeric leaf type (int, float, enum), with its byte order.
pub(crate) fn numeric_type(t: &TypeInfo) -> Option<(ElementType, bool)> {
    let int = |size: usize, signed: bool| -> Option<ElementType> {
        Some(match (size, signed) {
            (1, true) => ElementType::I8,
            (1, false) => ElementType::U8,
            (2, true) => ElementType::I16,
            (2, false) => ElementType::U16,
            (4, true) => ElementType::I32,
            (4, false) => ElementType::U32,
            (8, true) => ElementType::I64,
            (8, false) => ElementType::U64,
            _ => return None,
        })
    };
    match &t.kind {
        Kind::Int { signed, be, .. } => Some((int(t.size, *signed)?, *be)),
        Kind::Float { dtype, be } => Some((*dtype, *be)),
        Kind::Enum {
            is_bool: true, be, ..
        } => Some((ElementType::Bool, *be)),
        Kind::Enum { signed, be, .. } => Some((int(t.size, *signed)?, *be)),
        _ => None,
    }
}

/// Whether the type is a complex number as h5py writes one: a compound of exactly two f32 or
/// two f64 (one type, either byte order) named `r`/`i` or `real`/`imag`, in either order. Returns
/// the complex type, the parts' byte order and where the parts lie.
fn complex_pair(fields: &[Field]) -> Option<(ElementType, bool, Parts)> {
    let [a, b] = fields else {
        return None;
    };
    let Kind::Float { dtype, be } = a.ty.kind else {
        return None;
    };
    let complex = dtype.complex_of()?;
    if b.ty != a.ty {
        return None;
    }
    let (re, im) = match (a.name.as_str(), b.name.as_str()) {
        ("r", "i") | ("real", "imag") => (a, b),
        ("i", "r") | ("imag", "real") => (b, a),
        _ => return None,
    };
    let parts = Parts {
        real: re.offset as u64,
        imag: im.offset as u64,
    };
    Some((complex, be, parts))
}

/// The type record of an attribute of complex numbers as h5py writes them (a compound of two
/// f32 or f64 named `r`/`i` or `real`/`imag`), whose values [`decode_attr`] gives as JSON text:
/// `{"count": n, "type": {"class": "compound", …}}`, the form the netCDF exporter reads from
/// the fact `nc_attr_type:<attribute>`, so that an export writes the attribute as that
/// compound again, which h5py reads as complex numbers. The type is named as nc-complex names
/// complex types. `None` for other types, and for a one-element array (its JSON is a list).
pub(crate) fn complex_attr_record(t: &TypeInfo, n: usize, scalar: bool) -> Option<String> {
    let Kind::Compound { fields } = &t.kind else {
        return None;
    };
    let (complex, _, _) = complex_pair(fields)?;
    let (part, name) = match complex {
        ElementType::C64 => ("f32", "_PFNC_FLOAT_COMPLEX_TYPE"),
        ElementType::C128 => ("f64", "_PFNC_DOUBLE_COMPLEX_TYPE"),
        _ => return None,
    };
    if !scalar && n == 1 {
        return None;
    }
    // The field names are `r`/`i` or `real`/`imag` (`complex_pair`): no JSON escaping needed.
    let fields: Vec<String> = fields
        .iter()
        .map(|f| {
            format!(
                r#"{{"name":"{}","offset":{},"type":"{part}"}}"#,
                f.name, f.offset
            )
        })
        .collect();
    Some(format!(
        r#"{{"count":{n},"type":{{"class":"compound","name":"{name}","size":{},"fields":[{}]}}}}"#,
        t.size,
        fields.join(",")
    ))
}

/// What one leaf of a flattened datatype delivers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LeafKind {
    /// Numbers of this element type, swapped to little-endian when `be` (for a complex type:
    /// each part).
    Numeric {
        /// The leaf's type (for a complex number: the compound of its two parts).
        ty: TypeInfo,
        dtype: ElementType,
        be: bool,
        /// Enum `NAME=value` pairs (not for bool).
        enum_mapping: Option<Vec<(String, i128)>>,
        /// Set for a complex number (`C64` / `C128`): where its parts are in each element,
        /// which may be imaginary first or padded.
        complex: Option<Parts>,
    },
    /// Strings (fixed or variable length) of this type.
    Text(TypeInfo),
    /// Nothing deliverable; the reason.
    Unsupported(String),
}

/// One numeric or text part of a record: for compounds one per field (its path), for arrays
/// the whole array as trailing axes of its place; notes to record for it (compound field,
/// renamed field…).
pub(crate) type Leaf = record::Leaf<LeafKind>;

/// A whole-record leaf of little-endian `dtype` values (data gathered in memory).
pub(crate) fn le_leaf(dtype: ElementType) -> Leaf {
    Leaf {
        path: Vec::new(),
        place: Place::whole(),
        kind: LeafKind::Numeric {
            ty: TypeInfo {
                size: dtype.size(),
                kind: Kind::Float { dtype, be: false },
            },
            dtype,
            be: false,
            enum_mapping: None,
            complex: None,
        },
        notes: Vec::new(),
    }
}

/// Whether the leaf is the whole record (no compound field, no array) and its elements are
/// stored as they are delivered up to byte order (so records can be copied as they are, then
/// swapped per [`LeafKind::swap_width`]): numeric, not a complex number stored imaginary part
/// first or with padding.
pub(crate) fn is_whole(leaf: &Leaf, record: usize) -> bool {
    let LeafKind::Numeric {
        ty, dtype, complex, ..
    } = &leaf.kind
    else {
        return false;
    };
    // Whether each element's bytes are the delivered element's, up to byte order.
    let in_order = match complex {
        None => true,
        Some(p) => {
            let half = dtype.size() as u64 / 2;
            p.real == 0 && p.imag == half && ty.size == dtype.size()
        }
    };
    leaf.place.is_whole() && ty.size == record && in_order
}

impl LeafKind {
    /// The width of the numbers to byte-swap in the delivered elements: 0 when nothing is
    /// swapped (little-endian, single bytes, not numeric), else the element size, or the size
    /// of one part of a complex element.
    pub fn swap_width(&self) -> usize {
        match self {
            LeafKind::Numeric {
                dtype, be: true, ..
            } => {
                let w = dtype.complex_component().unwrap_or(*dtype).size();
                if w > 1 {
                    w
                } else {
                    0
                }
            }
            _ => 0,
        }
    }

    /// Whether the leaf holds 64-bit HDF5 time values, delivered decoded ([`crate::time`]):
    /// their stored bytes are not the delivered ones.
    pub fn is_time64(&self) -> bool {
        matches!(self, LeafKind::Numeric { ty, .. }
            if ty.size == 8 && matches!(ty.kind, Kind::Int { time: true, .. }))
    }

    /// How a numeric leaf's elements are delivered: their size, their parts (a complex
    /// number) and the byte-order fix (never a bool normalisation: HDF5 enum booleans are
    /// delivered as stored). `None` for a leaf that is not numeric.
    pub fn element(&self) -> Option<Element> {
        let LeafKind::Numeric {
            dtype, be, complex, ..
        } = self
        else {
            return None;
        };
        Some(Element {
            size: dtype.size(),
            parts: *complex,
            fix: Fix::order(*dtype, *be),
        })
    }
}

/// Flattens a dataset type into leaves.
pub(crate) fn flatten(t: &TypeInfo) -> Vec<Leaf> {
    let mut out = Vec::new();
    flatten_at(t, &Place::whole(), Vec::new(), Vec::new(), &mut out);
    out
}

fn flatten_at(
    t: &TypeInfo,
    place: &Place,
    path: Vec<String>,
    notes: Vec<String>,
    out: &mut Vec<Leaf>,
) {
    let leaf = |kind: LeafKind, out: &mut Vec<Leaf>| {
        out.push(Leaf {
            path: path.clone(),
            place: place.clone(),
            kind,
            notes: notes.clone(),
        })
    };
    match &t.kind {
        Kind::Int { .. } | Kind::Float { .. } | Kind::Enum { .. } => {
            let Some((dtype, be)) = numeric_type(t) else {
                return leaf(LeafKind::Unsupported("integer of an odd size".into()), out);
            };
            let enum_mapping = match &t.kind {
                Kind::Enum {
                    members,
                    is_bool: false,
                    ..
                } => Some(members.clone()),
                _ => None,
            };
            leaf(
                LeafKind::Numeric {
                    ty: t.clone(),
                    dtype,
                    be,
                    enum_mapping,
                    complex: None,
                },
                out,
            )
        }
        Kind::FixedStr { .. } | Kind::VarStr { .. } => leaf(LeafKind::Text(t.clone()), out),
        Kind::Other(what) => leaf(LeafKind::Unsupported(what.clone()), out),
        Kind::Array { dims, base } => {
            let at = place.with_array(dims, base.size as u64);
            flatten_at(base, &at, path, notes, out);
        }
        Kind::Compound { fields } => {
            // A complex number is one leaf (the engine stores its parts).
            if let Some((dtype, be, parts)) = complex_pair(fields) {
                out.push(Leaf {
                    path,
                    place: place.clone(),
                    kind: LeafKind::Numeric {
                        ty: t.clone(),
                        dtype,
                        be,
                        enum_mapping: None,
                        complex: Some(parts),
                    },
                    notes,
                });
                return;
            }
            for (i, f) in fields.iter().enumerate() {
                let mut n = notes.clone();
                let name = tet_source::fields::compound_field_name(&f.name, i, &mut n);
                n.push(format!("field '{}' of a compound record", f.name));
                let mut p = path.clone();
                p.push(name);
                flatten_at(&f.ty, &place.shifted(f.offset as u64), p, n, out);
            }
        }
    }
}

/// Decodes the bytes of a string element. `lossy` is set when invalid UTF-8 was replaced.
pub(crate) fn decode_text(b: &[u8], lossy: &mut bool) -> String {
    match std::str::from_utf8(b) {
        Ok(s) => s.to_string(),
        Err(_) => {
            *lossy = true;
            String::from_utf8_lossy(b).into_owned()
        }
    }
}

/// Reads one string element at `off` of `rec`.
///
/// # Safety
/// For variable-length strings `rec` must come from an `H5Dread`/`H5Aread` with the type the
/// leaf was analysed from, not yet reclaimed: the bytes hold a `char *`.
pub(crate) unsafe fn string_at(t: &TypeInfo, rec: &[u8], off: usize, lossy: &mut bool) -> String {
    match &t.kind {
        Kind::FixedStr { pad, .. } => {
            let Some(b) = rec.get(off..off + t.size) else {
                return String::new();
            };
            let b = match pad {
                Padding::NullTerm => &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())],
                Padding::NullPad => &b[..b.iter().rposition(|&c| c != 0).map_or(0, |p| p + 1)],
                Padding::SpacePad => {
                    let b = &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())];
                    &b[..b.iter().rposition(|&c| c != b' ').map_or(0, |p| p + 1)]
                }
            };
            decode_text(b, lossy)
        }
        Kind::VarStr { .. } => {
            const P: usize = std::mem::size_of::<usize>();
            let Some(b) = rec.get(off..off + P) else {
                return String::new();
            };
            let mut a = [0u8; P];
            a.copy_from_slice(b);
            let p = usize::from_ne_bytes(a) as *const c_char;
            if p.is_null() {
                return String::new();
            }
            // SAFETY: the caller guarantees the record was read by libhdf5 in this type and not
            // yet reclaimed, so the non-null pointer is a live NUL-terminated `char *` it
            // allocated.
            let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
            decode_text(bytes, lossy)
        }
        _ => String::new(),
    }
}

/// IEEE half → f32 (exact).
pub(crate) fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = match exp {
        0 if man == 0 => sign,
        0 => {
            // Subnormal: normalise.
            let mut e = 127 - 15 + 1;
            let mut m = man;
            while m & 0x400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | ((e as u32) << 23) | ((m & 0x3ff) << 13)
        }
        31 => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// The little-endian bytes of one numeric element at `off` (swapped when `be`).
fn le_elem<'a>(rec: &'a [u8], off: usize, size: usize, be: bool, tmp: &'a mut [u8; 8]) -> &'a [u8] {
    let b = &rec[off..off + size];
    if be && size > 1 {
        for i in 0..size {
            tmp[i] = b[size - 1 - i];
        }
        &tmp[..size]
    } else {
        b
    }
}

/// A typed attribute value of numeric leaves (all elements in C order).
fn numeric_attr(dtype: ElementType, le: &[u8]) -> AttrValue {
    macro_rules! v {
        ($t:ty, $n:expr) => {
            le.chunks_exact($n)
                .map(|c| <$t>::from_le_bytes(c.try_into().unwrap_or([0; $n])))
                .collect()
        };
    }
    match dtype {
        ElementType::Bool | ElementType::U8 => AttrValue::U8(le.to_vec()),
        ElementType::I8 => AttrValue::I8(le.iter().map(|&b| b as i8).collect()),
        ElementType::I16 => AttrValue::I16(v!(i16, 2)),
        ElementType::U16 => AttrValue::U16(v!(u16, 2)),
        ElementType::I32 => AttrValue::I32(v!(i32, 4)),
        ElementType::U32 => AttrValue::U32(v!(u32, 4)),
        ElementType::I64 => AttrValue::I64(v!(i64, 8)),
        ElementType::U64 => AttrValue::U64(v!(u64, 8)),
        // Not reached for complex values (`decode_attr` gives them as JSON text); were they
        // given here, they would be their parts, real then imaginary, interleaved.
        ElementType::F32 | ElementType::C64 => AttrValue::F32(v!(f32, 4)),
        ElementType::F64 | ElementType::C128 => AttrValue::F64(v!(f64, 8)),
        ElementType::F16 => AttrValue::F32(
            le.chunks_exact(2)
                .map(|c| f16_to_f32(u16::from_le_bytes([c[0], c[1]])))
                .collect(),
        ),
        ElementType::BF16 => AttrValue::F32(
            le.chunks_exact(2)
                .map(|c| f32::from_bits((u16::from_le_bytes([c[0], c[1]]) as u32) << 16))
                .collect(),
        ),
    }
}

/// The outcome of decoding an attribute.
pub(crate) enum AttrOutcome {
    Value(AttrValue, Option<String>),
    Skip(String),
}

/// Decodes `n` records of type `t` (read in the attribute's own type) into an attribute value.
///
/// # Safety
/// As for [`string_at`]: variable-length parts must still be live.
pub(crate) unsafe fn decode_attr(
    t: &TypeInfo,
    bytes: &[u8],
    n: usize,
    scalar: bool,
) -> AttrOutcome {
    let leaves = flatten(t);
    // Complex values are compounds: JSON text as the others.
    let single = leaves.len() == 1
        && leaves[0].path.is_empty()
        && !matches!(
            leaves[0].kind,
            LeafKind::Numeric {
                complex: Some(_),
                ..
            }
        );
    // The records of the attribute (all there: libhdf5 read them).
    let Some(recs) = n.checked_mul(t.size).and_then(|len| bytes.get(..len)) else {
        return AttrOutcome::Skip("attribute shorter than its records".into());
    };
    let record_at = |r: usize| recs.get(r * t.size..(r + 1) * t.size).unwrap_or(&[]);
    if single {
        let leaf = &leaves[0];
        let zeros = vec![0u64; leaf.place.inner.len()];
        let dims = leaf.place.inner_shape();
        match &leaf.kind {
            LeafKind::Numeric { ty, dtype, be, .. } => {
                let es = ty.size;
                // Inside its record, a leaf's elements take at most the record's bytes.
                let len = dims.iter().try_fold(n.saturating_mul(es), |a, &d| {
                    a.checked_mul(usize::try_from(d).ok()?)
                });
                let Some(len) = len.filter(|_| leaf.place.fits(t.size as u64, es as u64)) else {
                    return AttrOutcome::Skip(format!(
                        "attribute of {}: field outside its record",
                        describe(t)
                    ));
                };
                let mut le = vec![0u8; len];
                let elem = Element::plain(es, Fix::order(*dtype, *be));
                let got = record::gather(recs, t.size, &leaf.place, &zeros, &dims, elem, &mut le);
                if let Err(e) = got {
                    return AttrOutcome::Skip(format!("attribute of {}: {e}", describe(t)));
                }
                if leaf.kind.is_time64() {
                    if let Err(e) = crate::time::decode_in_place(&mut le) {
                        return AttrOutcome::Skip(e.error("attribute").to_string());
                    }
                    return AttrOutcome::Value(
                        numeric_attr(*dtype, &le),
                        Some(format!(
                            "64-bit HDF5 time values given as {}",
                            crate::time::UNITS_MICROSECONDS
                        )),
                    );
                }
                let note = match dtype {
                    ElementType::F16 => Some("half-precision values given as f32".to_string()),
                    ElementType::BF16 => Some("bfloat16 values given as f32".to_string()),
                    _ => None,
                };
                return AttrOutcome::Value(numeric_attr(*dtype, &le), note);
            }
            LeafKind::Text(ty) => {
                let mut lossy = false;
                let mut vals = Vec::new();
                for r in 0..n {
                    let rec = record_at(r);
                    let each = leaf.place.for_each(&zeros, &dims, |off| {
                        // SAFETY: `rec` is a record of `bytes`, whose variable-length parts the
                        // caller keeps live (this function's contract), and `ty` is the type of
                        // the string at `off`.
                        vals.push(unsafe { string_at(ty, rec, off, &mut lossy) });
                    });
                    if let Err(e) = each {
                        return AttrOutcome::Skip(format!("attribute of {}: {e}", describe(t)));
                    }
                }
                let note = lossy.then(|| "invalid UTF-8 replaced by U+FFFD".to_string());
                let v = if scalar && vals.len() == 1 {
                    AttrValue::Text(vals.pop().unwrap_or_default())
                } else {
                    AttrValue::TextList(vals)
                };
                return AttrOutcome::Value(v, note);
            }
            LeafKind::Unsupported(why) => return AttrOutcome::Skip(format!("{why} attribute")),
        }
    }
    // Compound (or nested) values: JSON text.
    let mut parts = Vec::with_capacity(n);
    for r in 0..n {
        let rec = record_at(r);
        // SAFETY: `rec` is a record of type `t` whose variable-length parts the caller keeps
        // live (this function's contract).
        match unsafe { json_of(t, rec, 0) } {
            Ok(s) => parts.push(s),
            Err(why) => return AttrOutcome::Skip(format!("compound attribute with {why}")),
        }
    }
    let text = if scalar && parts.len() == 1 {
        parts.pop().unwrap_or_default()
    } else {
        format!("[{}]", parts.join(","))
    };
    AttrOutcome::Value(
        AttrValue::Text(text),
        Some("compound value given as JSON text".into()),
    )
}

/// Why a compound value has no JSON rendering (the attribute is then skipped with this reason).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum NoJson {
    /// The record is shorter than its type.
    #[error("a truncated record")]
    Truncated,
    /// An integer of a size no element type has.
    #[error("an odd integer size")]
    OddInteger,
    /// A member of a type with no JSON form (its description).
    #[error("a member of type {0}")]
    Member(String),
}

/// A JSON rendering of one value of type `t` at `off` of `rec`.
///
/// # Safety
/// As for [`string_at`].
unsafe fn json_of(t: &TypeInfo, rec: &[u8], off: usize) -> Result<String, NoJson> {
    if rec.len() < off + t.size {
        return Err(NoJson::Truncated);
    }
    let mut tmp = [0u8; 8];
    match &t.kind {
        Kind::Int { .. } | Kind::Enum { .. } | Kind::Float { .. } => {
            let (dtype, be) = numeric_type(t).ok_or(NoJson::OddInteger)?;
            let b = le_elem(rec, off, t.size, be, &mut tmp);
            Ok(match dtype {
                ElementType::F16 => {
                    json_text::float(f16_to_f32(u16::from_le_bytes([b[0], b[1]])) as f64)
                }
                ElementType::BF16 => json_text::float(f32::from_bits(
                    (u16::from_le_bytes([b[0], b[1]]) as u32) << 16,
                ) as f64),
                ElementType::F32 => {
                    json_text::float(f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64)
                }
                ElementType::F64 => {
                    json_text::float(f64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
                }
                d => {
                    let signed = matches!(
                        d,
                        ElementType::I8 | ElementType::I16 | ElementType::I32 | ElementType::I64
                    );
                    int_value(b, signed, false).to_string()
                }
            })
        }
        Kind::FixedStr { .. } | Kind::VarStr { .. } => {
            let mut lossy = false;
            // SAFETY: the string of type `t` at `off` of `rec`, live (this function's contract).
            Ok(json_text::string(&unsafe {
                string_at(t, rec, off, &mut lossy)
            }))
        }
        Kind::Compound { fields } => {
            let mut parts = Vec::with_capacity(fields.len());
            for f in fields {
                // SAFETY: the member of type `f.ty` at its offset in the value of type `t` at
                // `off` of `rec`, live (this function's contract).
                let value = unsafe { json_of(&f.ty, rec, off + f.offset) }?;
                parts.push(format!("{}:{}", json_text::string(&f.name), value));
            }
            Ok(format!("{{{}}}", parts.join(",")))
        }
        Kind::Array { dims, base } => {
            /// The JSON of an array of extents `dims` over `base` at `off` of `rec`.
            ///
            /// # Safety
            /// As for [`string_at`]: variable-length parts of `rec` must still be live.
            unsafe fn nest(
                dims: &[u64],
                base: &TypeInfo,
                rec: &[u8],
                off: usize,
            ) -> Result<String, NoJson> {
                if dims.is_empty() {
                    // SAFETY: a value of type `base` in `rec`, live (this function's contract).
                    return unsafe { json_of(base, rec, off) };
                }
                let stride = dims[1..]
                    .iter()
                    .fold(base.size, |a, &d| a.saturating_mul(d as usize));
                let mut parts = Vec::new();
                for i in 0..dims[0] as usize {
                    // SAFETY: a sub-array of the live array at `off` (this function's contract).
                    parts.push(unsafe { nest(&dims[1..], base, rec, off + i * stride) }?);
                }
                Ok(format!("[{}]", parts.join(",")))
            }
            // SAFETY: the array of type `t` at `off` of `rec`, live (this function's contract).
            unsafe { nest(dims, base, rec, off) }
        }
        Kind::Other(what) => Err(NoJson::Member(what.clone())),
    }
}

/// A short description of a type for messages (`f32`, `enum(u8)`, `compound`, `S12`, …).
pub(crate) fn describe(t: &TypeInfo) -> String {
    match &t.kind {
        Kind::Int { bitfield: true, .. } => format!("bitfield{}", t.size * 8),
        Kind::Int { time: true, .. } => format!("time{}", t.size * 8),
        Kind::Int {
            nbit: Some((prec, off)),
            ..
        } => format!(
            "{}{prec}@{off} in {}",
            if numeric_type(t).is_some_and(|(d, _)| d.name().starts_with('i')) {
                "i"
            } else {
                "u"
            },
            numeric_type(t).map(|(d, _)| d.name()).unwrap_or("?")
        ),
        Kind::Enum { is_bool: true, .. } => "bool".into(),
        Kind::Enum { .. } => format!(
            "enum({})",
            numeric_type(t).map(|(d, _)| d.name()).unwrap_or("?")
        ),
        Kind::Int { .. } | Kind::Float { .. } => numeric_type(t)
            .map(|(d, _)| d.name().to_string())
            .unwrap_or_else(|| "?".into()),
        Kind::FixedStr { .. } => format!("S{}", t.size),
        Kind::VarStr { .. } => "vlen_str".into(),
        Kind::Compound { .. } => "compound".into(),
        Kind::Array { dims, base } => format!("{}{dims:?}", describe(base)),
        Kind::Other(w) => w.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints_sign_extend() {
        assert_eq!(int_value(&[0xff], true, false), -1);
        assert_eq!(int_value(&[0xff], false, false), 255);
        assert_eq!(int_value(&[0xff, 0xfe], true, true), -2);
        assert_eq!(int_value(&[0xff; 8], false, false), u64::MAX as i128);
        assert_eq!(int_value(&[0xff; 8], true, false), -1);
    }

    #[test]
    fn half_floats() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert_eq!(f16_to_f32(0x03ff), 1023.0 * 2f32.powi(-24));
        assert!(f16_to_f32(0x7e00).is_nan());
        assert_eq!(f16_to_f32(0xfc00), f32::NEG_INFINITY);
        assert_eq!(f16_to_f32(0x8000).to_bits(), 0x8000_0000);
    }
}
