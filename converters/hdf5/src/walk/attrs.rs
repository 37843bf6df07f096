//! Attributes as the walk reads them: an object's attributes decoded to typed values (shapes,
//! enums, compound values as typed JSON), netCDF-4's own attributes and `DIMENSION_LIST`
//! recognised, group attributes lifted to file-level ones.

use hdf5::types::VarLenArray;
use hdf5::{ObjectReference, ObjectReference1};
use hdf5_sys::h5d::H5Dvlen_reclaim;
use hdf5_sys::h5p::H5P_DEFAULT;
use hdf5_sys::h5s::{H5S_class_t, H5Sget_simple_extent_type};
use tet_source::{AttrValue, Fact};

use crate::types::{AttrOutcome, Kind};
use crate::{chunks, types, MAX_ATTR_BYTES};

use super::{join, text_of, ObjAttrs, ObjKey, Walker};

/// The prefix of the fact recording a complex attribute's type (`nc_attr_type:<name>`, a group
/// attribute's name joined to its group's path): the key the netCDF exporter reads type
/// records under ([`types::complex_attr_record`]).
const NC_ATTR_TYPE: &str = "nc_attr_type:";

impl Walker<'_> {
    /// The attributes of the group at `path` become global attributes named `path/name`; one
    /// whose own name holds a `/` gets a [`Fact::AttrGroup`] saying where `path` ends.
    pub(crate) fn add_group_attrs(&mut self, path: &str, a: ObjAttrs) {
        let owned: Vec<Fact> = a
            .attrs
            .iter()
            .filter_map(|(k, _)| Fact::attr_group(path, k))
            .collect();
        self.global_attrs
            .extend(a.attrs.into_iter().map(|(k, v)| (join(path, &k), v)));
        self.global_facts
            .extend(a.shapes.into_iter().map(|f| match f {
                Fact::AttrShape { attr, shape } => Fact::AttrShape {
                    attr: join(path, &attr),
                    shape,
                },
                Fact::Private { format, key, value } if key.starts_with(NC_ATTR_TYPE) => {
                    Fact::Private {
                        key: format!("{NC_ATTR_TYPE}{}", join(path, &key[NC_ATTR_TYPE.len()..])),
                        format,
                        value,
                    }
                }
                other => other,
            }));
        self.global_facts.extend(owned);
    }

    pub(crate) fn read_attrs(
        &mut self,
        file: usize,
        loc: &hdf5::Location,
        owner: &str,
    ) -> ObjAttrs {
        let mut out = ObjAttrs::default();
        let label = |n: &str| {
            if owner.is_empty() {
                format!("@{n}")
            } else {
                format!("{owner}/@{n}")
            }
        };
        let names = match loc.attr_names() {
            Ok(n) => n,
            Err(e) => {
                let o = if owner.is_empty() { "/" } else { owner };
                self.skip(o, format!("attributes unreadable: {e}"));
                return out;
            }
        };
        for name in names {
            if name == "REFERENCE_LIST"
                || name.starts_with("_Netcdf4")
                || name == "_nc3_strict"
                || name == "_NCProperties"
            {
                continue;
            }
            let attr = match loc.attr(&name) {
                Ok(a) => a,
                Err(e) => {
                    self.skip(label(&name), format!("attribute unreadable: {e}"));
                    continue;
                }
            };
            if name == "DIMENSION_LIST" {
                out.dim_list = Some(self.dim_list(file, &attr));
                continue;
            }
            let (outcome, record) = decode_attribute(&attr);
            if let (Some(r), AttrOutcome::Value(..)) = (record, &outcome) {
                out.shapes.push(Fact::private(
                    "h5",
                    format!("{NC_ATTR_TYPE}{name}"),
                    AttrValue::Text(r),
                ));
            }
            match (name.as_str(), outcome) {
                ("DIMENSION_LABELS", AttrOutcome::Value(v, _)) => {
                    out.labels = Some(match v {
                        AttrValue::Text(s) => vec![s],
                        AttrValue::TextList(l) => l,
                        _ => Vec::new(),
                    });
                }
                ("DIMENSION_LABELS", AttrOutcome::Skip(_)) => {}
                (_, AttrOutcome::Value(v, note)) => {
                    // Kept as attributes, and noted for dimension scales (see add_dataset).
                    match name.as_str() {
                        "CLASS" => out.class = text_of(&v),
                        "NAME" => out.name = text_of(&v),
                        _ => {}
                    }
                    if let Some(n) = note {
                        out.notes.push(format!("attribute '{name}': {n}"));
                    }
                    let shape = attr.shape();
                    if shape.len() > 1 {
                        let extents = shape.iter().map(|&d| d as u64).collect();
                        out.shapes.push(Fact::AttrShape {
                            attr: name.clone(),
                            shape: extents,
                        });
                    }
                    out.attrs.push((name.clone(), v));
                }
                (_, AttrOutcome::Skip(reason)) => self.skip(label(&name), reason),
            }
        }
        out
    }

    /// The first dimension scale attached to each axis.
    pub(super) fn dim_list(&mut self, file: usize, attr: &hdf5::Attribute) -> Vec<Option<ObjKey>> {
        let refs = match attr.read_raw::<VarLenArray<ObjectReference1>>() {
            Ok(r) => r,
            Err(_) => return Vec::new(),
        };
        let root: &hdf5::Location = &self.files[file].h5;
        refs.iter()
            .map(|axis| {
                let r = axis.first()?;
                match r.dereference(root).ok()? {
                    hdf5::ReferencedObject::Dataset(d) => {
                        let info = d.loc_info().ok()?;
                        Some((file, format!("{:?}", info.token)))
                    }
                    _ => None,
                }
            })
            .collect()
    }
}

/// Reads and decodes one attribute in its own type.
fn decode_attribute(attr: &hdf5::Attribute) -> (AttrOutcome, Option<String>) {
    let (space, dtype) = match (attr.space(), attr.dtype()) {
        (Ok(s), Ok(t)) => (s, t),
        (Err(e), _) | (_, Err(e)) => {
            return (
                AttrOutcome::Skip(format!("attribute unreadable: {e}")),
                None,
            )
        }
    };
    // SAFETY: a by-value query of an open dataspace id under the library lock.
    let class = hdf5::sync::sync(|| unsafe { H5Sget_simple_extent_type(space.id()) });
    let scalar = match class {
        H5S_class_t::H5S_NULL => {
            return (
                AttrOutcome::Skip("empty attribute (null dataspace, no value)".into()),
                None,
            )
        }
        H5S_class_t::H5S_SCALAR => true,
        H5S_class_t::H5S_SIMPLE => false,
        _ => {
            return (
                AttrOutcome::Skip("attribute with a bad dataspace".into()),
                None,
            )
        }
    };
    let n = if scalar {
        Some(1u64)
    } else {
        space
            .shape()
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d as u64))
    };
    let info = types::analyze(dtype.id());
    if types::opaque_tag(dtype.id()).is_some() {
        return (AttrOutcome::Skip("opaque bytes attribute".into()), None);
    }
    let bytes = n
        .and_then(|n| n.checked_mul(info.size as u64))
        .filter(|&b| b <= MAX_ATTR_BYTES);
    let (Some(n), Some(bytes)) = (n, bytes) else {
        return (AttrOutcome::Skip("attribute too large".into()), None);
    };
    if let Kind::Other(what) = &info.kind {
        return (AttrOutcome::Skip(format!("{what} attribute")), None);
    }
    // N-bit integers: read converted to their container type (as datasets are).
    let dtype = if types::has_nbit(&info) {
        let mem = types::memory_type(dtype.id()).map(|id| {
            // SAFETY: `memory_type` returns a fresh datatype id this code owns; the handle takes
            // over its one reference (and closes it).
            unsafe { hdf5::from_id::<hdf5::Datatype>(id) }
        });
        match mem {
            Some(Ok(t)) => t,
            _ => {
                return (
                    AttrOutcome::Skip("N-bit integer attribute libhdf5 cannot convert".into()),
                    None,
                )
            }
        }
    } else {
        dtype
    };
    let indirect = chunks::type_has_indirection(dtype.id());
    let mut buf = vec![0u8; (bytes as usize).max(1)];
    hdf5::sync::sync(|| {
        if n > 0 {
            // SAFETY: under the library lock; libhdf5 writes the attribute's `n` elements in
            // `dtype` (the attribute's own type, or its N-bit memory type of the same size:
            // `info.size` bytes each) into `buf`, which holds `n * info.size` bytes.
            let rc =
                unsafe { hdf5_sys::h5a::H5Aread(attr.id(), dtype.id(), buf.as_mut_ptr().cast()) };
            if let Err(e) = hdf5::h5check(rc) {
                return (
                    AttrOutcome::Skip(format!("attribute unreadable: {e}")),
                    None,
                );
            }
        }
        // SAFETY: `buf` holds `n` records of `info`'s type just read by libhdf5 (or nothing
        // when `n` is 0); their variable-length parts are reclaimed only below.
        let out = unsafe { types::decode_attr(&info, &buf, n as usize, scalar) };
        let record = types::complex_attr_record(&info, n as usize, scalar);
        if indirect && n > 0 {
            // SAFETY: under the library lock; `buf` holds the elements `H5Aread` just wrote in
            // `dtype` over `space`, whose variable-length parts libhdf5 frees once, here; `buf`
            // is not read afterwards.
            unsafe {
                H5Dvlen_reclaim(dtype.id(), space.id(), H5P_DEFAULT, buf.as_mut_ptr().cast())
            };
        }
        (out, record)
    })
}
