//! HDF5 datatypes: analysis with raw `H5T` calls, flattening into numeric and text leaves, and
//! decoding of values read in the file's own type (no library conversion).

use std::ffi::CStr;
use std::os::raw::c_char;

use hdf5_sys::h5i::hid_t;
use hdf5_sys::h5t::{
    H5T_class_t, H5T_cset_t, H5T_norm_t, H5T_order_t, H5T_sign_t, H5T_str_t, H5Tclose,
    H5Tget_array_dims2, H5Tget_array_ndims, H5Tget_class, H5Tget_cset, H5Tget_ebias, H5Tget_fields,
    H5Tget_member_name, H5Tget_member_offset, H5Tget_member_type, H5Tget_member_value,
    H5Tget_nmembers, H5Tget_norm, H5Tget_offset, H5Tget_order, H5Tget_precision, H5Tget_sign,
    H5Tget_size, H5Tget_strpad, H5Tget_super, H5Tis_variable_str,
};
use tet_source::{AttrValue, ElementType};

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
        /// An HDF5 time (`H5T_TIME`, seconds since the epoch as libhdf5 defines it) delivered
        /// as its stored integer.
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

/// Takes ownership of a C string allocated by HDF5.
fn take_name(p: *mut c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    unsafe { hdf5_sys::h5::H5free_memory(p.cast()) };
    Some(s)
}

fn int_order(tid: hid_t, size: usize) -> Option<bool> {
    match unsafe { H5Tget_order(tid) } {
        H5T_order_t::H5T_ORDER_LE => Some(false),
        H5T_order_t::H5T_ORDER_BE => Some(true),
        H5T_order_t::H5T_ORDER_NONE if size == 1 => Some(false),
        _ if size == 1 => Some(false),
        _ => None,
    }
}

fn analyze_at(tid: hid_t, depth: u32) -> TypeInfo {
    let size = unsafe { H5Tget_size(tid) };
    if depth > 16 {
        return other(size, "datatype nested too deeply");
    }
    if size == 0 {
        return other(0, "datatype of size 0");
    }
    let class = unsafe { H5Tget_class(tid) };
    match class {
        H5T_class_t::H5T_INTEGER | H5T_class_t::H5T_BITFIELD => {
            let bitfield = class == H5T_class_t::H5T_BITFIELD;
            let what = if bitfield { "bitfield" } else { "integer" };
            if !matches!(size, 1 | 2 | 4 | 8) {
                return other(size, format!("{size}-byte {what}"));
            }
            let prec = unsafe { H5Tget_precision(tid) };
            let Ok(off) = usize::try_from(unsafe { H5Tget_offset(tid) }) else {
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
        H5T_class_t::H5T_TIME => {
            // libhdf5 defines H5T_UNIX_D32/D64 (LE and BE): a time_t-like signed count of
            // seconds, with no conversion path; the stored integer is the value.
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
        H5T_class_t::H5T_FLOAT => float_info(tid, size),
        H5T_class_t::H5T_ENUM => {
            let sup = unsafe { H5Tget_super(tid) };
            if sup < 0 {
                return other(size, "enum without a base type");
            }
            let base = analyze_at(sup, depth + 1);
            unsafe { H5Tclose(sup) };
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
            let n = unsafe { H5Tget_nmembers(tid) };
            if n < 0 {
                return other(size, "enum with unreadable members");
            }
            let mut members = Vec::with_capacity(n as usize);
            for i in 0..n as u32 {
                let name = take_name(unsafe { H5Tget_member_name(tid, i) }).unwrap_or_default();
                let mut buf = [0u8; 8];
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
        H5T_class_t::H5T_STRING => {
            let utf8 = unsafe { H5Tget_cset(tid) } == H5T_cset_t::H5T_CSET_UTF8;
            if unsafe { H5Tis_variable_str(tid) } > 0 {
                TypeInfo {
                    size,
                    kind: Kind::VarStr { utf8 },
                }
            } else {
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
        }
        H5T_class_t::H5T_COMPOUND => {
            let n = unsafe { H5Tget_nmembers(tid) };
            if n < 0 {
                return other(size, "compound with unreadable members");
            }
            let mut fields = Vec::with_capacity(n as usize);
            for i in 0..n as u32 {
                let name = take_name(unsafe { H5Tget_member_name(tid, i) }).unwrap_or_default();
                let offset = unsafe { H5Tget_member_offset(tid, i) };
                let mt = unsafe { H5Tget_member_type(tid, i) };
                if mt < 0 {
                    return other(size, format!("compound member '{name}' unreadable"));
                }
                let ty = analyze_at(mt, depth + 1);
                unsafe { H5Tclose(mt) };
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
        H5T_class_t::H5T_ARRAY => {
            let nd = unsafe { H5Tget_array_ndims(tid) };
            if !(1..=32).contains(&nd) {
                return other(size, "array type with an invalid rank");
            }
            let mut dims = vec![0u64; nd as usize];
            if unsafe { H5Tget_array_dims2(tid, dims.as_mut_ptr()) } < 0 {
                return other(size, "array type with unreadable dimensions");
            }
            let sup = unsafe { H5Tget_super(tid) };
            if sup < 0 {
                return other(size, "array type without a base type");
            }
            let base = analyze_at(sup, depth + 1);
            unsafe { H5Tclose(sup) };
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
        H5T_class_t::H5T_VLEN => other(size, "variable-length sequence"),
        H5T_class_t::H5T_REFERENCE => other(size, "object/region reference"),
        H5T_class_t::H5T_OPAQUE => other(size, "opaque bytes"),
        c => other(size, format!("datatype class {c:?}")),
    }
}

fn float_info(tid: hid_t, size: usize) -> TypeInfo {
    let be = match unsafe { H5Tget_order(tid) } {
        H5T_order_t::H5T_ORDER_LE => false,
        H5T_order_t::H5T_ORDER_BE => true,
        _ => return other(size, "float with an unusual byte order (VAX or mixed)"),
    };
    let (mut spos, mut epos, mut esize, mut mpos, mut msize) =
        (0usize, 0usize, 0usize, 0usize, 0usize);
    if unsafe { H5Tget_fields(tid, &mut spos, &mut epos, &mut esize, &mut mpos, &mut msize) } < 0 {
        return other(size, "float with unreadable bit fields");
    }
    let ebias = unsafe { H5Tget_ebias(tid) };
    let prec = unsafe { H5Tget_precision(tid) };
    let off = unsafe { H5Tget_offset(tid) };
    let norm = unsafe { H5Tget_norm(tid) };
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
    use hdf5_sys::h5t::{
        H5Tarray_create2, H5Tcopy, H5Tcreate, H5Tinsert, H5Tset_offset, H5Tset_order,
        H5Tset_precision,
    };
    /// A type id owned while building (closed on drop unless taken).
    struct Owned(hid_t);
    impl Drop for Owned {
        fn drop(&mut self) {
            if self.0 >= 0 {
                // SAFETY: the id was created by this function and is closed once.
                unsafe { H5Tclose(self.0) };
            }
        }
    }
    impl Owned {
        fn take(mut self) -> hid_t {
            std::mem::replace(&mut self.0, -1)
        }
    }
    fn build(tid: hid_t, depth: u32) -> Option<Owned> {
        if depth > 16 {
            return None;
        }
        // SAFETY (all calls below): `tid` is a valid datatype id for the duration of the call;
        // every id created here is owned by an `Owned` and closed unless returned.
        let class = unsafe { H5Tget_class(tid) };
        match class {
            H5T_class_t::H5T_INTEGER | H5T_class_t::H5T_BITFIELD => {
                let t = Owned(unsafe { H5Tcopy(tid) });
                if t.0 < 0 {
                    return None;
                }
                let bits = unsafe { H5Tget_size(tid) }.checked_mul(8)?;
                let ok = unsafe {
                    H5Tset_offset(t.0, 0) >= 0
                        && H5Tset_precision(t.0, bits) >= 0
                        && H5Tset_order(t.0, H5T_order_t::H5T_ORDER_LE) >= 0
                };
                ok.then_some(t)
            }
            H5T_class_t::H5T_COMPOUND => {
                let size = unsafe { H5Tget_size(tid) };
                let n = u32::try_from(unsafe { H5Tget_nmembers(tid) }).ok()?;
                let t = Owned(unsafe { H5Tcreate(H5T_class_t::H5T_COMPOUND, size) });
                if t.0 < 0 {
                    return None;
                }
                for i in 0..n {
                    let m = Owned(unsafe { H5Tget_member_type(tid, i) });
                    if m.0 < 0 {
                        return None;
                    }
                    let offset = unsafe { H5Tget_member_offset(tid, i) };
                    let name = unsafe { H5Tget_member_name(tid, i) };
                    if name.is_null() {
                        return None;
                    }
                    let converted = build(m.0, depth + 1);
                    let mt = converted.as_ref().map_or(m.0, |c| c.0);
                    let rc = unsafe { H5Tinsert(t.0, name, offset, mt) };
                    unsafe { hdf5_sys::h5::H5free_memory(name.cast()) };
                    if rc < 0 {
                        return None;
                    }
                }
                Some(t)
            }
            H5T_class_t::H5T_ARRAY => {
                let nd = unsafe { H5Tget_array_ndims(tid) };
                let ndu = usize::try_from(nd).ok().filter(|n| (1..=32).contains(n))?;
                let mut dims = vec![0u64; ndu];
                if unsafe { H5Tget_array_dims2(tid, dims.as_mut_ptr()) } < 0 {
                    return None;
                }
                let sup = Owned(unsafe { H5Tget_super(tid) });
                if sup.0 < 0 {
                    return None;
                }
                let base = build(sup.0, depth + 1)?;
                let t = Owned(unsafe { H5Tarray_create2(base.0, nd as u32, dims.as_ptr()) });
                (t.0 >= 0).then_some(t)
            }
            _ => unsafe { Some(Owned(H5Tcopy(tid))) }.filter(|t| t.0 >= 0),
        }
    }
    hdf5::sync::sync(|| build(tid, 0).map(Owned::take))
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

/// Whether the type is a complex pair: a compound of exactly two floats of one type named
/// `r`/`i` or `real`/`imag`. Returns the (real, imag) field indices.
fn complex_pair(fields: &[Field]) -> Option<(usize, usize)> {
    if fields.len() != 2 {
        return None;
    }
    if !matches!(fields[0].ty.kind, Kind::Float { .. }) || fields[1].ty != fields[0].ty {
        return None;
    }
    let names = (fields[0].name.as_str(), fields[1].name.as_str());
    match names {
        ("r", "i") | ("real", "imag") => Some((0, 1)),
        ("i", "r") | ("imag", "real") => Some((1, 0)),
        _ => None,
    }
}

/// What one leaf of a flattened datatype delivers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LeafKind {
    /// Numbers of this element type, swapped to little-endian when `be`.
    Numeric {
        dtype: ElementType,
        be: bool,
        /// Enum `NAME=value` pairs (not for bool).
        enum_mapping: Option<Vec<String>>,
    },
    /// Strings (fixed or variable length).
    Text,
    /// Nothing deliverable; the reason.
    Unsupported(String),
}

/// One numeric or text part of a record: for compounds one per field, for arrays the whole
/// array as trailing axes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Leaf {
    /// Appended to the dataset name (`""`, `/field`, `/real`, `/outer/inner`).
    pub suffix: String,
    /// Byte offset of the first element in the record.
    pub offset: usize,
    /// Trailing axes (array types): length and byte stride of each.
    pub inner: Vec<(u64, usize)>,
    /// The leaf's element type.
    pub ty: TypeInfo,
    pub kind: LeafKind,
    /// Notes to record for this leaf (complex part, compound field, renamed field…).
    pub notes: Vec<String>,
}

impl Leaf {
    /// Whether the leaf is the whole record (no compound, no array).
    pub fn is_whole(&self, record: usize) -> bool {
        self.offset == 0 && self.inner.is_empty() && self.ty.size == record
    }
}

/// Flattens a dataset type into leaves.
pub(crate) fn flatten(t: &TypeInfo) -> Vec<Leaf> {
    let mut out = Vec::new();
    flatten_at(t, 0, &[], String::new(), Vec::new(), &mut out);
    out
}

fn sanitize_field(name: &str, index: usize, notes: &mut Vec<String>) -> String {
    if name.is_empty() {
        notes.push(format!(
            "compound field {index} has no name: named field_{index}"
        ));
        return format!("field_{index}");
    }
    if name.contains('/') {
        let s = name.replace('/', "_");
        notes.push(format!(
            "compound field '{name}' renamed '{s}' ('/' separates groups)"
        ));
        return s;
    }
    name.to_string()
}

fn flatten_at(
    t: &TypeInfo,
    offset: usize,
    inner: &[(u64, usize)],
    suffix: String,
    notes: Vec<String>,
    out: &mut Vec<Leaf>,
) {
    let leaf = |kind: LeafKind, out: &mut Vec<Leaf>| {
        out.push(Leaf {
            suffix: suffix.clone(),
            offset,
            inner: inner.to_vec(),
            ty: t.clone(),
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
                } => Some(members.iter().map(|(n, v)| format!("{n}={v}")).collect()),
                _ => None,
            };
            leaf(
                LeafKind::Numeric {
                    dtype,
                    be,
                    enum_mapping,
                },
                out,
            )
        }
        Kind::FixedStr { .. } | Kind::VarStr { .. } => leaf(LeafKind::Text, out),
        Kind::Other(what) => leaf(LeafKind::Unsupported(what.clone()), out),
        Kind::Array { dims, base } => {
            let mut stride = base.size;
            let mut axes = vec![(0u64, 0usize); dims.len()];
            for (k, &d) in dims.iter().enumerate().rev() {
                axes[k] = (d, stride);
                stride = stride.saturating_mul(d as usize);
            }
            let mut inner2 = inner.to_vec();
            inner2.extend(axes);
            flatten_at(base, offset, &inner2, suffix, notes, out);
        }
        Kind::Compound { fields } => {
            if let Some((re, im)) = complex_pair(fields) {
                for (idx, part) in [(re, "real"), (im, "imag")] {
                    let mut n = notes.clone();
                    n.push(format!(
                        "{part} part of a complex compound {{{}, {}}}",
                        fields[0].name, fields[1].name
                    ));
                    flatten_at(
                        &fields[idx].ty,
                        offset + fields[idx].offset,
                        inner,
                        format!("{suffix}/{part}"),
                        n,
                        out,
                    );
                }
                return;
            }
            for (i, f) in fields.iter().enumerate() {
                let mut n = notes.clone();
                let name = sanitize_field(&f.name, i, &mut n);
                n.push(format!("field '{}' of a compound record", f.name));
                flatten_at(
                    &f.ty,
                    offset + f.offset,
                    inner,
                    format!("{suffix}/{name}"),
                    n,
                    out,
                );
            }
        }
    }
}

/// Calls `f(byte_offset_in_record)` for every element of the leaf's inner box
/// `start..start+count` (C order).
pub(crate) fn for_each_inner(leaf: &Leaf, start: &[u64], count: &[u64], mut f: impl FnMut(usize)) {
    let rank = leaf.inner.len();
    if rank == 0 {
        f(leaf.offset);
        return;
    }
    if count.contains(&0) {
        return;
    }
    let mut idx: Vec<u64> = start.to_vec();
    loop {
        let off = leaf.offset
            + idx
                .iter()
                .zip(&leaf.inner)
                .map(|(&i, &(_, s))| i as usize * s)
                .sum::<usize>();
        f(off);
        let mut a = rank;
        loop {
            if a == 0 {
                return;
            }
            a -= 1;
            idx[a] += 1;
            if idx[a] < start[a] + count[a] {
                break;
            }
            idx[a] = start[a];
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
            // SAFETY: the caller guarantees the record holds a live `char *` from HDF5.
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
        ElementType::F32 => AttrValue::F32(v!(f32, 4)),
        ElementType::F64 => AttrValue::F64(v!(f64, 8)),
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
    let single = leaves.len() == 1 && leaves[0].suffix.is_empty();
    if single {
        let leaf = &leaves[0];
        let per: u64 = leaf.inner.iter().map(|&(d, _)| d).product();
        let zeros = vec![0u64; leaf.inner.len()];
        let dims: Vec<u64> = leaf.inner.iter().map(|&(d, _)| d).collect();
        match &leaf.kind {
            LeafKind::Numeric { dtype, be, .. } => {
                let es = leaf.ty.size;
                let mut le = Vec::with_capacity(n * per as usize * es);
                let mut tmp = [0u8; 8];
                for r in 0..n {
                    let rec = &bytes[r * t.size..(r + 1) * t.size];
                    for_each_inner(leaf, &zeros, &dims, |off| {
                        le.extend_from_slice(le_elem(rec, off, es, *be, &mut tmp));
                    });
                }
                let note = match dtype {
                    ElementType::F16 => Some("half-precision values given as f32".to_string()),
                    ElementType::BF16 => Some("bfloat16 values given as f32".to_string()),
                    _ => None,
                };
                return AttrOutcome::Value(numeric_attr(*dtype, &le), note);
            }
            LeafKind::Text => {
                let mut lossy = false;
                let mut vals = Vec::new();
                for r in 0..n {
                    let rec = &bytes[r * t.size..(r + 1) * t.size];
                    for_each_inner(leaf, &zeros, &dims, |off| {
                        vals.push(unsafe { string_at(&leaf.ty, rec, off, &mut lossy) });
                    });
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
        let rec = &bytes[r * t.size..(r + 1) * t.size];
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

/// JSON string literal.
pub(crate) fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn json_float(v: f64) -> String {
    if v.is_nan() {
        "\"NaN\"".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "\"Infinity\""
        } else {
            "\"-Infinity\""
        }
        .into()
    } else {
        format!("{v:?}")
    }
}

/// A JSON rendering of one value of type `t` at `off` of `rec`.
///
/// # Safety
/// As for [`string_at`].
unsafe fn json_of(t: &TypeInfo, rec: &[u8], off: usize) -> Result<String, String> {
    if rec.len() < off + t.size {
        return Err("a truncated record".into());
    }
    let mut tmp = [0u8; 8];
    match &t.kind {
        Kind::Int { .. } | Kind::Enum { .. } | Kind::Float { .. } => {
            let (dtype, be) = numeric_type(t).ok_or("an odd integer size")?;
            let b = le_elem(rec, off, t.size, be, &mut tmp);
            Ok(match dtype {
                ElementType::F16 => json_float(f16_to_f32(u16::from_le_bytes([b[0], b[1]])) as f64),
                ElementType::BF16 => json_float(f32::from_bits(
                    (u16::from_le_bytes([b[0], b[1]]) as u32) << 16,
                ) as f64),
                ElementType::F32 => json_float(f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64),
                ElementType::F64 => json_float(f64::from_le_bytes(b.try_into().unwrap_or([0; 8]))),
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
            Ok(json_str(&unsafe { string_at(t, rec, off, &mut lossy) }))
        }
        Kind::Compound { fields } => {
            let mut parts = Vec::with_capacity(fields.len());
            for f in fields {
                parts.push(format!("{}:{}", json_str(&f.name), unsafe {
                    json_of(&f.ty, rec, off + f.offset)
                }?));
            }
            Ok(format!("{{{}}}", parts.join(",")))
        }
        Kind::Array { dims, base } => {
            unsafe fn nest(
                dims: &[u64],
                base: &TypeInfo,
                rec: &[u8],
                off: usize,
            ) -> Result<String, String> {
                if dims.is_empty() {
                    return unsafe { json_of(base, rec, off) };
                }
                let stride = dims[1..]
                    .iter()
                    .fold(base.size, |a, &d| a.saturating_mul(d as usize));
                let mut parts = Vec::new();
                for i in 0..dims[0] as usize {
                    parts.push(unsafe { nest(&dims[1..], base, rec, off + i * stride) }?);
                }
                Ok(format!("[{}]", parts.join(",")))
            }
            unsafe { nest(dims, base, rec, off) }
        }
        Kind::Other(what) => Err(format!("a member of type {what}")),
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

    #[test]
    fn json_strings_escape() {
        assert_eq!(json_str("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
    }
}
